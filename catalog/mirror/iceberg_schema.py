"""What a dataset's descriptor is in Iceberg's words: its schema (with cdkds's field ids),
its partition spec (identity functions only), and values in Iceberg's single-value binary
serialisation (column bounds, partition summaries) and in a manifest's partition struct.

Iceberg reads Parquet columns by field id. cdkds's files carry the ids of record fields
(nested ones too) but none for list elements and map keys and values, which Iceberg also
numbers: a reader would fall back to a name mapping for the whole file, and a name is
ambiguous once a field was renamed or dropped and another took its name. So datasets with
arrays or maps are refused (:func:`schema_refusal`), as are types Iceberg has no form for.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from typing import Any

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.formats.schema import FIELD_ID, last_field_id, type_kind, unwrap

PARTITION_FIELD_BASE = 1000  # Iceberg numbers partition fields from 1000
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_PRIMITIVES = {
    "boolean": "boolean", "int": "int", "long": "long", "float": "float", "double": "double",
    "string": "string", "enum": "string", "uuid": "string",  # as the files store them: Parquet strings
    "bytes": "binary", "date": "date", "time-micros": "time",
    "timestamp-millis": "timestamptz", "timestamp-micros": "timestamptz",
    "local-timestamp-millis": "timestamp", "local-timestamp-micros": "timestamp",
}
_DEFAULT_KINDS = {"boolean", "int", "long", "float", "double", "string"}  # the defaults alter().add takes


def schema_refusal(descriptor: DatasetDescriptor) -> str | None:
    """Why the descriptor's schema has no faithful Iceberg form (``None``: it has one)."""
    for f in descriptor.schema["fields"]:
        problem = _type_refusal(f["type"], f["name"])
        if problem is not None:
            return problem
    return None


def _type_refusal(avro: Any, path: str) -> str | None:
    inner = unwrap(avro).avro
    kind = type_kind(inner)
    if kind == "record":
        record = inner if inner.get("type") == "record" else inner["type"]
        for f in record["fields"]:
            problem = _type_refusal(f["type"], f"{path}.{f['name']}")
            if problem is not None:
                return problem
        return None
    if kind in ("array", "map"):
        return (f"field {path!r} is an {kind}: cdkds's data files carry no field ids for list elements or map "
                f"keys and values, which Iceberg readers match by id")
    if kind == "decimal" and inner["precision"] > 38:
        return f"field {path!r} is a decimal of {inner['precision']} digits; Iceberg's hold at most 38"
    if kind == "time-millis":
        return f"field {path!r} is a time-millis, which Iceberg (times in microseconds) does not read"
    if kind not in _PRIMITIVES and kind not in ("decimal", "fixed"):
        return f"field {path!r} has type {kind}, which has no Iceberg counterpart"
    return None


# ---------------------------------------------------------------- schema

def iceberg_type(avro: Any) -> Any:
    """The Iceberg type (JSON form) of a (non-union) Avro type of a dataset schema."""
    kind = type_kind(avro)
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "decimal":
        return f"decimal({avro['precision']}, {avro.get('scale', 0)})"
    if kind == "fixed":
        return f"fixed[{avro['size']}]"
    if kind == "record":
        record = avro if avro.get("type") == "record" else avro["type"]
        return {"type": "struct", "fields": [_field(f) for f in record["fields"]]}
    raise ValueError(f"Avro type {kind} has no Iceberg form")


def _field(f: dict) -> dict:
    t = unwrap(f["type"])
    out = {"id": f[FIELD_ID], "name": f["name"], "required": not t.nullable, "type": iceberg_type(t.avro)}
    if f.get("doc"):
        out["doc"] = f["doc"]
    if f.get("default") is not None and type_kind(t.avro) in _DEFAULT_KINDS:
        # what a file written before the field was added reads: its default (Iceberg's
        # initial-default, which pyiceberg honours; the spec gives it to format version 3)
        out["initial-default"] = f["default"]
    return out


def iceberg_schema(descriptor: DatasetDescriptor, schema_id: int) -> dict:
    """The descriptor's schema as an Iceberg schema (JSON), fields numbered by their ids."""
    return {"type": "struct", "schema-id": schema_id, "fields": [_field(f) for f in descriptor.schema["fields"]]}


def promotion_refusal(before: dict, after: dict) -> str | None:
    """Why files written with Iceberg schema ``before`` cannot be read with ``after``: a
    field (by id) whose type changed other than by Iceberg's promotions (int to long, float
    to double, a decimal's precision up). cdkds also widens int or long to float or double
    and string to bytes, which Iceberg readers refuse (``None``: every change is one)."""
    old = {f["id"]: f for f in before["fields"]}
    for f in after["fields"]:
        if f["id"] not in old:
            continue
        was, now = old[f["id"]]["type"], f["type"]
        if isinstance(was, dict) and isinstance(now, dict):
            problem = promotion_refusal(was, now)
        elif was == now or (was, now) in (("int", "long"), ("float", "double")) or _wider_decimal(was, now):
            problem = None
        else:
            problem = f"field {f['name']!r} changed from {was} to {now}, which is not an Iceberg type promotion"
        if problem is not None:
            return problem
    return None


def _wider_decimal(was: Any, now: Any) -> bool:
    if not all(isinstance(t, str) and t.startswith("decimal(") for t in (was, now)):
        return False
    (p1, s1), (p2, s2) = ([int(x) for x in t[len("decimal("):-1].split(",")] for t in (was, now))
    return s1 == s2 and p2 >= p1


def last_column_id(descriptor: DatasetDescriptor) -> int:
    return last_field_id(descriptor.schema)


# ---------------------------------------------------------------- partition spec

def identity_fields(descriptor: DatasetDescriptor, spec_id: int | None = None) -> list[tuple[str, str]]:
    """``(partition name, source field)`` of the identity functions of partition spec
    ``spec_id`` (default: the current one), in strategy order: the partition functions with
    an Iceberg counterpart (cdkds's hash is not Iceberg's bucket)."""
    strategy = descriptor.partition_strategy if spec_id is None else descriptor.strategy_of(spec_id)
    if strategy is None:
        return []
    return [(f.name, f.source) for f in strategy.functions if f.type == "identity"]


def partition_spec(descriptor: DatasetDescriptor) -> dict:
    """Spec 0: an identity field per identity function, ids from 1000."""
    ids = descriptor.field_ids
    return {"spec-id": 0, "fields": [
        {"name": name, "transform": "identity", "source-id": ids[source], "field-id": PARTITION_FIELD_BASE + i}
        for i, (name, source) in enumerate(identity_fields(descriptor))]}


def partition_avro(descriptor: DatasetDescriptor) -> dict:
    """The Avro record of a manifest's ``partition`` struct (field id 102's type)."""
    fields = descriptor.fields
    return {"type": "record", "name": "r102", "fields": [
        {"name": name, "type": ["null", _avro_value_type(fields[source].avro, f"p{PARTITION_FIELD_BASE + i}")],
         "default": None, "field-id": PARTITION_FIELD_BASE + i}
        for i, (name, source) in enumerate(identity_fields(descriptor))]}


def _avro_value_type(avro: Any, name: str) -> Any:
    """Iceberg's Avro form of a primitive type (the manifest's partition values); ``name``
    names a fixed type (unique in the manifest's schema)."""
    kind = type_kind(avro)
    if kind == "decimal":
        precision = avro["precision"]
        return {"type": "fixed", "name": name, "size": _decimal_bytes(precision),
                "logicalType": "decimal", "precision": precision, "scale": avro.get("scale", 0)}
    if kind == "fixed":
        return {"type": "fixed", "name": name, "size": avro["size"]}
    if kind == "date":
        return {"type": "int", "logicalType": "date"}
    if kind in ("timestamp-millis", "timestamp-micros"):
        return {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": True}
    if kind in ("local-timestamp-millis", "local-timestamp-micros"):
        return {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": False}
    if kind == "time-micros":
        return {"type": "long", "logicalType": "time-micros"}
    return {"string": "string", "enum": "string", "uuid": "string", "bytes": "bytes"}.get(kind, kind)


def partition_record(descriptor: DatasetDescriptor, partition: dict) -> dict:
    """A file's identity partition values as the manifest's partition struct holds them."""
    fields = descriptor.fields
    out = {}
    for name, source in identity_fields(descriptor):
        value, kind = partition.get(name), fields[source].kind
        if kind in ("enum", "uuid") and value is not None:
            value = str(value)
        out[name] = value
    return out


def _decimal_bytes(precision: int) -> int:
    n = 1
    while 2 ** (8 * n - 1) < 10 ** precision:
        n += 1
    return n


# ---------------------------------------------------------------- single-value serialisation

def single_value(value: Any, kind: str) -> bytes | None:
    """``value`` (cdkds's Python form for a field of ``kind``) in Iceberg's single-value
    binary serialisation (bounds in manifests); ``None`` when the kind has none (decimals:
    see :func:`bound`, which knows their scale)."""
    if value is None:
        return None
    if kind == "boolean":
        return b"\x01" if value else b"\x00"
    if kind == "int":
        return struct.pack("<i", value)
    if kind == "date":
        return struct.pack("<i", (value - _EPOCH.date()).days)
    if kind == "long":
        return struct.pack("<q", value)
    if kind == "float":
        return struct.pack("<f", value)
    if kind == "double":
        return struct.pack("<d", value)
    if kind in ("timestamp-millis", "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros"):
        return struct.pack("<q", _micros(value))
    if kind == "time-micros":
        return struct.pack("<q", ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond)
    if kind in ("string", "enum", "uuid"):
        return str(value).encode("utf-8")
    if kind in ("bytes", "fixed"):
        return bytes(value)
    return None


def decimal_bytes(value: decimal.Decimal, scale: int) -> bytes:
    """A decimal's unscaled value at ``scale``, big-endian two's complement, fewest bytes."""
    unscaled = int(value.scaleb(scale).to_integral_value())
    length = max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1)
    return unscaled.to_bytes(length, "big", signed=True)


def bound(value: Any, avro: Any) -> bytes | None:
    """A column bound in the field's Iceberg type (decimals at the field's scale)."""
    if value is None:
        return None
    kind = type_kind(avro)
    if kind == "decimal":
        return decimal_bytes(decimal.Decimal(value), avro.get("scale", 0))
    return single_value(value, kind)


def _micros(value: dt.datetime) -> int:
    epoch = _EPOCH_UTC if value.tzinfo is not None else _EPOCH
    delta = value - epoch
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
