"""A dataset's descriptor as Delta Lake sees it: the schema in Delta's JSON form with column
mapping (mode ``id``: each field's ``delta.columnMapping.id`` is its cdkds field id), the
identity partitions as Delta partition columns, and per-file statistics keyed by physical
names (Delta ``PROTOCOL.md``: Schema Serialization Format, Column Mapping, Per-file
Statistics, Partition Value Serialization).

A field's physical name is its current name: the Parquet column name of every file written
since its last rename. Delta readers that resolve columns by field id (the protocol's ``id``
mode) read renamed fields right in every file; readers that resolve by physical name
(delta-rs 1.x) read a renamed field as null in files written before the rename, until
compaction rewrites them (README, "cdkds and other engines").
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from typing import Any

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.partitioning.functions import IdentityFunction
import pyarrow as pa

from cdkds.formats.schema import (
    FIELD_ID, NAME_MAPPING, PARQUET_FIELD_ID, AvroType, last_field_id, type_kind, unwrap, walk_fields,
)

COLUMN_ID = "delta.columnMapping.id"
PHYSICAL_NAME = "delta.columnMapping.physicalName"

_PRIMITIVES = {
    "boolean": "boolean", "int": "integer", "long": "long", "float": "float", "double": "double",
    "bytes": "binary", "fixed": "binary", "string": "string", "enum": "string", "uuid": "string", "date": "date",
    "timestamp-millis": "timestamp", "timestamp-micros": "timestamp",
    "local-timestamp-millis": "timestamp_ntz", "local-timestamp-micros": "timestamp_ntz",
}
# kinds whose min/max Delta readers take from JSON stats exactly as cdkds keeps them
_BOUNDED = {"int", "long", "float", "double", "string", "enum", "uuid", "date",
            "timestamp-millis", "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros"}


_UNPARTITIONED = {"string", "bytes", "fixed"}  # kinds whose values include "", which Delta reads as null


class UnmappableSchema(ValueError):
    """A schema part Delta has no counterpart for (the message says which and why)."""


def schema_refusal(descriptor: DatasetDescriptor) -> str | None:
    """Why the descriptor's schema or partitions cannot be described to Delta readers (None: they can)."""
    schema = descriptor.schema
    if NAME_MAPPING in schema or not all(FIELD_ID in f for f in schema["fields"]):
        return ("the dataset may hold files without field ids (converted in place, or written before field ids: "
                "docs/FORMAT.md §5.2), which Delta's column mapping by id cannot describe; the Iceberg mirror "
                "can (it carries cdkds's name mapping)")
    try:
        delta_schema(schema)
    except UnmappableSchema as e:
        return str(e)
    return None


def delta_schema(schema: dict) -> dict:
    """The Delta schema (a ``struct``) of an Avro record schema, with column mapping metadata."""
    return _struct(schema, "")


def uses_ntz(schema: dict) -> bool:
    """Whether a field, at any depth, is a local timestamp (Delta's ``timestampNtz`` feature)."""
    return '"timestamp_ntz"' in json.dumps(delta_schema(schema))


def max_column_id(schema: dict) -> int:
    return last_field_id(schema)


def _struct(record: dict, path: str) -> dict:
    seen: dict[str, str] = {}
    for f in record["fields"]:
        other = seen.setdefault(f["name"].lower(), f["name"])
        if other != f["name"]:
            raise UnmappableSchema(f"fields {path + other!r} and {path + f['name']!r} differ only in case, and "
                                   f"Delta's column names are unique regardless of case")
    return {"type": "struct", "fields": [_field(f, f"{path}{f['name']}") for f in record["fields"]]}


def _field(f: dict, path: str) -> dict:
    t = unwrap(f["type"])
    return {"name": f["name"], "type": _type(t.avro, path), "nullable": t.nullable,
            "metadata": {COLUMN_ID: f[FIELD_ID], PHYSICAL_NAME: f["name"]}}


def _type(avro: AvroType, path: str) -> Any:
    kind = type_kind(avro)
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "decimal":
        if avro["precision"] > 38:
            raise UnmappableSchema(f"field {path!r} is a decimal of precision {avro['precision']}; Delta's "
                                   f"decimals hold at most 38 digits")
        return f"decimal({avro['precision']},{avro.get('scale', 0)})"
    if kind == "record":
        return _struct(avro if avro.get("type") == "record" else avro["type"], f"{path}.")
    if kind == "array":
        items = unwrap(avro["items"])
        return {"type": "array", "elementType": _type(items.avro, f"{path}[]"), "containsNull": items.nullable}
    if kind == "map":
        values = unwrap(avro["values"])
        return {"type": "map", "keyType": "string", "valueType": _type(values.avro, f"{path}{{}}"),
                "valueContainsNull": values.nullable}
    raise UnmappableSchema(f"field {path!r} is a {kind}, which Delta has no type for")


def defaulted_fields(schema: dict) -> dict[int, str]:
    """Field id -> dotted path of the fields, at any depth, with a non-null default: files
    written before such a field was added read its default in cdkds, but null in Delta,
    which has no defaults for missing columns."""
    return {f[FIELD_ID]: path for path, f in walk_fields(schema) if f.get("default") is not None and FIELD_ID in f}


def field_paths(schema: dict) -> dict[str, int]:
    """Dotted path (through arrays and maps, as :func:`walk_fields` names them) -> field id,
    of every record field at any depth."""
    return {path: f[FIELD_ID] for path, f in walk_fields(schema) if FIELD_ID in f}


def parquet_fields(schema: pa.Schema) -> dict[str, int]:
    """Dotted path -> field id of the columns, at any depth, of a data file's Arrow schema
    (named as :func:`field_paths` names them)."""
    out: dict[str, int] = {}

    def visit(field: pa.Field, path: str) -> None:
        raw = (field.metadata or {}).get(PARQUET_FIELD_ID)
        if raw is not None:
            out[path] = int(raw)
        inner = field.type
        while pa.types.is_list(inner) or pa.types.is_large_list(inner) or pa.types.is_map(inner):
            inner = inner.item_field.type if pa.types.is_map(inner) else inner.value_field.type
        if pa.types.is_struct(inner):
            for i in range(inner.num_fields):
                visit(inner.field(i), f"{path}.{inner.field(i).name}")

    for f in schema:
        visit(f, f.name)
    return out


# ---------------------------------------------------------------- partitions

def partition_columns(descriptor: DatasetDescriptor, spec_id: int | None = None) -> dict[str, str]:
    """Delta partition column (an identity partition's source field) -> the cdkds partition
    name holding its value, of partition spec ``spec_id`` (default: the current one). Other
    partition functions have no Delta counterpart, nor have identity partitions of strings
    and bytes (Delta reads an empty partition value as null, which cdkds keeps apart from
    ""): their files are described unpartitioned, with statistics (an identity partition's
    min and max are its value, so readers skip as well)."""
    strategy = descriptor.partition_strategy if spec_id is None else descriptor.strategy_of(spec_id)
    if strategy is None:
        return {}
    out: dict[str, str] = {}
    for f in strategy.functions:
        source = descriptor.fields.get(f.source)
        if isinstance(f, IdentityFunction) and source is not None and source.kind not in _UNPARTITIONED \
                and f.source not in out:
            out[f.source] = f.name
    return out


def partition_values(file: AddFile, descriptor: DatasetDescriptor) -> dict[str, str | None]:
    """The file's Delta ``partitionValues`` (by physical name: the field's name)."""
    return {column: _partition_text(file.partition.get(name)) for column, name in partition_columns(descriptor).items()}


def _partition_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):  # UTC-adjusted ISO 8601, as the protocol recommends
        if value.tzinfo is not None:
            return value.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
        return value.isoformat(sep=" ", timespec="microseconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return format(value, "f")  # never an exponent
    return str(value)


# ---------------------------------------------------------------- statistics

def file_statistics(file: AddFile, descriptor: DatasetDescriptor, tight: bool) -> str:
    """The file's Delta ``stats`` JSON: its row count and, for top-level columns of a kind
    whose bounds Delta's JSON keeps exactly, min/max/null counts by physical name. ``tight``:
    whether no row of the file is deleted (else the bounds are only wide ones)."""
    minimum: dict[str, Any] = {}
    maximum: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name, stats in file.statistics.items():
        field = descriptor.fields.get(name)
        if field is None or field.kind not in _BOUNDED and field.kind not in ("boolean", "bytes", "decimal"):
            continue  # nested: Delta keys their null counts by leaf
        nulls[name] = stats.null_count
        if field.kind in _BOUNDED and stats.min is not None and _finite(stats.min) and _finite(stats.max):
            minimum[name], maximum[name] = _bound(stats.min), _bound(stats.max)
    out = {"numRecords": file.row_count, "minValues": minimum, "maxValues": maximum, "nullCount": nulls,
           "tightBounds": tight}
    return json.dumps(out, separators=(",", ":"))


def _finite(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def _bound(value: Any) -> Any:
    if isinstance(value, dt.datetime):  # Delta keeps timestamp bounds truncated to milliseconds
        if value.tzinfo is not None:
            return value.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"
        return value.isoformat(timespec="milliseconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    return value
