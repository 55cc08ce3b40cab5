"""The time functions: ``year``, ``month``, ``day``, ``hour``, ``minute`` and ``dateFormat``.

They work in UTC (a local timestamp is read as UTC) on the proleptic Gregorian calendar,
for times in the years 1 to 9999: a ``long`` source (epoch milliseconds) outside them is
rejected, as are Arrow timestamps and dates outside them (they have no Python form).
Within them, a ``yyyy`` year has exactly four digits, so formatted times sort as times.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.errors import InvalidPartitionStrategyError
from cdkds.catalog.partitioning.functions import EVERYTHING, Domain, PartitionFunction
from cdkds.formats import domains
from cdkds.formats.schema import TIMESTAMP_KINDS

CALENDAR_UNITS = ("year", "month", "day", "hour", "minute")
_TIME_SOURCE_KINDS = TIMESTAMP_KINDS | {"date", "long"}
# epoch milliseconds of 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z
_MILLIS_DOMAIN = Domain(*domains.timestamp_range("ms"))


def _time_domain(kind: str) -> Domain:
    return _MILLIS_DOMAIN if kind == "long" else EVERYTHING


def _timestamps(array: pa.Array, kind: str) -> pa.Array:
    """The column as UTC timestamps."""
    if kind == "long":
        return array.cast(pa.timestamp("ms", tz="UTC"))
    if kind == "date":
        return array.cast(pa.timestamp("s")).cast(pa.timestamp("s", tz="UTC"))
    if array.type.tz is None:
        return array.cast(pa.timestamp(array.type.unit, tz="UTC"))
    return array


@dataclass(frozen=True)
class _TimeFunction(PartitionFunction):
    def source_kinds(self) -> set[str]:
        return set(_TIME_SOURCE_KINDS)

    def domain(self, kind: str) -> Domain:
        return _time_domain(kind)

    def outside_reason(self, kind: str) -> str:
        unit = " (epoch milliseconds)" if kind == "long" else ""
        return f"is not a time{unit} in the years 1 to 9999, which {self.to_text()} maps"


@dataclass(frozen=True)
class CalendarFunction(_TimeFunction):
    """``year``, ``month`` (1-12), ``day`` (1-31), ``hour`` or ``minute`` of a time, in UTC."""

    unit: str = "year"

    @property
    def type(self) -> str:  # type: ignore[override]
        return self.unit

    def __post_init__(self) -> None:
        if self.unit not in CALENDAR_UNITS:
            raise InvalidPartitionStrategyError(f"unknown calendar unit {self.unit!r}")

    def args_json(self) -> dict:
        return {}

    def args_text(self) -> list[str]:
        return []

    def source_kinds(self) -> set[str]:
        return super().source_kinds() - ({"date"} if self.unit in ("hour", "minute") else set())

    def result_kind(self, source_kind: str) -> str:
        return "int"

    def transform(self, array: pa.Array, kind: str) -> pa.Array:
        return getattr(pc, self.unit)(_timestamps(array, kind)).cast(pa.int32())


_JAVA_PATTERN = re.compile(r"'[^']*'|yyyy|yy|MM|dd|HH|mm|ss|SSS|[A-Za-z]")
_JAVA_TO_STRFTIME = {"yyyy": "%Y", "yy": "%y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}
_ORDER_PRESERVING = ("yyyy", "MM", "dd", "HH", "mm", "ss")
_UNITS = {"yyyy": "year", "yy": "year", "MM": "month", "dd": "day", "HH": "hour", "mm": "minute", "ss": "second"}
_FINEST_FIRST = ("second", "minute", "hour", "day", "month", "year")


def _strftime(pattern: str) -> tuple[str, bool, str]:
    """A Java ``SimpleDateFormat`` pattern as strftime, whether string order is time order,
    and the finest unit it shows."""
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
    units = {_UNITS[f] for f in fields}
    finest = next((u for u in _FINEST_FIRST if u in units), "year")
    return "".join(out), ordered, finest


@dataclass(frozen=True)
class DateFormatFunction(_TimeFunction):
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

    def result_kind(self, source_kind: str) -> str:
        return "string"

    def transform(self, array: pa.Array, kind: str) -> pa.Array:
        pattern, _, finest = _strftime(self.format)
        # floored to whole units: Arrow's %S shows fractions of seconds, Java's ss does not;
        # Arrow's strftime is slow, so each distinct floored time is formatted once
        floored = pc.floor_temporal(_timestamps(array, kind), unit=finest).cast(pa.timestamp("s", tz="UTC"))
        encoded = floored.dictionary_encode()
        return pc.strftime(encoded.dictionary, format=pattern).take(encoded.indices)
