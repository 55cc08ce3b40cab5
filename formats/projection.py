"""Reading data files by field id: some fields of a reader schema, out of files written
with any earlier schema of the dataset.

A file's columns are matched to the reader's fields by id, never by name, at every
depth (records, and records inside arrays and maps): a renamed field reads its old
column, a dropped field's column is never read (a field added later under the same name
has another id), a field the file lacks reads its default (or null), a widened field's
column is cast. Files written before ids existed carry none; their columns get ids by
name through the dataset's :class:`NameMapping` (the names the fields had when ids were
given), or through the reader schema's own names when it has no mapping.

A field the file lacks whose value the file's place tells (the source of an identity
partition function: files adopted from Hive-style folders or Delta tables usually leave
the partition columns out) reads that value, given as ``constants``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterator, Mapping, Sequence

import pyarrow as pa

from cdkds.formats.errors import DataFileError
from cdkds.formats.nulls import null_column
from cdkds.formats.schema import (
    FIELD_ID, NAME_MAPPING, PARQUET_FIELD_ID, AvroType, default_value, record_field, record_of, type_kind, unwrap,
)


# ---------------------------------------------------------------- name mapping

@dataclass(frozen=True)
class NameMapping:
    """Field name -> (id, mapping of the record it holds) for the fields of one record."""

    fields: Mapping[str, tuple[int, "NameMapping | None"]]

    @classmethod
    def of_schema(cls, record: dict) -> "NameMapping":
        """The mapping of a record schema's own names and ids."""
        out = {}
        for f in record["fields"]:
            inner = record_of(f["type"])
            out[f["name"]] = (f[FIELD_ID], cls.of_schema(inner) if inner is not None else None)
        return cls(out)

    @classmethod
    def of(cls, schema: dict) -> "NameMapping":
        """The mapping recorded in a schema, or the schema's own names."""
        if NAME_MAPPING in schema:
            return cls.from_json(schema[NAME_MAPPING])
        return cls.of_schema(schema)

    def to_json(self) -> list[dict]:
        """Iceberg's name-mapping form: ``[{"field-id": 1, "names": ["a"], "fields": [...]}]``."""
        out = []
        for name, (fid, inner) in self.fields.items():
            item: dict[str, Any] = {"field-id": fid, "names": [name]}
            if inner is not None:
                item["fields"] = inner.to_json()
            out.append(item)
        return out

    @classmethod
    def from_json(cls, data: list) -> "NameMapping":
        out = {}
        for item in data:
            inner = cls.from_json(item["fields"]) if item.get("fields") else None
            for name in item["names"]:
                out[name] = (int(item["field-id"]), inner)
        return cls(out)

    def apply(self, schema: pa.Schema) -> pa.Schema:
        """``schema`` (of a file without ids) with ids on the fields this mapping names."""
        return pa.schema([self._field(f) for f in schema])

    def _field(self, f: pa.Field) -> pa.Field:
        if f.name not in self.fields:
            return f  # a column no field had when ids were given: never read
        fid, inner = self.fields[f.name]
        typ = _with_ids(f.type, inner) if inner is not None else f.type
        return pa.field(f.name, typ, f.nullable, {**(f.metadata or {}), PARQUET_FIELD_ID: str(fid).encode()})


def _with_ids(t: pa.DataType, mapping: "NameMapping") -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct([mapping._field(t.field(i)) for i in range(t.num_fields)])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = t.value_field
        return pa.list_(item.with_type(_with_ids(item.type, mapping)))
    if pa.types.is_map(t):
        item = t.item_field
        return pa.map_(t.key_field, item.with_type(_with_ids(item.type, mapping)))
    return t


def file_has_ids(schema: pa.Schema) -> bool:
    return any(f.metadata and PARQUET_FIELD_ID in f.metadata for f in schema)


def _id(f: pa.Field) -> int | None:
    raw = (f.metadata or {}).get(PARQUET_FIELD_ID)
    return int(raw) if raw is not None else None


# ---------------------------------------------------------------- projection

class Projection:
    """Fields ``names`` of the Avro record ``schema`` (which carries ids), read out of
    files; ``arrow_schema`` is what every resolved batch has."""

    def __init__(self, schema: dict, names: Sequence[str], constants: Mapping[str, Any] | None = None):
        by_name = {f["name"]: f for f in schema["fields"]}
        self.fields = tuple(by_name[n] for n in names)
        self.arrow_schema = pa.schema([record_field(f) for f in self.fields])
        self._mapping = NameMapping.of(schema)
        self.constants = MappingProxyType(dict(constants or {}))  # field name -> its value where a file lacks it

    def resolve(self, file_schema: pa.Schema, where: str) -> "FileProjection":
        """How to read the fields out of a file of ``file_schema`` (its Arrow schema with
        Parquet field-id metadata where it has ids); ``where`` names the file in errors."""
        if not file_has_ids(file_schema):
            file_schema = self._mapping.apply(file_schema)
        by_id = {_id(f): f for f in file_schema if _id(f) is not None}
        columns, readers = [], []
        for field, target in zip(self.fields, self.arrow_schema):
            source = by_id.get(field[FIELD_ID])
            if source is None and field["name"] in self.constants:
                readers.append(PartitionValue(field, target, self.constants[field["name"]]))
            elif source is None:
                readers.append(MissingField(field, target))
            else:
                columns.append(source.name)
                readers.append(_column_reader(source, field["type"], target, where))
        return FileProjection(tuple(columns), tuple(readers), self.arrow_schema,
                              file_schema.names[0] if file_schema.names else None)


@dataclass(frozen=True)
class FileProjection:
    """The columns to read out of one file and how each becomes a reader field."""

    columns: tuple[str, ...]
    readers: tuple["FieldReader", ...]
    schema: pa.Schema
    any_column: str | None  # read when no field is in the file: the row count must come from somewhere

    @property
    def is_identity(self) -> bool:
        """Whether the file's columns are the reader's fields as they are (same names, types
        and ids: nothing renamed, added, widened or converted), so reading them needs no mapping."""
        return len(self.readers) == len(self.schema) and all(
            isinstance(r, FileColumn) and isinstance(r.convert, AsStored) and r.name == f.name
            for r, f in zip(self.readers, self.schema))

    @property
    def is_identity_but_partition_values(self) -> bool:
        """Whether the file's columns are the reader's fields as they are, except fields the
        file lacks that read its partition value (:class:`PartitionValue`)."""
        readers = [(r, f) for r, f in zip(self.readers, self.schema) if not isinstance(r, PartitionValue)]
        return len(self.readers) == len(self.schema) and all(
            isinstance(r, FileColumn) and isinstance(r.convert, AsStored) and r.name == f.name for r, f in readers)

    @property
    def read_columns(self) -> list[str]:
        """The file's columns to read (at least one, to count rows)."""
        return list(self.columns) or ([self.any_column] if self.any_column is not None else [])

    def sources(self) -> Iterator[tuple[str, str, Callable[[pa.Array], pa.Array]]]:
        """``(reader field, file column, conversion)`` of each field read from a file column."""
        for r, f in zip(self.readers, self.schema):
            if isinstance(r, FileColumn):
                yield f.name, r.name, r.convert

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """A batch of the file's ``read_columns`` as a batch of the reader's fields."""
        return pa.RecordBatch.from_arrays([r.read(batch) for r in self.readers], schema=self.schema)


class FieldReader(ABC):
    """How one field of the reader schema is read out of a file."""

    @abstractmethod
    def read(self, batch: pa.RecordBatch) -> pa.Array:
        """The reader's column out of a batch of the file's columns."""


@dataclass(frozen=True)
class MissingField(FieldReader):
    """A field the file does not have: its default, or null."""

    field: dict
    target: pa.Field

    def read(self, batch: pa.RecordBatch) -> pa.Array:
        return filled(self.field, self.target.type, batch.num_rows)


def filled(field: dict, t: pa.DataType, rows: int) -> pa.Array:
    """A column of ``rows`` values of a field a file does not have: its default, or null
    (with placeholders under a null record: see :mod:`cdkds.formats.nulls`)."""
    default = default_value(field["type"], field.get("default"))
    if default is None:
        return null_column(t, rows)
    return pa.repeat(pa.scalar(default, t), rows)


@dataclass(frozen=True)
class PartitionValue(FieldReader):
    """A field the file does not have whose value in every row of the file is known from
    where the file lies (an identity partition's value): that value."""

    field: dict
    target: pa.Field
    value: Any

    def read(self, batch: pa.RecordBatch) -> pa.Array:
        return pa.repeat(self.scalar, batch.num_rows)

    @property
    def scalar(self) -> pa.Scalar:
        return pa.scalar(self.value, self.target.type)


@dataclass(frozen=True)
class FileColumn(FieldReader):
    """A field read out of the file's column ``name`` through ``convert``."""

    name: str
    convert: "Conversion"

    def read(self, batch: pa.RecordBatch) -> pa.Array:
        column = batch.column(self.name)
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        return self.convert(column)


def _column_reader(source: pa.Field, avro: AvroType, target: pa.Field, where: str) -> FieldReader:
    return FileColumn(source.name, _converter(source.type, avro, target.type, f"{where}: column {source.name!r}"))


class Conversion(ABC):
    """How a file column's values become the reader type's."""

    @abstractmethod
    def __call__(self, array: pa.Array) -> pa.Array:
        """``array`` as the reader's type."""


@dataclass(frozen=True)
class AsStored(Conversion):
    """The column as it is stored."""

    def __call__(self, array: pa.Array) -> pa.Array:
        return array


@dataclass(frozen=True)
class CastTo(Conversion):
    """The column, of the file's type ``source``, cast to the reader's (wider) type."""

    source: pa.DataType
    target: pa.DataType
    where: str

    @property
    def exact(self) -> bool:
        """Whether every value is kept exactly (see :func:`exact_widening`)."""
        return exact_widening(self.source, self.target)

    def __call__(self, array: pa.Array) -> pa.Array:
        try:
            return widened(array, self.target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise DataFileError(f"{self.where} of type {array.type} cannot be read as {self.target}: {e}") from None


def exact_widening(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether widening ``source`` values to ``target`` keeps each value exactly; an integer
    widened to a floating type rounds beyond the float's precision (to the nearest, as Java,
    Spark and Iceberg widen)."""
    return not (pa.types.is_integer(source) and pa.types.is_floating(target))


def widened(array: pa.Array, target: pa.DataType) -> pa.Array:
    """``array`` widened to ``target``: checked (an out-of-range value fails), except where
    :func:`exact_widening` says values round."""
    return array.cast(target, safe=exact_widening(array.type, target))


@dataclass(frozen=True)
class RecordConversion(Conversion):
    """Children by id: ``(index of the file's child, converter)`` or ``(None, field)``.

    The file's children are taken as they are stored (``field``, not ``flatten``, which would
    put the record's nulls into them): under a null record a required child keeps the
    placeholder the file holds there, so the record read is one every writer accepts."""

    children: tuple[tuple[int | None, Any], ...]
    target: pa.DataType

    def __call__(self, array: pa.Array) -> pa.Array:
        rows = len(array)
        arrays = [convert(array.field(index)) if index is not None
                  else filled(convert, self.target.field(i).type, rows)
                  for i, (index, convert) in enumerate(self.children)]  # convert: the field dict when missing
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(arrays, fields=list(self.target), mask=mask)


def _entries(array: pa.Array) -> tuple[pa.Array, slice, pa.Array | None]:
    """A list or map array's offsets from 0, the slice of its child they cover, its null mask."""
    offsets = array.offsets
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    if start:
        offsets = pa.compute.subtract(offsets, offsets[0])
    return offsets, slice(start, end), array.is_null() if array.null_count else None


@dataclass(frozen=True)
class ListConversion(Conversion):
    """A list whose items are converted."""

    items: Conversion
    target: pa.DataType

    def __call__(self, array: pa.Array) -> pa.Array:
        offsets, covered, mask = _entries(array)
        return pa.ListArray.from_arrays(offsets, self.items(array.values[covered]), type=self.target, mask=mask)


@dataclass(frozen=True)
class MapConversion(Conversion):
    """A map whose values are converted (keys are strings)."""

    values: Conversion
    target: pa.DataType

    def __call__(self, array: pa.Array) -> pa.Array:
        offsets, covered, mask = _entries(array)
        return pa.MapArray.from_arrays(offsets, array.keys[covered], self.values(array.items[covered]),
                                       type=self.target, mask=mask)


def _converter(source: pa.DataType, avro: AvroType, target: pa.DataType, where: str) -> Conversion:
    """How a file column of type ``source`` becomes a value of the reader type ``avro``."""
    inner = unwrap(avro).avro
    kind = type_kind(inner)
    if kind == "record":
        if not pa.types.is_struct(source):
            raise DataFileError(f"{where} is {source}, not the record the schema has")
        by_id = {_id(source.field(i)): i for i in range(source.num_fields)}
        children: list[tuple[int | None, Any]] = []
        same = source.num_fields == len(inner["fields"])
        for i, f in enumerate(inner["fields"]):
            index = by_id.get(f[FIELD_ID])
            if index is None:
                children.append((None, f))
                same = False
                continue
            convert = _converter(source.field(index).type, f["type"], target.field(i).type, f"{where}.{f['name']}")
            children.append((index, convert))
            same = same and index == i and isinstance(convert, AsStored) and source.field(index).name == f["name"] \
                and source.field(index).nullable == target.field(i).nullable
        return AsStored() if same else RecordConversion(tuple(children), target)
    if kind == "array":
        if not (pa.types.is_list(source) or pa.types.is_large_list(source)):
            raise DataFileError(f"{where} is {source}, not the array the schema has")
        items = _converter(source.value_type, inner["items"], target.value_type, f"{where}[]")
        if isinstance(items, AsStored) and source.equals(target):
            return AsStored()
        return ListConversion(items, target)
    if kind == "map":
        if not pa.types.is_map(source):
            raise DataFileError(f"{where} is {source}, not the map the schema has")
        values = _converter(source.item_type, inner["values"], target.item_type, f"{where}{{}}")
        if isinstance(values, AsStored) and source.equals(target):
            return AsStored()
        return MapConversion(values, target)
    if source.equals(target):
        return AsStored()
    return CastTo(source, target, where)
