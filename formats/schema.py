"""Avro schemas, the one schema language of cdkds, and their Arrow and Spark forms.

A dataset's schema is an Avro record schema held as its JSON form (a ``dict``). Arrow
schemas are what files are read and written with; Spark schemas travel as Spark's own
JSON form (``StructType.jsonValue()``) so this layer never imports pyspark.

Type kinds name what a field holds after unwrapping ``["null", T]``: the Avro primitive or
complex type, or its logical type (``date``, ``timestamp-micros``, ``decimal``, ``uuid``...).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import fastavro
import pyarrow as pa

from cdkds.formats import domains
from cdkds.formats.errors import InvalidSchemaError

AvroType = Any  # a str, dict or list in Avro's JSON form

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
LOGICAL_KINDS = {
    "date", "time-millis", "time-micros", "timestamp-millis", "timestamp-micros",
    "local-timestamp-millis", "local-timestamp-micros", "decimal", "uuid",
}
TIMESTAMP_KINDS = {"timestamp-millis", "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros"}
INTEGER_KINDS = {"int", "long"}
FLOAT_KINDS = {"float", "double"}
INT_RANGES = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
UUID_METADATA = {b"cdkds.logicalType": b"uuid"}

FIELD_ID = "field-id"  # a record field's id, as Iceberg keeps it in Avro schemas
LAST_FIELD_ID = "cdkds.last-field-id"  # on the top record: the largest id ever given
NAME_MAPPING = "cdkds.name-mapping"  # on the top record: ids of files written before ids
FORMER_NAMES = "cdkds.former-names"  # on a field: the names it had before renames
PARQUET_FIELD_ID = b"PARQUET:field_id"


@dataclass(frozen=True)
class FieldType:
    """A field's type with its nullability split off."""

    avro: AvroType
    nullable: bool

    @property
    def kind(self) -> str:
        return type_kind(self.avro)


def load_schema(source: Any, rules: Callable[[dict], None] | None = None) -> dict:
    """Return a validated Avro record schema from a dict, JSON text or ``.avsc`` path.

    ``rules`` (a dataset's: :func:`cdkds.formats.schema_rules.check_schema`) are applied
    before Avro's parser, so that a fault both see is reported naming its field."""
    if isinstance(source, Mapping):
        schema = json.loads(json.dumps(source))
    elif isinstance(source, str):
        text = source.strip()
        if not text.startswith("{"):
            if not os.path.exists(text):
                raise InvalidSchemaError(f"schema {source!r} is neither Avro JSON nor an existing .avsc file")
            with open(text, encoding="utf-8") as f:
                text = f.read()
        try:
            schema = json.loads(text)
        except json.JSONDecodeError as e:
            raise InvalidSchemaError(f"schema is not valid JSON: {e}") from None
    else:
        raise InvalidSchemaError(f"schema must be an Avro dict, JSON text or .avsc path, not {type(source).__name__}")
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise InvalidSchemaError(f"a dataset schema must be an Avro record, got {json.dumps(schema)[:200]}")
    if rules is not None:
        rules(schema)
    try:
        fastavro.parse_schema(schema)
    except Exception as e:  # fastavro raises several unrelated types
        raise InvalidSchemaError(f"invalid Avro schema: {e}") from None
    _check_supported(schema, schema.get("name", "record"))
    _check_ids(schema)
    return schema


def _check_ids(schema: dict) -> None:
    seen: dict[int, str] = {}
    for path, f in walk_fields(schema):
        if FIELD_ID not in f:
            continue
        fid = f[FIELD_ID]
        if isinstance(fid, bool) or not isinstance(fid, int) or fid < 1:
            raise InvalidSchemaError(f"field {path!r}: {FIELD_ID} must be a positive integer, got {fid!r}")
        if fid in seen:
            raise InvalidSchemaError(f"fields {seen[fid]!r} and {path!r} have the same {FIELD_ID} {fid}")
        seen[fid] = path
    last = schema.get(LAST_FIELD_ID, 0)
    if isinstance(last, bool) or not isinstance(last, int) or last < 0:
        raise InvalidSchemaError(f"{LAST_FIELD_ID} must be a non-negative integer, got {last!r}")


# ---------------------------------------------------------------- field ids

def record_of(avro: AvroType) -> dict | None:
    """The record a field type holds, through nullability, arrays and maps (``None`` if none)."""
    inner = unwrap(avro).avro
    if isinstance(inner, dict):
        t = inner["type"]
        if t == "record":
            return inner
        if t == "array":
            return record_of(inner["items"])
        if t == "map":
            return record_of(inner["values"])
        if isinstance(t, (dict, list)):
            return record_of(t)
    return None


def walk_fields(record: dict, prefix: str = ""):
    """``(dotted path, field)`` for every record field, nested ones included, parents first
    (the fields of a record inside an array or map are named through it: ``items.sku``)."""
    for f in record["fields"]:
        path = f"{prefix}{f['name']}"
        yield path, f
        inner = record_of(f["type"])
        if inner is not None:
            yield from walk_fields(inner, f"{path}.")


def has_ids(schema: dict) -> bool:
    """Whether any field of the schema carries an id."""
    return any(FIELD_ID in f for _, f in walk_fields(schema))


def last_field_id(schema: dict) -> int:
    """The largest field id the schema has given (ids of dropped fields included)."""
    return max([schema.get(LAST_FIELD_ID, 0), *(f.get(FIELD_ID, 0) for _, f in walk_fields(schema))])


def assign_ids(schema: dict) -> dict:
    """A copy of the schema in which every field has an id: fields without one get the next
    ids after :func:`last_field_id`, a record's fields before their nested fields, in order
    (so an id-less schema is always numbered the same way: top-level fields 1..n)."""
    out = json.loads(json.dumps(schema))
    last = last_field_id(out)

    def number(record: dict) -> None:
        nonlocal last
        for f in record["fields"]:
            if FIELD_ID not in f:
                last += 1
                f[FIELD_ID] = last
        for f in record["fields"]:
            inner = record_of(f["type"])
            if inner is not None:
                number(inner)

    number(out)
    out[LAST_FIELD_ID] = last
    return out


def renamed_hint(schema: dict, names: list[str]) -> str:
    """For unknown field ``names``: which of them were renamed, and to what (or nothing)."""
    now = {old: f["name"] for f in schema["fields"] for old in f.get(FORMER_NAMES, ())}
    hints = [f"{n!r} was renamed to {now[n]!r}" for n in names if n in now]
    return f" ({'; '.join(hints)})" if hints else ""


def field_ids(schema: dict) -> dict[str, int]:
    """Top-level field name -> id."""
    return {f["name"]: f[FIELD_ID] for f in schema["fields"] if FIELD_ID in f}


def _check_supported(avro: AvroType, path: str) -> None:
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(branches) != 1 or len(avro) > 2:
            raise InvalidSchemaError(f"field {path!r}: only unions of null and one type are supported, got {avro}")
        _check_supported(branches[0], path)
        return
    if isinstance(avro, dict):
        t = avro["type"]
        if t == "record":
            for f in avro["fields"]:
                _check_supported(f["type"], f"{path}.{f['name']}" if path else f["name"])
        elif t == "array":
            _check_supported(avro["items"], f"{path}[]")
        elif t == "map":
            _check_supported(avro["values"], f"{path}{{}}")
        elif isinstance(t, (list, dict)):
            _check_supported(t, path)


def unwrap(avro: AvroType) -> FieldType:
    """Split ``["null", T]`` into ``T`` and a nullable flag."""
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        return FieldType(branches[0], len(branches) < len(avro))
    return FieldType(avro, avro == "null")


def type_kind(avro: AvroType) -> str:
    """The kind of a (non-union) Avro type: its logical type if it has one, else its type."""
    if isinstance(avro, list):
        return type_kind(unwrap(avro).avro)
    if isinstance(avro, dict):
        logical = avro.get("logicalType")
        if logical in LOGICAL_KINDS:
            return logical
        t = avro["type"]
        return t if isinstance(t, str) else type_kind(t)
    return avro


def fields(schema: dict) -> dict[str, FieldType]:
    """The top-level fields of a record schema, by name, in order."""
    return {f["name"]: unwrap(f["type"]) for f in schema["fields"]}


def field_defaults(schema: dict) -> dict[str, Any]:
    """Top-level fields that declare a default, with that default (as :func:`default_value`)."""
    return {f["name"]: default_value(f["type"], f["default"]) for f in schema["fields"] if "default" in f}


def default_value(avro: AvroType, default: Any) -> Any:
    """A default of a field of type ``avro``, given in Avro's JSON form, as the value it stands
    for: bytes and fixed defaults are text whose code points 0-255 are the bytes (not UTF-8),
    UUIDs canonical, nested values likewise (every place that fills a default goes through here)."""
    if default is None:
        return None
    t = unwrap(avro).avro
    kind = type_kind(t)
    if kind in ("bytes", "fixed"):
        return default.encode("latin-1") if isinstance(default, str) else default
    if kind == "uuid":
        return domains.canonical_uuid(default) if isinstance(default, str) else default
    if kind == "array" and isinstance(default, list):
        return [default_value(t["items"], v) for v in default]
    if kind == "map" and isinstance(default, dict):
        return {k: default_value(t["values"], v) for k, v in default.items()}
    if kind == "record" and isinstance(default, dict):
        record = t if t.get("type") == "record" else t["type"]
        return {f["name"]: default_value(f["type"], default.get(f["name"], f.get("default")))
                for f in record["fields"] if f["name"] in default or "default" in f}
    return default


# ---------------------------------------------------------------- Avro -> Arrow

def to_arrow(schema: dict, ids: bool = False) -> pa.Schema:
    """The Arrow schema that files of an Avro record schema are read and written with;
    with ``ids``, every field carries its id as Parquet field-id metadata."""
    return pa.schema([record_field(f, ids) for f in schema["fields"]])


def record_field(f: dict, ids: bool = False) -> pa.Field:
    """The Arrow field of an Avro record field (with its id as metadata if ``ids``)."""
    field = arrow_field(f["name"], f["type"], ids)
    if ids and FIELD_ID in f:
        field = field.with_metadata({**(field.metadata or {}), PARQUET_FIELD_ID: str(f[FIELD_ID]).encode()})
    return field


def arrow_field(name: str, avro: AvroType, ids: bool = False) -> pa.Field:
    """The Arrow field for a named Avro field type."""
    ft = unwrap(avro)
    metadata = UUID_METADATA if ft.kind == "uuid" else None
    return pa.field(name, arrow_type(ft.avro, name, ids), nullable=ft.nullable, metadata=metadata)


def arrow_type(avro: AvroType, path: str, ids: bool = False) -> pa.DataType:
    """The Arrow type of a (non-union) Avro type; ``path`` names the field in errors."""
    kind = type_kind(avro)
    simple = {
        "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
        "double": pa.float64(), "bytes": pa.binary(), "string": pa.string(), "enum": pa.string(),
        "uuid": pa.string(), "date": pa.date32(), "time-millis": pa.time32("ms"),
        "time-micros": pa.time64("us"), "timestamp-millis": pa.timestamp("ms", tz="UTC"),
        "timestamp-micros": pa.timestamp("us", tz="UTC"), "local-timestamp-millis": pa.timestamp("ms"),
        "local-timestamp-micros": pa.timestamp("us"),
    }
    if kind in simple:
        return simple[kind]
    if kind == "decimal":
        precision, scale = avro["precision"], avro.get("scale", 0)
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
    if kind == "fixed":
        return pa.binary(avro["size"])
    if kind == "record":
        return pa.struct([record_field(f, ids) for f in avro["fields"]])
    if kind == "array":
        return pa.list_(arrow_field("element", avro["items"], ids))
    if kind == "map":
        value = unwrap(avro["values"])
        return pa.map_(pa.string(), pa.field("value", arrow_type(value.avro, path, ids), nullable=value.nullable))
    raise InvalidSchemaError(f"field {path!r}: Avro type {json.dumps(avro)} has no Arrow form")


# ---------------------------------------------------------------- Arrow -> Avro

def from_arrow(schema: pa.Schema, name: str = "Record") -> dict:
    """An Avro record schema for an Arrow schema (nullable fields become ``["null", T]``)."""
    names = _RecordNames()
    return {"type": "record", "name": names.take(name),
            "fields": [_avro_field(f, f.name, names) for f in schema]}


class _RecordNames:
    """Avro requires nested record names to be unique within a schema."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def take(self, base: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "Record"
        if not (base[0].isalpha() or base[0] == "_"):
            base = "_" + base
        name, n = base, 1
        while name in self.used:
            n += 1
            name = f"{base}{n}"
        self.used.add(name)
        return name


def _avro_field(field: pa.Field, path: str, names: _RecordNames) -> dict:
    avro = _avro_type(field.type, path, names)
    if field.metadata and field.metadata.get(b"cdkds.logicalType") == b"uuid":
        avro = {"type": "string", "logicalType": "uuid"}
    if field.nullable:
        return {"name": field.name, "type": ["null", avro], "default": None}
    return {"name": field.name, "type": avro}


def _avro_type(t: pa.DataType, path: str, names: _RecordNames) -> AvroType:
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t) or pa.types.is_uint8(t) or pa.types.is_uint16(t):
        return "int"
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return "long"
    if pa.types.is_float32(t) or pa.types.is_float16(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_fixed_size_binary(t):
        return {"type": "fixed", "name": names.take(path.title().replace(".", "_")), "size": t.byte_width}
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "bytes"
    if pa.types.is_date(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_time32(t):
        return {"type": "int", "logicalType": "time-millis"}
    if pa.types.is_time64(t):
        return {"type": "long", "logicalType": "time-micros"}
    if pa.types.is_timestamp(t):
        # Avro has no nanosecond type fastavro writes; nanoseconds are kept as micros.
        unit = "millis" if t.unit in ("s", "ms") else "micros"
        prefix = "timestamp" if t.tz is not None else "local-timestamp"
        return {"type": "long", "logicalType": f"{prefix}-{unit}"}
    if pa.types.is_decimal(t):
        return {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    if pa.types.is_dictionary(t):
        return _avro_type(t.value_type, path, names)
    if pa.types.is_struct(t):
        return {"type": "record", "name": names.take(path.title().replace(".", "_")),
                "fields": [_avro_field(t.field(i), f"{path}.{t.field(i).name}", names) for i in range(t.num_fields)]}
    if pa.types.is_map(t):
        if not (pa.types.is_string(t.key_type) or pa.types.is_large_string(t.key_type)):
            raise InvalidSchemaError(f"field {path!r}: Avro maps need string keys, got {t.key_type}")
        item = t.item_field
        value = _avro_type(item.type, f"{path}.value", names)
        return {"type": "map", "values": ["null", value] if item.nullable else value}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        item = t.value_field
        value = _avro_type(item.type, f"{path}.element", names)
        return {"type": "array", "items": ["null", value] if item.nullable else value}
    raise InvalidSchemaError(f"field {path!r}: Arrow type {t} has no Avro form")


# ---------------------------------------------------------------- Spark JSON

def to_spark_json(schema: dict) -> dict:
    """Spark's JSON form of a StructType (``StructType.fromJson`` reads it) for an Avro record."""
    return {"type": "struct", "fields": [_spark_field(f["name"], f["type"]) for f in schema["fields"]]}


def _spark_field(name: str, avro: AvroType) -> dict:
    ft = unwrap(avro)
    return {"name": name, "type": _spark_type(ft.avro, name), "nullable": ft.nullable, "metadata": {}}


def _spark_type(avro: AvroType, path: str) -> Any:
    kind = type_kind(avro)
    simple = {
        "boolean": "boolean", "int": "integer", "long": "long", "float": "float", "double": "double",
        "bytes": "binary", "fixed": "binary", "string": "string", "enum": "string", "uuid": "string",
        "date": "date", "timestamp-millis": "timestamp", "timestamp-micros": "timestamp",
        "local-timestamp-millis": "timestamp_ntz", "local-timestamp-micros": "timestamp_ntz",
    }
    if kind in simple:
        return simple[kind]
    if kind == "decimal":
        if avro["precision"] > 38:
            raise InvalidSchemaError(f"field {path!r}: Spark decimals hold at most 38 digits, got {avro['precision']}")
        return f"decimal({avro['precision']},{avro.get('scale', 0)})"
    if kind == "record":
        return {"type": "struct", "fields": [_spark_field(f["name"], f["type"]) for f in avro["fields"]]}
    if kind == "array":
        item = unwrap(avro["items"])
        return {"type": "array", "elementType": _spark_type(item.avro, path), "containsNull": item.nullable}
    if kind == "map":
        value = unwrap(avro["values"])
        return {"type": "map", "keyType": "string", "valueType": _spark_type(value.avro, path),
                "valueContainsNull": value.nullable}
    raise InvalidSchemaError(f"field {path!r}: Avro type {json.dumps(avro)} has no Spark SQL type")


def from_spark_json(struct: dict, name: str = "Record") -> dict:
    """An Avro record schema for Spark's JSON form of a StructType."""
    names = _RecordNames()
    return {"type": "record", "name": names.take(name),
            "fields": [_avro_from_spark_field(f, f["name"], names) for f in struct["fields"]]}


def _avro_from_spark_field(field: dict, path: str, names: _RecordNames) -> dict:
    avro = _avro_from_spark(field["type"], path, names)
    if field.get("nullable", True):
        return {"name": field["name"], "type": ["null", avro], "default": None}
    return {"name": field["name"], "type": avro}


def _avro_from_spark(t: Any, path: str, names: _RecordNames) -> AvroType:
    simple = {
        "boolean": "boolean", "byte": "int", "short": "int", "integer": "int", "long": "long",
        "float": "float", "double": "double", "string": "string", "binary": "bytes",
        "date": {"type": "int", "logicalType": "date"},
        "timestamp": {"type": "long", "logicalType": "timestamp-micros"},
        "timestamp_ntz": {"type": "long", "logicalType": "local-timestamp-micros"},
    }
    if isinstance(t, str):
        if t in simple:
            return simple[t]
        if t.startswith(("varchar(", "char(")):
            return "string"
        if t.startswith("decimal(") and t.endswith(")"):
            precision, scale = (int(p) for p in t[len("decimal("):-1].split(","))
            return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}
        if t == "decimal":
            return {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 0}
    elif isinstance(t, dict):
        if t.get("type") == "struct":
            return {"type": "record", "name": names.take(path.title().replace(".", "_")),
                    "fields": [_avro_from_spark_field(f, f"{path}.{f['name']}", names) for f in t["fields"]]}
        if t.get("type") == "array":
            item = _avro_from_spark(t["elementType"], f"{path}.element", names)
            return {"type": "array", "items": ["null", item] if t.get("containsNull", True) else item}
        if t.get("type") == "map":
            if t["keyType"] != "string":
                raise InvalidSchemaError(f"field {path!r}: Avro maps need string keys, got {t['keyType']}")
            value = _avro_from_spark(t["valueType"], f"{path}.value", names)
            return {"type": "map", "values": ["null", value] if t.get("valueContainsNull", True) else value}
    raise InvalidSchemaError(f"field {path!r}: Spark type {json.dumps(t)} has no Avro form")


# ---------------------------------------------------------------- writing and evolution

_WRITABLE = {  # kinds a column of the left kind may be written into (converted losslessly or checked)
    "int": {"int", "long", "float", "double"},
    "long": {"long", "float", "double"},
    "float": {"float", "double"},
    "timestamp-micros": {"timestamp-micros", "timestamp-millis"},
    "local-timestamp-micros": {"local-timestamp-micros", "local-timestamp-millis"},
    "string": {"string", "uuid", "enum"},
    "bytes": {"bytes", "fixed"},
}


def writable_from(writer: dict, dataset: dict, nullability: bool = True) -> list[str]:
    """Why records of schema ``writer`` cannot be written into a dataset of schema
    ``dataset`` (empty when they can). Without ``nullability``, nullable columns may feed
    required fields (their values are then checked as they are written)."""
    problems = []
    have = fields(writer)
    target = fields(dataset)
    defaults = field_defaults(dataset)
    unknown = [n for n in have if n not in target]
    if unknown:
        problems.append(f"unknown columns {unknown}{renamed_hint(dataset, unknown)}; the dataset has {list(target)}")
    missing = [n for n in target if n not in have and n not in defaults]
    if missing:
        problems.append(f"missing required columns {missing}")
    nullable = [n for n, t in target.items() if n in have and have[n].nullable and not t.nullable]
    if nullable and nullability:
        problems.append(f"columns {nullable} may hold nulls but the dataset requires values (declare them "
                        f"NOT NULL, or set option checkNulls=values to check each value as it is written)")
    for name, t in target.items():
        if name in have and have[name].kind not in kinds_writable_into(t.kind):
            problems.append(f"column {name!r} is {have[name].kind}, which cannot be written as {t.kind}")
        elif name in have and t.kind in ("record", "array", "map", "decimal") and \
                arrow_type(have[name].avro, name) != arrow_type(t.avro, name) and \
                not _decimal_fits(have[name].avro, t.avro):
            problems.append(f"column {name!r} has type {arrow_type(have[name].avro, name)} but the dataset "
                            f"has {arrow_type(t.avro, name)}")
    return problems


def kinds_writable_into(target_kind: str) -> set[str]:
    """The kinds that may be written into a field of ``target_kind``."""
    return {k for k, allowed in _WRITABLE.items() if target_kind in allowed} | {target_kind}


def _decimal_fits(source: AvroType, target: AvroType) -> bool:
    if type_kind(source) != "decimal" or type_kind(target) != "decimal":
        return False
    return source.get("scale", 0) == target.get("scale", 0) and source["precision"] <= target["precision"]
