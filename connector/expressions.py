"""A bound expression as a Spark :class:`~pyspark.sql.Column`, for Spark's own readers.

It has the meaning of :func:`~cdkds.catalog.expressions.rows.evaluate` on every row,
null for unknown, whatever the session's time zone. Where Spark's SQL differs, the
translation says so:

- Spark orders NaN above every number and finds it equal to itself; in cdkds every
  comparison of a NaN value is unknown, so predicates on floating columns are null on NaN;
- ``x in ()`` is false in Spark even when ``x`` is null; in cdkds it is unknown;
- literals are built as exact values of the column's type (decimals cast from their text,
  timestamps from their microseconds, local timestamps from their text, dates from their
  day number), never from Python's ``datetime`` objects, which Spark reads in the
  session's (or the JVM's) time zone and calendar.

The columns must be read with the types Spark's Parquet reader gives the Arrow ``schema``
of the expression's fields: zoned timestamps as ``timestamp``, local ones as
``timestamp_ntz``, fixed-size binary as ``binary``, times as ``time(6)`` (which needs
``spark.sql.timeType.enabled``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import operator
from typing import Any, Sequence

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F

from cdkds.catalog.errors import ExpressionError
from cdkds.catalog.expressions import BoundPredicate, BoundPredicateVisitor, Expression, visit
from cdkds.catalog.expressions.tree import balanced

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_DAY = dt.date(1970, 1, 1)
_MICROSECOND = dt.timedelta(microseconds=1)


def top_level_column(name: str) -> Column:
    """The top-level column ``name``, whatever characters it holds (dots, backticks)."""
    return F.col("`" + name.replace("`", "``") + "`")


class _SparkTranslator(BoundPredicateVisitor[Column]):
    def __init__(self, schema: pa.Schema):
        self.schema = schema

    def visit_true(self) -> Column:
        return F.lit(True)

    def visit_false(self) -> Column:
        return F.lit(False)

    def visit_and(self, terms: Sequence[Column]) -> Column:
        return balanced(terms, operator.and_)

    def visit_or(self, terms: Sequence[Column]) -> Column:
        return balanced(terms, operator.or_)

    def visit_predicate(self, p: BoundPredicate) -> Column:  # type: ignore[override]
        out = super().visit_predicate(p)
        if p.op in ("is_null", "not_null") or not pa.types.is_floating(self._type(p)):
            return out
        return F.when(~F.isnan(top_level_column(p.name)), out)  # NaN: unknown (Spark would order it above every number)

    def _type(self, p: BoundPredicate) -> pa.DataType:
        if p.name not in self.schema.names:
            raise ExpressionError(f"field {p.name!r} of predicate '{p}' is not among the columns {self.schema.names}")
        return self.schema.field(p.name).type

    def _literal(self, p: BoundPredicate, value: Any) -> Column:
        return spark_literal(value, self._type(p), p.name)

    def visit_is_null(self, p: BoundPredicate) -> Column:
        return top_level_column(p.name).isNull()

    def visit_not_null(self, p: BoundPredicate) -> Column:
        return top_level_column(p.name).isNotNull()

    def visit_eq(self, p: BoundPredicate) -> Column:
        return top_level_column(p.name) == self._literal(p, p.value)

    def visit_ne(self, p: BoundPredicate) -> Column:
        return top_level_column(p.name) != self._literal(p, p.value)

    def visit_lt(self, p: BoundPredicate) -> Column:
        return top_level_column(p.name) < self._literal(p, p.value)

    def visit_le(self, p: BoundPredicate) -> Column:
        return top_level_column(p.name) <= self._literal(p, p.value)

    def visit_gt(self, p: BoundPredicate) -> Column:
        return top_level_column(p.name) > self._literal(p, p.value)

    def visit_ge(self, p: BoundPredicate) -> Column:
        return top_level_column(p.name) >= self._literal(p, p.value)

    def visit_in(self, p: BoundPredicate) -> Column:
        if not p.values:
            return F.when(top_level_column(p.name).isNotNull(), F.lit(False))  # Spark: false even for a null
        return top_level_column(p.name).isin([self._literal(p, v) for v in p.values])

    def visit_not_in(self, p: BoundPredicate) -> Column:
        if not p.values:
            return F.when(top_level_column(p.name).isNotNull(), F.lit(True))
        return ~self.visit_in(p)

    def visit_starts_with(self, p: BoundPredicate) -> Column:
        return top_level_column(p.name).startswith(self._literal(p, p.value))  # a bytes prefix on binary columns

    def visit_not_starts_with(self, p: BoundPredicate) -> Column:
        return ~self.visit_starts_with(p)


def spark_literal(value: Any, arrow_type: pa.DataType, name: str = "") -> Column:
    """``value`` (a Python value of a column of ``arrow_type``, as binding makes it) as a
    Spark literal of that column's type, independent of the session's time zone."""
    t = arrow_type
    if pa.types.is_boolean(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
        return F.lit(value)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return F.lit(bytes(value))
    if pa.types.is_integer(t):
        return F.lit(int(value)).cast({8: "tinyint", 16: "smallint", 32: "int", 64: "bigint"}[t.bit_width])
    if pa.types.is_floating(t):
        return F.lit(float(value)).cast("float" if t.bit_width == 32 else "double")
    if pa.types.is_decimal(t) and t.precision <= 38:
        return F.lit(format(decimal.Decimal(value), "f")).cast(f"decimal({t.precision},{t.scale})")
    if pa.types.is_date(t):
        return F.date_from_unix_date(F.lit((value - _EPOCH_DAY).days))
    if pa.types.is_timestamp(t) and t.tz is not None:
        return F.timestamp_micros(F.lit((value - _EPOCH) // _MICROSECOND))
    if pa.types.is_timestamp(t):
        return F.lit(value.isoformat()).cast("timestamp_ntz")
    if pa.types.is_time(t):
        return F.lit(value.isoformat()).cast("time(6)")
    raise ExpressionError(f"field {name!r}: values of type {t} have no Spark literal")


def to_spark_column(expr: Expression, schema: pa.Schema) -> Column:
    """A boolean Spark column with the meaning of the bound ``expr`` on every row (null
    where it is unknown); ``schema`` is the Arrow schema of the columns it reads."""
    return visit(expr, _SparkTranslator(schema))
