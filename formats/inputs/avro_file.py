"""Avro files to import, read by blocks."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping

import fastavro
import pyarrow as pa

from cdkds.formats.errors import CdkdsError
from cdkds.formats.avro import uuids_as_text
from cdkds.formats.schema import load_schema, to_arrow
from cdkds.formats.inputs.base import BATCH_ROWS, InputError, InputFile


class AvroInput(InputFile):
    format = "avro"

    def _schema(self) -> tuple[dict, pa.Schema]:
        """The writer's Avro schema and its Arrow form."""
        with self._open() as f:
            try:
                writer = fastavro.reader(f).writer_schema
            except Exception as e:  # fastavro raises ValueError, EOFError, its own types...
                raise InputError(f"{self.name}: not a readable Avro file: {e}", self.name) from None
        try:
            load_schema(writer)  # unions of several types (["string", "int"]) have no Arrow form
            return writer, to_arrow(writer)
        except (CdkdsError, KeyError, TypeError) as e:
            raise InputError(f"{self.name}: its Avro schema has no Arrow form: {e}", self.name) from None

    def columns(self) -> list[str]:
        return self._schema()[1].names

    def _fields(self, max_rows: int | None) -> list[pa.Field]:
        return list(self._schema()[1])

    def _read(self, schema: pa.Schema, defaults: Mapping[str, Any]) -> Iterator[pa.RecordBatch]:
        writer, arrow = self._schema()
        self._check_columns(arrow.names, schema, defaults)
        texts = {f["name"]: as_text for f in writer["fields"] if (as_text := uuids_as_text(f["type"])) is not None}

        def batch_of(rows: list[dict], base: int) -> pa.RecordBatch:
            for row in rows:
                for name, as_text in texts.items():
                    row[name] = as_text(row.get(name))
            batch = pa.RecordBatch.from_pylist(rows, schema=arrow)
            columns = {name: self._typed(batch.column(name), schema.field(name), base) for name in arrow.names}
            return self._conform(columns, len(rows), schema, defaults, base)

        with self._open() as f:
            rows: list[dict] = []
            base = 0
            for record in self._records(f, lambda: base + len(rows)):
                rows.append(record)
                if len(rows) >= BATCH_ROWS:
                    yield batch_of(rows, base)
                    base += len(rows)
                    rows = []
            if rows:
                yield batch_of(rows, base)

    def _records(self, f: Any, read: Callable[[], int]) -> Iterator[dict]:
        """The records of the file; :class:`InputError` naming the row after the ``read()``
        rows read when the file breaks off (truncated, garbled: fastavro raises ValueError...)."""
        records = iter(fastavro.reader(f))
        while True:
            try:
                record = next(records)
            except StopIteration:
                return
            except (ValueError, EOFError, OSError) as e:
                raise InputError(f"{self.name} row {read() + 1}: cannot be read as avro (is the file truncated?): "
                                 f"{e}", self.name, row=read() + 1) from None
            yield record
