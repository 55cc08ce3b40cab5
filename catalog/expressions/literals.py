"""Predicate literals converted to the type of the field they are compared with.

As Iceberg's ``Literal.to(type)``: a literal becomes a value of the field's own type, so
every evaluator (rows, Arrow batches, file statistics, partition projection) compares
values of one type. A literal the type cannot hold exactly is described by where it lies:

- between two values of the type (``1.5`` for an int, ``...00.001500`` for milliseconds,
  ``1.005`` for ``decimal(5, 2)``, ``b'ab'`` for ``fixed(4)``): :class:`Literal` with
  ``exact`` false and ``value`` the next value of the type above it;
- above every value of the type (``2**40`` for an int): :data:`ABOVE_ALL`;
- unordered (NaN): :data:`UNORDERED`.

Floats are the exception: a literal is rounded to the nearest value of the column's
type (double, then float32 for ``float``), as Iceberg does, and is then exact.
"""

from __future__ import annotations

import datetime as dt
import decimal
import fractions
import math
from dataclasses import dataclass
from typing import Any


from cdkds.formats import domains, values
from cdkds.formats.errors import SchemaMismatchError
from cdkds.formats.schema import FLOAT_KINDS, INT_RANGES, INTEGER_KINDS, TIMESTAMP_KINDS, FieldType
from cdkds.formats.values import DECIMAL_CONTEXT


@dataclass(frozen=True)
class Literal:
    """A literal as a value of a field's type: ``value`` itself when ``exact``; otherwise
    the smallest value of the type above the literal (``None``: there is none)."""

    value: Any
    exact: bool = True
    ordered: bool = True


ABOVE_ALL = Literal(None, exact=False)
UNORDERED = Literal(None, exact=False, ordered=False)



def to_field_type(value: Any, field: FieldType) -> Literal:
    """``value`` as a literal of ``field``'s type.

    Raises :class:`SchemaMismatchError` when the value cannot stand for that type at all
    (text that is no number for an int field, a number for a string field...).
    """
    kind = field.kind
    try:
        if kind in INTEGER_KINDS:
            return _integer(_number(value), *INT_RANGES[kind])
        if kind in FLOAT_KINDS:
            return _float(_number(value), kind)
        if kind == "decimal":
            return _decimal(_number(value), field.avro["precision"], field.avro.get("scale", 0))
        if kind == "fixed":
            return _fixed(values.coerce(value, "bytes"), field.avro["size"])
        if kind == "date":
            return _date(value)
        if kind in TIMESTAMP_KINDS:
            return _in_millis(values.coerce(value, kind), kind)
        if kind in ("time-millis", "time-micros"):
            return _in_millis(values.coerce(value, kind), kind)
    except (ValueError, TypeError, ArithmeticError):
        raise SchemaMismatchError(f"value {value!r:.100} ({type(value).__name__}) cannot be read as {kind}") from None
    return Literal(values.coerce(value, kind))


def prefix_for(value: Any, field: FieldType) -> Any:
    """The prefix of a ``starts with`` on ``field``: bytes for binary fields, lower-case
    text for UUIDs (their canonical form), text otherwise."""
    kind = field.kind
    if kind in ("bytes", "fixed"):
        return values.coerce(value, "bytes")
    if not isinstance(value, str):
        raise SchemaMismatchError(f"prefix {value!r:.100} ({type(value).__name__}) is not text")
    return value.lower() if kind == "uuid" else value


def _number(value: Any) -> float | fractions.Fraction:
    """An exact rational for a numeric literal, or a float for NaN and the infinities."""
    if isinstance(value, bool):
        raise TypeError("a boolean is no number")
    if isinstance(value, str):
        value = decimal.Decimal(value.strip())
    if isinstance(value, decimal.Decimal) and not value.is_finite():
        value = float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return value
    if isinstance(value, (int, float, decimal.Decimal)):
        return fractions.Fraction(value)
    raise TypeError("not a number")


def _integer(q: float | fractions.Fraction, lo: int, hi: int) -> Literal:
    if isinstance(q, float):
        return UNORDERED if math.isnan(q) else (ABOVE_ALL if q > 0 else Literal(lo, exact=False))
    above = math.ceil(q)
    if above > hi:
        return ABOVE_ALL
    if above < lo:
        return Literal(lo, exact=False)
    return Literal(above, exact=above == q)


def _float(q: float | fractions.Fraction, kind: str) -> Literal:
    if isinstance(q, float) and math.isnan(q):
        return UNORDERED
    if isinstance(q, float):
        return Literal(q)  # an infinity
    try:
        value = float(q) if kind == "double" else domains.as_float32(float(q))
    except OverflowError:
        value = math.inf
    if math.isinf(value):  # a finite literal beyond the type: between its largest value and infinity
        largest = domains.LARGEST[kind]
        return Literal(math.inf, exact=False) if q > 0 else Literal(-largest, exact=False)
    return Literal(value)


def _decimal(q: float | fractions.Fraction, precision: int, scale: int) -> Literal:
    largest = decimal.Decimal(10 ** precision - 1).scaleb(-scale, DECIMAL_CONTEXT)
    if isinstance(q, float):
        return UNORDERED if math.isnan(q) else (ABOVE_ALL if q > 0 else Literal(-largest, exact=False))
    scaled = q * 10 ** scale
    above = decimal.Decimal(math.ceil(scaled)).scaleb(-scale, DECIMAL_CONTEXT)
    if above > largest:
        return ABOVE_ALL
    if above < -largest:
        return Literal(-largest, exact=False)
    return Literal(above, exact=scaled.denominator == 1)


def _fixed(data: bytes, size: int) -> Literal:
    if len(data) == size:
        return Literal(data)
    if len(data) < size:
        return Literal(data + bytes(size - len(data)), exact=False)  # the smallest value starting with it
    head = int.from_bytes(data[:size], "big") + 1  # the literal is above its first `size` bytes
    return ABOVE_ALL if head >= 256 ** size else Literal(head.to_bytes(size, "big"), exact=False)


def _date(value: Any) -> Literal:
    if isinstance(value, str):
        text = value.strip()
        value = dt.date.fromisoformat(text) if len(text) <= 10 else values.coerce(text, "local-timestamp-micros")
    if isinstance(value, dt.datetime):
        value = values.coerce(value, "local-timestamp-micros")  # an aware time is taken in UTC
        day = value.date()
        if value.time() == dt.time():
            return Literal(day)
        return ABOVE_ALL if day == dt.date.max else Literal(day + dt.timedelta(days=1), exact=False)
    return Literal(values.coerce(value, "date"))


def _in_millis(value: dt.datetime | dt.time, kind: str) -> Literal:
    below = value.microsecond % 1000
    if kind not in domains.MILLIS_KINDS or not below:
        return Literal(value)
    step = dt.timedelta(microseconds=1000 - below)
    if isinstance(value, dt.time):
        as_datetime = dt.datetime.combine(dt.date.min, value) + step
        return ABOVE_ALL if as_datetime.date() != dt.date.min else Literal(as_datetime.time(), exact=False)
    try:
        return Literal(value + step, exact=False)
    except OverflowError:
        return ABOVE_ALL

