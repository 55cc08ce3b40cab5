"""Partition functions: each maps a source field's value to a partition value.

Kite's functions with Kite's JSON names and default partition names: ``identity`` (here),
``hash`` (:mod:`.hashing`), ``range`` and ``list`` (:mod:`.ranges`),
``year``/``month``/``day``/``hour``/``minute`` and ``dateFormat`` (:mod:`.calendar`).

A function's meaning is one vectorised :meth:`~PartitionFunction.transform` of an Arrow
column; the partition value of one value is that transform on a one-value column, so the
write path, the record path and projection cannot disagree. A function maps the values
of its :class:`Domain`; values outside it are rejected on write and project to "all" or
"none" in predicates.

Each function also projects a predicate on its source field onto its partition values,
as pyiceberg's transforms do: the *inclusive* projection keeps every partition that may
hold a matching row; the *strict* projection keeps only partitions whose rows all match.
``None`` means "no projection" (inclusive: keep everything; strict: keep nothing).
Range predicates through the calendar functions are projected jointly by the strategy
(``year`` then ``month`` then ``day``...), see :mod:`.strategy`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.errors import InvalidPartitionStrategyError
from cdkds.catalog.expressions import ALWAYS_FALSE, ALWAYS_TRUE, Expression, Predicate
from cdkds.catalog.expressions.tree import text_name
from cdkds.formats import values
from cdkds.formats.errors import SchemaMismatchError
from cdkds.formats.schema import INTEGER_KINDS, TIMESTAMP_KINDS, arrow_type

STRING_KINDS = frozenset({"string", "enum", "uuid"})
IDENTITY_KINDS = INTEGER_KINDS | STRING_KINDS | TIMESTAMP_KINDS | {"boolean", "date", "decimal"}
ORDER_OPS = frozenset({"lt", "le", "gt", "ge"})


@dataclass(frozen=True)
class Domain:
    """The source values a function maps: ``low <= v <= high`` (``None``: unbounded) and,
    when ``members`` is given, ``v in members``. Every value must also have a Python form
    (Arrow timestamps beyond year 9999 have none)."""

    low: Any = None
    high: Any = None
    members: frozenset | None = None

    def position(self, value: Any) -> int:
        """-1 below the domain, 1 above it, 0 inside its bounds."""
        if self.low is not None and value < self.low:
            return -1
        if self.high is not None and value > self.high:
            return 1
        return 0

    def contains(self, value: Any) -> bool:
        return self.position(value) == 0 and (self.members is None or value in self.members)

    def first_outside(self, array: pa.Array) -> Any:
        """A value of ``array`` outside the domain (its raw form if it has no Python
        form), or ``None``. Bounds are checked on the column's minimum and maximum."""
        if self.members is not None:
            candidates = array.unique()
        else:
            extremes = pc.min_max(array)
            candidates = [extremes["min"], extremes["max"]]
        for scalar in candidates:
            if not scalar.is_valid:
                continue
            try:
                value = scalar.as_py()
            except (ValueError, OverflowError):
                return _raw(scalar)
            if not self.contains(value):
                return value
        return None


def _raw(scalar: pa.Scalar) -> str:
    return f"{scalar.value} ({scalar.type})"  # only temporal scalars lack a Python form


EVERYTHING = Domain()


@dataclass(frozen=True)
class PartitionFunction(ABC):
    """Maps field ``source`` to the partition field ``name``."""

    source: str
    name: str

    type: ClassVar[str]
    monotonic: ClassVar[bool] = False  # a <= b implies f(a) <= f(b)

    @abstractmethod
    def args_json(self) -> dict:
        """The Kite JSON attributes beyond type, source and name."""

    @abstractmethod
    def args_text(self) -> list[str]:
        """The text-form arguments after the source."""

    @abstractmethod
    def result_kind(self, source_kind: str) -> str:
        """The type kind of the partition values made from a source of ``source_kind``."""

    @abstractmethod
    def transform(self, array: pa.Array, kind: str) -> pa.Array:
        """The partition values of a column of non-null values inside the domain: the
        function's one definition."""

    def domain(self, kind: str) -> Domain:
        """The source values of ``kind`` the function maps."""
        return EVERYTHING

    def source_kinds(self) -> set[str]:
        return set(IDENTITY_KINDS)

    def check_source(self, kind: str) -> None:
        """Raise when a source field of this kind cannot feed the function."""
        allowed = self.source_kinds()
        if kind not in allowed:
            raise InvalidPartitionStrategyError(
                f"partition function {self.to_text()} needs a source of type {' or '.join(sorted(allowed))}, "
                f"but field {self.source!r} is {kind}")

    def check_limits(self) -> None:
        """Raise when an argument is beyond what a new dataset may use (none by default)."""

    def bind(self, kind: str) -> "PartitionFunction":
        """This function, recording what it must keep of its source type ``kind``."""
        return self

    # ---------------------------------------------------------------- values

    def check(self, value: Any, kind: str) -> None:
        """Raise :class:`SchemaMismatchError` unless the non-null ``value`` is in the domain."""
        if not self.domain(kind).contains(value):
            raise self._outside(value, kind)

    def apply_array(self, array: pa.Array, kind: str) -> pa.Array:
        """Partition values of a column without nulls; :class:`SchemaMismatchError` names
        a value outside the domain."""
        bad = self.domain(kind).first_outside(array)
        if bad is not None:
            raise self._outside(bad, kind)
        return self.transform(array, kind)

    def apply(self, value: Any, kind: str) -> Any:
        """The partition value of one non-null source value: :meth:`apply_array` on it."""
        value = values.coerce(value, kind)
        self.check(value, kind)
        return self.transform(column_of([value], kind), kind)[0].as_py()

    def _outside(self, value: Any, kind: str) -> SchemaMismatchError:
        return SchemaMismatchError(f"value {value!r:.100} of field {self.source!r} {self.outside_reason(kind)}")

    def outside_reason(self, kind: str) -> str:
        """Why a value is outside the domain, as the end of a sentence about it."""
        return f"is outside what {self.to_text()} maps"

    # ---------------------------------------------------------------- projection

    def project(self, p: Predicate, kind: str) -> Expression | None:
        """Inclusive projection of a bound predicate on ``source`` onto ``name``."""
        if p.op in ("eq", "in"):
            return self._image(p.values if p.op == "in" else (p.value,), kind)
        if p.op == "is_null":
            return ALWAYS_FALSE  # only identity partitions keep null sources
        if p.op == "not_null":
            return ALWAYS_TRUE
        if self.monotonic and p.op in ORDER_OPS:
            return self._project_order(p, kind, strict=False)
        return None

    def project_strict(self, p: Predicate, kind: str) -> Expression | None:
        """Strict projection: partitions where every row satisfies ``p``."""
        if p.op in ("ne", "not_in"):
            image = self._image(p.values if p.op == "not_in" else (p.value,), kind)
            return image.negate() if image is not ALWAYS_FALSE else ALWAYS_TRUE
        if p.op == "is_null":
            return ALWAYS_FALSE
        if p.op == "not_null":
            return ALWAYS_TRUE
        if self.monotonic and p.op in ORDER_OPS:
            return self._project_order(p, kind, strict=True)
        return None

    def outside_order(self, p: Predicate, kind: str) -> Expression | None:
        """The projection (inclusive and strict alike) of an order predicate whose literal
        lies beyond the domain's bounds; ``None`` when it lies within them."""
        position = self.domain(kind).position(p.value)
        if position == 0:
            return None
        below_literal = p.op in ("lt", "le")  # the predicate keeps values below the literal
        return ALWAYS_TRUE if (position > 0) == below_literal else ALWAYS_FALSE

    def _project_order(self, p: Predicate, kind: str, strict: bool) -> Expression:
        outside = self.outside_order(p, kind)
        if outside is not None:
            return outside
        below = p.op in ("lt", "le")
        # f(x) < f(v) implies x < v; f(x) <= f(v) is all that x <= v implies
        op = ("lt" if below else "gt") if strict else ("le" if below else "ge")
        return Predicate(op, self.name, self.apply(p.value, kind))

    def _image(self, literals: Iterable[Any], kind: str) -> Expression:
        """``name in f(literals)``, skipping literals outside the domain (they match nothing)."""
        inside = [v for v in literals if self.domain(kind).contains(v)]
        if not inside:
            return ALWAYS_FALSE
        image = self.transform(column_of(inside, kind), kind).to_pylist()
        unique = tuple(dict.fromkeys(image))
        return Predicate("eq", self.name, unique[0]) if len(unique) == 1 else Predicate("in", self.name, values=unique)

    # ---------------------------------------------------------------- forms

    def to_json(self) -> dict:
        out = {"type": self.type, "source": self.source, **self.args_json()}
        if self.name != default_name(self.type, self.source):
            out["name"] = self.name
        return out

    def to_text(self) -> str:
        args = ", ".join([text_name(self.source), *self.args_text()])
        text = f"{self.type}({args})"
        if self.name != default_name(self.type, self.source):
            text += f" as {text_name(self.name)}"
        return text


def default_name(kind: str, source: str) -> str:
    """Kite's default partition names."""
    return {"identity": f"{source}_copy", "hash": f"{source}_hash", "range": f"{source}_range",
            "list": f"{source}_list", "dateFormat": f"{source}_formatted"}.get(kind, kind)


_KIND_AVRO = {
    "date": {"type": "int", "logicalType": "date"},
    "timestamp-millis": {"type": "long", "logicalType": "timestamp-millis"},
    "timestamp-micros": {"type": "long", "logicalType": "timestamp-micros"},
    "local-timestamp-millis": {"type": "long", "logicalType": "local-timestamp-millis"},
    "local-timestamp-micros": {"type": "long", "logicalType": "local-timestamp-micros"},
    "uuid": {"type": "string", "logicalType": "uuid"},
    "enum": "string",
}


def kind_arrow_type(kind: str) -> pa.DataType:
    """The Arrow type of values of a (non-decimal) kind; timestamps in microseconds, so
    any Python datetime converts exactly (the functions do not depend on the unit)."""
    if kind in TIMESTAMP_KINDS:
        return pa.timestamp("us", tz=None if kind.startswith("local-") else "UTC")
    return arrow_type(_KIND_AVRO.get(kind, kind), "partition")


def column_of(items: list[Any], kind: str) -> pa.Array:
    """Python values of ``kind`` as an Arrow column the functions take."""
    return pa.array(items) if kind == "decimal" else pa.array(items, type=kind_arrow_type(kind))


def map_distinct(array: pa.Array, fn: Callable[[Any], Any], result: pa.DataType) -> pa.Array:
    """``fn`` applied once per distinct value (partition sources repeat a lot)."""
    encoded = array.dictionary_encode() if not pa.types.is_dictionary(array.type) else array
    mapped = pa.array([fn(v) for v in encoded.dictionary.to_pylist()], type=result)
    return mapped.take(encoded.indices)


@dataclass(frozen=True)
class IdentityFunction(PartitionFunction):
    type: ClassVar[str] = "identity"
    monotonic: ClassVar[bool] = True

    def args_json(self) -> dict:
        return {}

    def args_text(self) -> list[str]:
        return []

    def result_kind(self, source_kind: str) -> str:
        return source_kind

    def transform(self, array: pa.Array, kind: str) -> pa.Array:
        return array

    def project(self, p: Predicate, kind: str) -> Expression | None:
        return Predicate(p.op, self.name, p.value, p.values)

    project_strict = project
