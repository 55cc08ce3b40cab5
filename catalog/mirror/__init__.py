"""Mirrors: Delta Lake and Iceberg metadata kept in step with a dataset's log, over the same
data files, so engines that read those formats read cdkds datasets (``mirror.delta``,
``mirror.iceberg``; ``cdkds mirror``). A mirror is derived data: it never changes the log."""
