"""What can be done with an expression: bind it to a schema, push negations down,
evaluate it on a record or an Arrow batch, and decide whether a file's statistics
can hold a match.

Evaluation uses SQL's three-valued logic: a comparison with a null is unknown
(``None``), and only rows for which the predicate is true are kept.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.errors import ExpressionError
from cdkds.catalog.expressions.tree import (
    ALWAYS_FALSE, ALWAYS_TRUE, COMPARISONS, SET_OPS, UNARY_OPS, And, Expression, Not, Or, Predicate,
    _Constant, and_, or_,
)
from cdkds.formats import values
from cdkds.formats.errors import SchemaMismatchError
from cdkds.formats.schema import FieldType
from cdkds.formats.statistics import ColumnStatistics

_STRING_KINDS = {"string", "enum", "uuid", "bytes", "fixed"}
_ORDERED_EXCLUDED = {"boolean"}


def transform(expr: Expression, on_predicate: Callable[[Predicate], Expression]) -> Expression:
    """Rebuild ``expr`` with every predicate replaced by ``on_predicate(predicate)``."""
    if isinstance(expr, Predicate):
        return on_predicate(expr)
    if isinstance(expr, And):
        return and_(transform(expr.left, on_predicate), transform(expr.right, on_predicate))
    if isinstance(expr, Or):
        return or_(transform(expr.left, on_predicate), transform(expr.right, on_predicate))
    if isinstance(expr, Not):
        inner = transform(expr.child, on_predicate)
        return inner.negate() if isinstance(inner, _Constant) else Not(inner)
    return expr


def rewrite_not(expr: Expression) -> Expression:
    """The same expression with no :class:`Not` nodes (negations pushed into predicates)."""
    if isinstance(expr, Not):
        return rewrite_not(expr.child.negate())
    if isinstance(expr, And):
        return and_(rewrite_not(expr.left), rewrite_not(expr.right))
    if isinstance(expr, Or):
        return or_(rewrite_not(expr.left), rewrite_not(expr.right))
    return expr


def references(expr: Expression) -> set[str]:
    """The names of the fields an expression reads."""
    found: set[str] = set()

    def collect(p: Predicate) -> Expression:
        found.add(p.name)
        return p

    transform(expr, collect)
    return found


def bind(expr: Expression, fields: Mapping[str, FieldType], dataset: str = "") -> Expression:
    """Check field names and convert literals to the fields' types (``'2026-01-01'`` to a
    datetime for a timestamp field); also drops ``Not`` nodes."""
    where = f"dataset {dataset!r}: " if dataset else ""

    def bind_predicate(p: Predicate) -> Expression:
        if p.name not in fields:
            raise ExpressionError(f"{where}unknown field {p.name!r} in predicate '{p}'; fields are {list(fields)}")
        ft = fields[p.name]
        if ft.kind in ("record", "array", "map") and p.op not in UNARY_OPS:
            raise ExpressionError(f"{where}field {p.name!r} is a {ft.kind}; only 'is null' and 'is not null' apply to it")
        if ft.kind in _ORDERED_EXCLUDED and p.op in ("lt", "le", "gt", "ge"):
            raise ExpressionError(f"{where}field {p.name!r} is a boolean and has no order ('{p}')")
        if p.op in ("starts_with", "not_starts_with") and ft.kind not in _STRING_KINDS:
            raise ExpressionError(f"{where}'starts with' needs a string field; {p.name!r} is {ft.kind}")
        try:
            if p.op == "not_in" and any(v is None for v in p.values):
                return ALWAYS_FALSE  # SQL: 'x not in (..., null)' is never true
            if p.op in SET_OPS:
                return p.with_literals(values=tuple(values.coerce(v, ft.kind) for v in p.values if v is not None))
            if p.op in UNARY_OPS:
                return p
            if p.op in ("starts_with", "not_starts_with"):
                return p.with_literals(value=values.coerce(p.value, "string" if ft.kind != "bytes" else "bytes"))
            return p.with_literals(value=values.coerce(p.value, ft.kind))
        except SchemaMismatchError as e:
            raise ExpressionError(f"{where}field {p.name!r} ({ft.kind}) in predicate '{p}': {e}") from None

    return transform(rewrite_not(expr), bind_predicate)


# ---------------------------------------------------------------- rows

def evaluate(expr: Expression, record: Mapping[str, Any]) -> bool | None:
    """True, False or unknown (``None``) for one record (a dict)."""
    if isinstance(expr, Predicate):
        return _evaluate_predicate(expr, record.get(expr.name))
    if isinstance(expr, And):
        left = evaluate(expr.left, record)
        if left is False:
            return False
        right = evaluate(expr.right, record)
        if right is False:
            return False
        return None if left is None or right is None else True
    if isinstance(expr, Or):
        left = evaluate(expr.left, record)
        if left is True:
            return True
        right = evaluate(expr.right, record)
        if right is True:
            return True
        return None if left is None or right is None else False
    if isinstance(expr, Not):
        inner = evaluate(expr.child, record)
        return None if inner is None else not inner
    if isinstance(expr, _Constant):
        return expr.value
    raise ExpressionError(f"cannot evaluate {expr!r}")


_COMPARE = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}


def _evaluate_predicate(p: Predicate, value: Any) -> bool | None:
    if p.op == "is_null":
        return value is None
    if p.op == "not_null":
        return value is not None
    if value is None:
        return None
    if p.op in COMPARISONS:
        return _COMPARE[p.op](value, p.value)
    if p.op == "in":
        return value in p.values
    if p.op == "not_in":
        return value not in p.values
    starts = value.startswith(p.value)
    return starts if p.op == "starts_with" else not starts


# ---------------------------------------------------------------- Arrow

def to_arrow(expr: Expression, schema: pa.Schema) -> pc.Expression:
    """A pyarrow compute expression with the same meaning, for filtering batches."""
    if isinstance(expr, Predicate):
        return _arrow_predicate(expr, schema.field(expr.name).type)
    if isinstance(expr, And):
        return to_arrow(expr.left, schema) & to_arrow(expr.right, schema)
    if isinstance(expr, Or):
        return to_arrow(expr.left, schema) | to_arrow(expr.right, schema)
    if isinstance(expr, Not):
        return ~to_arrow(expr.child, schema)
    if isinstance(expr, _Constant):
        return pc.scalar(expr.value)
    raise ExpressionError(f"cannot convert {expr!r} to Arrow")


def _arrow_predicate(p: Predicate, t: pa.DataType) -> pc.Expression:
    ref = pc.field(p.name)
    if p.op == "is_null":
        return ref.is_null()
    if p.op == "not_null":
        return ref.is_valid()
    if p.op in SET_OPS:
        member = ref.isin(pa.array(list(p.values), type=t))
        return member if p.op == "in" else (~member & ref.is_valid())
    if p.op in ("starts_with", "not_starts_with"):
        starts = pc.Expression._call("starts_with", [ref], pc.MatchSubstringOptions(p.value))
        return starts if p.op == "starts_with" else ~starts
    literal = pc.scalar(pa.scalar(p.value, type=t))
    return {
        "eq": ref == literal, "ne": ref != literal, "lt": ref < literal,
        "le": ref <= literal, "gt": ref > literal, "ge": ref >= literal,
    }[p.op]


def filter_batch(batch: pa.RecordBatch, expr: Expression) -> pa.RecordBatch:
    """The rows of ``batch`` for which ``expr`` is true."""
    if expr is ALWAYS_TRUE:
        return batch
    if expr is ALWAYS_FALSE:
        return batch.slice(0, 0)
    return batch.filter(to_arrow(expr, batch.schema))


# ---------------------------------------------------------------- statistics

def may_match(expr: Expression, row_count: int, statistics: Mapping[str, ColumnStatistics]) -> bool:
    """False only when no row of a file with these statistics can satisfy ``expr``.

    ``expr`` must be bound and free of ``Not`` (see :func:`bind`). A column without
    statistics, or without bounds, can hold anything.
    """
    def decide(p: Predicate) -> bool:
        stats = statistics.get(p.name)
        return True if stats is None else _predicate_may_match(p, row_count, stats)

    return _decide(expr, decide)


def _decide(expr: Expression, decide: Callable[[Predicate], bool]) -> bool:
    """Two-valued evaluation of an expression free of ``Not`` from a verdict per predicate."""
    if isinstance(expr, Predicate):
        return decide(expr)
    if isinstance(expr, And):
        return _decide(expr.left, decide) and _decide(expr.right, decide)
    if isinstance(expr, Or):
        return _decide(expr.left, decide) or _decide(expr.right, decide)
    if isinstance(expr, _Constant):
        return expr.value
    raise ExpressionError(f"bind the expression first (no 'not' nodes): {expr}")


def _predicate_may_match(p: Predicate, row_count: int, s: ColumnStatistics) -> bool:  # noqa: C901
    if p.op == "is_null":
        return s.null_count > 0
    if p.op == "not_null":
        return s.null_count < row_count
    if s.null_count >= row_count:
        return False  # every other predicate is unknown on nulls, so an all-null column never matches
    lo, hi = s.min, s.max
    if lo is None:
        return True
    try:
        if p.op == "eq":
            return lo <= p.value <= hi
        if p.op == "ne":
            return not (lo == hi == p.value)
        if p.op == "lt":
            return lo < p.value
        if p.op == "le":
            return lo <= p.value
        if p.op == "gt":
            return hi > p.value
        if p.op == "ge":
            return hi >= p.value
        if p.op == "in":
            return any(lo <= v <= hi for v in p.values)
        if p.op == "not_in":
            return not (lo == hi and lo in p.values)
        n = len(p.value)
        if p.op == "starts_with":
            return lo[:n] <= p.value <= hi[:n]
        return not (lo.startswith(p.value) and hi.startswith(p.value))
    except TypeError:
        return True  # bounds of another type (an evolved column): cannot decide, so keep the file


def must_match(expr: Expression, row_count: int, statistics: Mapping[str, ColumnStatistics]) -> bool:
    """True only when every row of a file with these statistics satisfies ``expr``
    (bound, free of ``Not``). Unknown statistics never prove it."""
    def decide(p: Predicate) -> bool:
        stats = statistics.get(p.name)
        return False if stats is None else _predicate_must_match(p, row_count, stats)

    return _decide(expr, decide)


def _predicate_must_match(p: Predicate, row_count: int, s: ColumnStatistics) -> bool:  # noqa: C901
    if p.op == "is_null":
        return s.null_count == row_count
    if p.op == "not_null":
        return s.null_count == 0
    lo, hi = s.min, s.max
    if s.null_count or lo is None:
        return False  # a null row satisfies no other predicate
    try:
        if p.op == "eq":
            return lo == hi == p.value
        if p.op == "ne":
            return p.value < lo or p.value > hi
        if p.op == "lt":
            return hi < p.value
        if p.op == "le":
            return hi <= p.value
        if p.op == "gt":
            return lo > p.value
        if p.op == "ge":
            return lo >= p.value
        if p.op == "in":
            return lo == hi and lo in p.values
        if p.op == "not_in":
            return all(v < lo or v > hi for v in p.values)
        n = len(p.value)
        if p.op == "starts_with":
            return lo.startswith(p.value) and hi.startswith(p.value)
        return not (lo[:n] <= p.value <= hi[:n])
    except TypeError:
        return False


def drop_matching(batch: pa.RecordBatch, expressions: "Sequence[Expression]") -> pa.RecordBatch:
    """The rows of ``batch`` for which no expression is true (how tombstones apply)."""
    if not expressions:
        return batch
    keep = None
    for expr in expressions:
        matched = pc.Expression._call("coalesce", [to_arrow(expr, batch.schema), pc.scalar(False)])
        keep = ~matched if keep is None else keep & ~matched
    return batch.filter(keep)
