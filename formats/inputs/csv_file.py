"""CSV files to import: parsed by pyarrow as text, typed by the text rules; lines found again by
Python's csv module for errors."""

from __future__ import annotations

import contextlib
import csv
import io
from typing import Any, Iterator, Mapping

import pyarrow as pa
import pyarrow.csv as pacsv

from cdkds.formats.text import TextKinds
from cdkds.formats.inputs import base as limits
from cdkds.formats.inputs.base import FIELD_SIZE_LIMIT, InputError, LinesInput


MAX_BLOCK_BYTES = 1 << 30  # the largest block a CSV file is parsed in (a row must fit in one)


class _QuoteCount(io.RawIOBase):
    """A binary stream that counts the quote characters read through it."""

    def __init__(self, stream: Any):
        super().__init__()
        self.stream = stream
        self.quotes = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.quotes += data.count(b'"')
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


class CsvInput(LinesInput):
    format = "csv"
    null_word = "empty"

    def __init__(self, path: str, fs: Any = None, compression: str | None = None,
                 storage_options: Mapping[str, Any] | None = None, delimiter: str = ","):
        if len(delimiter) != 1:
            raise InputError(f"a CSV delimiter is one character, got {delimiter!r}")
        super().__init__(path, fs, compression, storage_options)
        self.delimiter = delimiter

    def columns(self) -> list[str]:
        return self._header()[1]

    def _header(self) -> tuple[list[str], list[str]]:
        """The header as written and trimmed."""
        with self._open() as f:
            header = next(csv.reader(io.TextIOWrapper(f, encoding="utf-8-sig", newline=""), delimiter=self.delimiter),
                          None)
        if not header:
            raise InputError(f"{self.name}: the file is empty; a CSV file needs a header row", self.name)
        names = [h.strip() for h in header]
        for i, n in enumerate(names):
            if not n:
                raise InputError(f"{self.name}: column {i + 1} of the header has no name", self.name)
            if n in names[:i]:
                raise InputError(f"{self.name}: column {n!r} appears twice in the header", self.name, field=n)
        return header, names

    def _records(self) -> Iterator[tuple[int, list[str]]]:
        """Each data record with the line it starts on, by Python's csv module, skipping the lines
        pyarrow skips (to find lines: pyarrow's reader does not count them)."""
        csv.field_size_limit(max(csv.field_size_limit(), FIELD_SIZE_LIMIT))
        with self._open() as f:
            reader = csv.reader(io.TextIOWrapper(f, encoding="utf-8-sig", newline=""), delimiter=self.delimiter)
            header = next(reader, None) or []
            start = reader.line_num + 1
            for record in reader:
                if record or len(header) == 1:
                    yield start, record or [""]
                start = reader.line_num + 1

    def _line_of(self, index: int) -> int:
        with contextlib.closing(self._records()) as records:
            for number, (line, _) in enumerate(records):
                if number == index:
                    return line
        return -1

    def _text_batches(self) -> Iterator[tuple[list[str], pa.RecordBatch]]:
        raw, names = self._header()
        block, done = limits.BLOCK_BYTES, 0
        while True:
            with self._open() as f:
                counted = _QuoteCount(f)
                try:
                    reader = pacsv.open_csv(
                        counted, read_options=pacsv.ReadOptions(block_size=block),
                        # an empty line is skipped, unless there is one column: then it is an empty value
                        parse_options=pacsv.ParseOptions(delimiter=self.delimiter, newlines_in_values=True,
                                                         ignore_empty_lines=len(names) > 1),
                        convert_options=pacsv.ConvertOptions(column_types={n: pa.string() for n in raw},
                                                             strings_can_be_null=True, null_values=[""],
                                                             quoted_strings_can_be_null=False))
                    skip = done  # rows yielded before a retry with larger blocks
                    for batch in reader:
                        if skip >= batch.num_rows:
                            skip -= batch.num_rows
                            continue
                        batch, skip = batch.slice(skip), 0
                        done += batch.num_rows
                        yield names, batch
                    if counted.quotes % 2:  # an odd number of quotes: maybe a file cut inside a quoted value
                        self._check_complete()
                    return
                except pa.ArrowInvalid as e:
                    error = e
            if "straddl" in str(error) and block < MAX_BLOCK_BYTES:
                block = min(block * 8, MAX_BLOCK_BYTES)  # a row longer than a block: read in larger blocks
                continue
            raise self._parse_error(error, len(names))

    def _check_complete(self) -> None:
        """:class:`InputError` if the file ends inside a quoted value (pyarrow takes the rest
        of the file as the value)."""
        with self._open() as f:
            reader = csv.reader(io.TextIOWrapper(f, encoding="utf-8-sig", newline=""), delimiter=self.delimiter,
                                strict=True)
            start = 1
            try:
                for _ in reader:
                    start = reader.line_num + 1
            except csv.Error as e:
                if "unexpected end of data" in str(e):
                    raise InputError(f"{self.name} line {start}: the file ends inside a quoted value (is it "
                                     f"truncated?)", self.name, line=start) from None

    def _parse_error(self, error: Exception, width: int) -> InputError:
        for line, record in self._records():
            if len(record) != width:
                return InputError(f"{self.name} line {line}: {len(record)} value{'s' if len(record) != 1 else ''} "
                                  f"where the header has {width} columns", self.name, line=line)
        return InputError(f"{self.name}: {str(error).splitlines()[0]}", self.name)

    def _fields(self, max_rows: int | None) -> list[pa.Field]:
        names = self._header()[1]
        kinds = [TextKinds() for _ in names]
        seen = 0
        for _, batch in self._text_batches():
            if max_rows is not None and seen + batch.num_rows > max_rows:
                batch = batch.slice(0, max_rows - seen)
            for kind, column in zip(kinds, batch.columns):
                kind.update(column)
            seen += batch.num_rows
            if max_rows is not None and seen >= max_rows:
                break
        return [pa.field(n, k.result()) for n, k in zip(names, kinds)]

    def _read(self, schema: pa.Schema, defaults: Mapping[str, Any]) -> Iterator[pa.RecordBatch]:
        self._check_columns(self._header()[1], schema, defaults)
        base = 0
        for names, batch in self._text_batches():
            columns = {name: self._typed(column, schema.field(name), base) for name, column in zip(names, batch.columns)}
            yield self._conform(columns, batch.num_rows, schema, defaults, base)
            base += batch.num_rows
