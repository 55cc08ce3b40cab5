"""The dataset descriptor: everything that says what a dataset is.

An immutable value: an Avro record schema, an optional partition strategy, the file
format and compression, an optional record key and ordering field, and free-form
properties. It round-trips to JSON and is versioned by the dataset's transaction log.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import pyarrow as pa

from cdkds.catalog.errors import (
    IncompatibleDescriptorError, InvalidDescriptorError, InvalidPartitionStrategyError, InvalidSchemaError,
)
from cdkds.catalog.keyed.properties import KeyedProperties
from cdkds.catalog.partitioning import PartitionStrategy
from cdkds.formats import schema as schemas
from cdkds.formats.files import file_format
from cdkds.formats.schema import FieldType

DEFAULT_FORMAT = "parquet"
DEFAULT_COMPRESSION = "snappy"
_KEY_KINDS = {"int", "long", "string", "uuid", "enum", "date", "timestamp-millis", "timestamp-micros",
              "local-timestamp-millis", "local-timestamp-micros", "decimal", "boolean", "bytes", "fixed"}
_ORDERING_KINDS = {"int", "long", "float", "double", "date", "timestamp-millis", "timestamp-micros",
                   "local-timestamp-millis", "local-timestamp-micros", "decimal", "string"}


@dataclass(frozen=True, init=False, eq=False)
class DatasetDescriptor:
    """What a dataset is. Build it directly, with :meth:`builder`, or from JSON."""

    _schema_json: str = field(repr=False)
    partition_strategy: PartitionStrategy | None
    format: str
    compression: str
    record_key: tuple[str, ...]
    ordering_field: str | None
    properties: Mapping[str, str]

    def __init__(self, schema: Any, partition_strategy: PartitionStrategy | str | list | None = None,
                 format: str = DEFAULT_FORMAT, compression: str | None = None,
                 record_key: str | Iterable[str] | None = None, ordering_field: str | None = None,
                 properties: Mapping[str, str] | None = None):
        avro = schemas.load_schema(schema)
        set_ = object.__setattr__
        set_(self, "_schema_json", json.dumps(avro, sort_keys=True))
        set_(self, "partition_strategy", _strategy(partition_strategy))
        set_(self, "format", format)
        set_(self, "compression", compression if compression is not None else DEFAULT_COMPRESSION)
        key = (record_key,) if isinstance(record_key, str) else tuple(record_key or ())
        set_(self, "record_key", key)
        set_(self, "ordering_field", ordering_field)
        props = dict(properties or {})
        set_(self, "properties", MappingProxyType(props))
        self._validate(props)
        if self.partition_strategy is not None:
            set_(self, "partition_strategy", self.partition_strategy.bind(self.fields))

    def _validate(self, props: dict) -> None:
        if not isinstance(self.format, str):
            raise InvalidDescriptorError(f"format must be a string, got {self.format!r}")
        try:
            fmt = file_format(self.format)
        except InvalidSchemaError as e:
            raise InvalidDescriptorError(str(e)) from None
        if self.compression not in fmt.compressions:
            raise InvalidDescriptorError(
                f"compression {self.compression!r} is not available for {self.format}; choose one of {sorted(fmt.compressions)}")
        fields = self.fields
        if self.partition_strategy is not None:
            self.partition_strategy.check(fields)
        for name in self.record_key:
            if name not in fields:
                raise InvalidDescriptorError(f"record key field {name!r} is not in the schema {list(fields)}")
            if fields[name].kind not in _KEY_KINDS:
                raise InvalidDescriptorError(f"record key field {name!r} is a {fields[name].kind}, which cannot be a key")
        if self.ordering_field is not None:
            if self.ordering_field not in fields:
                raise InvalidDescriptorError(f"ordering field {self.ordering_field!r} is not in the schema {list(fields)}")
            if fields[self.ordering_field].kind not in _ORDERING_KINDS:
                raise InvalidDescriptorError(
                    f"ordering field {self.ordering_field!r} is a {fields[self.ordering_field].kind}, which has no order")
        bad = {k: v for k, v in props.items() if not isinstance(k, str) or not isinstance(v, str)}
        if bad:
            raise InvalidDescriptorError(f"properties must map strings to strings; bad entries: {bad!r:.200}")
        interval = props.get("checkpoint.interval", "10")
        if not interval.isdigit() or int(interval) < 1:
            raise InvalidDescriptorError(f"property checkpoint.interval must be a positive integer, got {interval!r}")
        KeyedProperties.parse(props, fields, self.ordering_field)

    @property
    def keyed(self) -> "KeyedProperties":
        """The record-index, TTL and tombstone properties (see :mod:`cdkds.catalog.keyed.properties`)."""
        return KeyedProperties.parse(self.properties, self.fields, self.ordering_field)

    # ---------------------------------------------------------------- schema views

    @property
    def schema(self) -> dict:
        """The Avro record schema (a fresh copy: descriptors are immutable)."""
        return json.loads(self._schema_json)

    @cached_property
    def fields(self) -> Mapping[str, FieldType]:
        return MappingProxyType(schemas.fields(json.loads(self._schema_json)))

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        return schemas.to_arrow(json.loads(self._schema_json))

    @cached_property
    def defaults(self) -> Mapping[str, Any]:
        return MappingProxyType(schemas.field_defaults(json.loads(self._schema_json)))

    def spark_schema_json(self) -> dict:
        """The schema as Spark's StructType JSON (``StructType.fromJson`` reads it)."""
        return schemas.to_spark_json(self.schema)

    @property
    def is_partitioned(self) -> bool:
        return self.partition_strategy is not None

    # ---------------------------------------------------------------- building

    @staticmethod
    def builder() -> "DatasetDescriptorBuilder":
        return DatasetDescriptorBuilder()

    @classmethod
    def from_arrow(cls, schema: pa.Schema, name: str = "Record", **kwargs: Any) -> "DatasetDescriptor":
        return cls(schemas.from_arrow(schema, name), **kwargs)

    @classmethod
    def from_spark_json(cls, struct: dict, name: str = "Record", **kwargs: Any) -> "DatasetDescriptor":
        return cls(schemas.from_spark_json(struct, name), **kwargs)

    def replace(self, **changes: Any) -> "DatasetDescriptor":
        """A copy with some parts changed (``schema=``, ``properties=``...)."""
        current = {
            "schema": self.schema, "partition_strategy": self.partition_strategy, "format": self.format,
            "compression": self.compression, "record_key": self.record_key,
            "ordering_field": self.ordering_field, "properties": dict(self.properties),
        }
        unknown = set(changes) - set(current)
        if unknown:
            raise InvalidDescriptorError(f"a descriptor has no {sorted(unknown)}")
        return DatasetDescriptor(**{**current, **changes})

    # ---------------------------------------------------------------- JSON

    def to_json(self) -> dict:
        out: dict[str, Any] = {"schema": self.schema, "format": self.format, "compression": self.compression}
        if self.partition_strategy is not None:
            out["partitionStrategy"] = self.partition_strategy.to_json()
        if self.record_key:
            out["recordKey"] = list(self.record_key)
        if self.ordering_field is not None:
            out["orderingField"] = self.ordering_field
        if self.properties:
            out["properties"] = dict(self.properties)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> "DatasetDescriptor":
        if isinstance(data, str):
            data = json.loads(data)
        if not isinstance(data, Mapping) or "schema" not in data:
            raise InvalidDescriptorError(f"a descriptor's JSON needs a 'schema', got {str(data)[:200]}")
        strategy = data.get("partitionStrategy")
        return cls(data["schema"], PartitionStrategy.from_json(strategy) if strategy is not None else None,
                   data.get("format", DEFAULT_FORMAT), data.get("compression"), data.get("recordKey"),
                   data.get("orderingField"), data.get("properties"))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DatasetDescriptor) and self.to_json() == other.to_json()

    def __reduce__(self) -> tuple:
        return (DatasetDescriptor.from_json, (self.to_json(),))  # Spark ships descriptors to executors

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_json(), sort_keys=True))

    # ---------------------------------------------------------------- evolution

    def check_update(self, new: "DatasetDescriptor") -> None:
        """Raise :class:`IncompatibleDescriptorError` unless ``new`` may replace this
        descriptor (Kite's rules: same format, partition strategy and record key; the new
        schema must read data written with the old one)."""
        if new.format != self.format:
            raise IncompatibleDescriptorError(f"the format cannot change ({self.format} -> {new.format})")
        if new.partition_strategy != self.partition_strategy:
            raise IncompatibleDescriptorError(
                f"the partition strategy cannot change ({_text(self.partition_strategy)} -> {_text(new.partition_strategy)})")
        if self.record_key and new.record_key != self.record_key:  # setting one bootstraps the index
            raise IncompatibleDescriptorError(f"the record key cannot change ({self.record_key} -> {new.record_key})")
        if self.record_key and new.ordering_field != self.ordering_field:
            raise IncompatibleDescriptorError(f"the ordering field of a keyed dataset cannot change "
                                              f"({self.ordering_field} -> {new.ordering_field})")
        if self.record_key and new.keyed.buckets != self.keyed.buckets:
            raise IncompatibleDescriptorError(f"property index.buckets is fixed once a dataset is keyed "
                                              f"({self.keyed.buckets} -> {new.keyed.buckets})")
        problems = schemas.can_read(self.schema, new.schema)
        if problems:
            raise IncompatibleDescriptorError("the new schema cannot read existing data: " + "; ".join(problems))

    def evolve(self, new: "DatasetDescriptor") -> "DatasetDescriptor":
        """The descriptor to record when ``new`` replaces this one: ``new`` (checked by
        :meth:`check_update`) with this descriptor's partition strategy, which keeps the
        source types the partitions were created with (a hash bucket must not move when
        its source is promoted from int to long)."""
        self.check_update(new)
        if self.partition_strategy is None:
            return new
        return new.replace(partition_strategy=self.partition_strategy)


def _text(strategy: PartitionStrategy | None) -> str:
    return strategy.to_text() if strategy is not None else "unpartitioned"


def _strategy(value: PartitionStrategy | str | list | None) -> PartitionStrategy | None:
    if value is None or isinstance(value, PartitionStrategy):
        return value
    if isinstance(value, str):
        return PartitionStrategy.parse(value)
    if isinstance(value, list):
        return PartitionStrategy.from_json(value)
    raise InvalidPartitionStrategyError(f"a partition strategy must be a PartitionStrategy, text or Kite JSON, got {value!r:.100}")


class DatasetDescriptorBuilder:
    """Builds a :class:`DatasetDescriptor` step by step, as Kite's builder does."""

    def __init__(self) -> None:
        self._parts: dict[str, Any] = {}

    def schema(self, schema: Any) -> "DatasetDescriptorBuilder":
        self._parts["schema"] = schema
        return self

    def partition_strategy(self, strategy: PartitionStrategy | str | list) -> "DatasetDescriptorBuilder":
        self._parts["partition_strategy"] = strategy
        return self

    def format(self, name: str) -> "DatasetDescriptorBuilder":
        self._parts["format"] = name
        return self

    def compression(self, name: str) -> "DatasetDescriptorBuilder":
        self._parts["compression"] = name
        return self

    def record_key(self, *names: str) -> "DatasetDescriptorBuilder":
        self._parts["record_key"] = names
        return self

    def ordering_field(self, name: str) -> "DatasetDescriptorBuilder":
        self._parts["ordering_field"] = name
        return self

    def property(self, key: str, value: str) -> "DatasetDescriptorBuilder":
        self._parts.setdefault("properties", {})[key] = value
        return self

    def build(self) -> DatasetDescriptor:
        if "schema" not in self._parts:
            raise InvalidDescriptorError("a descriptor needs a schema")
        return DatasetDescriptor(**self._parts)
