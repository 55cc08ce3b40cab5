"""Binding an expression to a schema: field names checked, negations pushed into the
predicates, literals converted to the fields' types (:mod:`.literals`).

Where a literal lies between two values of its field's type, the operator is adjusted
so the predicate keeps its meaning on every value the field can hold: on a
``timestamp-millis`` field ``x < '...00.001500'`` becomes ``x < '...00.002'``,
``x = '...00.001500'`` becomes false and ``x != '...00.001500'`` becomes ``x is not null``.
A NaN literal compares unknown with every value, as a null does.
"""

from __future__ import annotations

from typing import Callable, Mapping

from cdkds.catalog.errors import ExpressionError
from cdkds.catalog.expressions.literals import Literal, prefix_for, to_field_type
from cdkds.catalog.expressions.tree import (
    ALWAYS_FALSE, SET_OPS, UNARY_OPS, BoundPredicate, Expression, Predicate,
)
from cdkds.catalog.expressions.visitors import rewrite_not, transform
from cdkds.formats.errors import SchemaMismatchError
from cdkds.formats.schema import FieldType

_PREFIX_KINDS = {"string", "enum", "uuid", "bytes", "fixed"}
_UNORDERED_KINDS = {"boolean"}
_NESTED_KINDS = {"record", "array", "map"}


def bind(expr: Expression, fields: Mapping[str, FieldType], dataset: str = "") -> Expression:
    """``expr`` with :class:`BoundPredicate` s of typed literals and no ``not`` nodes.

    Raises :class:`ExpressionError` naming the dataset, field and literal when a field is
    unknown, an operator does not apply to its type, or a literal cannot stand for it.
    Binding a bound expression again gives it back unchanged.
    """
    where = f"dataset {dataset!r}: " if dataset else ""

    def bind_predicate(p: Predicate) -> Expression:
        if p.name not in fields:
            raise ExpressionError(f"{where}unknown field {p.name!r} in predicate '{p}'; fields are {list(fields)}")
        field = fields[p.name]
        _check_operator(p, field, where)
        try:
            return _bind(p, field)
        except SchemaMismatchError as e:
            raise ExpressionError(f"{where}field {p.name!r} ({field.kind}) in predicate '{p}': {e}") from None

    return transform(rewrite_not(expr), bind_predicate)


def _check_operator(p: Predicate, field: FieldType, where: str) -> None:
    kind = field.kind
    if kind in _NESTED_KINDS and p.op not in UNARY_OPS:
        raise ExpressionError(f"{where}field {p.name!r} is a {kind}; only 'is null' and 'is not null' apply to it")
    if kind in _UNORDERED_KINDS and p.op in ("lt", "le", "gt", "ge"):
        raise ExpressionError(f"{where}field {p.name!r} is a {kind} and has no order ('{p}')")
    if p.op in ("starts_with", "not_starts_with") and kind not in _PREFIX_KINDS:
        raise ExpressionError(f"{where}'starts with' needs a string field or a binary one; {p.name!r} is {kind}")


def _bind(p: Predicate, field: FieldType) -> Expression:
    kind = field.kind

    def bound(op: str, value: object = None, values: tuple = ()) -> BoundPredicate:
        return BoundPredicate(op, p.name, value, values, kind)

    if p.op in UNARY_OPS:
        return bound(p.op)
    if p.op in ("starts_with", "not_starts_with"):
        return bound(p.op, prefix_for(p.value, field))
    if p.op in SET_OPS:
        literals = [to_field_type(v, field) if v is not None else None for v in p.values]
        if p.op == "not_in" and any(lit is None or not lit.ordered for lit in literals):
            return ALWAYS_FALSE  # 'x != null' and 'x != NaN' are unknown, so is the conjunction
        exact = tuple(dict.fromkeys(lit.value for lit in literals if lit is not None and lit.exact))
        if p.op == "in":
            return bound("in", values=exact) if exact else ALWAYS_FALSE
        return bound("not_in", values=exact) if exact else bound("not_null")
    return _bind_comparison(p.op, to_field_type(p.value, field), bound)


def _bind_comparison(op: str, literal: Literal, bound: Callable[..., BoundPredicate]) -> Expression:
    if literal.exact:
        return bound(op, literal.value)
    if not literal.ordered:
        return ALWAYS_FALSE  # every comparison with NaN is unknown
    if op == "eq":
        return ALWAYS_FALSE
    if op == "ne":
        return bound("not_null")
    if literal.value is None:  # above every value of the type
        return bound("not_null") if op in ("lt", "le") else ALWAYS_FALSE
    return bound("lt" if op in ("lt", "le") else "ge", literal.value)

