"""Record keys: checking them, hashing them and the index bucket they belong to.

A key's hash is a stable 64-bit function of its values (not of their Arrow types: an
``int`` promoted to ``long`` hashes the same): integers and temporal values as their
int64 value, strings and bytes as FNV-1a of their bytes, each mixed by splitmix64 and
combined column by column. ``bucket = hash % buckets``; the index sorts a bucket's
entries by hash, so a lookup reads only the row groups whose hash range may hold a key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pyarrow as pa

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import CdkdsError, InvalidKeyError

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


def _column_hash(array: pa.Array) -> np.ndarray:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    t = array.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or \
            pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        values = _bytes_hash(array)
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


@dataclass(frozen=True)
class RecordKey:
    """The record key of a dataset: its field names and Arrow types."""

    dataset: str
    names: tuple[str, ...]
    schema: pa.Schema  # the key fields, in key order

    @classmethod
    def of(cls, descriptor: DatasetDescriptor, dataset: str) -> "RecordKey":
        if not descriptor.record_key:
            raise CdkdsError(f"dataset {dataset!r} has no record key; set one with DatasetDescriptor(record_key=...)")
        full = descriptor.arrow_schema
        return cls(dataset, tuple(descriptor.record_key), pa.schema([full.field(n) for n in descriptor.record_key]))

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

    def keys(self, keys: Any) -> pa.Table:
        """Keys given as dicts, tuples (in key order), single values (one-field keys), or an
        Arrow table/batch of the key columns, as a table of the key columns with the key's
        types; :class:`InvalidKeyError` for a wrong arity, unknown field, wrong type or null."""
        if isinstance(keys, (pa.Table, pa.RecordBatch)):
            extra = [n for n in keys.schema.names if n not in self.names]
            if extra:
                raise InvalidKeyError(f"dataset {self.dataset!r}: {extra[0]!r} is not a record key field "
                                      f"(the key is {list(self.names)})")
            self.check(keys, "key")
            table = pa.Table.from_batches([keys]) if isinstance(keys, pa.RecordBatch) else keys
            return self._cast(table.select(list(self.names)))
        if isinstance(keys, Mapping):
            keys = [keys]
        rows = [self._as_dict(k, i) for i, k in enumerate(keys)]
        columns = {n: [r[n] for r in rows] for n in self.names}
        try:
            table = pa.table(columns)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise InvalidKeyError(f"dataset {self.dataset!r}: keys of mixed types: {e}") from None
        self.check(table, "key")
        return self._cast(table)

    def _as_dict(self, key: Any, i: int) -> dict:
        if isinstance(key, Mapping):
            unknown = [n for n in key if n not in self.names]
            missing = [n for n in self.names if n not in key]
            if unknown or missing:
                problem = f"has no field {missing[0]!r}" if missing else f"has {unknown[0]!r}, not a key field"
                raise InvalidKeyError(f"dataset {self.dataset!r}: key {i} ({dict(key)!r:.200}) {problem}; "
                                      f"the key is {list(self.names)}")
            return dict(key)
        values = tuple(key) if isinstance(key, (tuple, list)) else (key,)
        if len(values) != len(self.names):
            raise InvalidKeyError(f"dataset {self.dataset!r}: key {i} ({key!r:.200}) has {len(values)} value(s); "
                                  f"the key is {list(self.names)}")
        return dict(zip(self.names, values))

    def _cast(self, table: pa.Table) -> pa.Table:
        columns = []
        for field in self.schema:
            column = table.column(field.name)
            try:
                columns.append(column.cast(field.type, safe=True))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                bad = _first_uncastable(column, field.type)
                raise InvalidKeyError(f"dataset {self.dataset!r}: record key field {field.name!r} is a {field.type}; "
                                      f"got {bad!r:.200}") from None
        return pa.Table.from_arrays(columns, schema=pa.schema([f.with_nullable(False) for f in self.schema]))

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


def _first_uncastable(column: pa.ChunkedArray | pa.Array, target: pa.DataType) -> Any:
    for value in column.to_pylist():
        try:
            pa.array([value]).cast(target, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return value
    return None

