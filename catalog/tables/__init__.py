"""Keyed tables: CDAP's StructuredTable SPI (seed 000) over cdkds.

Table specifications (:mod:`.spec`), the order-preserving key encoding and ranges
(:mod:`.keys`), the SPI with every check written once (:mod:`.table`), its implementations —
SQL over SQLite and PostgreSQL (:mod:`.sql`), and the object store's log-structured merge
tree of sorted runs in one dataset and one log (:mod:`.objectstore`, :mod:`.runs`) — and
``TableAdmin`` and ``TransactionRunner`` over any of them (:mod:`.admin`).
"""

from cdkds.catalog.tables.keys import KeyCodec, Range
from cdkds.catalog.tables.spec import FieldSpec, Fields, TableSpecification
from cdkds.catalog.tables.table import StructuredTable
from cdkds.catalog.tables.admin import TableAdmin, TableContext, TransactionRunner

__all__ = ["FieldSpec", "Fields", "KeyCodec", "Range", "StructuredTable", "TableAdmin", "TableContext",
           "TableSpecification", "TransactionRunner"]
