"""What a dataset accepts: records (dicts) and Arrow batches checked against its schema
and normalised, and records read back from batches.

Both write paths follow the same rules — records are checked here one by one, then
buffered into batches that pass :func:`batch_conformer` as every batch does (which
checks nested columns holding such values through the record checks):

- UUIDs are stored in their canonical text form (lower case, hyphenated);
- enum values must be one of the symbols;
- ``*-millis`` fields (``timestamp-millis``, ``local-timestamp-millis``, ``time-millis``)
  take whole milliseconds: a value with a sub-millisecond part is rejected, never truncated;
- decimals must fit their precision and scale.

Errors are :class:`SchemaMismatchError` naming the field and the value.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import struct
import uuid
from typing import Any, Callable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from cdkds.formats.errors import InvalidSchemaError, SchemaMismatchError
from cdkds.formats.schema import (
    FLOAT_KINDS, INT_RANGES, INTEGER_KINDS, TIMESTAMP_KINDS, AvroType, field_defaults, fields, renamed_hint, to_arrow,
    type_kind, unwrap,
)
from cdkds.formats.values import DECIMAL_CONTEXT

MILLIS_KINDS = {"timestamp-millis", "local-timestamp-millis", "time-millis"}
_CANONICAL_UUID = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"


def to_records(batch: pa.RecordBatch | pa.Table) -> list[dict]:
    """The rows of a batch as records that can be written back: maps as dicts."""
    return batch.to_pylist(maps_as_pydicts="lossy")


# ---------------------------------------------------------------- records

Validator = Callable[[Any, str], Any]


def record_validator(schema: dict) -> Callable[[Mapping[str, Any]], dict]:
    """A function that checks a record (a dict) against the schema and returns it normalised.

    It raises :class:`SchemaMismatchError` naming the field and the value at fault.
    Normalised means: unknown fields rejected, missing fields filled with their defaults,
    UUIDs as canonical text.
    """
    checks = {f["name"]: _validator(f["type"]) for f in schema["fields"]}
    defaults = field_defaults(schema)

    def validate(record: Mapping[str, Any]) -> dict:
        if not isinstance(record, Mapping):
            raise SchemaMismatchError(f"a record must be a dict, got {type(record).__name__}: {record!r:.200}")
        unknown = [k for k in record if k not in checks]
        if unknown:
            raise SchemaMismatchError(f"unknown field {unknown[0]!r} (value {record[unknown[0]]!r:.100})"
                                      f"{renamed_hint(schema, unknown[:1])}; "
                                      f"the schema has {list(checks)}")
        out = {}
        for name, check in checks.items():
            if name in record:
                out[name] = check(record[name], name)
            elif name in defaults:
                out[name] = defaults[name]
            else:
                raise SchemaMismatchError(f"field {name!r} is required and missing from the record")
        return out

    return validate


def field_validator(avro: AvroType) -> Validator:
    """A function ``check(value, path)`` that checks one value of a field of Avro type
    ``avro`` (a union with null for a nullable field) and returns it normalised, as
    :func:`record_validator` does for each field; ``path`` names the field in errors."""
    return _validator(avro)


def _validator(avro: AvroType) -> Validator:
    ft = unwrap(avro)
    inner = _value_validator(ft.avro)

    def check(value: Any, path: str) -> Any:
        if value is None:
            if ft.nullable:
                return None
            raise SchemaMismatchError(f"field {path!r} is required (not nullable) but the value is None")
        return inner(value, path)

    return check


def _mismatch(path: str, value: Any, expected: str) -> SchemaMismatchError:
    return SchemaMismatchError(f"field {path!r}: value {value!r:.100} ({type(value).__name__}) is not {expected}")


def _sub_millisecond(path: str, value: Any, kind: str) -> SchemaMismatchError:
    return SchemaMismatchError(f"field {path!r}: value {value!r:.100} has a sub-millisecond part, but a {kind} "
                               f"field holds whole milliseconds (round or truncate it first)")


def _encodable(text: str, path: str) -> str:
    """``text`` if it can be stored (as UTF-8): a lone surrogate cannot."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise SchemaMismatchError(f"field {path!r}: text {text!r:.100} holds a lone surrogate "
                                      f"({text[e.start]!r} at {e.start}), which is not valid Unicode") from None
    return text


def _canonical_uuid(value: Any, path: str) -> str:
    try:
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(value))
    except ValueError:
        raise _mismatch(path, value, "a UUID") from None


def _value_validator(avro: AvroType) -> Validator:  # noqa: C901 - one branch per Avro kind
    kind = type_kind(avro)
    if kind == "boolean":
        def check(v, p):
            if not isinstance(v, bool):
                raise _mismatch(p, v, "a boolean")
            return v
    elif kind in INTEGER_KINDS:
        lo, hi = INT_RANGES[kind]

        def check(v, p):
            if isinstance(v, bool) or not isinstance(v, int):
                raise _mismatch(p, v, f"an integer ({kind})")
            if not lo <= v <= hi:
                raise _mismatch(p, v, f"within the range of an Avro {kind}")
            return v
    elif kind in FLOAT_KINDS:
        def check(v, p):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise _mismatch(p, v, f"a number ({kind})")
            try:
                value = float(v)
            except OverflowError:
                raise _mismatch(p, v, f"within the range of an Avro {kind}") from None
            if kind == "float" and math.isfinite(value) and math.isinf(struct.unpack("f", struct.pack("f", value))[0]):
                raise _mismatch(p, v, "within the range of an Avro float")
            return value
    elif kind == "string":
        def check(v, p):
            if not isinstance(v, str):
                raise _mismatch(p, v, "a string")
            return _encodable(v, p)
    elif kind == "uuid":
        def check(v, p):
            if not isinstance(v, (str, uuid.UUID)):
                raise _mismatch(p, v, "a UUID or its text")
            return _canonical_uuid(v, p)
    elif kind == "enum":
        symbols = set(avro["symbols"])

        def check(v, p):
            if v not in symbols:
                raise _mismatch(p, v, f"one of the enum symbols {sorted(symbols)}")
            return v
    elif kind in ("bytes", "fixed"):
        size = avro.get("size") if kind == "fixed" else None

        def check(v, p):
            if not isinstance(v, (bytes, bytearray)):
                raise _mismatch(p, v, "bytes")
            if size is not None and len(v) != size:
                raise _mismatch(p, v, f"exactly {size} bytes")
            return bytes(v)
    elif kind == "date":
        def check(v, p):
            if isinstance(v, dt.datetime) or not isinstance(v, dt.date):
                raise _mismatch(p, v, "a datetime.date")
            return v
    elif kind in TIMESTAMP_KINDS or kind in ("time-millis", "time-micros"):
        expected = dt.datetime if kind in TIMESTAMP_KINDS else dt.time

        def check(v, p):
            if not isinstance(v, expected):
                raise _mismatch(p, v, f"a datetime.{expected.__name__}")
            if kind in MILLIS_KINDS and v.microsecond % 1000:
                raise _sub_millisecond(p, v, kind)
            return v
    elif kind == "decimal":
        precision, scale = avro["precision"], avro.get("scale", 0)
        unit = decimal.Decimal(1).scaleb(-scale)

        def check(v, p):
            if isinstance(v, bool) or not isinstance(v, (decimal.Decimal, int)):
                raise _mismatch(p, v, f"a Decimal({precision},{scale})")
            d = decimal.Decimal(v)
            fitted = d.quantize(unit, context=DECIMAL_CONTEXT) if d.is_finite() else None
            if fitted is None or fitted != d or len(fitted.as_tuple().digits) > precision:
                raise _mismatch(p, v, f"representable as decimal({precision},{scale})")
            return fitted
    elif kind == "record":
        inner = record_validator(avro)

        def check(v, p):
            try:
                return inner(v)
            except SchemaMismatchError as e:
                raise SchemaMismatchError(f"in field {p!r}: {e}") from None
    elif kind == "array":
        item = _validator(avro["items"])

        def check(v, p):
            if isinstance(v, (str, bytes, Mapping)) or not hasattr(v, "__iter__"):
                raise _mismatch(p, v, "a list")
            return [item(x, f"{p}[{i}]") for i, x in enumerate(v)]
    elif kind == "map":
        value = _validator(avro["values"])

        def check(v, p):
            if not isinstance(v, Mapping) or not all(isinstance(k, str) for k in v):
                raise _mismatch(p, v, "a dict with string keys")
            return {_encodable(k, p): value(x, f"{p}[{k!r}]") for k, x in v.items()}
    else:
        raise InvalidSchemaError(f"Avro type {json.dumps(avro)} is not supported")
    return check


# ---------------------------------------------------------------- batches

def batch_conformer(schema: dict) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """A function that checks an Arrow batch against the schema and returns it in the
    schema's Arrow form: columns cast (losslessly), missing ones filled with their
    defaults, values checked and normalised by the rules of the module docstring."""
    arrow = to_arrow(schema)
    kinds = {name: (ft.kind, ft.avro) for name, ft in fields(schema).items()}
    defaults = field_defaults(schema)
    # nested columns holding values with rules go through the record path, value by value
    by_record = {f["name"]: _validator(f["type"]) for f in schema["fields"]
                 if kinds[f["name"]][0] in _NESTED_KINDS and _has_rules(kinds[f["name"]][1])}

    def conform(batch: pa.RecordBatch) -> pa.RecordBatch:
        unknown = [n for n in batch.schema.names if arrow.get_field_index(n) < 0]
        if unknown:
            raise SchemaMismatchError(f"unknown column {unknown[0]!r}{renamed_hint(schema, unknown[:1])}; "
                                      f"the schema has {arrow.names}")
        columns = []
        for f in arrow:
            if batch.schema.get_field_index(f.name) < 0:
                if f.name not in defaults:
                    raise SchemaMismatchError(f"required column {f.name!r} is missing from the batch")
                columns.append(pa.array([defaults[f.name]] * batch.num_rows, type=f.type))
                continue
            kind, avro = kinds[f.name]
            if f.name in by_record:
                column = _through_records(batch.column(f.name), f, by_record[f.name])
            else:
                column = _checked_values(_cast(batch.column(f.name), f, kind), f.name, kind, avro)
            if not f.nullable and column.null_count:
                row = column.is_null().to_pylist().index(True)
                raise SchemaMismatchError(f"field {f.name!r} is required but row {row} of the batch is null")
            columns.append(column)
        return pa.RecordBatch.from_arrays(columns, schema=arrow)

    return conform


_NESTED_KINDS = {"record", "array", "map"}


def _has_rules(avro: AvroType) -> bool:
    """Whether a (nested) type holds values of a kind with rules beyond Arrow's cast."""
    kind = type_kind(avro)
    if kind == "record":
        return any(_has_rules(f["type"]) for f in unwrap(avro).avro["fields"])
    if kind in ("array", "map"):
        inner = unwrap(avro).avro
        return _has_rules(inner["items"] if kind == "array" else inner["values"])
    return kind in ("enum", "uuid") or kind in MILLIS_KINDS


def _through_records(column: pa.Array, f: pa.Field, check: Validator) -> pa.Array:
    checked = [check(v, f.name) for v in column.to_pylist(maps_as_pydicts="lossy")]
    try:
        return pa.array(checked, type=f.type)
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise SchemaMismatchError(f"column {f.name!r} of type {column.type} cannot be written as {f.type}: {e}") from None


def _cast(column: pa.Array, f: pa.Field, kind: str) -> pa.Array:
    if column.type.equals(f.type):
        return column
    if kind in MILLIS_KINDS and (pa.types.is_timestamp(column.type) or pa.types.is_time(column.type)):
        whole = column.cast(f.type, safe=False)
        lost = pc.index(pc.not_equal(whole.cast(column.type), column), True).as_py()
        if lost >= 0:
            raise _sub_millisecond(f.name, column[lost].as_py(), kind)
    try:
        return safe_cast(column, f.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SchemaMismatchError(f"column {f.name!r} of type {column.type} cannot be written as {kind} "
                                  f"({f.type}): {e}") from None


def safe_cast(array: pa.Array, t: pa.DataType) -> pa.Array:
    """``array`` as type ``t`` without losing a value: Arrow's safe cast, and ``pa.ArrowInvalid``
    for a finite number that would overflow a float to infinity (Arrow's safe cast lets it)."""
    cast = array.cast(t, safe=True)
    if pa.types.is_float32(t) and not pa.types.is_float32(array.type) and cast.null_count < len(cast):
        overflow = pc.is_inf(cast)
        if pa.types.is_floating(array.type):
            overflow = pc.and_(overflow, pc.invert(pc.is_inf(array)))
        first = pc.index(overflow, True).as_py()
        if first >= 0:
            raise pa.ArrowInvalid(f"value {array[first].as_py()!r} is beyond the range of a float")
    return cast


def _checked_values(column: pa.Array, name: str, kind: str, avro: AvroType) -> pa.Array:
    if kind == "enum":
        symbols = avro["symbols"]
        bad = pc.index(pc.and_(column.is_valid(), pc.invert(pc.is_in(column, pa.array(symbols)))), True).as_py()
        if bad >= 0:
            raise _mismatch(name, column[bad].as_py(), f"one of the enum symbols {sorted(symbols)}")
    if kind == "uuid" and pc.all(pc.match_substring_regex(column, _CANONICAL_UUID)).as_py() is False:
        return pa.array([None if v is None else _canonical_uuid(v, name) for v in column.to_pylist()], column.type)
    return column
