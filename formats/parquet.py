"""Parquet data files through pyarrow."""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cdkds.formats.cache import BoundedCache
from cdkds.formats.errors import DataFileError
from cdkds.formats.files import DEFAULT_BATCH_ROWS, KeepRowGroup, Split, WrittenFile, open_data_file
from cdkds.formats.nulls import writable_batch
from cdkds.formats.projection import FileProjection, Projection
from cdkds.formats.schema import to_arrow
from cdkds.formats.statistics import MAX_BOUND_LENGTH, ColumnStatistics, StatisticsCollector

ROW_GROUP_ROWS = 131_072
KEYED_ROW_GROUP_ROWS = 32_768  # a read by key decodes one row group: 4x fewer rows for scans 10-15% slower
ROW_GROUP_BYTES = 64 * 1024 * 1024
# a column falls back from dictionary to plain encoding once its dictionary passes this:
# pyarrow's 1 MiB keeps unique keys, e-mails and scores dictionary-encoded through a whole
# row group — 125k rows of the keyed benchmark: 36 ms to encode, 2.65 MB; at 64 KiB 21 ms,
# 2.09 MB, and a scan 30 % faster; columns of a few thousand values keep their dictionary
DICTIONARY_PAGE_BYTES = 64 * 1024
THREADED_ABOVE = 4 * 1024 * 1024  # smaller files decode faster on one thread (pyarrow's dispatch costs more)


def parquet_in_memory(data: bytes | bytearray | memoryview, **options: Any) -> pq.ParquetFile:
    """A Parquet file whose bytes are in memory (a checkpoint, an index file), read on the
    calling thread (``.read()``, ``.schema_arrow``): ``options`` go to ``pq.ParquetFile``.

    The bytes are copied into Arrow's own memory, so no Arrow object refers to a Python one.
    Freeing a reference to a Python object takes Python's lock, and Arrow's threads free the
    last references of a ``pq.read_table`` (a dataset scan) after it has returned: when the
    interpreter was tearing down by then, the process aborted ("terminate called without an
    active exception", exit code 134). Never hand Arrow a Python file or bytes to read on
    its own threads."""
    sink = pa.BufferOutputStream()
    sink.write(data)
    return pq.ParquetFile(pa.BufferReader(sink.getvalue()), **options)


class ParquetFileWriter:
    """Buffers batches up to one row group, so small batches do not make tiny row groups."""

    def __init__(self, fs: Any, path: str, avro_schema: dict, schema: pa.Schema, compression: str,
                 metadata: Mapping[str, str], row_group_rows: int = ROW_GROUP_ROWS):
        self.path = path
        self._row_group_rows = row_group_rows
        self._fs = fs
        self._schema = schema
        self._stream = fs.open(path, "wb")
        try:  # the file's schema carries the field ids: files are read by id
            self._writer = pq.ParquetWriter(self._stream, to_arrow(avro_schema, ids=True).with_metadata(dict(metadata)),
                                            compression=compression, dictionary_pagesize_limit=DICTIONARY_PAGE_BYTES)
        except BaseException:
            self._stream.close()
            raise
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self._statistics = StatisticsCollector(schema)

    @property
    def bytes_written(self) -> int:
        return self._stream.tell() + self._pending_bytes

    @property
    def buffered_bytes(self) -> int:
        return self._pending_bytes

    def flush_buffer(self) -> None:
        self._flush_row_group()

    def write(self, batch: pa.RecordBatch) -> None:
        batch = writable_batch(batch)  # a null a null record hides is no null to Parquet's writer
        self._statistics.update(batch)
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        self._pending_bytes += batch.nbytes
        if self._pending_rows >= self._row_group_rows or self._pending_bytes >= ROW_GROUP_BYTES:
            self._flush_row_group()

    def _flush_row_group(self) -> None:  # a large batch becomes several row groups: pruning and splits go by them
        if self._pending:
            self._writer.write_table(pa.Table.from_batches(self._pending, schema=self._schema),
                                     row_group_size=min(max(self._pending_rows, 1), self._row_group_rows))
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0

    def close(self) -> WrittenFile:
        self._flush_row_group()
        self._writer.close()
        size = self._stream.tell()
        self._stream.close()
        return WrittenFile(self.path, size, self._statistics.row_count, self._statistics.result())

    def abort(self) -> None:
        try:
            self._writer.close()
            self._stream.close()
        finally:
            if self._fs.exists(self.path):
                self._fs.rm(self.path)


class ParquetFormat:
    name = "parquet"
    extension = "parquet"
    splittable = True
    compressions = frozenset({"snappy", "zstd", "gzip", "none"})

    def open_writer(self, fs: Any, path: str, avro_schema: dict, arrow_schema: pa.Schema,
                    compression: str, metadata: Mapping[str, str], keyed: bool = False) -> ParquetFileWriter:
        return ParquetFileWriter(fs, path, avro_schema, arrow_schema, compression, metadata,
                                 KEYED_ROW_GROUP_ROWS if keyed else ROW_GROUP_ROWS)

    def scan(self, fs: Any, path: str, projection: Projection, batch_rows: int = DEFAULT_BATCH_ROWS,
             size: int | None = None, split: Split | None = None, keep: KeepRowGroup | None = None
             ) -> Iterator[tuple[int, pa.RecordBatch]]:
        with open_data_file(fs, path, size) as f:
            parquet, resolved = _open(f, path, projection)
            meta = parquet.metadata
            statistics = _RowGroupStatistics(parquet.schema_arrow, resolved) if keep is not None else None
            chosen, start = [], 0
            for group in range(meta.num_row_groups):
                row_group = meta.row_group(group)
                if (split is None or split.holds(*_byte_range(row_group))) and \
                        (statistics is None or keep(row_group.num_rows, statistics.of(row_group))):
                    chosen.append((group, start))
                start += row_group.num_rows
            # row groups read together must be contiguous: pyarrow's batches run across them
            for run in _contiguous(chosen):
                position = run[0][1]
                for batch in parquet.iter_batches(batch_size=batch_rows, row_groups=[g for g, _ in run], use_threads=size is None or size > THREADED_ABOVE,
                                                  columns=resolved.read_columns):
                    yield position, resolved.apply(batch)
                    position += batch.num_rows

    def read(self, fs: Any, path: str, projection: Projection, batch_rows: int = DEFAULT_BATCH_ROWS,
             size: int | None = None) -> Iterator[pa.RecordBatch]:
        for _, batch in self.scan(fs, path, projection, batch_rows, size):
            yield batch

    def read_at(self, fs: Any, path: str, projection: Projection, positions: np.ndarray,
                size: int | None = None) -> Iterator[tuple[int, pa.RecordBatch]]:
        """Reads only the row groups holding ``positions``; with a known ``size`` the
        file's footer is cached (a data file never changes), so a read by key of a file
        read before costs one request a row group."""
        with open_data_file(fs, path, size) as f:
            parquet, resolved = _open(f, path, projection, FOOTERS if size is not None else None, size)
            columns = resolved.read_columns
            start = 0
            for group in range(parquet.num_row_groups):
                rows = parquet.metadata.row_group(group).num_rows
                lo, hi = np.searchsorted(positions, [start, start + rows])
                if hi > lo:
                    for batch in parquet.read_row_group(group, columns=columns).to_batches():
                        yield start, resolved.apply(batch)
                        start += batch.num_rows
                else:
                    start += rows

    def metadata(self, fs: Any, path: str) -> dict[str, str]:
        with open_data_file(fs, path) as f:
            raw = pq.read_metadata(f).metadata or {}
        return {k.decode(): v.decode() for k, v in raw.items() if k.startswith(b"cdkds.")}


# footers of data files read by position, by path and size: a wide file's footer is megabytes
FOOTERS: BoundedCache[pq.FileMetaData] = BoundedCache(64 << 20, lambda m: m.serialized_size)


def _open(f: Any, path: str, projection: Projection, footers: BoundedCache[pq.FileMetaData] | None = None,
          size: int | None = None) -> tuple[pq.ParquetFile, FileProjection]:
    """The Parquet file behind ``f`` and how to read the projection's fields out of it
    (its footer from ``footers`` when they hold it, and kept there)."""
    try:
        cached = footers.get((path, size)) if footers is not None else None
        parquet = pq.ParquetFile(f, metadata=cached)
        if footers is not None and cached is None:
            footers.put((path, size), parquet.metadata)
    except FileNotFoundError:
        raise
    except (pa.ArrowInvalid, OSError) as e:
        raise DataFileError(f"data file {path} is not a readable Parquet file: {e}") from None
    return parquet, projection.resolve(parquet.schema_arrow, path)


def _byte_range(row_group: pq.RowGroupMetaData) -> tuple[int, int]:
    """The bytes a row group's column chunks take in its file."""
    first, last = None, 0
    for i in range(row_group.num_columns):
        column = row_group.column(i)
        begin = column.data_page_offset
        if column.has_dictionary_page and column.dictionary_page_offset:
            begin = min(begin, column.dictionary_page_offset)
        first = begin if first is None else min(first, begin)
        last = max(last, begin + column.total_compressed_size)
    return (first or 0), last


def _contiguous(chosen: Sequence[tuple[int, int]]) -> Iterator[list[tuple[int, int]]]:
    """``(row group, first row)`` pairs in runs of consecutive row groups."""
    run: list[tuple[int, int]] = []
    for item in chosen:
        if run and item[0] != run[-1][0] + 1:
            yield run
            run = []
        run.append(item)
    if run:
        yield run


class _RowGroupStatistics:
    """A row group's Parquet statistics as :class:`ColumnStatistics` of the reader's fields:
    top-level columns with a single leaf, bounds converted as the column's values are
    (a widened field's bounds widened). Bounds pyarrow cannot convert are left out."""

    def __init__(self, file_schema: pa.Schema, resolved: FileProjection):
        first_leaf = _first_leaves(file_schema)
        self._columns = []
        for name, column, convert in resolved.sources():
            file_type = file_schema.field(column).type
            if not pa.types.is_nested(file_type):
                self._columns.append((name, first_leaf[column], file_type, convert))

    def of(self, row_group: pq.RowGroupMetaData) -> dict[str, ColumnStatistics]:
        out = {}
        for name, leaf, file_type, convert in self._columns:
            stats = row_group.column(leaf).statistics
            if stats is None or not stats.has_null_count:
                continue
            if not stats.has_min_max:
                out[name] = ColumnStatistics(stats.null_count)
                continue
            try:
                lo, hi = convert(pa.array([stats.min, stats.max], type=file_type)).to_pylist()
            except (pa.ArrowException, DataFileError, TypeError, ValueError, OverflowError):
                out[name] = ColumnStatistics(stats.null_count)
                continue
            out[name] = ColumnStatistics(stats.null_count, lo, hi)
        return out


def footer_statistics(parquet: pq.ParquetFile, resolved: FileProjection) -> dict[str, ColumnStatistics]:
    """Per-field statistics of a whole file from its footer (no row is read), as a writer's
    :class:`~cdkds.formats.statistics.StatisticsCollector` keeps them: a field some row group
    has no statistics for is left out, and bounds where the collector would keep none
    (floating columns, whose Parquet bounds leave NaN out; strings and bytes longer than
    :data:`~cdkds.formats.statistics.MAX_BOUND_LENGTH`; a row group with values but no bounds)."""
    groups = _RowGroupStatistics(parquet.schema_arrow, resolved)
    floating = {f.name for f in resolved.schema if pa.types.is_floating(f.type)}
    merged: dict[str, tuple[int, Any, Any, bool]] = {}  # nulls, min, max, bounds known
    for i in range(parquet.num_row_groups):
        group = parquet.metadata.row_group(i)
        found = groups.of(group)
        names = found.keys() if i == 0 else merged.keys() & found.keys()
        out = {}
        for n in names:
            s = found[n]
            nulls, lo, hi, known = merged.get(n, (0, None, None, True))
            if s.min is not None:
                lo, hi = (s.min, s.max) if lo is None else (min(lo, s.min), max(hi, s.max))
            elif s.null_count < group.num_rows:  # values whose bounds the footer does not give
                known = False
            out[n] = (nulls + s.null_count, lo, hi, known)
        merged = out
    result = {}
    for name, (nulls, lo, hi, known) in merged.items():
        long = any(isinstance(v, (str, bytes)) and len(v) > MAX_BOUND_LENGTH for v in (lo, hi))
        keep = known and lo is not None and name not in floating and not long
        result[name] = ColumnStatistics(nulls, lo, hi) if keep else ColumnStatistics(nulls)
    return result


def _first_leaves(schema: pa.Schema) -> dict[str, int]:
    """Each top-level column's first leaf column index in the Parquet file."""
    out, leaf = {}, 0
    for f in schema:
        out[f.name] = leaf
        leaf += _leaf_count(f.type)
    return out


def _leaf_count(t: pa.DataType) -> int:
    if pa.types.is_struct(t):
        return sum(_leaf_count(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaf_count(t.value_type)
    if pa.types.is_map(t):
        return _leaf_count(t.key_type) + _leaf_count(t.item_type)
    return 1


PARQUET = ParquetFormat()
