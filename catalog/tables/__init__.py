"""Keyed tables: CDAP's StructuredTable SPI (seed 000) over cdkds.

Built so far: table specifications (:mod:`.spec`) and the order-preserving key encoding
(:mod:`.keys`) that ranges and scans rest on. Not yet: ``StructuredTable``, ``TableAdmin``
and ``TransactionRunner`` (issue 13).
"""

from cdkds.catalog.tables.keys import KeyCodec, Range
from cdkds.catalog.tables.spec import FieldSpec, Fields, TableSpecification

__all__ = ["FieldSpec", "Fields", "KeyCodec", "Range", "TableSpecification"]
