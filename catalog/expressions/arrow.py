"""A bound expression as a pyarrow compute expression, to filter record batches.

It has the meaning of :func:`~cdkds.catalog.expressions.rows.evaluate` on every row:
comparisons with nulls and NaNs are unknown, ``in`` compares as ``=`` does (so ``-0.0``
is in ``(0.0)``), and ``starts with`` takes a bytes prefix on binary fields.
"""

from __future__ import annotations

import operator
from typing import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.expressions.tree import ALWAYS_FALSE, ALWAYS_TRUE, BoundPredicate, Expression, balanced
from cdkds.catalog.expressions.visitors import BoundPredicateVisitor, visit

_UNKNOWN = pa.scalar(None, pa.bool_())


class _ArrowTranslator(BoundPredicateVisitor[pc.Expression]):
    def __init__(self, schema: pa.Schema, columns: Mapping[str, pc.Expression] | None = None):
        self.schema = schema
        self.columns = columns or {}

    def _column(self, p: BoundPredicate) -> pc.Expression:
        return self.columns[p.name] if p.name in self.columns else pc.field(p.name)

    def visit_true(self) -> pc.Expression:
        return pc.scalar(True)

    def visit_false(self) -> pc.Expression:
        return pc.scalar(False)

    def visit_and(self, terms: Sequence[pc.Expression]) -> pc.Expression:
        return balanced(terms, operator.and_)

    def visit_or(self, terms: Sequence[pc.Expression]) -> pc.Expression:
        return balanced(terms, operator.or_)

    def visit_predicate(self, p: BoundPredicate) -> pc.Expression:  # type: ignore[override]
        out = super().visit_predicate(p)
        if p.op in ("is_null", "not_null") or not pa.types.is_floating(self._type(p)):
            return out
        return pc.if_else(pc.is_nan(self._column(p)), _UNKNOWN, out)

    def _type(self, p: BoundPredicate) -> pa.DataType:
        return self.schema.field(p.name).type

    def _literal(self, p: BoundPredicate) -> pc.Expression:
        return pc.scalar(pa.scalar(p.value, type=self._type(p)))

    def visit_is_null(self, p: BoundPredicate) -> pc.Expression:
        return self._column(p).is_null()

    def visit_not_null(self, p: BoundPredicate) -> pc.Expression:
        return self._column(p).is_valid()

    def visit_eq(self, p: BoundPredicate) -> pc.Expression:
        return self._column(p) == self._literal(p)

    def visit_ne(self, p: BoundPredicate) -> pc.Expression:
        return self._column(p) != self._literal(p)

    def visit_lt(self, p: BoundPredicate) -> pc.Expression:
        return self._column(p) < self._literal(p)

    def visit_le(self, p: BoundPredicate) -> pc.Expression:
        return self._column(p) <= self._literal(p)

    def visit_gt(self, p: BoundPredicate) -> pc.Expression:
        return self._column(p) > self._literal(p)

    def visit_ge(self, p: BoundPredicate) -> pc.Expression:
        return self._column(p) >= self._literal(p)

    def visit_in(self, p: BoundPredicate) -> pc.Expression:
        members = list(p.values)
        if pa.types.is_floating(self._type(p)) and 0.0 in members:
            members += [0.0, -0.0]  # Arrow's set lookup tells the zeros apart; '=' does not
        return self._column(p).isin(pa.array(members, type=self._type(p)))

    def visit_not_in(self, p: BoundPredicate) -> pc.Expression:
        return ~self.visit_in(p) & self._column(p).is_valid()

    def visit_starts_with(self, p: BoundPredicate) -> pc.Expression:
        column = self._column(p)
        if pa.types.is_fixed_size_binary(self._type(p)):
            column = column.cast(pa.binary())  # Arrow matches prefixes of variable-size values only
        return pc.starts_with(column, pattern=p.value)

    def visit_not_starts_with(self, p: BoundPredicate) -> pc.Expression:
        return ~self.visit_starts_with(p)


def to_arrow(expr: Expression, schema: pa.Schema, columns: Mapping[str, pc.Expression] | None = None
             ) -> pc.Expression:
    """A pyarrow compute expression with the meaning of the bound ``expr`` on rows of
    ``schema``; ``columns``: the expression each field's values come from where it is not
    the column of that name (a scan's projection of a file's columns)."""
    return visit(expr, _ArrowTranslator(schema, columns))


def filter_batch(batch: pa.RecordBatch, expr: Expression) -> pa.RecordBatch:
    """The rows of ``batch`` for which the bound ``expr`` is true."""
    if expr is ALWAYS_TRUE:
        return batch
    if expr is ALWAYS_FALSE:
        return batch.slice(0, 0)
    return batch.filter(to_arrow(expr, batch.schema))


def drop_matching(batch: pa.RecordBatch, expressions: Sequence[Expression]) -> pa.RecordBatch:
    """The rows of ``batch`` for which no bound expression is true (how tombstones apply)."""
    if not expressions:
        return batch
    keep = None
    for expr in expressions:
        matched = pc.coalesce(to_arrow(expr, batch.schema), pc.scalar(False))
        keep = ~matched if keep is None else keep & ~matched
    return batch.filter(keep)
