"""The dataset descriptor: everything that says what a dataset is.

An immutable value: an Avro record schema, an optional partition strategy, the file
format and compression, an optional record key and ordering field, and free-form
properties. It round-trips to JSON and is versioned by the dataset's transaction log.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import pyarrow as pa

from cdkds.catalog.errors import (
    IncompatibleDescriptorError, InvalidDatasetSchemaError, InvalidDescriptorError, InvalidPartitionStrategyError,
    InvalidSchemaError,
)
from cdkds.catalog.keyed.properties import KeyedProperties, count_property
from cdkds.catalog.mirror.settings import MIRROR_PROPERTIES, check_mirrors, enabled_mirrors
from cdkds.catalog.services.settings import SERVICE_PROPERTIES, ServiceSettings
from cdkds.catalog.partitioning import PartitionStrategy
from cdkds.catalog.work_columns import INDEX_COLUMNS
from cdkds.catalog.write.sorting import descriptor_sort
from cdkds.formats import evolution, schema as schemas
from cdkds.formats.files import file_format
from cdkds.formats.projection import NameMapping, Projection
from cdkds.formats.schema import FieldType
from cdkds.formats.schema_rules import check_schema

DEFAULT_FORMAT = "parquet"
DEFAULT_COMPRESSION = "snappy"
# the properties cdkds reads (README, "Descriptor properties"); a descriptor keeps any other
# string pair for its users, so entry points that take properties from people refuse the rest
KNOWN_PROPERTIES = ("checkpoint.interval", "checkpoint.partFiles", "index.buckets", "index.compaction.deltas", "ttl", "ttl.field", "gc.grace",
                    "sort.by", *SERVICE_PROPERTIES, *MIRROR_PROPERTIES)
_KEY_KINDS = {"int", "long", "string", "uuid", "enum", "date", "timestamp-millis", "timestamp-micros",
              "local-timestamp-millis", "local-timestamp-micros", "decimal", "boolean", "bytes", "fixed"}
_ORDERING_KINDS = {"int", "long", "float", "double", "date", "timestamp-millis", "timestamp-micros",
                   "local-timestamp-millis", "local-timestamp-micros", "decimal", "string"}


@dataclass(frozen=True, init=False, eq=False)
class DatasetDescriptor:
    """What a dataset is. Build it directly, with :meth:`builder`, or from JSON.

    Every descriptor made is checked whole, once, here: its schema against the rules of
    :mod:`cdkds.formats.schema_rules`, its partition strategy, key, ordering field and
    properties against the schema (:class:`InvalidDescriptorError` naming the field or
    property) — so create, update, alter and the CLI share one rule. Only a descriptor read
    back from a log (:meth:`as_recorded`) skips the schema rules and takes a duration
    property beyond its limit as the limit, so that a dataset made before a rule existed
    stays readable; any change to it must pass them.
    """

    _schema_json: str = field(repr=False)
    partition_strategy: PartitionStrategy | None  # the current one: new files are written with it
    partition_spec_id: int  # the current strategy's id in the log (``AddFile.spec_id``)
    _past_specs: tuple[tuple[int, PartitionStrategy | None], ...] = field(repr=False)  # older strategies by id
    format: str
    compression: str
    record_key: tuple[str, ...]
    ordering_field: str | None
    properties: Mapping[str, str]
    _ids_given: bool = field(repr=False)  # the schema came with field ids (from a log that has them)
    _given_json: str = field(repr=False)  # the schema as given, before missing ids were given
    _recorded: bool = field(repr=False)  # read back from a log: rules that may postdate it are relaxed

    def __init__(self, schema: Any, partition_strategy: PartitionStrategy | str | list | None = None,
                 format: str = DEFAULT_FORMAT, compression: str | None = None,
                 record_key: str | Iterable[str] | None = None, ordering_field: str | None = None,
                 properties: Mapping[str, str] | None = None, *,
                 partition_specs: Mapping[int, PartitionStrategy | str | list | None] | None = None,
                 partition_spec_id: int = 0, _recorded: bool = False):
        try:
            avro = schemas.load_schema(schema, None if _recorded else check_schema)
        except InvalidSchemaError as e:
            raise InvalidDatasetSchemaError(f"schema: {e}") from None
        set_ = object.__setattr__
        set_(self, "_recorded", _recorded)
        set_(self, "_ids_given", schemas.has_ids(avro))
        set_(self, "_given_json", json.dumps(avro))
        set_(self, "_schema_json", json.dumps(schemas.assign_ids(avro), sort_keys=True))
        set_(self, "partition_strategy", _strategy(partition_strategy))
        set_(self, "partition_spec_id", partition_spec_id)
        set_(self, "_past_specs", _past_specs(partition_specs, partition_spec_id))
        set_(self, "format", format)
        set_(self, "compression", compression if compression is not None else DEFAULT_COMPRESSION)
        key = (record_key,) if isinstance(record_key, str) else tuple(record_key or ())
        set_(self, "record_key", key)
        set_(self, "ordering_field", ordering_field)
        props = dict(properties or {})
        set_(self, "properties", MappingProxyType(props))
        self._validate(props, _recorded)
        if self.partition_strategy is not None:
            set_(self, "partition_strategy", self.partition_strategy.bind(self.fields))
        set_(self, "_past_specs", tuple((i, s.bind(self.fields) if s is not None else None)
                                        for i, s in self._past_specs))
        _check_specs(self.partition_specs, self.fields)
        if not _recorded:
            check_mirrors(self)

    def _validate(self, props: dict, recorded: bool) -> None:
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
            if not recorded:
                self.partition_strategy.check_limits()
        for spec_id, strategy in self._past_specs:
            if strategy is not None:
                try:
                    strategy.check(fields)
                except InvalidPartitionStrategyError as e:
                    raise InvalidPartitionStrategyError(f"partition spec {spec_id} (a past strategy): {e}") from None
        for name in self.record_key:
            if name not in fields:
                raise InvalidDescriptorError(f"record key field {name!r} is not in the schema {list(fields)}")
            if fields[name].kind not in _KEY_KINDS:
                raise InvalidDescriptorError(f"record key field {name!r} is a {fields[name].kind}, which cannot be a key")
            if name in INDEX_COLUMNS and not recorded:
                raise InvalidDescriptorError(
                    f"record key field {name!r}: the record index stores its own columns {list(INDEX_COLUMNS)} beside "
                    f"the key's, so a key field cannot be named as one of them; choose another name")
        if self.ordering_field is not None:
            if self.ordering_field not in fields:
                raise InvalidDescriptorError(f"ordering field {self.ordering_field!r} is not in the schema {list(fields)}")
            if fields[self.ordering_field].kind not in _ORDERING_KINDS:
                raise InvalidDescriptorError(
                    f"ordering field {self.ordering_field!r} is a {fields[self.ordering_field].kind}, which has no order")
        bad = {k: v for k, v in props.items() if not isinstance(k, str) or not isinstance(v, str)}
        if bad:
            raise InvalidDescriptorError(f"properties must map strings to strings; bad entries: {bad!r:.200}")
        count_property(props, "checkpoint.interval", 10)
        if not recorded:  # a log that recorded a bad one before it was checked still reads (the default applies)
            count_property(props, "checkpoint.partFiles", 1)
        KeyedProperties.parse(props, fields, self.ordering_field, recorded)
        ServiceSettings.parse(props, recorded)
        enabled_mirrors(props, recorded)
        descriptor_sort(props, fields, self.record_key)

    @property
    def sort_by(self) -> tuple[str, ...]:
        """The fields each data file's rows are sorted by (property ``sort.by``; by default a
        keyed dataset's record key; empty: unsorted). See :mod:`cdkds.catalog.write.sorting`."""
        return descriptor_sort(self.properties, self.fields, self.record_key)

    @property
    def keyed(self) -> "KeyedProperties":
        """The record-index, TTL and tombstone properties (see :mod:`cdkds.catalog.keyed.properties`)."""
        return KeyedProperties.parse(self.properties, self.fields, self.ordering_field, self._recorded)

    @property
    def mirrors(self) -> tuple[str, ...]:
        """The mirrors kept after each commit (``mirror.delta``, ``mirror.iceberg``; see :mod:`cdkds.catalog.mirror`)."""
        return enabled_mirrors(self.properties, self._recorded)

    @property
    def services(self) -> ServiceSettings:
        """What the table services do (see :mod:`cdkds.catalog.services.settings`)."""
        return ServiceSettings.parse(self.properties, self._recorded)

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

    @cached_property
    def field_ids(self) -> Mapping[str, int]:
        """Top-level field name -> field id."""
        return MappingProxyType(schemas.field_ids(json.loads(self._schema_json)))

    @property
    def _schema_given(self) -> dict:
        return json.loads(self._given_json)

    def projection(self, names: Iterable[str] | None = None, partition: Mapping[str, Any] | None = None,
                   spec_id: int | None = None) -> Projection:
        """How to read fields ``names`` (default: all) out of the dataset's data files, by id;
        given a file's ``partition`` values (of partition spec ``spec_id``, default the
        current one), how to read that file: a source field of an identity partition
        function that the file lacks reads the file's partition value (docs/FORMAT.md §8)."""
        constants = self.source_values(partition, spec_id) if partition else None
        return Projection(json.loads(self._schema_json), list(self.fields) if names is None else list(names),
                          constants)

    def source_values(self, partition: Mapping[str, Any], spec_id: int | None = None) -> dict[str, Any]:
        """The value the source field of each identity function of spec ``spec_id`` (default:
        the current one) has in every row of a file of that spec whose partition values are
        ``partition``: what the file reads for such a field it lacks (docs/FORMAT.md §8)."""
        strategy = self.partition_strategy if spec_id is None else self.strategy_of(spec_id)
        return strategy.source_values(partition) if strategy is not None else {}

    def spark_schema_json(self) -> dict:
        """The schema as Spark's StructType JSON (``StructType.fromJson`` reads it)."""
        return schemas.to_spark_json(self.schema)

    @property
    def is_partitioned(self) -> bool:
        return self.partition_strategy is not None

    # ---------------------------------------------------------------- partition specs

    @property
    def partition_specs(self) -> Mapping[int, PartitionStrategy | None]:
        """Every partition strategy the dataset's files may have been written with, by spec
        id: the past ones and the current one (:attr:`partition_spec_id`)."""
        return MappingProxyType({**dict(self._past_specs), self.partition_spec_id: self.partition_strategy})

    @property
    def has_past_specs(self) -> bool:
        """Whether the partition strategy was ever changed (files may carry several specs)."""
        return bool(self._past_specs)

    def strategy_of(self, spec_id: int) -> PartitionStrategy | None:
        """The strategy of spec ``spec_id``; ``ValueError`` naming it when the descriptor has none."""
        if spec_id == self.partition_spec_id:
            return self.partition_strategy
        for i, strategy in self._past_specs:
            if i == spec_id:
                return strategy
        raise ValueError(f"partition spec {spec_id!r} is not one of the descriptor's ({sorted(self.partition_specs)})")

    def with_partitioning(self, strategy: PartitionStrategy | str | list | None) -> "DatasetDescriptor":
        """This descriptor with ``strategy`` as the current partition strategy (None:
        unpartitioned); the current one joins the past specs, which files written with it keep.
        A strategy equal to a past one takes that spec back (its id, and the source types its
        hashes were made with). :class:`IncompatibleDescriptorError` when it is the current strategy already."""
        new = _strategy(strategy)
        if new is not None:
            new = new.bind(self.fields)
        if new == self.partition_strategy:
            raise IncompatibleDescriptorError(f"the dataset is partitioned by {_text(new)} already")
        specs = dict(self.partition_specs)
        reused = [i for i, s in specs.items() if s == new]
        spec_id = reused[0] if reused else max(specs) + 1
        if reused:  # the spec as its files were written: a hash keeps the source type it was made with
            new = specs[spec_id]
        return DatasetDescriptor(self.schema, new, self.format, self.compression, self.record_key,
                                 self.ordering_field, self.properties, partition_specs=specs,
                                 partition_spec_id=spec_id)

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
            "partition_specs": dict(self._past_specs), "partition_spec_id": self.partition_spec_id,
        }
        unknown = set(changes) - set(current)
        if unknown:
            raise InvalidDescriptorError(f"a descriptor has no {sorted(unknown)}")
        return DatasetDescriptor(**{**current, **changes})

    @property
    def files_may_lack_ids(self) -> bool:
        """Whether some data files may carry no field ids (the log began before ids existed):
        such files are read by name, so their layout is known from their footers only."""
        return not self._ids_given or schemas.NAME_MAPPING in self.schema

    # ---------------------------------------------------------------- JSON

    def to_json(self, as_loaded: bool = False) -> dict:
        """The descriptor as JSON, its schema with field ids. ``as_loaded``: a schema whose ids were
        given on load (a log from before ids, no change since) is written as it was loaded, without
        them, so that it loads that way again and its files stay read by name (checkpoints)."""
        legacy = as_loaded and not self._ids_given and schemas.NAME_MAPPING not in self.schema
        out: dict[str, Any] = {"schema": self._schema_given if legacy else self.schema, "format": self.format,
                               "compression": self.compression}
        if self.partition_strategy is not None:
            out["partitionStrategy"] = self.partition_strategy.to_json()
        if self.partition_spec_id or self._past_specs:
            out["partitionSpecId"] = self.partition_spec_id
        if self._past_specs:
            out["partitionSpecs"] = [{"specId": i, "partitionStrategy": s.to_json() if s is not None else None}
                                     for i, s in self._past_specs]
        if self.record_key:
            out["recordKey"] = list(self.record_key)
        if self.ordering_field is not None:
            out["orderingField"] = self.ordering_field
        if self.properties:
            out["properties"] = dict(self.properties)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str, _recorded: bool = False) -> "DatasetDescriptor":
        if isinstance(data, str):
            data = json.loads(data)
        if not isinstance(data, Mapping) or "schema" not in data:
            raise InvalidDescriptorError(f"a descriptor's JSON needs a 'schema', got {str(data)[:200]}")
        strategy = data.get("partitionStrategy")
        return cls(data["schema"], PartitionStrategy.from_json(strategy) if strategy is not None else None,
                   data.get("format", DEFAULT_FORMAT), data.get("compression"), data.get("recordKey"),
                   data.get("orderingField"), data.get("properties"),
                   partition_specs=_specs_from_json(data.get("partitionSpecs", [])),
                   partition_spec_id=data.get("partitionSpecId", 0), _recorded=_recorded)

    @classmethod
    def as_recorded(cls, data: Mapping[str, Any] | str) -> "DatasetDescriptor":
        """A descriptor a log (or a data file) holds, as :meth:`from_json` reads it but without
        the schema rules that may postdate it."""
        return cls.from_json(data, _recorded=True)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DatasetDescriptor) and self.to_json() == other.to_json()

    def __reduce__(self) -> tuple:
        return (DatasetDescriptor.as_recorded, (self.to_json(),))  # Spark ships descriptors to executors

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_json(), sort_keys=True))

    # ---------------------------------------------------------------- evolution

    def with_schema(self, schema: dict) -> "DatasetDescriptor":
        """This descriptor with ``schema``, whose fields are this schema's by id: partition
        sources (the partition names, hence paths, stay), record key, ordering field and
        ``ttl.field`` follow renames; :class:`IncompatibleDescriptorError` if one of them
        is dropped."""
        renames = evolution.top_level_renames(self.schema, schema)
        self.check_drops([n for n in self.fields if n not in renames])

        def name(n: str) -> str:
            return renames.get(n, n)

        def renamed(strategy: PartitionStrategy | None) -> PartitionStrategy | None:
            if strategy is None:
                return None
            return PartitionStrategy(tuple(dataclasses.replace(f, source=name(f.source)) for f in strategy.functions))

        strategy = renamed(self.partition_strategy)
        past = {i: renamed(s) for i, s in self._past_specs}
        props = dict(self.properties)
        if "ttl.field" in props:
            props["ttl.field"] = name(props["ttl.field"])
        if props.get("sort.by", "").strip().lower() not in ("", "none"):
            props["sort.by"] = ", ".join(name(n.strip()) for n in props["sort.by"].split(","))
        try:  # the schema is new: it obeys every rule; the rest is this descriptor's, as it was made
            check_schema(schema)
        except InvalidSchemaError as e:
            raise InvalidDatasetSchemaError(f"schema: {e}") from None
        return DatasetDescriptor(schema, strategy, self.format, self.compression, [name(k) for k in self.record_key],
                                 name(self.ordering_field) if self.ordering_field else None, props,
                                 partition_specs=past, partition_spec_id=self.partition_spec_id,
                                 _recorded=self._recorded)

    def check_drops(self, dropped: Iterable[str]) -> None:
        """Raise :class:`IncompatibleDescriptorError` if a top-level field in ``dropped`` is
        a record key field, the ordering field, ``ttl.field``, a ``sort.by`` field or a partition source."""
        dropped = set(dropped)
        strategy = [f for s in self.partition_specs.values() if s is not None for f in s.functions]
        for what, names in (("record key field", self.record_key), ("ordering field", [self.ordering_field]),
                            ("ttl.field", [self.properties.get("ttl.field")]),
                            ("sort.by field (change property sort.by first)",
                             [n for n in self.sort_by if n not in self.record_key]),
                            ("partition source", [f.source for f in strategy])):
            gone = [n for n in names if n in dropped]
            if gone:
                raise IncompatibleDescriptorError(f"field {gone[0]!r} is the dataset's {what} and cannot be dropped")

    def check_rules(self) -> None:
        """Raise :class:`InvalidDescriptorError` unless this descriptor obeys every rule a
        descriptor made now must (one read back from a log may predate some)."""
        DatasetDescriptor.from_json(self.to_json())

    def check_update(self, new: "DatasetDescriptor") -> None:
        """Raise :class:`IncompatibleDescriptorError` unless ``new`` may replace this
        descriptor (see :meth:`evolve`)."""
        self.evolve(new)

    def evolve(self, new: "DatasetDescriptor") -> "DatasetDescriptor":
        """The descriptor to record when ``new`` replaces this one, or
        :class:`IncompatibleDescriptorError` naming the field and both types.

        Fields are matched by id when ``new``'s schema carries ids, by name otherwise
        (:func:`cdkds.formats.evolution.align_ids`). The format stays; the partition
        strategy, record key and ordering field stay, following renames (the recorded
        strategy keeps the source types its partitions were made with: a hash bucket must
        not move when its source widens) unless ``new`` has another strategy, which becomes a new
        partition spec (:meth:`with_partitioning`); a key field keeps its type; no partition source,
        key, ordering or ``ttl.field`` is dropped; every file written so far must read under
        the new schema (:func:`cdkds.formats.evolution.read_problems`); ``new`` obeys every
        rule of a new descriptor (:meth:`check_rules`)."""
        new.check_rules()
        current = self.schema
        if not self._ids_given and schemas.NAME_MAPPING not in current:
            # ids were given on load, by position: files written so far carry none and are
            # read by the names the fields have now, from this commit on through the mapping
            current[schemas.NAME_MAPPING] = NameMapping.of_schema(current).to_json()
        schema = evolution.align_ids(current, new._schema_given)
        renames = evolution.top_level_renames(current, schema)
        if new.format != self.format:
            raise IncompatibleDescriptorError(
                f"the format cannot change ({self.format} -> {new.format}): a dataset's data files are all of its "
                f"format, which readers, writers and mirrors open them by, and a change would leave every file "
                f"written so far in the old one; write the rows into a new dataset instead")
        problems = evolution.read_problems(current, schema)
        if problems:
            raise IncompatibleDescriptorError("the new schema cannot read existing data: " + "; ".join(problems))
        before = self.with_schema(schema)
        if self.record_key and new.record_key != before.record_key:  # setting one bootstraps the index
            raise IncompatibleDescriptorError(
                f"the record key cannot change ({before.record_key} -> {new.record_key}): the record index finds each "
                f"key's one live row by the key's hash, and rows unique by the old key need not be by a new one; "
                f"write the rows into a new dataset keyed so instead")
        if self.record_key and new.ordering_field != before.ordering_field:
            raise IncompatibleDescriptorError(f"the ordering field of a keyed dataset cannot change "
                                              f"({before.ordering_field} -> {new.ordering_field})")
        if self.record_key and new.keyed.buckets != self.keyed.buckets:
            raise IncompatibleDescriptorError(f"property index.buckets is fixed once a dataset is keyed "
                                              f"({self.keyed.buckets} -> {new.keyed.buckets})")
        old_types = {f["name"]: f["type"] for f in current["fields"]}
        new_types = {f["name"]: f["type"] for f in schema["fields"]}
        for key in self.record_key:
            if old_types[key] != new_types[renames[key]]:
                raise IncompatibleDescriptorError(
                    f"record key field {renames[key]!r} cannot change its type ({evolution.type_text(old_types[key])} "
                    f"-> {evolution.type_text(new_types[renames[key]])}): rows would move between keys")
        evolved = DatasetDescriptor(schema, before.partition_strategy, new.format, new.compression, new.record_key,
                                    new.ordering_field, new.properties, partition_specs=dict(before._past_specs),
                                    partition_spec_id=before.partition_spec_id)
        if new.partition_strategy != before.partition_strategy:  # a new partition spec: files keep theirs
            return evolved.with_partitioning(new.partition_strategy)
        return evolved



def _past_specs(specs: Mapping[int, Any] | None, current: int) -> tuple[tuple[int, PartitionStrategy | None], ...]:
    """The specs other than ``current``, by id, their strategies parsed."""
    if not isinstance(current, int) or isinstance(current, bool) or current < 0:
        raise InvalidDescriptorError(f"partitionSpecId must be a non-negative integer, got {current!r:.100}")
    if specs is None:
        return ()
    if not isinstance(specs, Mapping):
        raise InvalidDescriptorError(f"partition specs must map spec ids to strategies, got {specs!r:.200}")
    out = []
    for spec_id, strategy in specs.items():  # checked here, sorted below
        if not isinstance(spec_id, int) or isinstance(spec_id, bool) or spec_id < 0:
            raise InvalidDescriptorError(f"a partition spec id must be a non-negative integer, got {spec_id!r:.100}")
        if spec_id != current:
            out.append((spec_id, _strategy(strategy)))
    return tuple(sorted(out, key=lambda kv: kv[0]))


def _specs_from_json(data: Any) -> dict[int, Any]:
    if not isinstance(data, list) or not all(isinstance(d, Mapping) and "specId" in d for d in data):
        raise InvalidDescriptorError(f"partitionSpecs must be a list of {{'specId', 'partitionStrategy'}}, got {data!r:.200}")
    specs: dict[int, Any] = {}
    for d in data:
        if d["specId"] in specs:
            raise InvalidDescriptorError(f"partitionSpecs repeats spec id {d['specId']!r}")
        strategy = d.get("partitionStrategy")
        specs[d["specId"]] = PartitionStrategy.from_json(strategy) if strategy is not None else None
    return specs


_SHARED_KINDS = {frozenset({"int", "long"}): "long"}  # an int widens losslessly into a long column


def shared_partition_kind(a: str, b: str) -> str | None:
    """The kind of the one file-table column a partition name holding values of kinds ``a``
    and ``b`` (in two specs) takes; ``None`` when they cannot share one. Ints and longs do
    (a long column): a past spec's identity source may be widened while another spec's int
    function shares its name."""
    return a if a == b else _SHARED_KINDS.get(frozenset({a, b}))


def _check_specs(specs: Mapping[int, PartitionStrategy | None], fields: Mapping[str, FieldType]) -> None:
    """Refuse specs that give one partition name values of two kinds that cannot share one
    column (files of every spec share one column per name in the log's file table)."""
    seen: dict[str, tuple[str, str, int]] = {}
    for spec_id, strategy in sorted(specs.items()):
        if strategy is None:
            continue
        for f in strategy.functions:
            if f.name.startswith("#"):
                raise InvalidPartitionStrategyError(f"partition name {f.name!r} may not start with '#'")
            kind = f.result_kind(fields[f.source].kind)
            shape = kind if kind != "decimal" else f"{kind} of {fields[f.source].kind} {f.source}"
            if f.name in seen and shared_partition_kind(seen[f.name][0], shape) is None:
                raise InvalidPartitionStrategyError(
                    f"partition name {f.name!r} of {f.to_text()} (spec {spec_id}) holds {shape} values but spec "
                    f"{seen[f.name][2]} gives it {seen[f.name][0]} values ({seen[f.name][1]}); give it another "
                    f"name, e.g. '{f.to_text().split(' as ')[0]} as {f.name}_{spec_id}'")
            seen.setdefault(f.name, (shape, f.to_text(), spec_id))


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
