"""Files to export into — Parquet, CSV, JSON lines, Avro — written batch by batch.

CSV and JSON lines follow the rules :mod:`cdkds.formats.inputs` reads by, so an exported file
imports back: nulls are unquoted empty CSV values (the empty string is ``""``), timestamps ISO
8601 (``Z`` for UTC), bytes and fixed base64, and in CSV arrays, maps and records JSON text.
JSON has no NaN or infinity: they are written as Python's json module writes them (``NaN``,
``Infinity``), which Python, Spark and cdkds read.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import decimal
import io
import json
import uuid
from typing import Any, Mapping

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from cdkds.formats.avro import AvroFileWriter
from cdkds.formats.errors import CdkdsError
from cdkds.formats.inputs import format_of
from cdkds.formats.nulls import writable_batch
from cdkds.formats.schema import from_arrow
from cdkds.formats.text import is_bytes

EXPORT_FORMATS = ("parquet", "csv", "jsonl", "avro")


class OutputError(CdkdsError, ValueError):
    """A file that cannot be written as asked (its format unknown, or it exists)."""


def output_format(path: str, format: str | None = None) -> str:
    """``format``, or the format the name tells (``.parquet``, ``.csv``, ``.jsonl``/``.json``/
    ``.ndjson``, ``.avro``)."""
    found = format_of(path, format)
    if found is None:
        raise OutputError(f"{path}: cannot tell the format to write from the name; name it .parquet, .csv, .jsonl "
                          f"or .avro, or give the format")
    if found not in EXPORT_FORMATS:
        raise OutputError(f"{path}: unknown format {format!r}; use one of {', '.join(EXPORT_FORMATS)}")
    return found


class OutputFile:
    """One file written batch by batch; ``close()`` finishes it and returns its size, ``abort()``
    removes it. Nothing is created before the first batch or ``close()``."""

    def __init__(self, path: str, schema: pa.Schema, format: str | None = None, fs: Any = None,
                 storage_options: Mapping[str, Any] | None = None, avro_schema: dict | None = None,
                 overwrite: bool = False):
        self.name = path
        self.format = output_format(path, format)
        if fs is None:
            fs, path = fsspec.core.url_to_fs(path, **dict(storage_options or {}))
        self.fs, self.path, self.schema = fs, path, schema
        if not overwrite and fs.exists(path):
            raise OutputError(f"{self.name} exists (and overwriting it was not asked for)")
        self.rows = 0
        self._avro_schema = avro_schema if avro_schema is not None else from_arrow(schema)
        self._sink: Any = None

    def _open(self) -> Any:
        if self._sink is None:
            parent = self.path.rsplit("/", 1)[0] if "/" in self.path else ""
            if parent:
                with contextlib.suppress(Exception):  # object stores have no folders to make
                    self.fs.makedirs(parent, exist_ok=True)
            if self.format == "avro":
                self._sink = _AvroSink(AvroFileWriter(self.fs, self.path, self._avro_schema, self.schema, "deflate", {}))
            else:
                sink = {"parquet": _ParquetSink, "csv": _CsvSink, "jsonl": _JsonLinesSink}[self.format]
                self._sink = sink(self.fs.open(self.path, "wb"), self.schema)
        return self._sink

    def write(self, batch: pa.RecordBatch) -> None:
        self._open().write(batch)
        self.rows += batch.num_rows

    def close(self) -> int:
        """Finish the file (an empty one if nothing was written); its size in bytes."""
        self._open().close()
        return int(self.fs.size(self.path))

    def abort(self) -> None:
        """Stop and remove what was written."""
        if self._sink is not None:
            with contextlib.suppress(Exception):
                self._sink.close()
        with contextlib.suppress(Exception):
            if self.fs.exists(self.path):
                self.fs.rm(self.path)


class _ParquetSink:
    def __init__(self, stream: Any, schema: pa.Schema):
        self.stream, self.writer = stream, pq.ParquetWriter(stream, schema, compression="snappy")

    def write(self, batch: pa.RecordBatch) -> None:
        self.writer.write_batch(writable_batch(batch))

    def close(self) -> None:
        try:
            self.writer.close()
        finally:
            self.stream.close()


class _CsvSink:
    def __init__(self, stream: Any, schema: pa.Schema):
        self.schema = pa.schema([pa.field(f.name, pa.string() if _as_text(f.type) else f.type) for f in schema])
        self.stream, self.writer = stream, pacsv.CSVWriter(stream, self.schema)

    def write(self, batch: pa.RecordBatch) -> None:
        columns = [_csv_column(c) if _as_text(c.type) else c for c in batch.columns]
        self.writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=self.schema))

    def close(self) -> None:
        try:
            self.writer.close()
        finally:
            self.stream.close()


class _JsonLinesSink:
    def __init__(self, stream: Any, schema: pa.Schema):
        self.stream = stream

    def write(self, batch: pa.RecordBatch) -> None:
        # times, decimals and bytes become text column by column (a Python datetime for every value
        # would cost more than the JSON)
        columns = [_values(c) for c in batch.columns]
        names = batch.schema.names
        self.stream.write("".join(_JSON.encode(dict(zip(names, row))) + "\n" for row in zip(*columns)).encode())

    def close(self) -> None:
        self.stream.close()


class _AvroSink:
    def __init__(self, writer: AvroFileWriter):
        self.writer = writer

    def write(self, batch: pa.RecordBatch) -> None:
        self.writer.write(batch)

    def close(self) -> None:
        self.writer.close()


def _as_text(t: pa.DataType) -> bool:
    """Whether CSV holds values of type ``t`` as text made here (JSON, base64, ISO 8601 with ``T``)."""
    return pa.types.is_nested(t) or is_bytes(t) or pa.types.is_timestamp(t)


def _csv_column(column: pa.Array) -> pa.Array:
    """A column as the text a CSV file holds (null stays null): Arrow's own text of numbers,
    booleans, dates, times and decimals; ours of timestamps, bytes and nested values."""
    if is_bytes(column.type):
        return pa.array(_values(column), pa.string())
    if pa.types.is_nested(column.type):
        return pa.array([None if v is None else _JSON.encode(v) for v in _values(column)], pa.string())
    if pa.types.is_timestamp(column.type):
        return _timestamp_text(column)
    return column.cast(pa.string())


def _timestamp_text(column: pa.Array) -> pa.Array:
    return pc.replace_substring(column.cast(pa.string()), " ", "T", max_replacements=1)


def csv_text(table: pa.Table) -> str:
    """The rows as an exported CSV file holds them (``cdkds show --format csv`` prints this)."""
    stream = io.BytesIO()
    sink = _CsvSink(stream, table.schema)
    for batch in table.to_batches():
        sink.write(batch)
    sink.writer.close()
    return stream.getvalue().decode()


def text_cells(table: pa.Table) -> list[list[str | None]]:
    """Each row's values as the cells of an exported CSV file (``None`` for null)."""
    columns = [_csv_column(c.combine_chunks()).to_pylist() for c in table.columns]
    return [list(row) for row in zip(*columns)]


def json_rows(table: pa.Table) -> list[dict]:
    """The rows as an exported JSON lines file holds them, as Python values (NaN a float)."""
    names = table.schema.names
    columns = [_values(c) for c in table.columns]
    return [json.loads(_JSON.encode(dict(zip(names, row)))) for row in zip(*columns)]


def _values(column: pa.Array) -> list:
    """A column's values for JSON: timestamps, dates, times and decimals as ISO text, bytes as
    base64 (strings, so the result is JSON as it is), nested values as lists and dicts."""
    t = column.type
    if pa.types.is_timestamp(t):
        column = _timestamp_text(column)
    elif pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_decimal(t):
        column = column.cast(pa.string())
    elif is_bytes(t):
        return [None if v is None else base64.b64encode(v).decode() for v in column.to_pylist()]
    return column.to_pylist(maps_as_pydicts="lossy") if pa.types.is_nested(t) else column.to_pylist()


def _json_default(value: Any) -> Any:
    """Values inside nested ones that JSON has no type for."""
    if isinstance(value, dt.datetime):
        text = value.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} is not JSON")


_JSON = json.JSONEncoder(default=_json_default, ensure_ascii=False)
