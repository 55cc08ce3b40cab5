"""Whether a file's column statistics (:class:`ColumnStatistics`) allow a bound expression
to match some of its rows (:func:`may_match`) or prove that it matches all of them
(:func:`must_match`), as Iceberg's inclusive and strict metrics evaluators.

A column without statistics or without bounds (a float column holding NaN, long text)
can hold anything. Statistics of an older type than the bound literal (after a
promotion) that cannot be compared with it decide nothing.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from cdkds.catalog.expressions.tree import BoundPredicate, Expression
from cdkds.catalog.expressions.visitors import BoundPredicateVisitor, visit
from cdkds.formats.statistics import ColumnStatistics


class _MetricsEvaluator(BoundPredicateVisitor[bool]):
    undecided: bool  # the answer when the statistics cannot tell

    def __init__(self, row_count: int, statistics: Mapping[str, ColumnStatistics]):
        self.row_count = row_count
        self.statistics = statistics
        self.stats: ColumnStatistics | None = None  # of the predicate being visited

    def visit_true(self) -> bool:
        return True

    def visit_false(self) -> bool:
        return False

    def visit_and(self, terms: Sequence[bool]) -> bool:
        return all(terms)

    def visit_or(self, terms: Sequence[bool]) -> bool:
        return any(terms)

    def visit_predicate(self, p: BoundPredicate) -> bool:  # type: ignore[override]
        self.stats = self.statistics.get(p.name)
        if self.stats is None:
            return self.undecided
        try:
            return super().visit_predicate(p)
        except (TypeError, AttributeError):  # bounds a literal does not compare with; a minimum without a maximum
            return self.undecided

    def _bounds(self) -> tuple[Any, Any] | None:
        s = self.stats
        return None if s.min is None else (s.min, s.max)


class _MayMatch(_MetricsEvaluator):
    undecided = True

    def _compare(self, test: Callable[[Any, Any], bool]) -> bool:
        if self.stats.null_count >= self.row_count:
            return False  # comparisons are unknown on nulls, so an all-null column never matches
        bounds = self._bounds()
        return True if bounds is None else test(*bounds)

    def visit_is_null(self, p: BoundPredicate) -> bool:
        return self.stats.null_count > 0

    def visit_not_null(self, p: BoundPredicate) -> bool:
        return self.stats.null_count < self.row_count

    def visit_eq(self, p: BoundPredicate) -> bool:
        return self._compare(lambda lo, hi: lo <= p.value <= hi)

    def visit_ne(self, p: BoundPredicate) -> bool:
        return self._compare(lambda lo, hi: not lo == hi == p.value)

    def visit_lt(self, p: BoundPredicate) -> bool:
        return self._compare(lambda lo, hi: lo < p.value)

    def visit_le(self, p: BoundPredicate) -> bool:
        return self._compare(lambda lo, hi: lo <= p.value)

    def visit_gt(self, p: BoundPredicate) -> bool:
        return self._compare(lambda lo, hi: hi > p.value)

    def visit_ge(self, p: BoundPredicate) -> bool:
        return self._compare(lambda lo, hi: hi >= p.value)

    def visit_in(self, p: BoundPredicate) -> bool:
        return self._compare(lambda lo, hi: any(lo <= v <= hi for v in p.values))

    def visit_not_in(self, p: BoundPredicate) -> bool:
        return self._compare(lambda lo, hi: not (lo == hi and lo in p.values))

    def visit_starts_with(self, p: BoundPredicate) -> bool:
        n = len(p.value)
        return self._compare(lambda lo, hi: lo[:n] <= p.value <= hi[:n])

    def visit_not_starts_with(self, p: BoundPredicate) -> bool:
        return self._compare(lambda lo, hi: not (lo.startswith(p.value) and hi.startswith(p.value)))


class _MustMatch(_MetricsEvaluator):
    undecided = False

    def _compare(self, test: Callable[[Any, Any], bool]) -> bool:
        bounds = self._bounds()
        if self.stats.null_count or bounds is None:
            return False  # a null row satisfies no comparison
        return test(*bounds)

    def visit_is_null(self, p: BoundPredicate) -> bool:
        return self.stats.null_count == self.row_count

    def visit_not_null(self, p: BoundPredicate) -> bool:
        return self.stats.null_count == 0

    def visit_eq(self, p: BoundPredicate) -> bool:
        return self._compare(lambda lo, hi: lo == hi == p.value)

    def visit_ne(self, p: BoundPredicate) -> bool:
        return self._compare(lambda lo, hi: p.value < lo or p.value > hi)

    def visit_lt(self, p: BoundPredicate) -> bool:
        return self._compare(lambda lo, hi: hi < p.value)

    def visit_le(self, p: BoundPredicate) -> bool:
        return self._compare(lambda lo, hi: hi <= p.value)

    def visit_gt(self, p: BoundPredicate) -> bool:
        return self._compare(lambda lo, hi: lo > p.value)

    def visit_ge(self, p: BoundPredicate) -> bool:
        return self._compare(lambda lo, hi: lo >= p.value)

    def visit_in(self, p: BoundPredicate) -> bool:
        return self._compare(lambda lo, hi: lo == hi and lo in p.values)

    def visit_not_in(self, p: BoundPredicate) -> bool:
        return self._compare(lambda lo, hi: all(v < lo or v > hi for v in p.values))

    def visit_starts_with(self, p: BoundPredicate) -> bool:
        return self._compare(lambda lo, hi: lo.startswith(p.value) and hi.startswith(p.value))

    def visit_not_starts_with(self, p: BoundPredicate) -> bool:
        n = len(p.value)
        return self._compare(lambda lo, hi: not (lo[:n] <= p.value <= hi[:n]))


def may_match(expr: Expression, row_count: int, statistics: Mapping[str, ColumnStatistics]) -> bool:
    """False only when no row of a file with these statistics can satisfy the bound ``expr``."""
    return visit(expr, _MayMatch(row_count, statistics))


def must_match(expr: Expression, row_count: int, statistics: Mapping[str, ColumnStatistics]) -> bool:
    """True only when every row of a file with these statistics satisfies the bound ``expr``."""
    return visit(expr, _MustMatch(row_count, statistics))
