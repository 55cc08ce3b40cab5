"""cdkds.cli: the ``cdkds`` command line (see :mod:`cdkds.cli.main`)."""
