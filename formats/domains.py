"""The domain of each value type, written once: the constants and checks that say which
values a field can hold, and the one wording of each refusal. Both ways a value enters —
one by one (:mod:`cdkds.formats.records`) and a column at a time
(:mod:`cdkds.formats.conversion`) — and schema defaults and predicate literals use these.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import sys
import uuid

import numpy as np

#: The largest finite value of each floating type.
LARGEST = {"float": float(np.finfo(np.float32).max), "double": sys.float_info.max}

MILLIS_KINDS = frozenset({"timestamp-millis", "local-timestamp-millis", "time-millis"})
TICKS_PER_SECOND = {"s": 1, "ms": 1000, "us": 10**6, "ns": 10**9}
TIME_UNITS = {"time-millis": "ms", "time-micros": "us"}
DAY_SECONDS = 86_400
EPOCH_DAY = dt.date(1970, 1, 1)
#: The first and last dates a field holds, in days since 1970-01-01: the years 1 to 9999,
#: what Python's ``datetime`` holds.
FIRST_DAY, LAST_DAY = (dt.date.min - EPOCH_DAY).days, (dt.date.max - EPOCH_DAY).days
DECIMAL_CONTEXT = decimal.Context(prec=200)  # exact for every decimal(p, s) Arrow holds (p <= 76)
CANONICAL_UUID = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"

NOT_A_UUID = "is not a UUID"
NOT_A_TIME_OF_DAY = "is not a time of day (00:00 to 23:59:59.999999)"
NOT_A_DATE = "is not a date in the years 1 to 9999"
NOT_A_TIMESTAMP = "is not a timestamp in the years 1 to 9999"


def ticks_per_day(unit: str) -> int:
    """How many ticks of ``unit`` (``s``, ``ms``, ``us``, ``ns``) make a day."""
    return DAY_SECONDS * TICKS_PER_SECOND[unit]


def timestamp_range(unit: str) -> tuple[int, int]:
    """The first and last timestamps a field holds (the years 1 to 9999), in ticks of ``unit``
    since the epoch."""
    per_day = ticks_per_day(unit)
    return FIRST_DAY * per_day, (LAST_DAY + 1) * per_day - 1


def as_float32(value: float) -> float:
    """The ``float`` nearest to ``value`` (an infinity beyond its range), as a cast rounds it."""
    with np.errstate(over="ignore"):
        return float(np.float32(value))


def beyond_range(value: float, kind: str) -> bool:
    """Whether a finite ``value`` would overflow to an infinity in a ``kind`` (float, double) field."""
    return math.isfinite(value) and kind == "float" and math.isinf(as_float32(value))


def out_of_range(kind: str) -> str:
    """The refusal of a finite number beyond a ``kind`` field's range."""
    return f"is beyond the range of a {kind}"


def inexact(kind: str) -> str:
    """The refusal of an integer a ``kind`` (float, double) field cannot hold exactly."""
    return f"has no exact {kind} form"


def fitted_decimal(value: decimal.Decimal, precision: int, scale: int) -> decimal.Decimal | None:
    """``value`` at ``scale`` when that changes no digit and it has at most ``precision``
    digits, else ``None``."""
    if not value.is_finite():
        return None
    try:
        fitted = value.quantize(decimal.Decimal(1).scaleb(-scale), context=DECIMAL_CONTEXT)
    except decimal.InvalidOperation:  # more digits than any decimal holds
        return None
    return fitted if fitted == value and len(fitted.as_tuple().digits) <= precision else None


def misfit_decimal(precision: int, scale: int) -> str:
    """The refusal of a number a decimal(precision, scale) cannot hold exactly."""
    return f"does not fit decimal({precision},{scale})"


def canonical_uuid(value: str | uuid.UUID) -> str:
    """A UUID (or its text) in its canonical text form, lower case and hyphenated;
    ``ValueError`` for text that is not a UUID."""
    return str(value if isinstance(value, uuid.UUID) else uuid.UUID(value))


def sub_millisecond(kind: str) -> str:
    """The refusal of a time finer than a ``*-millis`` field of ``kind`` holds."""
    return f"has a sub-millisecond part, but a {kind} field holds whole milliseconds (round or truncate it first)"


def whole_milliseconds(value: dt.datetime | dt.time) -> bool:
    """Whether ``value`` is a whole number of milliseconds."""
    return value.microsecond % 1000 == 0


__all__ = [
    "CANONICAL_UUID", "DAY_SECONDS", "DECIMAL_CONTEXT", "FIRST_DAY", "LARGEST", "LAST_DAY", "MILLIS_KINDS",
    "NOT_A_DATE", "NOT_A_TIMESTAMP", "NOT_A_TIME_OF_DAY", "NOT_A_UUID", "TICKS_PER_SECOND", "TIME_UNITS",
    "as_float32", "beyond_range", "canonical_uuid", "fitted_decimal", "inexact", "misfit_decimal",
    "out_of_range", "sub_millisecond", "ticks_per_day", "timestamp_range", "whole_milliseconds",
]
