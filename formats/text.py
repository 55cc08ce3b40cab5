"""Values written as text — CSV cells, strings in JSON lines — read into Arrow columns, and the
inference of a column's type from its text. One set of rules, vectorised (pyarrow casts), used
whether the type is inferred or given:

- a blank value is null in every field but a string field (the caller decides what is blank:
  CSV has an unquoted empty cell null and a quoted ``""`` the empty string); values of
  non-string fields are trimmed;
- longs, ints, doubles, floats and decimals as pyarrow parses them (``nan``, ``inf``, ``1e5``);
  booleans ``true``/``false`` (any case; ``1``/``0`` too when the field is boolean);
- dates ``YYYY-MM-DD``; timestamps ISO 8601 (``2026-03-01T10:00:00Z``; a space for the ``T``,
  a fraction, an offset allowed) — in a timestamp field a value without a zone is UTC, in a
  local timestamp field a zone is an error; times ``HH:MM[:SS[.f]]``;
- bytes and fixed are base64; arrays, maps and records are JSON text.

**Inference** (Kite's CSV rule, extended with booleans and times): a column is a ``long`` if
every non-blank value parses as a long, else a ``double`` if all parse as doubles and not all
are whole numbers (whole numbers beyond a long stay exact as strings), else a
``boolean`` if all are ``true``/``false``, else a ``date`` if all are ``YYYY-MM-DD``, else a
UTC ``timestamp`` (micros) if all are ISO timestamps with a zone, else a local timestamp
(micros) if all are ISO timestamps without one, else a ``string``; a column with no non-blank
value is a string. Strings in JSON lines are checked for the date and timestamp kinds only.
"""

from __future__ import annotations

import base64
import decimal
import json
from typing import Any, Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from cdkds.formats.conversion import first_bad as _first_bad, safe_cast

_DATE = r"^\d{4}-\d{2}-\d{2}$"
_DATETIME = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?"
_ZONE = r"(Z|[+-]\d{2}(:?\d{2})?)$"
_TIME = r"^\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?$"
_INTEGER = r"^\s*[+-]?\d+\s*$"
# what a conversion raises for a value that does not fit its type
BAD_VALUE = (ValueError, TypeError, OverflowError, decimal.InvalidOperation, pa.ArrowInvalid, pa.ArrowTypeError)

CSV_CANDIDATES = ("long", "double", "boolean", "date", "timestamp", "local-timestamp")
STRING_CANDIDATES = ("date", "timestamp", "local-timestamp")  # what a JSON string may turn out to be
_CANDIDATE_TYPES = {"long": pa.int64(), "double": pa.float64(), "boolean": pa.bool_(), "date": pa.date32(),
                    "timestamp": pa.timestamp("us", tz="UTC"), "local-timestamp": pa.timestamp("us")}


def type_name(t: pa.DataType) -> str:
    """An Arrow type in the words of the dataset model (Avro's names)."""
    if pa.types.is_timestamp(t):
        unit = {"s": "millis", "ms": "millis"}.get(t.unit, "micros")
        return f"timestamp-{unit}" if t.tz is not None else f"local-timestamp-{unit}"
    simple = {pa.int64(): "long", pa.int32(): "int", pa.float64(): "double", pa.float32(): "float",
              pa.bool_(): "boolean", pa.string(): "string", pa.large_string(): "string", pa.date32(): "date",
              pa.binary(): "bytes (base64)", pa.large_binary(): "bytes (base64)", pa.time32("ms"): "time-millis",
              pa.time64("us"): "time-micros"}
    for candidate, name in simple.items():
        if t.equals(candidate):
            return name
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_fixed_size_binary(t):
        return f"fixed({t.byte_width}) (base64)"
    return str(t)


def is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def is_bytes(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)


# ---------------------------------------------------------------- text -> Arrow

def blank_null(a: pa.Array) -> pa.Array:
    """The values trimmed, blank ones null."""
    trimmed = pc.utf8_trim_whitespace(a)
    return pc.if_else(pc.equal(trimmed, ""), pa.scalar(None, pa.string()), trimmed)


def _all_match(a: pa.Array, pattern: str) -> bool:
    return a.null_count == len(a) or bool(pc.all(pc.match_substring_regex(a, pattern)).as_py())


def _timestamps(t: pa.DataType) -> Callable[[pa.Array], pa.Array]:
    def convert(a: pa.Array) -> pa.Array:
        s = blank_null(a)
        if t.tz is None:
            return s.cast(t)
        zoned = pc.match_substring_regex(s, _ZONE)
        if pc.all(zoned).as_py() is not False:
            return s.cast(t)
        null = pa.scalar(None, pa.string())
        with_zone = pc.if_else(zoned, s, null).cast(t)
        without = pc.if_else(zoned, null, s).cast(pa.timestamp(t.unit)).cast(t)  # no zone: UTC
        return pc.coalesce(with_zone, without)
    return convert


def _times(t: pa.DataType) -> Callable[[pa.Array], pa.Array]:
    def convert(a: pa.Array) -> pa.Array:
        s = blank_null(a)
        if not _all_match(s, _TIME):
            raise ValueError("not a time")
        ticks = pc.binary_join_element_wise("1970-01-01T", s, "").cast(pa.timestamp(t.unit)).cast(pa.int64())
        return (ticks.cast(pa.int32()) if pa.types.is_time32(t) else ticks).cast(t)
    return convert


def _base64(t: pa.DataType) -> Callable[[pa.Array], pa.Array]:
    def convert(a: pa.Array) -> pa.Array:
        return pa.array([None if v is None else base64.b64decode(v, validate=True) for v in a.to_pylist()], t)
    return convert


def _json_text(t: pa.DataType) -> Callable[[pa.Array], pa.Array]:
    def convert(a: pa.Array) -> pa.Array:
        return pa.array([None if v is None else json_for_arrow(decoded_json(v), t) for v in a.to_pylist()], t)
    return convert


def _nulls(a: pa.Array) -> pa.Array:
    if blank_null(a).null_count != len(a):
        raise ValueError("not null")
    return pa.nulls(len(a))


def text_converter(t: pa.DataType) -> Callable[[pa.Array], pa.Array] | None:
    """How a text column becomes a column of type ``t``, raising one of :data:`BAD_VALUE` if any
    value does not fit (value by value, so :func:`first_bad` can find it); ``None`` if text
    cannot hold ``t``."""
    if is_text(t):
        return lambda a: a.cast(t)
    if pa.types.is_timestamp(t):
        return _timestamps(t)
    if pa.types.is_time(t):
        return _times(t)
    if is_bytes(t):
        return _base64(t)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_struct(t) or pa.types.is_map(t):
        return _json_text(t)
    if pa.types.is_null(t):
        return _nulls
    if (pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            or pa.types.is_date(t)):
        return lambda a: safe_cast(blank_null(a), t)
    return None


def first_bad(n: int, convert: Callable[[int, int], Any]) -> int:
    """The index of the first of ``n`` values whose conversion raises one of :data:`BAD_VALUE`
    (see :func:`cdkds.formats.conversion.first_bad`)."""
    return _first_bad(n, convert, BAD_VALUE)


# ---------------------------------------------------------------- decoded JSON -> Arrow

class Overflowed(str):
    """A JSON number beyond a double (``1e400``), kept as its text so that it is refused by
    name instead of becoming an infinity."""

    def __repr__(self) -> str:
        return str(self)


def json_number(text: str) -> float | Overflowed:
    """A JSON number with a fraction or exponent (``json.loads``'s ``parse_float``)."""
    value = float(text)
    return Overflowed(text) if value in (float("inf"), float("-inf")) else value


def decoded_json(text: str) -> Any:
    """JSON text decoded, numbers beyond a double kept as :class:`Overflowed` text; a key
    given twice in one object is a ``json.JSONDecodeError`` (Python would keep the last)."""
    def unique(pairs: list[tuple[str, Any]]) -> dict:
        out = dict(pairs)
        if len(out) < len(pairs):
            key = next(k for i, (k, _) in enumerate(pairs) if k in (k2 for k2, _ in pairs[:i]))
            quoted = json.dumps(key)
            at = text.find(quoted, text.find(quoted) + 1)
            raise json.JSONDecodeError(f"key {key!r} given twice in one object", text, max(at, 0))
        return out

    return json.loads(text, parse_float=json_number, object_pairs_hook=unique)


def _json_scalar(value: Any, t: pa.DataType) -> Any:
    """A decoded JSON scalar for a field of type ``t``, as it is: a number for a number field
    (a whole one for an integer field: 1.9 is not truncated), a boolean for a boolean field,
    a string for a text field; ``ValueError`` for anything else."""
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        allowed = int if pa.types.is_integer(t) else (int, float)
        if isinstance(value, bool) or not isinstance(value, allowed):
            raise ValueError("not a number")
    elif pa.types.is_boolean(t) and not isinstance(value, bool):
        raise ValueError("not a boolean")
    elif is_text(t) and (not isinstance(value, str) or isinstance(value, Overflowed)):
        raise ValueError("not a string")
    return value


def json_for_arrow(value: Any, t: pa.DataType) -> Any:
    """A decoded JSON value in the form ``pa.array`` takes for type ``t`` (maps as key-value
    pairs, bytes from base64), every value inside checked as :func:`json_array` checks them."""
    if value is None:
        return None
    if pa.types.is_map(t):
        if not isinstance(value, dict):
            raise ValueError("not a JSON object")
        return [(k, json_for_arrow(v, t.item_type)) for k, v in value.items()]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        if not isinstance(value, list):
            raise ValueError("not a JSON array")
        return [json_for_arrow(v, t.value_type) for v in value]
    if pa.types.is_struct(t):
        if not isinstance(value, dict):
            raise ValueError("not a JSON object")
        names = {t.field(i).name: t.field(i).type for i in range(t.num_fields)}
        unknown = [k for k in value if k not in names]
        if unknown:
            raise ValueError(f"unknown field {unknown[0]!r}")
        return {k: json_for_arrow(v, names[k]) for k, v in value.items()}
    if is_bytes(t):
        return base64.b64decode(value, validate=True) if isinstance(value, str) else value
    if pa.types.is_decimal(t) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return decimal.Decimal(str(value))
    if isinstance(value, str) and (pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_timestamp(t)
                                   or pa.types.is_decimal(t)):
        return text_converter(t)(pa.array([value], pa.string()))[0].as_py()  # the text rules, inside values too
    return _json_scalar(value, t)


def json_misfit(value: Any, t: pa.DataType, path: str = "") -> tuple[str, Any, str] | None:
    """Where a decoded JSON value does not fit type ``t``: the path inside it (``[0].a``), the
    value there and what it should be; ``None`` if it fits."""
    if value is None:
        return None
    if pa.types.is_map(t) or pa.types.is_struct(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
        if not isinstance(value, list if pa.types.is_list(t) or pa.types.is_large_list(t) else dict):
            return path, value, type_name(t)
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            inner = ((f"{path}[{i}]", v, t.value_type) for i, v in enumerate(value))
        elif pa.types.is_map(t):
            inner = ((f"{path}[{k!r}]", v, t.item_type) for k, v in value.items())
        else:
            names = {t.field(i).name: t.field(i).type for i in range(t.num_fields)}
            unknown = [k for k in value if k not in names]
            if unknown:
                return f"{path}.{unknown[0]}", value[unknown[0]], "a field of the schema"
            inner = ((f"{path}.{k}", v, names[k]) for k, v in value.items())
        return next((m for m in (json_misfit(v, vt, p) for p, v, vt in inner) if m is not None), None)
    try:
        pa.array([json_for_arrow(value, t)], t)
    except BAD_VALUE:
        return path, value, type_name(t)
    return None


def misfit(value: Any, t: pa.DataType) -> tuple[str, Any, str]:
    """For a value (text, or decoded JSON) that does not fit type ``t``: the path inside it of
    the part that does not, that part and what it should be (the value itself if not nested)."""
    nested = pa.types.is_map(t) or pa.types.is_struct(t) or pa.types.is_list(t) or pa.types.is_large_list(t)
    if nested:
        try:
            decoded = decoded_json(value) if isinstance(value, str) else value
        except ValueError:
            return "", value, type_name(t)
        found = json_misfit(decoded, t)
        if found is not None:
            return found
    return "", value, type_name(t)


def json_array(values: list, t: pa.DataType) -> pa.Array:
    """Decoded JSON values as an array of type ``t``: numbers, booleans and strings as they are
    (no number from a string), dates, times, timestamps and bytes from text by the text rules.
    Raises one of :data:`BAD_VALUE` if a value does not fit."""
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        checked = [None if v is None else _json_scalar(v, t) for v in values]
        return safe_cast(pa.array(checked, pa.int64() if pa.types.is_integer(t) else pa.float64()), t)
    if pa.types.is_boolean(t):
        return pa.array([None if v is None else _json_scalar(v, t) for v in values], t)
    if pa.types.is_decimal(t):
        if not all(v is None or (isinstance(v, (int, float, str)) and not isinstance(v, bool)) for v in values):
            raise ValueError("not a number")
        return pa.array([None if v is None else decimal.Decimal(str(v)) for v in values], t)
    if is_text(t) or is_bytes(t) or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_timestamp(t):
        if not all(v is None or (isinstance(v, str) and not isinstance(v, Overflowed)) for v in values):
            raise ValueError("not a string")
        column = pa.array(values, pa.string())
        return column if is_text(t) else text_converter(t)(column)
    return pa.array([json_for_arrow(v, t) for v in values], t)


# ---------------------------------------------------------------- inference

def _fits(a: pa.Array, candidate: str) -> bool:
    """Whether every (trimmed, non-null) value of a text array reads as ``candidate``."""
    if candidate == "boolean":
        return bool(pc.all(pc.is_in(pc.utf8_lower(a), pa.array(["true", "false"]))).as_py())
    pattern = {"date": _DATE, "timestamp": _DATETIME + _ZONE, "local-timestamp": _DATETIME + "$"}.get(candidate)
    if pattern is not None and not _all_match(a, pattern):
        return False
    if candidate == "double" and _all_match(a, _INTEGER):
        return False  # whole numbers beyond a long (ids, say) would lose digits as doubles: text keeps them

    try:
        a.cast(_CANDIDATE_TYPES[candidate])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


class TextKinds:
    """The type of a text column, inferred batch by batch: what all its values seen so far could be."""

    def __init__(self, candidates: Sequence[str] = CSV_CANDIDATES):
        self.candidates = list(candidates)
        self.values = 0

    def update(self, a: pa.Array) -> None:
        values = blank_null(a).drop_null()
        if not len(values):
            return
        self.values += len(values)
        self.candidates = [c for c in self.candidates if _fits(values, c)]

    def result(self) -> pa.DataType:
        if not self.values or not self.candidates:
            return pa.string()
        return _CANDIDATE_TYPES[self.candidates[0]]
