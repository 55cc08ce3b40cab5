"""Adopting a source's files: the actions of a converted dataset's first commit.

Each file becomes an ``add`` with its size, row count and per-column statistics — from
its own Parquet footer (no row is read), or by reading it for Avro — and, where the source
had deleted rows of it, a ``deleteRows`` of those positions (docs/FORMAT.md §9). Files are
never copied or rewritten; a file that cannot be read is named.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cdkds.catalog.convert.source import SourceFile
from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import ConversionError, StorageError
from cdkds.catalog.keyed.deletion import DeletionVector, DeletionVectorRef
from cdkds.catalog.log.actions import AddFile, DeleteRows, dataset_path
from cdkds.catalog.storage import ObjectStore
from cdkds.formats.files import file_format, open_data_file
from cdkds.formats.parquet import footer_statistics
from cdkds.formats.errors import DataFileError
from cdkds.formats.projection import AsStored, FileProjection, PartitionValue
from cdkds.formats.statistics import ColumnStatistics, StatisticsCollector


def adopted(store: ObjectStore, descriptor: DatasetDescriptor, source: SourceFile) -> AddFile:
    """The ``add`` of ``source`` (a file of the dataset at ``store``)."""
    where = store.display(source.path)
    try:
        path = dataset_path(source.path, "data file")
    except ValueError as e:
        raise ConversionError(str(e)) from None
    try:
        size = store.size(path)
        rows, statistics = (_parquet_statistics if descriptor.format == "parquet" else _read_statistics)(
            store, descriptor, source)
    except (ConversionError, StorageError):
        raise
    except Exception as e:  # noqa: BLE001 - whatever the reader raises, the file cannot be adopted
        raise ConversionError(f"data file {where} cannot be read: {type(e).__name__}: {e}") from None
    # the log keeps no schema version for it: readers learn its columns from its footer
    return AddFile(path, dict(source.partition), size, rows, statistics, schema_version=-1)


def deletion(store: ObjectStore, add: AddFile, source: SourceFile) -> DeleteRows | None:
    """The ``deleteRows`` of the positions the source deleted of ``add``, if any (a sidecar
    is written for a large vector)."""
    if source.deleted is None or not len(source.deleted):
        return None
    positions = np.unique(np.asarray(source.deleted, dtype=np.int64))
    if positions[0] < 0 or positions[-1] >= add.row_count:
        raise ConversionError(f"data file {store.display(add.path)} has {add.row_count} rows, but its source deletes "
                              f"row {positions[-1] if positions[-1] >= add.row_count else positions[0]}")
    return DeleteRows(add.path, DeletionVectorRef.store(store, DeletionVector.of(positions)))


def _parquet_statistics(store: ObjectStore, descriptor: DatasetDescriptor, source: SourceFile
                        ) -> tuple[int, dict[str, ColumnStatistics]]:
    projection = descriptor.projection(partition=source.partition)
    with open_data_file(store.fs, store.path(source.path)) as f:
        parquet = pq.ParquetFile(f)
        resolved = projection.resolve(parquet.schema_arrow, store.display(source.path))
        rows = parquet.metadata.num_rows
        statistics = footer_statistics(parquet, resolved)
        _check_casts(parquet, resolved, store.display(source.path))
    for reader, target in zip(resolved.readers, resolved.schema):
        if isinstance(reader, PartitionValue):
            statistics[target.name] = _constant_statistics(reader.value, target.type, rows)
    return rows, statistics


def _check_casts(parquet: pq.ParquetFile, resolved: FileProjection, where: str) -> None:
    """The columns the dataset reads through a cast (nanosecond timestamps, kept as
    microseconds; narrow integers), at any depth, read and cast once: a value the dataset's
    type cannot hold (a timestamp with nanoseconds) is named now, not at every read after
    the commit."""
    casts = [(name, convert) for _, name, convert in resolved.sources() if not isinstance(convert, AsStored)]
    if not casts:
        return
    table = parquet.read(columns=[name for name, _ in casts])
    for name, convert in casts:
        try:
            convert(table.column(name).combine_chunks())
        except DataFileError as e:
            raise ConversionError(f"data file {where} cannot be adopted: {e}") from None


def _constant_statistics(value: Any, t: pa.DataType, rows: int) -> ColumnStatistics:
    """What a column of ``rows`` copies of ``value`` holds, kept as a writer keeps it."""
    if rows == 0:
        return ColumnStatistics(0)  # no value: no bounds
    collector = StatisticsCollector(pa.schema([pa.field("v", t)]))
    collector.update(pa.record_batch([pa.array([value], t)], names=["v"]))
    one = collector.result()["v"]
    return ColumnStatistics(rows if value is None else 0, one.min, one.max)


def _read_statistics(store: ObjectStore, descriptor: DatasetDescriptor, source: SourceFile
                     ) -> tuple[int, dict[str, ColumnStatistics]]:
    projection = descriptor.projection(partition=source.partition)
    collector = StatisticsCollector(projection.arrow_schema)
    for batch in file_format(descriptor.format).read(store.fs, store.path(source.path), projection):
        collector.update(batch)
    return collector.row_count, collector.result()
