"""Avro data files through fastavro, converted to and from Arrow batches."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping

import fastavro
import fastavro.write
import numpy as np
import pyarrow as pa

from cdkds.formats.errors import DataFileError
from cdkds.formats.files import DEFAULT_BATCH_ROWS, KeepRowGroup, Split, WrittenFile, open_data_file, stream_at
from cdkds.formats.records import to_records
from cdkds.formats.projection import Projection
from cdkds.formats.schema import arrow_field, to_arrow, type_kind, unwrap
from cdkds.formats.statistics import StatisticsCollector

_CODECS = {"snappy": "snappy", "deflate": "deflate", "zstd": "zstandard", "null": "null", "none": "null"}


def uuids_as_text(avro: Any) -> Callable[[Any], Any] | None:
    """For a field type holding UUIDs (at any depth): a function turning the ``uuid.UUID``
    objects fastavro reads in a value of it back into their text; ``None`` if it holds none."""
    ft = unwrap(avro)
    kind = type_kind(ft.avro)
    if kind == "uuid":
        return lambda v: None if v is None else str(v)
    if kind == "record":
        inner = {f["name"]: f for f in ft.avro["fields"]}
        fixes = {n: fix for n, f in inner.items() if (fix := uuids_as_text(f["type"])) is not None}
        if fixes:
            return lambda v: None if v is None else {**v, **{n: fix(v.get(n)) for n, fix in fixes.items()}}
    if kind in ("array", "map"):
        fix = uuids_as_text(ft.avro["items"] if kind == "array" else ft.avro["values"])
        if fix is not None and kind == "array":
            return lambda v: None if v is None else [fix(x) for x in v]
        if fix is not None:
            return lambda v: None if v is None else {k: fix(x) for k, x in v.items()}
    return None


class AvroFileWriter:
    def __init__(self, fs: Any, path: str, avro_schema: dict, arrow_schema: pa.Schema, compression: str,
                 metadata: Mapping[str, str]):
        self.path = path
        self._fs = fs
        self._stream = fs.open(path, "wb")
        self._writer = fastavro.write.Writer(self._stream, fastavro.parse_schema(avro_schema),
                                             codec=_CODECS[compression], metadata=dict(metadata))
        self._statistics = StatisticsCollector(arrow_schema)

    @property
    def bytes_written(self) -> int:
        return self._stream.tell()

    @property
    def buffered_bytes(self) -> int:
        return 0  # fastavro writes a block every few kilobytes

    def flush_buffer(self) -> None:
        pass

    def write(self, batch: pa.RecordBatch) -> None:
        self._statistics.update(batch)
        for record in to_records(batch):
            self._writer.write(record)

    def close(self) -> WrittenFile:
        self._writer.flush()
        size = self._stream.tell()
        self._stream.close()
        return WrittenFile(self.path, size, self._statistics.row_count, self._statistics.result())

    def abort(self) -> None:
        try:
            self._stream.close()
        finally:
            if self._fs.exists(self.path):
                self._fs.rm(self.path)


class AvroFormat:
    name = "avro"
    extension = "avro"
    splittable = False  # (sync-marker splits: files are written at most targetFileSize, rarely worth it)
    compressions = frozenset({"snappy", "deflate", "zstd", "null", "none"})

    def open_writer(self, fs: Any, path: str, avro_schema: dict, arrow_schema: pa.Schema,
                    compression: str, metadata: Mapping[str, str], keyed: bool = False) -> AvroFileWriter:
        return AvroFileWriter(fs, path, avro_schema, arrow_schema, compression, metadata)

    def read_at(self, fs: Any, path: str, projection: Projection, positions: np.ndarray,
                size: int | None = None) -> Iterator[tuple[int, pa.RecordBatch]]:
        return stream_at(self.read(fs, path, projection, size=size), positions)

    def scan(self, fs: Any, path: str, projection: Projection, batch_rows: int = DEFAULT_BATCH_ROWS,
             size: int | None = None, split: Split | None = None, keep: KeepRowGroup | None = None
             ) -> Iterator[tuple[int, pa.RecordBatch]]:
        if split is not None and split.start > 0:
            raise ValueError(f"data file {path}: Avro files are read whole, not from byte {split.start}")
        position = 0
        for batch in self.read(fs, path, projection, batch_rows, size):
            yield position, batch
            position += batch.num_rows

    def read(self, fs: Any, path: str, projection: Projection, batch_rows: int = DEFAULT_BATCH_ROWS,
             size: int | None = None) -> Iterator[pa.RecordBatch]:
        with open_data_file(fs, path, size) as f:
            try:
                reader = fastavro.reader(f)
            except FileNotFoundError:
                raise
            except Exception as e:  # fastavro raises ValueError, EOFError, its own types...
                raise DataFileError(f"data file {path} is not a readable Avro file: {e}") from None
            writer = reader.writer_schema  # with the field ids it was written with
            present = {fl["name"]: fl["type"] for fl in writer["fields"]}
            resolved = projection.resolve(to_arrow(writer, ids=True), path)
            names = resolved.read_columns
            wanted = pa.schema([arrow_field(name, present[name]) for name in names])
            texts = {name: as_text for name in names if (as_text := uuids_as_text(present[name])) is not None}
            rows: list[dict] = []
            for record in reader:
                row = {name: record[name] for name in names}
                for name, as_text in texts.items():
                    row[name] = as_text(row[name])
                rows.append(row)
                if len(rows) >= batch_rows:
                    yield resolved.apply(pa.RecordBatch.from_pylist(rows, schema=wanted))
                    rows = []
            if rows:
                yield resolved.apply(pa.RecordBatch.from_pylist(rows, schema=wanted))

    def metadata(self, fs: Any, path: str) -> dict[str, str]:
        with open_data_file(fs, path) as f:
            meta = fastavro.reader(f).metadata
        return {k: v for k, v in meta.items() if k.startswith("cdkds.")}


AVRO = AvroFormat()
