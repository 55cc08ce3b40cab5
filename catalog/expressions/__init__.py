"""The expression tree (:mod:`.tree`), its text parser, typed binding (:mod:`.binding`,
:mod:`.literals`) and its evaluators on records (:mod:`.rows`), Arrow batches
(:mod:`.arrow`) and file statistics (:mod:`.metrics`), all built on one visitor base
(:mod:`.visitors`); :mod:`.pruning` decides whether a data file can match."""

from cdkds.catalog.errors import ExpressionError
from cdkds.catalog.expressions.arrow import drop_matching, filter_batch, to_arrow
from cdkds.catalog.expressions.binding import bind
from cdkds.catalog.expressions.metrics import may_match, must_match
from cdkds.catalog.expressions.parser import parse
from cdkds.catalog.expressions.rows import evaluate
from cdkds.catalog.expressions.tree import (
    ALWAYS_FALSE, ALWAYS_TRUE, And, BoundPredicate, Expression, Not, Or, Predicate, Reference, all_of, and_, any_of,
    field, from_json, not_, or_,
)
from cdkds.catalog.expressions.visitors import (
    BooleanExpressionVisitor, BoundPredicateVisitor, references, rewrite_not, transform, visit,
)

__all__ = [
    "ALWAYS_FALSE", "ALWAYS_TRUE", "And", "BooleanExpressionVisitor", "BoundPredicate", "BoundPredicateVisitor",
    "Expression", "as_expression", "Not", "Or", "Predicate", "Reference", "all_of", "and_", "any_of", "bind",
    "drop_matching", "evaluate", "field", "filter_batch", "from_json", "may_match", "must_match", "not_", "or_",
    "parse", "references", "rewrite_not", "to_arrow", "transform", "visit",
]


def as_expression(where: "Expression | str | None", dataset: str = "") -> Expression:
    """An expression from an expression, its text form, or ``None`` (every row); a text
    that does not parse is an :class:`ExpressionError` naming ``dataset`` when given."""
    if where is None:
        return ALWAYS_TRUE
    if isinstance(where, Expression):
        return where
    try:
        return parse(where)
    except ExpressionError as e:
        if not dataset:
            raise
        raise ExpressionError(f"dataset {dataset!r}: {e}") from None
