"""Parquet data files through pyarrow."""

from __future__ import annotations

from typing import Any, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cdkds.formats.errors import DataFileError
from cdkds.formats.files import DEFAULT_BATCH_ROWS, WrittenFile
from cdkds.formats.projection import FileProjection, Projection
from cdkds.formats.schema import to_arrow
from cdkds.formats.statistics import StatisticsCollector

ROW_GROUP_ROWS = 131_072
ROW_GROUP_BYTES = 64 * 1024 * 1024


class ParquetFileWriter:
    """Buffers batches up to one row group, so small batches do not make tiny row groups."""

    def __init__(self, fs: Any, path: str, avro_schema: dict, schema: pa.Schema, compression: str,
                 metadata: Mapping[str, str]):
        self.path = path
        self._fs = fs
        self._schema = schema
        self._stream = fs.open(path, "wb")
        try:  # the file's schema carries the field ids: files are read by id
            self._writer = pq.ParquetWriter(self._stream, to_arrow(avro_schema, ids=True).with_metadata(dict(metadata)),
                                            compression=compression)
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
        self._statistics.update(batch)
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        self._pending_bytes += batch.nbytes
        if self._pending_rows >= ROW_GROUP_ROWS or self._pending_bytes >= ROW_GROUP_BYTES:
            self._flush_row_group()

    def _flush_row_group(self) -> None:
        if self._pending:
            self._writer.write_table(pa.Table.from_batches(self._pending, schema=self._schema),
                                     row_group_size=max(self._pending_rows, 1))
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
    compressions = frozenset({"snappy", "zstd", "gzip", "none"})

    def open_writer(self, fs: Any, path: str, avro_schema: dict, arrow_schema: pa.Schema,
                    compression: str, metadata: Mapping[str, str]) -> ParquetFileWriter:
        return ParquetFileWriter(fs, path, avro_schema, arrow_schema, compression, metadata)

    def read(self, fs: Any, path: str, projection: Projection, batch_rows: int = DEFAULT_BATCH_ROWS,
             size: int | None = None) -> Iterator[pa.RecordBatch]:
        with fs.open(path, "rb", **({"size": size} if size is not None else {})) as f:
            parquet, resolved = _open(f, path, projection)
            for batch in parquet.iter_batches(batch_size=batch_rows, columns=resolved.read_columns):
                yield resolved.apply(batch)

    def read_at(self, fs: Any, path: str, projection: Projection, positions: np.ndarray,
                size: int | None = None) -> Iterator[tuple[int, pa.RecordBatch]]:
        with fs.open(path, "rb", **({"size": size} if size is not None else {})) as f:
            parquet, resolved = _open(f, path, projection)
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
        with fs.open(path, "rb") as f:
            raw = pq.read_metadata(f).metadata or {}
        return {k.decode(): v.decode() for k, v in raw.items() if k.startswith(b"cdkds.")}


def _open(f: Any, path: str, projection: Projection) -> tuple[pq.ParquetFile, FileProjection]:
    """The Parquet file behind ``f`` and how to read the projection's fields out of it."""
    try:
        parquet = pq.ParquetFile(f)
    except FileNotFoundError:
        raise
    except (pa.ArrowInvalid, OSError) as e:
        raise DataFileError(f"data file {path} is not a readable Parquet file: {e}") from None
    return parquet, projection.resolve(parquet.schema_arrow, path)


PARQUET = ParquetFormat()
