"""Traversals of the expression tree: one visitor base, and the jobs that only rebuild or
inspect the tree (:func:`transform`, :func:`rewrite_not`, :func:`references`).

A :class:`BooleanExpressionVisitor` is called bottom-up by :func:`visit`: each node's
method receives the results of its children — all the terms of an ``and`` or ``or`` chain
at once, however many (see :data:`~cdkds.catalog.expressions.tree.MAX_DEPTH` for how deep
a tree may be). A :class:`BoundPredicateVisitor` further
dispatches each predicate to one method per operator (``visit_eq``, ``visit_in``...),
so an evaluator states one rule per operator.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable, Generic, Sequence, TypeVar

from cdkds.catalog.errors import ExpressionError
from cdkds.catalog.expressions.tree import (
    ALWAYS_FALSE, ALWAYS_TRUE, And, BoundPredicate, Expression, Not, Or, Predicate, _Constant, all_of, any_of,
    not_,
)

T = TypeVar("T")


class BooleanExpressionVisitor(Generic[T], ABC):
    """One job over an expression tree; see :func:`visit`."""

    @abstractmethod
    def visit_true(self) -> T: ...

    @abstractmethod
    def visit_false(self) -> T: ...

    @abstractmethod
    def visit_not(self, child: T) -> T: ...

    @abstractmethod
    def visit_and(self, terms: Sequence[T]) -> T:
        """The result of a conjunction of two or more terms, given theirs."""

    @abstractmethod
    def visit_or(self, terms: Sequence[T]) -> T:
        """The result of a disjunction of two or more terms, given theirs."""

    @abstractmethod
    def visit_predicate(self, predicate: Predicate) -> T: ...


def visit(expr: Expression, visitor: BooleanExpressionVisitor[T]) -> T:
    """The result of ``visitor`` on ``expr``, children first."""
    if isinstance(expr, Predicate):
        return visitor.visit_predicate(expr)
    if isinstance(expr, And):
        return visitor.visit_and([visit(term, visitor) for term in expr.terms])
    if isinstance(expr, Or):
        return visitor.visit_or([visit(term, visitor) for term in expr.terms])
    if isinstance(expr, Not):
        return visitor.visit_not(visit(expr.child, visitor))
    if isinstance(expr, _Constant):
        return visitor.visit_true() if expr.value else visitor.visit_false()
    raise ExpressionError(f"not an expression: {expr!r:.200}")


class BoundPredicateVisitor(BooleanExpressionVisitor[T]):
    """A visitor of bound expressions (no ``not`` nodes) with one method per operator."""

    def visit_not(self, child: T) -> T:
        raise ExpressionError("bind the expression first: a bound expression has no 'not' nodes")

    def visit_predicate(self, predicate: Predicate) -> T:
        if not isinstance(predicate, BoundPredicate):
            raise ExpressionError(f"bind the expression first: '{predicate}' is not bound to a schema")
        return getattr(self, f"visit_{predicate.op}")(predicate)

    @abstractmethod
    def visit_is_null(self, p: BoundPredicate) -> T: ...

    @abstractmethod
    def visit_not_null(self, p: BoundPredicate) -> T: ...

    @abstractmethod
    def visit_eq(self, p: BoundPredicate) -> T: ...

    @abstractmethod
    def visit_ne(self, p: BoundPredicate) -> T: ...

    @abstractmethod
    def visit_lt(self, p: BoundPredicate) -> T: ...

    @abstractmethod
    def visit_le(self, p: BoundPredicate) -> T: ...

    @abstractmethod
    def visit_gt(self, p: BoundPredicate) -> T: ...

    @abstractmethod
    def visit_ge(self, p: BoundPredicate) -> T: ...

    @abstractmethod
    def visit_in(self, p: BoundPredicate) -> T: ...

    @abstractmethod
    def visit_not_in(self, p: BoundPredicate) -> T: ...

    @abstractmethod
    def visit_starts_with(self, p: BoundPredicate) -> T: ...

    @abstractmethod
    def visit_not_starts_with(self, p: BoundPredicate) -> T: ...


class _Rebuild(BooleanExpressionVisitor[Expression]):
    """The same tree, each predicate replaced by ``on_predicate(predicate)``."""

    def __init__(self, on_predicate: Callable[[Predicate], Expression]):
        self.on_predicate = on_predicate

    def visit_true(self) -> Expression:
        return ALWAYS_TRUE

    def visit_false(self) -> Expression:
        return ALWAYS_FALSE

    def visit_not(self, child: Expression) -> Expression:
        return not_(child)

    def visit_and(self, terms: Sequence[Expression]) -> Expression:
        return all_of(terms)

    def visit_or(self, terms: Sequence[Expression]) -> Expression:
        return any_of(terms)

    def visit_predicate(self, predicate: Predicate) -> Expression:
        return self.on_predicate(predicate)


class _RewriteNot(_Rebuild):
    def __init__(self) -> None:
        super().__init__(lambda p: p)

    def visit_not(self, child: Expression) -> Expression:
        return child.negate()  # the child has no 'not' nodes, nor has its negation


def transform(expr: Expression, on_predicate: Callable[[Predicate], Expression]) -> Expression:
    """Rebuild ``expr`` with every predicate replaced by ``on_predicate(predicate)``."""
    return visit(expr, _Rebuild(on_predicate))


def rewrite_not(expr: Expression) -> Expression:
    """The same expression with no :class:`Not` nodes (negations pushed into predicates)."""
    return visit(expr, _RewriteNot())


class _References(BooleanExpressionVisitor[frozenset]):
    def visit_true(self) -> frozenset:
        return frozenset()

    visit_false = visit_true

    def visit_not(self, child: frozenset) -> frozenset:
        return child

    def visit_and(self, terms: Sequence[frozenset]) -> frozenset:
        return frozenset().union(*terms)

    visit_or = visit_and

    def visit_predicate(self, predicate: Predicate) -> frozenset:
        return frozenset([predicate.name])


def references(expr: Expression) -> set[str]:
    """The names of the fields an expression reads."""
    return set(visit(expr, _References()))
