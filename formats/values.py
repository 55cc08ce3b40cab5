"""Typed values: their Python form, their JSON form, and coercion of loose input to them.

Every value cdkds keeps outside a data file — partition values, column statistics,
predicate literals — is one of these, keyed by the type kind of its field
(see :mod:`cdkds.formats.schema`). Python forms follow Arrow's ``to_pylist``: timestamps
with a zone are aware UTC datetimes, local timestamps are naive, decimals are Decimal,
UUIDs are text.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
import uuid
from typing import Any

from cdkds.formats import domains
from cdkds.formats.errors import SchemaMismatchError
from cdkds.formats.schema import FLOAT_KINDS, INT_RANGES, INTEGER_KINDS, TIMESTAMP_KINDS

_UTC = dt.timezone.utc
DECIMAL_CONTEXT = domains.DECIMAL_CONTEXT
_LOCAL_KINDS = {"local-timestamp-millis", "local-timestamp-micros"}


def to_json(value: Any, kind: str) -> Any:
    """The JSON form of a value of the given kind."""
    if value is None:
        return None
    if kind in TIMESTAMP_KINDS or kind in ("date", "time-millis", "time-micros"):
        return value.isoformat()
    if kind == "decimal":
        return str(value)
    if kind in ("bytes", "fixed"):
        return base64.b64encode(value).decode("ascii")
    if kind in FLOAT_KINDS and not math.isfinite(value):
        return str(value)
    return value


def from_json(value: Any, kind: str) -> Any:
    """The Python form of a JSON value of the given kind."""
    if value is None:
        return None
    if kind in TIMESTAMP_KINDS:
        return dt.datetime.fromisoformat(value)
    if kind == "date":
        return dt.date.fromisoformat(value)
    if kind in ("time-millis", "time-micros"):
        return dt.time.fromisoformat(value)
    if kind == "decimal":
        return decimal.Decimal(value)
    if kind in ("bytes", "fixed"):
        return base64.b64decode(value)
    if kind in FLOAT_KINDS:
        return float(value)
    return value


def coerce(value: Any, kind: str) -> Any:
    """Convert loose input (text dates, ints for decimals...) to a value of ``kind``.

    Raises :class:`SchemaMismatchError` when the value cannot stand for that kind.
    """
    if value is None:
        return None
    try:
        out = _coerce(value, kind)
    except (ValueError, TypeError, decimal.InvalidOperation, OverflowError):
        out = _INVALID
    if out is _INVALID:
        raise SchemaMismatchError(f"value {value!r:.100} ({type(value).__name__}) cannot be read as {kind}")
    return out


_INVALID = object()


def _coerce(value: Any, kind: str) -> Any:  # noqa: C901 - one branch per kind
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        return _INVALID
    if kind in INTEGER_KINDS:
        if isinstance(value, str):
            value = int(value.strip())
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            return _INVALID
        lo, hi = INT_RANGES[kind]
        return value if lo <= value <= hi else _INVALID
    if kind in FLOAT_KINDS:
        if isinstance(value, bool):
            return _INVALID
        return float(value) if isinstance(value, (int, float, str)) else _INVALID
    if kind in ("string", "enum"):
        return value if isinstance(value, str) else _INVALID
    if kind == "uuid":
        return domains.canonical_uuid(value) if isinstance(value, (str, uuid.UUID)) else _INVALID
    if kind in ("bytes", "fixed"):
        if isinstance(value, str):
            return value.encode("utf-8")
        return bytes(value) if isinstance(value, (bytes, bytearray)) else _INVALID
    if kind == "date":
        if isinstance(value, dt.datetime):
            return _INVALID
        if isinstance(value, dt.date):
            return value
        return dt.date.fromisoformat(value.strip()) if isinstance(value, str) else _INVALID
    if kind in TIMESTAMP_KINDS:
        return _timestamp(value, local=kind in _LOCAL_KINDS)
    if kind in ("time-millis", "time-micros"):
        if isinstance(value, dt.time):
            return value
        return dt.time.fromisoformat(value.strip()) if isinstance(value, str) else _INVALID
    if kind == "decimal":
        if isinstance(value, bool):
            return _INVALID
        if isinstance(value, (decimal.Decimal, int)):
            return decimal.Decimal(value)
        if isinstance(value, (float, str)):
            d = decimal.Decimal(str(value).strip())
            return d if d.is_finite() else _INVALID
        return _INVALID
    return _INVALID


def _timestamp(value: Any, local: bool) -> Any:
    if isinstance(value, str):
        text = value.strip().replace(" ", "T", 1)
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        value = dt.datetime.fromisoformat(text)
    elif isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    if not isinstance(value, dt.datetime):
        return _INVALID
    if local:
        return value.astimezone(_UTC).replace(tzinfo=None) if value.tzinfo else value
    return value.replace(tzinfo=_UTC) if value.tzinfo is None else value.astimezone(_UTC)
