"""A partition strategy: the ordered partition functions of a dataset.

Three equal forms: a builder (``PartitionStrategy.builder().hash("userId", 53).build()``),
Kite's JSON (``[{"type": "hash", "source": "userId", "buckets": 53}]``) and a text form
(``"hash(userId, 53), identity(country)"``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import pyarrow as pa

from cdkds.catalog.errors import ExpressionError, InvalidPartitionStrategyError
from cdkds.catalog.expressions import Expression, Predicate, all_of, any_of, transform
from cdkds.catalog.expressions.parser import TokenStream
from cdkds.catalog.partitioning.calendar import CALENDAR_UNITS, CalendarFunction, DateFormatFunction
from cdkds.catalog.partitioning.functions import IdentityFunction, PartitionFunction, default_name
from cdkds.catalog.partitioning.hashing import HashFunction
from cdkds.catalog.partitioning.ranges import ListFunction, RangeFunction
from cdkds.formats import values
from cdkds.formats.errors import SchemaMismatchError
from cdkds.formats.schema import FieldType

_JSON_ARGS = {"sourceType": "source_type"}  # Kite JSON attribute -> function field


def make_function(kind: str, source: str, name: str | None = None, **args: Any) -> PartitionFunction:
    """A partition function from its Kite type name and attributes."""
    if not isinstance(source, str) or not source:
        raise InvalidPartitionStrategyError(f"partition function {kind!r} needs a source field name, got {source!r}")
    name = name or default_name(kind, source)
    known = {"identity": (), "hash": ("buckets", "sourceType"), "range": ("size", "bounds"), "list": ("values",),
             "dateFormat": ("format",), **{unit: () for unit in CALENDAR_UNITS}}
    if kind not in known:
        raise InvalidPartitionStrategyError(f"unknown partition function type {kind!r}; known: {sorted(known)}")
    extra = set(args) - set(known[kind])
    if extra:
        raise InvalidPartitionStrategyError(f"partition function {kind}({source}) does not take {sorted(extra)}")
    if kind == "hash" and "buckets" not in args:
        raise InvalidPartitionStrategyError(f"hash({source}) needs a number of buckets")
    if kind == "list" and "values" not in args:
        raise InvalidPartitionStrategyError(f"list({source}) needs its value lists")
    if kind in CALENDAR_UNITS:
        return CalendarFunction(source, name, unit=kind)
    cls = {"identity": IdentityFunction, "hash": HashFunction, "range": RangeFunction, "list": ListFunction,
           "dateFormat": DateFormatFunction}[kind]
    return cls(source, name, **{_JSON_ARGS.get(k, k): v for k, v in args.items()})


@dataclass(frozen=True)
class PartitionStrategy:
    """Ordered partition functions; the physical layout follows their order."""

    functions: tuple[PartitionFunction, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "functions", tuple(self.functions))
        if not self.functions:
            raise InvalidPartitionStrategyError("a partition strategy needs at least one partition function")
        names = [f.name for f in self.functions]
        duplicates = {n for n in names if names.count(n) > 1}
        if duplicates:
            raise InvalidPartitionStrategyError(f"partition names must be unique; repeated: {sorted(duplicates)}")

    @staticmethod
    def builder() -> "PartitionStrategyBuilder":
        return PartitionStrategyBuilder()

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.functions]

    def source_values(self, partition: Mapping[str, Any]) -> dict[str, Any]:
        """The value the source field of each identity function has in every row of a file
        whose partition values are ``partition``: what a file lacking that column reads
        (docs/FORMAT.md §8)."""
        return {f.source: partition[f.name] for f in self.functions
                if isinstance(f, IdentityFunction) and f.name in partition}

    # ---------------------------------------------------------------- forms

    def to_json(self) -> list[dict]:
        return [f.to_json() for f in self.functions]

    @classmethod
    def from_json(cls, data: Any) -> "PartitionStrategy":
        """From Kite's JSON (a list of objects, or its text)."""
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as e:
                raise InvalidPartitionStrategyError(f"partition strategy is not valid JSON: {e}") from None
        if not isinstance(data, list):
            raise InvalidPartitionStrategyError(f"a partition strategy's JSON is a list of objects, got {data!r:.200}")
        functions = []
        for item in data:
            if not isinstance(item, dict) or "type" not in item or "source" not in item:
                raise InvalidPartitionStrategyError(f"each partition field needs 'type' and 'source', got {item!r:.200}")
            args = {k: v for k, v in item.items() if k not in ("type", "source", "name")}
            functions.append(make_function(item["type"], item["source"], item.get("name"), **args))
        return cls(tuple(functions))

    def to_text(self) -> str:
        return ", ".join(f.to_text() for f in self.functions)

    @classmethod
    def parse(cls, text: str) -> "PartitionStrategy":
        """From the text form, e.g. ``"hash(userId, 53), range(age, [18, 65, 150]) as band"``.

        A text starting with ``[`` is read as Kite JSON.
        """
        if not isinstance(text, str):
            raise InvalidPartitionStrategyError(f"a partition strategy text must be a string, got {text!r:.100}")
        if text.lstrip().startswith("["):
            return cls.from_json(text)
        try:
            return cls(tuple(_parse_functions(TokenStream(text, "partition strategy"))))
        except ExpressionError as e:
            raise InvalidPartitionStrategyError(str(e)) from None

    # ---------------------------------------------------------------- schema

    def check(self, fields: Mapping[str, FieldType]) -> None:
        """Raise unless every source is a top-level field of a type its function accepts,
        and no partition name shadows a field."""
        for f in self.functions:
            if f.source not in fields:
                raise InvalidPartitionStrategyError(
                    f"partition source {f.source!r} of {f.to_text()} is not a field of the schema {list(fields)}")
            if f.name in fields:
                raise InvalidPartitionStrategyError(
                    f"partition name {f.name!r} of {f.to_text()} equals a schema field; give it another name")
            f.check_source(fields[f.source].kind)
            if isinstance(f, ListFunction):
                _check_list_values(f, fields[f.source].kind)

    def check_limits(self) -> None:
        """Raise unless every function's arguments are within the limits a new dataset may
        use (a dataset recorded before a limit existed keeps reading as it was made)."""
        for f in self.functions:
            f.check_limits()

    def bind(self, fields: Mapping[str, FieldType]) -> "PartitionStrategy":
        """This strategy, checked by :meth:`check`, with what each function must keep of
        its source's type recorded (see :class:`.hashing.HashFunction`)."""
        self.check(fields)
        return PartitionStrategy(tuple(f.bind(fields[f.source].kind) for f in self.functions))

    def kinds(self, fields: Mapping[str, FieldType]) -> dict[str, str]:
        """Partition name -> type kind of its values."""
        return {f.name: f.result_kind(fields[f.source].kind) for f in self.functions}

    # ---------------------------------------------------------------- values

    def partition_arrays(self, batch: pa.RecordBatch, fields: Mapping[str, FieldType]) -> list[pa.Array]:
        """Each function's partition values for every row of ``batch``."""
        return [f.apply_array(batch.column(f.source), fields[f.source].kind) for f in self.functions]

    # ---------------------------------------------------------------- projection

    def project(self, expr: Expression, fields: Mapping[str, FieldType]) -> Expression:
        """Inclusive projection of a bound expression onto partition names: true for every
        partition that may hold a matching row."""
        return transform(expr, lambda p: self._project_predicate(p, fields, strict=False))

    def project_strict(self, expr: Expression, fields: Mapping[str, FieldType]) -> Expression:
        """Strict projection: true only for partitions whose every row matches."""
        return transform(expr, lambda p: self._project_predicate(p, fields, strict=True))

    def _project_predicate(self, p: Predicate, fields: Mapping[str, FieldType], strict: bool) -> Expression:
        kind = fields[p.name].kind
        parts = []
        for f in self.functions:
            if f.source == p.name:
                projected = f.project_strict(p, kind) if strict else f.project(p, kind)
                if projected is not None:
                    parts.append(projected)
        chain = self._calendar_chain(p.name)
        if chain and p.op in ("lt", "le", "gt", "ge"):
            parts.append(_lexicographic(chain, p, kind, strict))
        if strict:
            return any_of(parts)
        return all_of(parts)

    def _calendar_chain(self, source: str) -> list[CalendarFunction]:
        """The calendar functions of ``source`` that form year, month, day... from the top."""
        by_unit = {f.unit: f for f in self.functions if isinstance(f, CalendarFunction) and f.source == source}
        chain = []
        for unit in CALENDAR_UNITS:
            if unit not in by_unit:
                break
            chain.append(by_unit[unit])
        return chain


def _lexicographic(chain: list[CalendarFunction], p: Predicate, kind: str, strict: bool) -> Expression:
    """``(year, month, ...)`` compared as a tuple with the tuple of ``p``'s value.

    Inclusive: the tuple of the value's own partition is kept (it may hold matches);
    strict: it is not (it may hold the value itself or its neighbours).
    """
    outside = chain[0].outside_order(p, kind)  # one source, so one domain
    if outside is not None:
        return outside
    target = [(f.name, f.apply(p.value, kind)) for f in chain]
    greater = p.op in ("gt", "ge")
    op = "gt" if greater else "lt"
    alternatives = []
    for i, (name, value) in enumerate(target):
        prefix = [Predicate("eq", n, v) for n, v in target[:i]]
        alternatives.append(all_of([*prefix, Predicate(op, name, value)]))
    if not strict:
        alternatives.append(all_of(Predicate("eq", n, v) for n, v in target))
    return any_of(alternatives)


def _check_list_values(f: ListFunction, kind: str) -> None:
    for s in f.values:
        for v in s:
            try:
                if values.coerce(v, kind) != v or isinstance(v, bool) != (kind == "boolean"):
                    raise SchemaMismatchError("changed by coercion")
            except SchemaMismatchError:
                raise InvalidPartitionStrategyError(
                    f"{f.to_text()}: value {v!r} is not a {kind} like its source field {f.source!r}") from None


def _parse_functions(s: TokenStream) -> list[PartitionFunction]:
    functions = []
    while True:
        token = s.next()
        if token.kind != "name":
            raise s.error("expected a partition function such as hash(userId, 16)", token)
        kind = "dateFormat" if token.text.lower() == "dateformat" else token.text
        s.expect("(")
        source = s.name()
        args: list[Any] = []
        while s.peek.text == ",":
            s.next()
            args.append(_argument(s))
        s.expect(")")
        name = None
        if s.accept_keyword("as"):
            name = s.name()
        functions.append(make_function(kind, source, name, **_named_args(kind, source, args)))
        if s.peek.kind == "end":
            return functions
        s.expect(",")


def _argument(s: TokenStream) -> Any:
    if s.peek.text == "[":
        s.next()
        items = []
        while s.peek.text != "]":
            items.append(_argument(s))
            if s.peek.text == ",":
                s.next()
            elif s.peek.text != "]":
                raise s.error("expected ',' or ']'")
        s.next()
        return items
    return s.literal()


def _named_args(kind: str, source: str, args: list[Any]) -> dict:
    def arity(n: int) -> None:
        if len(args) != n:
            raise InvalidPartitionStrategyError(f"{kind}({source}, ...) takes {n} argument(s) after the source, got {len(args)}")

    if kind == "hash":
        arity(1)
        return {"buckets": args[0]}
    if kind == "range":
        arity(1)
        return {"bounds": tuple(args[0])} if isinstance(args[0], list) else {"size": args[0]}
    if kind == "list":
        arity(1)
        if not isinstance(args[0], list):
            raise InvalidPartitionStrategyError(f"list({source}, ...) takes a list of value lists, got {args[0]!r}")
        return {"values": tuple(args[0])}
    if kind == "dateFormat":
        arity(1)
        return {"format": args[0]}
    arity(0)
    return {}


class PartitionStrategyBuilder:
    """Builds a :class:`PartitionStrategy` one function at a time, in layout order."""

    def __init__(self) -> None:
        self._functions: list[PartitionFunction] = []

    def _add(self, kind: str, source: str, name: str | None, **args: Any) -> "PartitionStrategyBuilder":
        self._functions.append(make_function(kind, source, name, **args))
        return self

    def identity(self, source: str, name: str | None = None) -> "PartitionStrategyBuilder":
        return self._add("identity", source, name)

    def hash(self, source: str, buckets: int, name: str | None = None) -> "PartitionStrategyBuilder":
        return self._add("hash", source, name, buckets=buckets)

    def range(self, source: str, size: int | None = None, bounds: Iterable[Any] | None = None,
              name: str | None = None) -> "PartitionStrategyBuilder":
        args = {"size": size} if bounds is None else {"bounds": tuple(bounds)}
        return self._add("range", source, name, **args)

    def list(self, source: str, values: Iterable[Iterable[Any]], name: str | None = None) -> "PartitionStrategyBuilder":
        return self._add("list", source, name, values=tuple(tuple(v) for v in values))

    def year(self, source: str, name: str | None = None) -> "PartitionStrategyBuilder":
        return self._add("year", source, name)

    def month(self, source: str, name: str | None = None) -> "PartitionStrategyBuilder":
        return self._add("month", source, name)

    def day(self, source: str, name: str | None = None) -> "PartitionStrategyBuilder":
        return self._add("day", source, name)

    def hour(self, source: str, name: str | None = None) -> "PartitionStrategyBuilder":
        return self._add("hour", source, name)

    def minute(self, source: str, name: str | None = None) -> "PartitionStrategyBuilder":
        return self._add("minute", source, name)

    def date_format(self, source: str, format: str, name: str | None = None) -> "PartitionStrategyBuilder":
        return self._add("dateFormat", source, name, format=format)

    def build(self) -> PartitionStrategy:
        return PartitionStrategy(tuple(self._functions))
