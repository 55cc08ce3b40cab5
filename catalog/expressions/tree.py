"""The one expression tree for predicates in cdkds.

Immutable values: :class:`Predicate` on one named field (comparison, set membership,
null checks, prefix), combined with :class:`And`, :class:`Or` and :class:`Not`, plus the
constants :data:`ALWAYS_TRUE` and :data:`ALWAYS_FALSE`. Every consumer — filter
pushdown, partition pruning, file statistics, tombstones, keyed-table filters —
takes this tree; the visitors in :mod:`cdkds.catalog.expressions.visitors` do the work.

Build with :func:`field`: ``field("userId") == 1234``, ``field("ts") >= "2026-01-01"``,
``field("country").isin(["NZ", "AU"])``, combined with ``&``, ``|`` and ``~``.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field as dataclass_field
from typing import Any, Callable, Iterable, Sequence, TypeVar

from cdkds.catalog.errors import ExpressionError
from cdkds.formats.schema_rules import is_field_name

T = TypeVar("T")

COMPARISONS = {"eq": "=", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
SET_OPS = {"in", "not_in"}
UNARY_OPS = {"is_null", "not_null"}
PREFIX_OPS = {"starts_with", "not_starts_with"}
NEGATIONS = {
    "eq": "ne", "ne": "eq", "lt": "ge", "ge": "lt", "gt": "le", "le": "gt", "in": "not_in",
    "not_in": "in", "is_null": "not_null", "not_null": "is_null", "starts_with": "not_starts_with",
    "not_starts_with": "starts_with",
}
FLIPPED = {"eq": "eq", "ne": "ne", "lt": "gt", "gt": "lt", "le": "ge", "ge": "le"}
RESERVED_WORDS = frozenset({"and", "or", "not", "in", "is", "null", "true", "false", "like", "starts"})
"""Words of the text form that a bare name may not be, in any case (a field so named is quoted in backticks)."""


def text_name(name: str) -> str:
    """``name`` as the text forms (predicates, partition strategies) read it back: bare, or
    quoted in backticks when it is not a plain name or is a reserved word."""
    if is_field_name(name) and name.lower() not in RESERVED_WORDS:
        return name
    return "`" + name.replace("`", "``") + "`"


class Expression(ABC):
    """A boolean expression over the fields of a record."""

    __slots__ = ()
    depth = 0  # levels of pairs and 'not's above the predicates, as targets nest them; at most MAX_DEPTH

    def __and__(self, other: "Expression") -> "Expression":
        return and_(self, other)

    def __or__(self, other: "Expression") -> "Expression":
        return or_(self, other)

    def __invert__(self) -> "Expression":
        return not_(self)

    @abstractmethod
    def negate(self) -> "Expression":
        """The exact logical complement (for non-null inputs), without a :class:`Not` node."""

    @abstractmethod
    def to_json(self) -> Any:
        """The JSON form that :func:`from_json` reads back."""


@dataclass(frozen=True)
class _Constant(Expression):
    value: bool

    def negate(self) -> Expression:
        return ALWAYS_FALSE if self.value else ALWAYS_TRUE

    def to_json(self) -> Any:
        return self.value

    def __str__(self) -> str:
        return "true" if self.value else "false"


ALWAYS_TRUE = _Constant(True)
ALWAYS_FALSE = _Constant(False)


MAX_DEPTH = 100
"""How deeply ``and``, ``or`` and ``not`` may nest, a chain of n terms counting as the
log2 n levels of the balanced pairs that JSON, Arrow and SQL hold it in (1,000 terms: 10
levels, a million: 20): deeper trees are refused with :class:`ExpressionError`, so every
traversal of a tree, and every form it is written in, stays far inside the recursion limits
of Python, its JSON module and SQL parsers."""


def _depth_of(terms: tuple[Expression, ...]) -> int:
    depth = max(1, (len(terms) - 1).bit_length()) + max(t.depth for t in terms)
    if depth > MAX_DEPTH:
        raise ExpressionError(f"the predicate nests 'and', 'or' and 'not' more than {MAX_DEPTH} levels deep")
    return depth


class _Junction(Expression):
    """An n-ary ``and`` or ``or`` of two or more terms, none itself of the same kind: a chain
    of any length is one flat node (``a & b & c`` is ``And(a, b, c)``)."""

    __slots__ = ("terms", "depth")
    word = ""

    def __init__(self, *terms: Expression):
        flat: list[Expression] = []
        for term in terms:
            if not isinstance(term, Expression):
                raise ExpressionError(f"not an expression: {term!r:.200}")
            flat.extend(term.terms if type(term) is type(self) else (term,))
        if len(flat) < 2:
            raise ExpressionError(f"'{self.word}' needs two terms or more, got {len(flat)}")
        object.__setattr__(self, "terms", tuple(flat))
        object.__setattr__(self, "depth", _depth_of(self.terms))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.terms == self.terms  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.terms))

    def __repr__(self) -> str:
        return f"{type(self).__name__}{self.terms!r}"

    def __reduce__(self) -> tuple:
        return type(self), self.terms

    def to_json(self) -> Any:
        # pairs, as format readers expect (docs/FORMAT.md §7), nested as a balanced tree so
        # that a long chain stays shallow for every JSON reader and writer
        return balanced([t.to_json() for t in self.terms], lambda left, right: {self.word: [left, right]})

    def __str__(self) -> str:
        return "(" + f" {self.word} ".join(str(t) for t in self.terms) + ")"


class And(_Junction):
    """True when every term is true."""

    __slots__ = ()
    word = "and"

    def negate(self) -> Expression:
        return any_of(t.negate() for t in self.terms)


class Or(_Junction):
    """True when some term is true."""

    __slots__ = ()
    word = "or"

    def negate(self) -> Expression:
        return all_of(t.negate() for t in self.terms)


@dataclass(frozen=True)
class Not(Expression):
    child: Expression
    depth: int = dataclass_field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.child, Expression):
            raise ExpressionError(f"not an expression: {self.child!r:.200}")
        object.__setattr__(self, "depth", _depth_of((self.child,)))

    def negate(self) -> Expression:
        return self.child

    def to_json(self) -> Any:
        return {"not": self.child.to_json()}

    def __str__(self) -> str:
        return f"not {self.child}"


@dataclass(frozen=True)
class Predicate(Expression):
    """``op`` applied to field ``name``: with ``value`` for comparisons and prefixes,
    ``values`` (a tuple) for ``in``/``not_in``, neither for null checks."""

    op: str
    name: str
    value: Any = None
    values: tuple = ()

    def __post_init__(self) -> None:
        if self.op not in NEGATIONS:
            raise ExpressionError(f"unknown predicate operator {self.op!r}")
        if not isinstance(self.name, str) or not self.name:
            raise ExpressionError(f"a predicate needs a field name, got {self.name!r}")
        if self.op in SET_OPS:
            object.__setattr__(self, "values", tuple(self.values))
        elif self.op not in UNARY_OPS and self.value is None:
            raise ExpressionError(f"field {self.name!r}: comparing with null is never true; use 'is null'")

    def negate(self) -> Expression:
        return Predicate(NEGATIONS[self.op], self.name, self.value, self.values)

    def to_json(self) -> Any:
        out: dict[str, Any] = {"op": self.op, "field": self.name}
        if self.op in SET_OPS:
            out["values"] = [literal_to_json(v) for v in self.values]
        elif self.op not in UNARY_OPS:
            out["value"] = literal_to_json(self.value)
        return out

    def __str__(self) -> str:
        name = text_name(self.name)
        if self.op in COMPARISONS:
            return f"{name} {COMPARISONS[self.op]} {literal_to_text(self.value)}"
        if self.op in SET_OPS:
            inner = ", ".join(literal_to_text(v) for v in self.values)
            return f"{name} {'in' if self.op == 'in' else 'not in'} ({inner})"
        if self.op in UNARY_OPS:
            return f"{name} is {'null' if self.op == 'is_null' else 'not null'}"
        text = f"{name} starts with {literal_to_text(self.value)}"
        return text if self.op == "starts_with" else f"not {text}"


@dataclass(frozen=True)
class BoundPredicate(Predicate):
    """A predicate checked against its field: ``value`` and ``values`` are values of the
    field's type (``kind``), as :func:`~cdkds.catalog.expressions.binding.bind` makes them."""

    kind: str = ""

    def negate(self) -> Expression:
        return BoundPredicate(NEGATIONS[self.op], self.name, self.value, self.values, self.kind)


def balanced(terms: Sequence[T], combine: Callable[[T, T], T]) -> T:
    """``terms`` combined pairwise as a balanced tree (depth log2 n, not n): for targets
    whose own trees nest (Arrow's expressions, SQL's parser)."""
    level = list(terms)
    while len(level) > 1:
        paired = [combine(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        level = paired + level[len(level) - len(level) % 2:]
    return level[0]


def and_(*terms: Expression) -> Expression:
    """The conjunction of ``terms``, simplified: constants fold, chains flatten."""
    return all_of(terms)


def or_(*terms: Expression) -> Expression:
    """The disjunction of ``terms``, simplified: constants fold, chains flatten."""
    return any_of(terms)


def not_(child: Expression) -> Expression:
    if isinstance(child, _Constant):
        return child.negate()
    if isinstance(child, Not):
        return child.child
    return Not(child)


def all_of(expressions: Iterable[Expression]) -> Expression:
    """True when every expression is (true for none at all)."""
    terms = []
    for e in expressions:
        if e is ALWAYS_FALSE:
            return ALWAYS_FALSE
        if e is not ALWAYS_TRUE:
            terms.append(e)
    return terms[0] if len(terms) == 1 else And(*terms) if terms else ALWAYS_TRUE


def any_of(expressions: Iterable[Expression]) -> Expression:
    """True when some expression is (false for none at all)."""
    terms = []
    for e in expressions:
        if e is ALWAYS_TRUE:
            return ALWAYS_TRUE
        if e is not ALWAYS_FALSE:
            terms.append(e)
    return terms[0] if len(terms) == 1 else Or(*terms) if terms else ALWAYS_FALSE


@dataclass(frozen=True)
class Reference:
    """A field by name; its operators build predicates."""

    name: str

    def __eq__(self, value: Any) -> Predicate:  # type: ignore[override]
        return Predicate("eq", self.name, value)

    def __ne__(self, value: Any) -> Predicate:  # type: ignore[override]
        return Predicate("ne", self.name, value)

    def __lt__(self, value: Any) -> Predicate:
        return Predicate("lt", self.name, value)

    def __le__(self, value: Any) -> Predicate:
        return Predicate("le", self.name, value)

    def __gt__(self, value: Any) -> Predicate:
        return Predicate("gt", self.name, value)

    def __ge__(self, value: Any) -> Predicate:
        return Predicate("ge", self.name, value)

    __hash__ = object.__hash__

    def isin(self, values: Iterable[Any]) -> Predicate:
        return Predicate("in", self.name, values=tuple(values))

    def notin(self, values: Iterable[Any]) -> Predicate:
        return Predicate("not_in", self.name, values=tuple(values))

    def is_null(self) -> Predicate:
        return Predicate("is_null", self.name)

    def not_null(self) -> Predicate:
        return Predicate("not_null", self.name)

    def startswith(self, prefix: str) -> Predicate:
        return Predicate("starts_with", self.name, prefix)


def field(name: str) -> Reference:
    """A reference to the field ``name``, for building predicates."""
    return Reference(name)


# ---------------------------------------------------------------- literals

def literal_to_json(value: Any) -> Any:
    """JSON form of a literal; types JSON lacks are tagged (``{"$date": "2026-01-01"}``)."""
    if isinstance(value, dt.datetime):
        return {"$timestamp": value.isoformat()}
    if isinstance(value, dt.date):
        return {"$date": value.isoformat()}
    if isinstance(value, dt.time):
        return {"$time": value.isoformat()}
    if isinstance(value, decimal.Decimal):
        return {"$decimal": str(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if isinstance(value, float) and not math.isfinite(value):
        return {"$float": str(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ExpressionError(f"literal {value!r} of type {type(value).__name__} cannot be stored in an expression")


def literal_from_json(data: Any) -> Any:
    if isinstance(data, dict):
        (tag, text), = data.items()
        readers = {"$timestamp": dt.datetime.fromisoformat, "$date": dt.date.fromisoformat,
                   "$time": dt.time.fromisoformat, "$decimal": decimal.Decimal,
                   "$bytes": base64.b64decode, "$float": float}
        if tag not in readers:
            raise ExpressionError(f"unknown literal tag {tag!r}")
        return readers[tag](text)
    return data


def literal_to_text(value: Any) -> str:
    """The literal as the text parser reads it back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, decimal.Decimal)):
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, dt.datetime):
        return f"timestamp '{value.isoformat()}'"
    if isinstance(value, dt.date):
        return f"date '{value.isoformat()}'"
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8", errors="replace")
    text = str(value).replace("'", "''")
    return f"'{text}'"


def from_json(data: Any) -> Expression:
    """The expression of a JSON form made by :meth:`Expression.to_json` (also the binary
    ``{"and": [left, right]}`` chains of older logs, read without recursing along them)."""
    built: list[Expression] = []
    pending: list[tuple[Any, bool]] = [(data, False)]
    while pending:  # children first, on a stack of our own
        node, children_done = pending.pop()
        kind, children = _json_node(node)
        if children and not children_done:
            pending.append((node, True))
            pending.extend((child, False) for child in reversed(children))
            continue
        if kind == "leaf":
            built.append(_json_leaf(node))
            continue
        terms = built[len(built) - len(children):]
        del built[len(built) - len(children):]
        built.append(Not(terms[0]) if kind == "not" else And(*terms) if kind == "and" else Or(*terms))
    return built[0]


def _json_node(data: Any) -> tuple[str, list]:
    if isinstance(data, dict) and len(data) == 1:
        (kind, value), = data.items()
        if kind in ("and", "or"):
            if not isinstance(value, list) or len(value) < 2:
                raise ExpressionError(f"not an expression: {data!r:.200}")
            return kind, value
        if kind == "not":
            return kind, [value]
    return "leaf", []


def _json_leaf(data: Any) -> Expression:
    if data is True:
        return ALWAYS_TRUE
    if data is False:
        return ALWAYS_FALSE
    if not isinstance(data, dict):
        raise ExpressionError(f"not an expression: {data!r:.200}")
    try:
        op, name = data["op"], data["field"]
    except KeyError:
        raise ExpressionError(f"not an expression: {data!r:.200}") from None
    return Predicate(op, name, literal_from_json(data.get("value")),
                     tuple(literal_from_json(v) for v in data.get("values", ())))
