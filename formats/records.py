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
import uuid
from typing import Any, Callable, Mapping

import pyarrow as pa

from cdkds.formats import domains
from cdkds.formats.conversion import RefusedValue, conform_column
from cdkds.formats.errors import InvalidSchemaError, SchemaMismatchError
from cdkds.formats.schema import (
    FLOAT_KINDS, INT_RANGES, INTEGER_KINDS, TIMESTAMP_KINDS, AvroType, field_defaults, renamed_hint, to_arrow,
    type_kind, unwrap,
)


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


def _refused(path: str, value: Any, reason: str) -> RefusedValue:
    """A value outside its type's domain, in the words the column path uses (no row: one value)."""
    return RefusedValue(path, None, value, reason)


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
        return domains.canonical_uuid(value)
    except ValueError:
        raise _refused(path, value, domains.NOT_A_UUID) from None


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
                raise _refused(p, v, domains.out_of_range(kind)) from None
            if domains.beyond_range(value, kind):
                raise _refused(p, v, domains.out_of_range(kind))
            if isinstance(v, int) and (value != v or kind == "float" and domains.as_float32(value) != v):
                raise _refused(p, v, domains.inexact(kind))
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
            if expected is dt.time and v.tzinfo is not None:  # (no date to convert it by: text refuses it too)
                raise _mismatch(p, v, "a time of day without a zone")
            if kind in domains.MILLIS_KINDS and not domains.whole_milliseconds(v):
                raise _refused(p, v, domains.sub_millisecond(kind))
            return v
    elif kind == "decimal":
        precision, scale = avro["precision"], avro.get("scale", 0)

        def check(v, p):
            if isinstance(v, bool) or not isinstance(v, (decimal.Decimal, int)):
                raise _mismatch(p, v, f"a Decimal({precision},{scale})")
            fitted = domains.fitted_decimal(decimal.Decimal(v), precision, scale)
            if fitted is None:
                raise _refused(p, v, domains.misfit_decimal(precision, scale))
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
    schema's Arrow form: columns converted by :func:`cdkds.formats.conversion.conform_column`
    (losslessly, every value checked), missing ones filled with their defaults; a column
    name given twice or unknown to the schema is refused."""
    arrow = to_arrow(schema)
    types = {f["name"]: f["type"] for f in schema["fields"]}
    defaults = field_defaults(schema)

    def conform(batch: pa.RecordBatch) -> pa.RecordBatch:
        names = batch.schema.names
        twice = [n for i, n in enumerate(names) if n in names[:i]]
        if twice:
            raise SchemaMismatchError(f"column {twice[0]!r} appears twice in the batch")
        unknown = [n for n in names if n not in types]
        if unknown:
            raise SchemaMismatchError(f"unknown column {unknown[0]!r}{renamed_hint(schema, unknown[:1])}; "
                                      f"the schema has {arrow.names}")
        columns = []
        for f in arrow:
            if f.name not in names:
                if f.name not in defaults:
                    raise SchemaMismatchError(f"required column {f.name!r} is missing from the batch")
                columns.append(pa.array([defaults[f.name]] * batch.num_rows, type=f.type))
            else:
                columns.append(conform_column(batch.column(f.name), types[f.name], f.name))
        return pa.RecordBatch.from_arrays(columns, schema=arrow)

    return conform
