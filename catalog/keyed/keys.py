"""Record keys: checking them, hashing them and the index bucket they belong to.

A key's hash is a stable 64-bit function of its values (not of their Arrow types: an
``int`` promoted to ``long`` hashes the same): integers and temporal values as their
int64 value, strings and bytes as FNV-1a of their bytes, each mixed by splitmix64 and
combined column by column. ``bucket = hash % buckets``; the index sorts a bucket's
entries by hash, so a lookup reads only the row groups whose hash range may hold a key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from collections import abc
from functools import cached_property
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import CdkdsError, InvalidKeyError
from cdkds.formats.errors import SchemaMismatchError
from cdkds.formats.records import batch_conformer, field_validator
from cdkds.formats.schema import unwrap

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _splitmix(h: np.ndarray) -> np.ndarray:
    h = h + _GOLDEN
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def _bytes_hash(array: pa.Array) -> np.ndarray:
    """FNV-1a (64-bit) of each value's bytes."""
    array = array.cast(pa.large_binary())
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)[array.offset: array.offset + len(array) + 1]
    data = array.buffers()[2]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    h = np.full(len(array), _FNV_OFFSET, dtype=np.uint64)
    order = np.argsort(-lengths, kind="stable")  # longest first: the rows still going are a prefix
    sorted_lengths = lengths[order]
    with np.errstate(over="ignore"):
        for j in range(int(sorted_lengths[0]) if len(order) else 0):
            active = order[: int(np.searchsorted(-sorted_lengths, -j, side="left"))]
            h[active] = (h[active] ^ data[starts[active] + j].astype(np.uint64)) * _FNV_PRIME
    return h


_SAMPLE = 2048  # values looked at to tell a column of few distinct strings


def _strings_hash(array: pa.Array) -> np.ndarray:
    """:func:`_bytes_hash` of each value, each distinct value hashed once when there are few
    (a tenant or country code: 2.6M rows in 34 ms instead of 87): the same hashes."""
    if pa.types.is_dictionary(array.type):
        encoded = array
    else:
        if len(array) <= _SAMPLE:
            return _bytes_hash(array)
        sample = array[::len(array) // _SAMPLE]
        if len(pc.unique(sample)) * 2 > len(sample):
            return _bytes_hash(array)  # mostly distinct (emails, ids): encoding would only add
        encoded = pc.dictionary_encode(array)
    if encoded.null_count:
        return _bytes_hash(encoded.dictionary_decode())
    return _bytes_hash(encoded.dictionary)[encoded.indices.to_numpy(zero_copy_only=False)]


def _is_bytes(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or \
        pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)


def _column_hash(array: pa.Array) -> np.ndarray:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_dictionary(array.type) and not _is_bytes(array.type.value_type):
        array = array.dictionary_decode()
    t = array.type
    if pa.types.is_dictionary(t) or _is_bytes(t):
        values = _strings_hash(array)
    elif pa.types.is_decimal(t):
        values = _bytes_hash(array.cast(pa.string()))  # the scale is fixed by the schema: one text per value
    elif pa.types.is_boolean(t):
        values = array.cast(pa.int64()).to_numpy(zero_copy_only=False).view(np.uint64)
    elif pa.types.is_integer(t) or pa.types.is_temporal(t):
        if pa.types.is_date(t) or pa.types.is_time(t):
            array = array.cast(pa.int32() if t.bit_width == 32 else pa.int64())
        values = array.cast(pa.int64()).to_numpy(zero_copy_only=False).view(np.uint64)
    else:
        raise CdkdsError(f"a record key column cannot be of type {t}")
    with np.errstate(over="ignore"):
        return _splitmix(values)


def arrow_table(value: Any) -> pa.Table | None:
    """``value`` as an Arrow table when it is one: an Arrow table or batch, or a frame that
    exports an Arrow stream (pandas, Polars) — which iterates over its column names, so it
    must never be taken for an iterable of rows or keys; else ``None``."""
    if isinstance(value, pa.Table):
        return value
    if isinstance(value, pa.RecordBatch):
        return pa.Table.from_batches([value])
    if hasattr(value, "__arrow_c_stream__"):
        return pa.table(value)
    return None


@dataclass(frozen=True)
class KeyField:
    """A field a keyed operation takes values of to find rows — a record key field, or the
    ordering field of a delete — with the schema's rules for its values (formats.records:
    type and range, canonical UUIDs, enum symbols, whole milliseconds, valid Unicode)."""

    name: str
    role: str  # "record key field" or "ordering field", for messages
    field: pa.Field
    avro: dict  # the Avro field
    nullable: bool  # a null is a value (a delete's ordering field: the key alone)

    @cached_property
    def _validate(self) -> Callable[[Any, str], Any]:
        return field_validator(self._schema["fields"][0]["type"])

    @cached_property
    def _conform(self) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
        return batch_conformer(self._schema)

    @property
    def _schema(self) -> dict:
        avro = self.avro["type"]
        if self.nullable and not unwrap(avro).nullable:
            avro = ["null", avro]
        return {"type": "record", "name": "key", "fields": [{**self.avro, "type": avro}]}

    def value(self, value: Any, dataset: str, i: int) -> Any:
        """``value`` checked and normalised; :class:`InvalidKeyError` naming the dataset,
        the field, the key and the value."""
        if value is None and not self.nullable:
            raise InvalidKeyError(f"dataset {dataset!r}: {self.role} {self.name!r} is null in key {i}")
        try:
            return self._validate(value, self.name)
        except SchemaMismatchError as e:
            raise InvalidKeyError(f"dataset {dataset!r}: key {i}: {self.role} {str(e).removeprefix('field ')}") from None

    def column(self, column: pa.Array | pa.ChunkedArray, dataset: str) -> pa.Array:
        """A column of values checked and normalised; :class:`InvalidKeyError` naming the
        dataset, the field and the first value at fault."""
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        try:
            return self._conformed(column)
        except (SchemaMismatchError, pa.ArrowException) as e:
            for i in range(len(column)):
                try:
                    self._conformed(column.slice(i, 1))
                except SchemaMismatchError as fault:
                    reason = str(fault).removeprefix(f"field {self.name!r} (row 0)").lstrip(": ")
                    raise InvalidKeyError(f"dataset {dataset!r}: key {i}: {self.role} {self.name!r}: {reason}") from None
                except pa.ArrowException:
                    raise InvalidKeyError(f"dataset {dataset!r}: key {i}: {self.role} {self.name!r} is a "
                                          f"{unwrap(self.avro['type']).kind}; got {column[i].as_py()!r:.200} "
                                          f"({column.type})") from None
            raise InvalidKeyError(f"dataset {dataset!r}: {self.role} {self.name!r}: {e}") from None

    def _conformed(self, column: pa.Array) -> pa.Array:
        return self._conform(pa.RecordBatch.from_arrays([column], names=[self.name])).column(0)


@dataclass(frozen=True)
class RecordKey:
    """The record key of a dataset: its field names and Arrow types, and the one path by
    which every keyed entry point turns the keys it is given into the stored key values
    (:meth:`keys`, :meth:`conform`)."""

    dataset: str
    names: tuple[str, ...]
    schema: pa.Schema  # the key fields, in key order
    fields: tuple[KeyField, ...] = dataclasses.field(repr=False, compare=False, default=())
    ordering: KeyField | None = dataclasses.field(repr=False, compare=False, default=None)

    @classmethod
    def of(cls, descriptor: DatasetDescriptor, dataset: str) -> "RecordKey":
        if not descriptor.record_key:
            raise CdkdsError(f"dataset {dataset!r} has no record key; set one with DatasetDescriptor(record_key=...)")
        full = descriptor.arrow_schema
        avro = {f["name"]: f for f in descriptor.schema["fields"]}
        fields = tuple(KeyField(n, "record key field", full.field(n).with_nullable(False), avro[n], False)
                       for n in descriptor.record_key)
        o = descriptor.ordering_field
        ordering = KeyField(o, "ordering field", full.field(o).with_nullable(True), avro[o], True) if o else None
        return cls(dataset, tuple(descriptor.record_key), pa.schema([f.field for f in fields]), fields, ordering)

    def describe(self, table: pa.Table | pa.RecordBatch, row: int) -> str:
        """The key of ``row`` for error messages, as ``{'tenant': 'nz', 'userId': 1234}``."""
        return repr({n: table.column(n)[row].as_py() for n in self.names})

    def check(self, table: pa.Table | pa.RecordBatch, what: str = "row") -> None:
        """:class:`InvalidKeyError` naming the dataset, the field and the row when a key
        field is missing or null."""
        for name in self.names:
            if name not in table.schema.names:
                raise InvalidKeyError(f"dataset {self.dataset!r}: the {what}s have no record key field {name!r} "
                                      f"(the key is {list(self.names)}; columns given: {table.schema.names})")
            column = table.column(name)
            if column.null_count:
                row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
                raise InvalidKeyError(f"dataset {self.dataset!r}: record key field {name!r} is null in {what} {row} "
                                      f"({ {n: table.column(n)[row].as_py() for n in table.schema.names} !r:.300})")

    def conform(self, table: pa.Table | pa.RecordBatch, what: str = "row") -> pa.Table:
        """``table`` (rows or keys) with its key columns checked (present, not null) and
        normalised by the schema's rules, in the key's types: the key values an index
        entry holds. :class:`InvalidKeyError` naming the dataset, the field and the value."""
        table = pa.Table.from_batches([table]) if isinstance(table, pa.RecordBatch) else table
        self.check(table, what)
        for f in self.fields:
            i = table.schema.get_field_index(f.name)
            table = table.set_column(i, f.field, f.column(table.column(i), self.dataset))
        return table

    def keys(self, keys: Any, ordering: bool = False) -> pa.Table:
        """Keys given as dicts, tuples (in key order), single values (one-field keys), or an
        Arrow table/batch (or a frame, see :func:`arrow_table`) of the key columns, as a
        table of the key columns with the key's types, normalised as :meth:`conform` does;
        :class:`InvalidKeyError` for a wrong arity, unknown field, wrong type, value out of
        range or null, or a lone value (``"abc"`` is not the keys ``a``, ``b``, ``c``).
        ``ordering``: a key may give the ordering field too (a delete's), a last column,
        null where not given."""
        extra = (self.ordering,) if ordering and self.ordering is not None else ()
        table = arrow_table(keys)
        if table is not None:
            keys = table
            allowed = [*self.names, *(f.name for f in extra)]
            unknown = [n for n in keys.schema.names if n not in allowed]
            if unknown:
                raise InvalidKeyError(f"dataset {self.dataset!r}: {unknown[0]!r} is not a record key field "
                                      f"(the key is {list(self.names)})")
            table = self.conform(keys, "key")
            columns = [table.column(n) for n in self.names]
            for f in extra:
                given = f.name in table.schema.names
                columns.append(f.column(table.column(f.name), self.dataset) if given else pa.nulls(len(table), f.field.type))
            return pa.Table.from_arrays(columns, schema=pa.schema([*self.schema, *(f.field for f in extra)]))
        if isinstance(keys, abc.Mapping):
            keys = [keys]
        elif isinstance(keys, (str, bytes, bytearray)) or not isinstance(keys, abc.Iterable):
            raise InvalidKeyError(f"dataset {self.dataset!r}: keys are dicts, tuples or values in an iterable, or an "
                                  f"Arrow table; got {type(keys).__name__}: {keys!r:.100}")
        fields = (*self.fields, *extra)
        allowed = frozenset(f.name for f in fields)
        rows = [self._values(k, i, fields, allowed) for i, k in enumerate(keys)]
        columns = [pa.array([f.value(v, self.dataset, i) for i, v in enumerate(values)], f.field.type)
                   for f, values in zip(fields, zip(*rows) if rows else [()] * len(fields))]
        return pa.Table.from_arrays(columns, schema=pa.schema([f.field for f in fields]))

    def _values(self, key: Any, i: int, fields: tuple[KeyField, ...], allowed: frozenset[str]) -> tuple:
        """The values of ``fields`` in key ``i`` (a field beyond the key's may be left out)."""
        if isinstance(key, abc.Mapping):
            unknown = [n for n in key if n not in allowed] if not key.keys() <= allowed else ()
            missing = [n for n in self.names if n not in key]
            if unknown or missing:
                problem = f"has no field {missing[0]!r}" if missing else f"has {unknown[0]!r}, not a key field"
                raise InvalidKeyError(f"dataset {self.dataset!r}: key {i} ({dict(key)!r:.200}) {problem}; "
                                      f"the key is {list(self.names)}")
            return tuple(map(key.get, [f.name for f in fields]))
        values = tuple(key) if isinstance(key, (tuple, list)) else (key,)
        if len(values) != len(self.names):
            raise InvalidKeyError(f"dataset {self.dataset!r}: key {i} ({key!r:.200}) has {len(values)} value(s); "
                                  f"the key is {list(self.names)}")
        return values + (None,) * (len(fields) - len(values))

    def hashes(self, table: pa.Table | pa.RecordBatch) -> np.ndarray:
        """The 64-bit hash of each row's key (uint64)."""
        h = np.zeros(table.num_rows, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for name in self.names:
                h = _splitmix(h * _GOLDEN ^ _column_hash(table.column(name)))
        return h

    def buckets(self, hashes: np.ndarray, buckets: int) -> np.ndarray:
        """The index bucket of each hash."""
        return (hashes % np.uint64(buckets)).astype(np.int64)
