"""Parquet files to import, read by row groups."""

from __future__ import annotations

from typing import Any, Iterator, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from cdkds.formats.inputs.base import BATCH_ROWS, InputError, InputFile, plain


class ParquetInput(InputFile):
    format = "parquet"

    @property
    def bytes_read(self) -> int:
        return self._done  # a Parquet file is read by seeks: progress by rows

    def _schema(self) -> pa.Schema:
        with self._open() as f:
            try:
                schema = pq.read_schema(f).remove_metadata()
            except pa.ArrowInvalid as e:
                raise InputError(f"{self.name}: not a readable Parquet file: {e}", self.name) from None
        self._check_names(schema.names)
        return schema

    def _check_names(self, names: list[str]) -> None:
        twice = [n for i, n in enumerate(names) if n in names[:i]]
        if twice:
            raise InputError(f"{self.name}: column {twice[0]!r} appears twice in the file", self.name, field=twice[0])

    def columns(self) -> list[str]:
        return self._schema().names

    def _fields(self, max_rows: int | None) -> list[pa.Field]:
        return [pa.field(f.name, plain(f.type), f.nullable) for f in self._schema()]

    def _read(self, schema: pa.Schema, defaults: Mapping[str, Any]) -> Iterator[pa.RecordBatch]:
        with self._open() as f:
            try:
                parquet = pq.ParquetFile(f)
            except pa.ArrowInvalid as e:
                raise InputError(f"{self.name}: not a readable Parquet file: {e}", self.name) from None
            names = parquet.schema_arrow.names
            self._check_names(names)
            self._check_columns(names, schema, defaults)
            total = max(1, parquet.metadata.num_rows)
            base = 0
            for batch in parquet.iter_batches(batch_size=BATCH_ROWS, use_threads=False):
                columns = {name: self._typed(batch.column(name), schema.field(name), base) for name in names}
                yield self._conform(columns, batch.num_rows, schema, defaults, base)
                base += batch.num_rows
                self._done = self.size * base // total
