"""Table services: the work that keeps a dataset fast without anyone scheduling it —
rewriting files with many deleted rows, bin-packing small files, merging record-index
deltas, and (only when asked) expiring the log and vacuuming. They run after each write,
within a budget (:func:`after_write`), or on demand (:func:`maintain`, ``cdkds maintain``).
Checkpoints are written by the log itself every ``checkpoint.interval`` commits, service
commits included."""

from cdkds.catalog.services.settings import SERVICE_PROPERTIES, ServiceSettings

__all__ = ["SERVICE_PROPERTIES", "ServiceSettings"]
