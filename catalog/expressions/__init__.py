"""The expression tree, its text parser and its visitors (see :mod:`.tree`)."""

from cdkds.catalog.expressions.parser import parse
from cdkds.catalog.expressions.tree import (
    ALWAYS_FALSE, ALWAYS_TRUE, And, Expression, Not, Or, Predicate, Reference, all_of, and_, any_of,
    field, from_json, not_, or_,
)
from cdkds.catalog.expressions.visitors import (
    bind, drop_matching, evaluate, filter_batch, may_match, must_match, references, rewrite_not, to_arrow, transform,
)

__all__ = [
    "ALWAYS_FALSE", "ALWAYS_TRUE", "And", "Expression", "as_expression", "Not", "Or", "Predicate", "Reference",
    "all_of", "and_", "any_of", "bind", "drop_matching", "evaluate", "field", "filter_batch", "from_json",
    "may_match", "must_match", "not_", "or_", "parse", "references", "rewrite_not", "to_arrow", "transform",
]


def as_expression(where: "Expression | str | None") -> Expression:
    """An expression from an expression, its text form, or ``None`` (every row)."""
    if where is None:
        return ALWAYS_TRUE
    if isinstance(where, Expression):
        return where
    return parse(where)
