"""An expression evaluated on one record (a dict of Python values).

SQL's three-valued logic: a comparison with a null — or with a NaN, see
:mod:`.binding` — is unknown (``None``); only records for which the expression is true
match. Bound expressions compare values of the field's type; unbound predicates work on
already typed values too (partition values and their projected predicates).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from cdkds.catalog.expressions.tree import Expression, Predicate
from cdkds.catalog.expressions.visitors import BooleanExpressionVisitor, visit

_COMPARE = {
    "eq": lambda v, p: v == p.value, "ne": lambda v, p: v != p.value, "lt": lambda v, p: v < p.value,
    "le": lambda v, p: v <= p.value, "gt": lambda v, p: v > p.value, "ge": lambda v, p: v >= p.value,
    "in": lambda v, p: v in p.values, "not_in": lambda v, p: v not in p.values,
    "starts_with": lambda v, p: v.startswith(p.value), "not_starts_with": lambda v, p: not v.startswith(p.value),
}


class _RowEvaluator(BooleanExpressionVisitor["bool | None"]):
    def __init__(self, record: Mapping[str, Any]):
        self.record = record

    def visit_true(self) -> bool | None:
        return True

    def visit_false(self) -> bool | None:
        return False

    def visit_not(self, child: bool | None) -> bool | None:
        return None if child is None else not child

    def visit_and(self, terms: Sequence[bool | None]) -> bool | None:
        if False in terms:
            return False
        return None if None in terms else True

    def visit_or(self, terms: Sequence[bool | None]) -> bool | None:
        if True in terms:
            return True
        return None if None in terms else False

    def visit_predicate(self, p: Predicate) -> bool | None:
        value = self.record.get(p.name)
        if p.op == "is_null":
            return value is None
        if p.op == "not_null":
            return value is not None
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        return _COMPARE[p.op](value, p)


def evaluate(expr: Expression, record: Mapping[str, Any]) -> bool | None:
    """True, False or unknown (``None``) for one record (a dict)."""
    return visit(expr, _RowEvaluator(record))
