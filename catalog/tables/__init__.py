"""Keyed tables: CDAP's StructuredTable SPI (seed 000) over cdkds.

Built so far: table specifications (:mod:`.spec`), the order-preserving key encoding and
ranges (:mod:`.keys`), the SPI with every check written once (:mod:`.table`), and its SQL
implementation over SQLite with ``TableAdmin`` and ``TransactionRunner`` (:mod:`.sql`,
:mod:`.admin`). Not yet (issue 13): the object-store implementation (file, memory, S3) and
PostgreSQL.
"""

from cdkds.catalog.tables.keys import KeyCodec, Range
from cdkds.catalog.tables.spec import FieldSpec, Fields, TableSpecification
from cdkds.catalog.tables.table import StructuredTable
from cdkds.catalog.tables.admin import TableAdmin, TableContext, TransactionRunner

__all__ = ["FieldSpec", "Fields", "KeyCodec", "Range", "StructuredTable", "TableAdmin", "TableContext",
           "TableSpecification", "TransactionRunner"]
