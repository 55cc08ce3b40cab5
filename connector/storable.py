"""What of Spark's rows cdkds can store, checked before they reach the files: a struct
column needs a field (Parquet and Avro have no empty group), and a timestamp must lie in
years 1-9999 in UTC (a session time zone can show a later instant as 9999-12-31, which
the files' statistics and Python's datetime cannot hold).

This module imports only pyspark and pyarrow; the writer imports it when a job runs.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

_MIN_SECONDS, _MAX_SECONDS = -62_135_596_800, 253_402_300_800  # 0001-01-01 and 10000-01-01, UTC
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def check_storable_schema(dataset: str, schema: StructType) -> None:
    """Refuse a DataFrame with a struct column of no fields (at any depth), naming it."""
    from cdkds.formats.errors import SchemaMismatchError

    for path in _empty_structs(schema, ""):
        raise SchemaMismatchError(f"dataset {dataset!r}: column {path!r} is a struct with no fields, which "
                                  f"Parquet and Avro cannot store; drop it or give it a field")


def _empty_structs(data_type: DataType, path: str) -> Iterator[str]:
    if isinstance(data_type, StructType):
        if not data_type.fields and path:
            yield path
        for f in data_type.fields:
            yield from _empty_structs(f.dataType, f"{path}.{f.name}" if path else f.name)
    elif isinstance(data_type, ArrayType):
        yield from _empty_structs(data_type.elementType, f"{path}[]")
    elif isinstance(data_type, MapType):
        yield from _empty_structs(data_type.keyType, f"{path}{{key}}")
        yield from _empty_structs(data_type.valueType, f"{path}{{value}}")


def check_storable_batch(dataset: str, batch: pa.RecordBatch) -> None:
    """Refuse a batch holding a timestamp outside years 1-9999 in UTC, naming the column
    and the value (as seconds since the epoch: no date type can show it)."""
    from cdkds.catalog.errors import InvalidRecordError

    for name, column in zip(batch.schema.names, batch.columns):
        for path, times in _timestamps(column, name):
            unit = times.type.unit
            ticks = times.cast(pa.int64())
            if ticks.null_count == len(ticks):
                continue
            low, high = pc.min_max(ticks).values()
            lowest, highest = _MIN_SECONDS * _PER_SECOND[unit], _MAX_SECONDS * _PER_SECOND[unit]
            bad = low.as_py() if low.as_py() < lowest else high.as_py() if high.as_py() >= highest else None
            if bad is not None:
                raise InvalidRecordError(
                    f"dataset {dataset!r}: column {path!r} holds a timestamp outside years 1-9999 in UTC "
                    f"({bad / _PER_SECOND[unit]:.0f} s from 1970-01-01T00:00:00Z), which cdkds cannot store; "
                    f"a session time zone can show it inside 9999 (set spark.sql.session.timeZone=UTC to see it)")


def _timestamps(array: pa.Array, path: str) -> Iterator[tuple[str, pa.Array]]:
    """The timestamp arrays in ``array`` (a column, or nested in it), with their paths."""
    if isinstance(array, pa.ChunkedArray):
        for chunk in array.chunks:
            yield from _timestamps(chunk, path)
        return
    t = array.type
    if pa.types.is_timestamp(t):
        yield path, array
    elif pa.types.is_struct(t):
        for i in range(t.num_fields):
            yield from _timestamps(array.field(i), f"{path}.{t.field(i).name}")
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        yield from _timestamps(array.flatten(), f"{path}[]")
    elif pa.types.is_map(t):
        yield from _timestamps(array.keys, f"{path}{{key}}")
        yield from _timestamps(array.items, f"{path}{{value}}")


def storable_batches(dataset: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches``, each checked by :func:`check_storable_batch` as it passes."""
    for batch in batches:
        check_storable_batch(dataset, batch)
        yield batch
