"""Partition functions: each maps a source field's value to a partition value.

Kite's functions with Kite's JSON names and default partition names: ``identity``,
``hash``, ``range`` (fixed width or explicit upper bounds), ``list`` (value list),
``year``/``month``/``day``/``hour``/``minute`` (UTC calendar fields) and ``dateFormat``.

Each function also projects a predicate on its source field onto its partition values,
as pyiceberg's transforms do: the *inclusive* projection keeps every partition that may
hold a matching row; the *strict* projection keeps only partitions whose rows all match.
``None`` means "no projection" (inclusive: keep everything; strict: keep nothing).
Range predicates through the calendar functions are projected jointly by the strategy
(``year`` then ``month`` then ``day``...), see :mod:`.strategy`.
"""

from __future__ import annotations

import bisect
import datetime as dt
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.errors import InvalidPartitionStrategyError
from cdkds.catalog.expressions import ALWAYS_FALSE, ALWAYS_TRUE, Expression, Predicate
from cdkds.catalog.expressions.tree import literal_to_text
from cdkds.formats import values
from cdkds.formats.errors import SchemaMismatchError
from cdkds.formats.schema import INTEGER_KINDS, TIMESTAMP_KINDS, arrow_type

_UTC = dt.timezone.utc
_STRING_KINDS = {"string", "enum", "uuid"}
_HASHABLE = INTEGER_KINDS | _STRING_KINDS
_IDENTITY_KINDS = INTEGER_KINDS | _STRING_KINDS | TIMESTAMP_KINDS | {"boolean", "date", "decimal"}
_TIME_SOURCE_KINDS = TIMESTAMP_KINDS | {"date", "long"}


def java_hash(value: Any, kind: str) -> int:
    """Java's ``hashCode`` of an Avro int, long or string value, as a signed 32-bit int."""
    if kind == "int":
        h = value & 0xFFFFFFFF
    elif kind == "long":
        v = value & 0xFFFFFFFFFFFFFFFF
        h = (v ^ (v >> 32)) & 0xFFFFFFFF
    else:
        h = 0
        units = str(value).encode("utf-16-be")
        for i in range(0, len(units), 2):
            h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _map_unique(array: pa.Array, fn: Callable[[Any], Any], result: pa.DataType) -> pa.Array:
    """Apply a scalar function once per distinct value (partition sources repeat a lot)."""
    encoded = array.dictionary_encode() if not pa.types.is_dictionary(array.type) else array
    mapped = pa.array([fn(v) for v in encoded.dictionary.to_pylist()], type=result)
    return mapped.take(encoded.indices)


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
    def apply(self, value: Any, kind: str) -> Any:
        """The partition value of one non-null source value."""

    def check_source(self, kind: str) -> None:
        """Raise when a source field of this kind cannot feed the function."""
        allowed = self.source_kinds()
        if kind not in allowed:
            raise InvalidPartitionStrategyError(
                f"partition function {self.to_text()} needs a source of type {' or '.join(sorted(allowed))}, "
                f"but field {self.source!r} is {kind}")

    def source_kinds(self) -> set[str]:
        return _IDENTITY_KINDS

    def apply_array(self, array: pa.Array, kind: str) -> pa.Array:
        """Partition values of a column without nulls."""
        return _map_unique(array, lambda v: self.apply(v, kind), _arrow_type(self.result_kind(kind)))

    def project(self, p: Predicate, kind: str) -> Expression | None:
        """Inclusive projection of a bound predicate on ``source`` onto ``name``."""
        if p.op in ("eq", "in"):
            return self._image(p, kind)
        if p.op == "is_null":
            return ALWAYS_FALSE  # only identity partitions keep null sources
        if p.op == "not_null":
            return ALWAYS_TRUE
        if self.monotonic and p.op in ("lt", "le"):
            return Predicate("le", self.name, self.apply(p.value, kind))
        if self.monotonic and p.op in ("gt", "ge"):
            return Predicate("ge", self.name, self.apply(p.value, kind))
        return None

    def project_strict(self, p: Predicate, kind: str) -> Expression | None:
        """Strict projection: partitions where every row satisfies ``p``."""
        if p.op in ("ne", "not_in"):
            image = self._image(Predicate("in", p.name, values=(p.value,) if p.op == "ne" else p.values), kind)
            return image.negate() if image is not ALWAYS_FALSE else ALWAYS_TRUE
        if p.op == "is_null":
            return ALWAYS_FALSE
        if p.op == "not_null":
            return ALWAYS_TRUE
        if self.monotonic and p.op in ("lt", "le"):
            return Predicate("lt", self.name, self.apply(p.value, kind))
        if self.monotonic and p.op in ("gt", "ge"):
            return Predicate("gt", self.name, self.apply(p.value, kind))
        return None

    def _image(self, p: Predicate, kind: str) -> Expression:
        """``name in f(values)``, skipping values the function rejects (they match nothing)."""
        found = []
        for v in ((p.value,) if p.op == "eq" else p.values):
            try:
                found.append(self.apply(v, kind))
            except SchemaMismatchError:
                continue
        unique = tuple(dict.fromkeys(found))
        if not unique:
            return ALWAYS_FALSE
        return Predicate("eq", self.name, unique[0]) if len(unique) == 1 else Predicate("in", self.name, values=unique)

    def to_json(self) -> dict:
        out = {"type": self.type, "source": self.source, **self.args_json()}
        if self.name != default_name(self.type, self.source):
            out["name"] = self.name
        return out

    def to_text(self) -> str:
        args = ", ".join([_text_name(self.source), *self.args_text()])
        text = f"{self.type}({args})"
        if self.name != default_name(self.type, self.source):
            text += f" as {_text_name(self.name)}"
        return text


def _text_name(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else f"`{name}`"


def default_name(kind: str, source: str) -> str:
    """Kite's default partition names."""
    return {"identity": f"{source}_copy", "hash": f"{source}_hash", "range": f"{source}_range",
            "list": f"{source}_list", "dateFormat": f"{source}_formatted"}.get(kind, kind)


def _arrow_type(kind: str) -> pa.DataType:
    return arrow_type(_KIND_AVRO.get(kind, kind), "partition")


_KIND_AVRO = {
    "date": {"type": "int", "logicalType": "date"},
    "timestamp-millis": {"type": "long", "logicalType": "timestamp-millis"},
    "timestamp-micros": {"type": "long", "logicalType": "timestamp-micros"},
    "local-timestamp-millis": {"type": "long", "logicalType": "local-timestamp-millis"},
    "local-timestamp-micros": {"type": "long", "logicalType": "local-timestamp-micros"},
    "uuid": {"type": "string", "logicalType": "uuid"},
    "enum": "string",
}


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

    def apply(self, value: Any, kind: str) -> Any:
        return values.coerce(value, kind)

    def apply_array(self, array: pa.Array, kind: str) -> pa.Array:
        return array

    def project(self, p: Predicate, kind: str) -> Expression | None:
        return Predicate(p.op, self.name, p.value, p.values)

    project_strict = project


@dataclass(frozen=True)
class HashFunction(PartitionFunction):
    """Kite's hash: ``(hashCode(value) & Integer.MAX_VALUE) % buckets``."""

    buckets: int = 0
    type: ClassVar[str] = "hash"

    def __post_init__(self) -> None:
        if isinstance(self.buckets, bool) or not isinstance(self.buckets, int) or self.buckets < 1:
            raise InvalidPartitionStrategyError(f"hash({self.source}): buckets must be a positive integer, got {self.buckets!r}")

    def args_json(self) -> dict:
        return {"buckets": self.buckets}

    def args_text(self) -> list[str]:
        return [str(self.buckets)]

    def source_kinds(self) -> set[str]:
        return _HASHABLE

    def result_kind(self, source_kind: str) -> str:
        return "int"

    def apply(self, value: Any, kind: str) -> int:
        value = values.coerce(value, kind)
        return (java_hash(value, "string" if kind in _STRING_KINDS else kind) & 0x7FFFFFFF) % self.buckets

    def apply_array(self, array: pa.Array, kind: str) -> pa.Array:
        if kind in INTEGER_KINDS:
            v = array.to_numpy(zero_copy_only=False).astype(np.int64)
            if kind == "long":
                v = v ^ (v.view(np.uint64) >> np.uint64(32)).view(np.int64)
            return pa.array(((v & 0x7FFFFFFF) % self.buckets).astype(np.int32))
        return super().apply_array(array, kind)


@dataclass(frozen=True)
class RangeFunction(PartitionFunction):
    """Fixed-width ranges (``size``: the value floored to a multiple of size) or explicit
    upper ``bounds`` (the first bound at or above the value)."""

    size: int | None = None
    bounds: tuple = ()
    type: ClassVar[str] = "range"
    monotonic: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if (self.size is None) == (not self.bounds):
            raise InvalidPartitionStrategyError(f"range({self.source}) needs either a size or a list of upper bounds")
        if self.size is not None and (isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1):
            raise InvalidPartitionStrategyError(f"range({self.source}): size must be a positive integer, got {self.size!r}")
        if self.bounds:
            object.__setattr__(self, "bounds", tuple(self.bounds))
            kinds = {type(b) for b in self.bounds}
            if kinds not in ({int}, {str}):
                raise InvalidPartitionStrategyError(
                    f"range({self.source}): bounds must be all integers or all strings, got {list(self.bounds)!r}")
            if list(self.bounds) != sorted(set(self.bounds)):
                raise InvalidPartitionStrategyError(
                    f"range({self.source}): bounds must be strictly increasing, got {list(self.bounds)!r}")

    def args_json(self) -> dict:
        return {"size": self.size} if self.size is not None else {"bounds": list(self.bounds)}

    def args_text(self) -> list[str]:
        if self.size is not None:
            return [str(self.size)]
        return ["[" + ", ".join(literal_to_text(b) for b in self.bounds) + "]"]

    def source_kinds(self) -> set[str]:
        if self.size is not None or isinstance(self.bounds[0], int):
            return set(INTEGER_KINDS)
        return set(_STRING_KINDS)

    def result_kind(self, source_kind: str) -> str:
        return source_kind

    def apply(self, value: Any, kind: str) -> Any:
        value = values.coerce(value, kind)
        if self.size is not None:
            return value - value % self.size
        i = bisect.bisect_left(self.bounds, value)
        if i == len(self.bounds):
            raise SchemaMismatchError(f"value {value!r} of field {self.source!r} is above the last range bound {self.bounds[-1]!r}")
        return self.bounds[i]

    def apply_array(self, array: pa.Array, kind: str) -> pa.Array:
        if kind not in INTEGER_KINDS:
            return super().apply_array(array, kind)
        v = array.to_numpy(zero_copy_only=False).astype(np.int64)
        if self.size is not None:
            return pa.array(v - v % self.size, type=array.type)
        bounds = np.array(self.bounds, dtype=np.int64)
        index = np.searchsorted(bounds, v, side="left")
        if (index == len(bounds)).any():
            bad = v[index == len(bounds)][0]
            raise SchemaMismatchError(f"value {int(bad)} of field {self.source!r} is above the last range bound {self.bounds[-1]}")
        return pa.array(bounds[index], type=array.type)

    def project_strict(self, p: Predicate, kind: str) -> Expression | None:
        if p.op in ("eq", "in"):
            return None
        return super().project_strict(p, kind)


@dataclass(frozen=True)
class ListFunction(PartitionFunction):
    """Kite's value list: the index of the set of values that holds the value."""

    values: tuple = ()
    type: ClassVar[str] = "list"

    def __post_init__(self) -> None:
        sets = tuple(tuple(s) if isinstance(s, (list, tuple)) else (s,) for s in self.values)
        object.__setattr__(self, "values", sets)
        if not sets or not all(sets):
            raise InvalidPartitionStrategyError(f"list({self.source}) needs a non-empty list of non-empty value lists")
        seen: set = set()
        for s in sets:
            for v in s:
                if v in seen:
                    raise InvalidPartitionStrategyError(f"list({self.source}): value {v!r} is in more than one list")
                seen.add(v)

    def args_json(self) -> dict:
        return {"values": [list(s) for s in self.values]}

    def args_text(self) -> list[str]:
        return ["[" + ", ".join("[" + ", ".join(literal_to_text(v) for v in s) + "]" for s in self.values) + "]"]

    def source_kinds(self) -> set[str]:
        return INTEGER_KINDS | _STRING_KINDS | {"boolean"}

    def result_kind(self, source_kind: str) -> str:
        return "int"

    def apply(self, value: Any, kind: str) -> int:
        for i, s in enumerate(self.values):
            if value in s:
                return i
        raise SchemaMismatchError(f"value {value!r} of field {self.source!r} is in none of the partition lists {self.args_text()[0]}")

    def project(self, p: Predicate, kind: str) -> Expression | None:
        if p.op == "ne" and any(s == (p.value,) for s in self.values):
            return Predicate("ne", self.name, self.apply(p.value, kind))
        return super().project(p, kind)

    def project_strict(self, p: Predicate, kind: str) -> Expression | None:
        if p.op in ("eq", "in"):
            wanted = {p.value} if p.op == "eq" else set(p.values)
            inside = tuple(i for i, s in enumerate(self.values) if set(s) <= wanted)
            return Predicate("in", self.name, values=inside) if inside else ALWAYS_FALSE
        return super().project_strict(p, kind)


_CALENDAR_UNITS = ("year", "month", "day", "hour", "minute")


def _as_utc(value: Any, kind: str) -> dt.datetime:
    if kind == "long":
        return dt.datetime(1970, 1, 1, tzinfo=_UTC) + dt.timedelta(milliseconds=value)
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=_UTC) if value.tzinfo is None else value.astimezone(_UTC)
    return dt.datetime(value.year, value.month, value.day, tzinfo=_UTC)


def _timestamps(array: pa.Array, kind: str) -> pa.Array:
    if kind == "long":
        return array.cast(pa.timestamp("ms", tz="UTC"))
    if kind == "date":
        return array.cast(pa.timestamp("s")).cast(pa.timestamp("s", tz="UTC"))
    if array.type.tz is None:
        return array.cast(pa.timestamp(array.type.unit, tz="UTC"))
    return array


@dataclass(frozen=True)
class CalendarFunction(PartitionFunction):
    """``year``, ``month`` (1-12), ``day`` (1-31), ``hour`` or ``minute`` of a time, in UTC."""

    unit: str = "year"

    @property
    def type(self) -> str:  # type: ignore[override]
        return self.unit

    def __post_init__(self) -> None:
        if self.unit not in _CALENDAR_UNITS:
            raise InvalidPartitionStrategyError(f"unknown calendar unit {self.unit!r}")

    def args_json(self) -> dict:
        return {}

    def args_text(self) -> list[str]:
        return []

    def source_kinds(self) -> set[str]:
        return _TIME_SOURCE_KINDS - ({"date"} if self.unit in ("hour", "minute") else set())

    def result_kind(self, source_kind: str) -> str:
        return "int"

    def apply(self, value: Any, kind: str) -> int:
        return getattr(_as_utc(values.coerce(value, kind), kind), self.unit)

    def apply_array(self, array: pa.Array, kind: str) -> pa.Array:
        return getattr(pc, self.unit)(_timestamps(array, kind)).cast(pa.int32())


_JAVA_PATTERN = re.compile(r"'[^']*'|yyyy|yy|MM|dd|HH|mm|ss|SSS|[A-Za-z]")
_JAVA_TO_STRFTIME = {"yyyy": "%Y", "yy": "%y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}
_ORDER_PRESERVING = ("yyyy", "MM", "dd", "HH", "mm", "ss")


def _strftime(pattern: str) -> tuple[str, bool]:
    """A Java ``SimpleDateFormat`` pattern as strftime, and whether string order is time order."""
    out, fields = [], []
    position = 0
    for m in _JAVA_PATTERN.finditer(pattern):
        out.append(pattern[position:m.start()].replace("%", "%%"))
        token = m.group()
        if token.startswith("'"):
            out.append(token[1:-1].replace("%", "%%") if token != "''" else "'")
        elif token in _JAVA_TO_STRFTIME:
            out.append(_JAVA_TO_STRFTIME[token])
            fields.append(token)
        else:
            raise InvalidPartitionStrategyError(
                f"dateFormat pattern {pattern!r}: {token!r} is not supported (use yyyy, yy, MM, dd, HH, mm, ss and 'quoted text')")
        position = m.end()
    out.append(pattern[position:].replace("%", "%%"))
    ordered = tuple(fields) == _ORDER_PRESERVING[:len(fields)] and bool(fields)
    return "".join(out), ordered


@dataclass(frozen=True)
class DateFormatFunction(PartitionFunction):
    """The time formatted with a Java ``SimpleDateFormat`` pattern, in UTC."""

    format: str = "yyyy-MM-dd"
    type: ClassVar[str] = "dateFormat"

    def __post_init__(self) -> None:
        if not isinstance(self.format, str) or not self.format:
            raise InvalidPartitionStrategyError(f"dateFormat({self.source}) needs a pattern such as 'yyyy-MM-dd'")
        _strftime(self.format)

    @property
    def monotonic(self) -> bool:  # type: ignore[override]
        return _strftime(self.format)[1]

    def args_json(self) -> dict:
        return {"format": self.format}

    def args_text(self) -> list[str]:
        return ["'" + self.format.replace("'", "''") + "'"]

    def source_kinds(self) -> set[str]:
        return set(_TIME_SOURCE_KINDS)

    def result_kind(self, source_kind: str) -> str:
        return "string"

    def apply(self, value: Any, kind: str) -> str:
        return _as_utc(values.coerce(value, kind), kind).strftime(_strftime(self.format)[0])

    def apply_array(self, array: pa.Array, kind: str) -> pa.Array:
        return pc.strftime(_timestamps(array, kind), format=_strftime(self.format)[0])
