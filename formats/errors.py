"""The cdkds exception hierarchy.

It lives in the lowest layer so every layer raises the same types; ``cdkds.catalog``
re-exports all of them.
"""

from __future__ import annotations


class CdkdsError(Exception):
    """Root of every error cdkds raises on purpose."""


class InvalidSchemaError(CdkdsError, ValueError):
    """An Avro, Arrow or Spark schema that cdkds cannot accept or convert."""


class SchemaMismatchError(CdkdsError, ValueError):
    """Data (a record, a batch, a new schema) that does not fit a dataset's schema."""


class DataFileError(CdkdsError):
    """A data file that cannot be written or read as its format says."""
