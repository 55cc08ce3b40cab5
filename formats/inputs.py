"""Files to import — CSV, JSON lines, Parquet, Avro — read as Arrow batches in a target schema,
and the schema inferred from them.

Reading streams (one batch at a time, bounded memory) and puts every batch into the *target*
Arrow schema (a dataset's): input columns are matched to fields by name; a column the schema
does not have is an error naming it; a missing column reads as the field's default, or as null
when the field has none (an error if the field is required). A null (an empty CSV value, a
JSON null or missing key) in a required field takes the field's default if it has one, else it
is an error. A value that does not fit its field is an :class:`InputError` naming the file, the
line (CSV and JSON lines: 1-based, the CSV header is line 1) or row (Parquet and Avro: 1-based),
the field and the value. Text becomes typed values by the rules of :mod:`cdkds.formats.text`;
other columns are cast losslessly.

The format is given, or told by the name: ``.csv``, ``.jsonl``/``.ndjson``/``.json`` (one
object per line), ``.parquet``, ``.avro``; CSV and JSON lines may be gzip-compressed
(``.csv.gz``). Files are opened through fsspec (local paths or URLs, with storage options).

- **CSV**: a header row is required (names are trimmed). Parsed by pyarrow, every column as
  text; an unquoted empty value is null, a quoted ``""`` the empty string; an empty line is
  skipped, except in a one-column file, where it is an empty value (as pyarrow writes a null
  there). pyarrow's messages give no line, so a bad value's line is found again by Python's
  csv module.
- **JSON lines**: parsed by pyarrow; where it fails (its messages give no line), and for what
  it cannot parse (maps, ``NaN``, an empty file), by Python's json module, line by line. Empty
  lines are skipped.
- **Parquet** and **Avro** carry their schema; Parquet is read by row groups, Avro by blocks.

**Inference**: CSV columns by the text rule of :mod:`cdkds.formats.text`; JSON lines values by
their JSON type — numbers are longs (doubles if any has a fraction or exponent, or is beyond a
long), booleans, strings (dates and timestamps recognised), arrays and objects (records) — and
a field holding values of two kinds (a number and a string) is an error naming it; Parquet and
Avro files by their schema. Every field inferred from CSV or JSON lines is nullable (Kite's
csv-import made inferred fields nullable); fields ``required`` by the caller are made required.
Field names must be Avro names. Several files' schemas are merged: fields in first-seen order,
a long and a double make a double, a string and any other scalar type make a string, other
differences are an error naming the field and both files.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import re
import uuid
from abc import ABC, abstractmethod
from typing import Any, Iterable, Iterator, Mapping, Sequence

import fastavro
import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from cdkds.formats.errors import CdkdsError
from cdkds.formats.records import safe_cast
from cdkds.formats.schema import to_arrow, type_kind
from cdkds.formats.text import (
    BAD_VALUE, STRING_CANDIDATES, TextKinds, first_bad, is_text, json_array, text_converter, type_name,
)

FORMATS = ("csv", "jsonl", "parquet", "avro")
EXTENSIONS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet",
              ".avro": "avro"}
_BLOCK_BYTES = 1 << 20  # CSV and JSON text parsed per batch
_BATCH_ROWS = 65_536  # Parquet and Avro rows per batch
_JSON_CHUNK_LINES = 16_384  # JSON lines parsed by Python per batch
_FIELD_SIZE_LIMIT = 2**31 - 1  # Python's csv module refuses values over 128 KiB by default
_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class InputError(CdkdsError, ValueError):
    """A file that cannot be read into the schema: the message names the file and, for a value,
    its line (or row), field and value (also kept as attributes)."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None, row: int | None = None,
                 field: str | None = None, value: Any = None):
        super().__init__(message)
        self.path, self.line, self.row, self.field, self.value = path, line, row, field, value


def format_of(path: str, format: str | None = None) -> str | None:
    """``format`` (aliases resolved), or the format the name's extension tells (``None`` if none)."""
    if format is not None:
        return {"json": "jsonl", "ndjson": "jsonl"}.get(format.lower(), format.lower())
    name = path.rstrip("/").rsplit("/", 1)[-1].lower().removesuffix(".gz")
    return EXTENSIONS.get(name[name.rfind("."):] if "." in name else "")


def input_format(path: str, format: str | None = None) -> tuple[str, str | None]:
    """The format of the file named ``path`` (``format`` if given) and its compression (``gzip``
    for a name ending in ``.gz``, else ``None``)."""
    found = format_of(path, format)
    if found is None:
        raise InputError(f"{path}: cannot tell its format from the name; name it .csv, .jsonl, .parquet or .avro "
                         f"(.csv.gz, .jsonl.gz), or give the format", path)
    if found not in FORMATS:
        raise InputError(f"{path}: unknown format {format!r}; use one of {', '.join(FORMATS)}", path)
    compression = "gzip" if path.lower().endswith(".gz") else None
    if compression and found in ("parquet", "avro"):
        raise InputError(f"{path}: a {found} file cannot be gzip-compressed (it compresses its own blocks)", path)
    return found, compression


def open_input(path: str, fs: Any = None, format: str | None = None,
               storage_options: Mapping[str, Any] | None = None, delimiter: str = ",") -> "InputFile":
    """The file at ``path`` (on ``fs``, or a local path or URL opened with ``storage_options``),
    read as ``format`` or as its name tells; :class:`InputError` if it does not exist."""
    found, compression = input_format(path, format)
    if found == "csv":
        return CsvInput(path, fs, compression, storage_options, delimiter)
    kind = {"jsonl": JsonLinesInput, "parquet": ParquetInput, "avro": AvroInput}[found]
    return kind(path, fs, compression, storage_options)


def infer_schema(paths: Sequence[str] | Sequence["InputFile"], fs: Any = None, format: str | None = None,
                 storage_options: Mapping[str, Any] | None = None, required: Iterable[str] = (),
                 max_rows: int | None = None, delimiter: str = ",") -> pa.Schema:
    """The Arrow schema of the files, merged (see the module docstring); fields named in
    ``required`` are not nullable. ``max_rows``: look at only that many rows of each CSV or JSON
    lines file (default: all)."""
    files = [p if isinstance(p, InputFile) else open_input(p, fs, format, storage_options, delimiter) for p in paths]
    if not files:
        raise InputError("no input files to infer a schema from")
    merged: dict[str, pa.Field] = {}
    origin: dict[str, str] = {}
    for f in files:
        for field in f.infer(max_rows):
            if field.name in merged:
                t = merge_types(field.name, merged[field.name].type, field.type, f"in {origin[field.name]} and {f.name}")
                merged[field.name] = pa.field(field.name, t, merged[field.name].nullable or field.nullable)
            else:
                merged[field.name], origin[field.name] = field, f.name
    required = set(required)
    missing = sorted(required - set(merged))
    if missing:
        raise InputError(f"no column {missing[0]!r} in {', '.join(f.name for f in files)}; columns are {list(merged)}",
                         field=missing[0])
    return pa.schema([f.with_nullable(False) if f.name in required else f for f in merged.values()])


def read_batches(path: str, schema: pa.Schema, fs: Any = None, format: str | None = None,
                 defaults: Mapping[str, Any] | None = None, storage_options: Mapping[str, Any] | None = None,
                 delimiter: str = ",") -> Iterator[pa.RecordBatch]:
    """The rows of one file as batches in ``schema``; ``defaults``: field name -> Avro default."""
    return open_input(path, fs, format, storage_options, delimiter).read(schema, defaults)


def merge_types(name: str, a: pa.DataType, b: pa.DataType, where: str) -> pa.DataType:
    """The type of field ``name`` read as ``a`` in one file and ``b`` in another."""
    if a.equals(b) or pa.types.is_null(b):
        return a
    if pa.types.is_null(a):
        return b
    numbers = (pa.types.is_integer, pa.types.is_floating)
    if any(f(a) for f in numbers) and any(f(b) for f in numbers):
        return pa.float64() if pa.types.is_floating(a) or pa.types.is_floating(b) else pa.int64()
    if (is_text(a) or is_text(b)) and not (pa.types.is_nested(a) or pa.types.is_nested(b)):
        return pa.string()
    if pa.types.is_nested(a) and pa.types.is_nested(b):
        with contextlib.suppress(pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return pa.unify_schemas([pa.schema([(name, a)]), pa.schema([(name, b)])],
                                    promote_options="permissive").field(name).type
    raise InputError(f"field {name!r} is a {type_name(a)} and a {type_name(b)} ({where})", field=name)


def plain(t: pa.DataType) -> pa.DataType:
    """A type without dictionary encoding, views or 64-bit offsets, as the dataset model has it."""
    if pa.types.is_dictionary(t):
        return plain(t.value_type)
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return pa.list_(t.value_field.with_type(plain(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(plain(t.field(i).type)) for i in range(t.num_fields)])
    return t


class InputFile(ABC):
    """One file to read: its size, how much of it has been read (for progress), its columns,
    its inferred schema and its rows in a target schema."""

    format = ""
    null_word = "null"  # what a missing value is called in errors

    def __init__(self, path: str, fs: Any = None, compression: str | None = None,
                 storage_options: Mapping[str, Any] | None = None):
        self.name = path
        self.compression = compression
        if fs is None:
            fs, path = fsspec.core.url_to_fs(path, **dict(storage_options or {}))
        self.fs, self.path = fs, path
        try:
            info = fs.info(path)
        except FileNotFoundError:
            raise InputError(f"{self.name}: no such file", self.name) from None
        if info.get("type") == "directory":
            raise InputError(f"{self.name} is a folder, not a file", self.name)
        self.size = int(info.get("size") or 0)
        self._raw: Any = None
        self._done = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @property
    def bytes_read(self) -> int:
        """Bytes of the (compressed) file read so far by the current or last read."""
        if self._raw is not None and not self._raw.closed:
            with contextlib.suppress(Exception):
                return min(self.size, self._raw.tell())
        return self._done

    @contextlib.contextmanager
    def _open(self) -> Iterator[Any]:
        raw = self.fs.open(self.path, "rb")
        self._raw, self._done = raw, 0
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if self.compression == "gzip" else raw
        try:
            yield stream
        except (OSError, EOFError, UnicodeDecodeError) as e:
            if isinstance(e, FileNotFoundError):
                raise
            raise InputError(f"{self.name}: cannot be read as {self.format}: {e}", self.name) from None
        finally:
            if stream is not raw:
                stream.close()
            raw.close()
            self._done = self.size

    # ------------------------------------------------------------ schema

    def columns(self) -> list[str] | None:
        """The column names the file declares; ``None`` when its records name their own fields."""
        return None

    def check(self, schema: pa.Schema, defaults: Mapping[str, Any] | None = None) -> None:
        """Raise an :class:`InputError` now if the file's columns do not fit ``schema``."""
        names = self.columns()
        if names is not None:
            self._check_columns(names, schema, defaults or {})

    def _check_columns(self, names: Sequence[str], schema: pa.Schema, defaults: Mapping[str, Any]) -> None:
        unknown = [n for n in names if schema.get_field_index(n) < 0]
        if unknown:
            listed = ", ".join(repr(n) for n in unknown)
            raise InputError(f"{self.name}: unknown column{'s' if len(unknown) > 1 else ''} {listed}; the fields are "
                             f"{schema.names}", self.name, field=unknown[0])
        for f in schema:
            if f.name not in names and not f.nullable and f.name not in defaults:
                raise InputError(f"{self.name}: no column for the required field {f.name!r} (it has no default)",
                                 self.name, field=f.name)

    def infer(self, max_rows: int | None = None) -> pa.Schema:
        """The file's own schema (inferred from the values of CSV and JSON lines)."""
        fields = self._fields(max_rows)
        bad = [f.name for f in fields if not _AVRO_NAME.fullmatch(f.name)]
        if bad:
            raise InputError(f"{self.name}: column name {bad[0]!r} is not a valid field name (letters, digits and '_', "
                             f"not starting with a digit)", self.name, field=bad[0])
        return pa.schema(fields)

    @abstractmethod
    def _fields(self, max_rows: int | None) -> list[pa.Field]:
        """The fields of the file's own schema."""

    # ------------------------------------------------------------ reading

    def read(self, schema: pa.Schema, defaults: Mapping[str, Any] | None = None) -> Iterator[pa.RecordBatch]:
        """The file's rows as batches in ``schema``, streamed."""
        return self._read(schema, dict(defaults or {}))

    @abstractmethod
    def _read(self, schema: pa.Schema, defaults: Mapping[str, Any]) -> Iterator[pa.RecordBatch]:
        """The rows in ``schema``."""

    def _location(self, index: int) -> dict:
        """Where record ``index`` (0-based) is, as :class:`InputError` attributes."""
        return {"row": index + 1}

    def _where(self, index: int) -> str:
        return " ".join(f"{k} {v}" for k, v in self._location(index).items())

    def _bad_value(self, index: int, field: str, value: Any, t: pa.DataType) -> InputError:
        location = self._location(index)
        shown = value if not isinstance(value, str) or len(value) <= 80 else value[:77] + "..."
        where = " ".join(f"{k} {v}" for k, v in location.items())
        return InputError(f"{self.name} {where}: field {field!r}: {shown!r} is not a {type_name(t)}", self.name,
                          field=field, value=value, **location)

    def _typed(self, column: pa.Array, f: pa.Field, base: int) -> pa.Array:
        """A column of any type as field ``f``'s type: text by the text rules, the rest cast
        losslessly; a value that does not fit is an error naming its line or row."""
        if pa.types.is_dictionary(column.type):
            column = column.dictionary_decode()
        if column.type.equals(f.type):
            return column
        if is_text(column.type) and not is_text(f.type):
            convert = text_converter(f.type)
        else:
            def convert(a: pa.Array) -> pa.Array:
                return safe_cast(a, f.type)
        try:
            if convert is None:
                raise pa.ArrowNotImplementedError("")
            return convert(column)
        except pa.ArrowNotImplementedError:
            raise InputError(f"{self.name}: column {f.name!r} holds {column.type}, which cannot be read as a "
                             f"{type_name(f.type)}", self.name, field=f.name) from None
        except BAD_VALUE:
            i = first_bad(len(column), lambda lo, hi: convert(column.slice(lo, hi - lo)))
            raise self._bad_value(base + i, f.name, column[i].as_py(), f.type) from None

    def _conform(self, columns: Mapping[str, pa.Array], rows: int, schema: pa.Schema, defaults: Mapping[str, Any],
                 base: int) -> pa.RecordBatch:
        """A batch in ``schema`` from typed input columns: missing ones filled, nulls checked."""
        arrays = []
        for f in schema:
            column = columns.get(f.name)
            if column is None:
                if f.name in defaults:
                    column = pa.array([defaults[f.name]] * rows, f.type)
                elif not f.nullable:
                    raise InputError(f"{self.name}: no value for the required field {f.name!r} (it has no default)",
                                     self.name, field=f.name)
                else:
                    column = pa.nulls(rows, f.type)
            elif column.null_count and not f.nullable:
                if f.name in defaults:
                    column = pc.fill_null(column, pa.array([defaults[f.name]], f.type)[0])
                else:
                    index = base + int(pc.index(column.is_null(), True).as_py())
                    raise InputError(f"{self.name} {self._where(index)}: field {f.name!r} is required, but the value "
                                     f"is {self.null_word}", self.name, field=f.name, **self._location(index))
            arrays.append(column)
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


class _LinesInput(InputFile):
    """A text format whose records start on lines: errors name the line."""

    def _location(self, index: int) -> dict:
        return {"line": self._line_of(index)}

    @abstractmethod
    def _line_of(self, index: int) -> int:
        """The line on which record ``index`` (0-based, a header not counted) starts."""


class CsvInput(_LinesInput):
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
        csv.field_size_limit(max(csv.field_size_limit(), _FIELD_SIZE_LIMIT))
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
        with self._open() as f:
            try:
                reader = pacsv.open_csv(
                    f, read_options=pacsv.ReadOptions(block_size=_BLOCK_BYTES),
                    # an empty line is skipped, unless there is one column: then it is an empty value
                    parse_options=pacsv.ParseOptions(delimiter=self.delimiter, newlines_in_values=True,
                                                     ignore_empty_lines=len(names) > 1),
                    convert_options=pacsv.ConvertOptions(column_types={n: pa.string() for n in raw},
                                                         strings_can_be_null=True, null_values=[""],
                                                         quoted_strings_can_be_null=False))
                for batch in reader:
                    yield names, batch
                return
            except pa.ArrowInvalid as e:
                error = e
        raise self._parse_error(error, len(names))

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


_JSON_GROUPS = {"boolean": "a boolean", "long": "a number", "double": "a number", "string": "a string",
                "nested": "an array or object"}


def _json_kind(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "long" if -(2**63) <= v < 2**63 else "double"
    if isinstance(v, float):
        return "double"
    if isinstance(v, str):
        return "string"
    return "nested"


def _json_native(t: pa.DataType) -> pa.DataType | None:
    """The type pyarrow's JSON reader parses a field of type ``t`` as (``None``: it cannot)."""
    if pa.types.is_integer(t):
        return pa.int64()
    if pa.types.is_floating(t):
        return pa.float64()
    if pa.types.is_boolean(t) or is_text(t) or pa.types.is_decimal(t) or pa.types.is_timestamp(t):
        return t
    if pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t) \
            or pa.types.is_large_binary(t):
        return pa.string()  # then converted by the text rules
    if pa.types.is_list(t):
        inner = _json_native(t.value_type)
        return t if inner is not None and inner.equals(t.value_type) else None
    if pa.types.is_struct(t):
        inner = [_json_native(t.field(i).type) for i in range(t.num_fields)]
        if all(x is not None and x.equals(t.field(i).type) for i, x in enumerate(inner)):
            return t
    return None


class JsonLinesInput(_LinesInput):
    format = "jsonl"
    null_word = "null or missing"

    def _objects(self, max_rows: int | None = None) -> Iterator[list[tuple[int, dict]]]:
        """Chunks of (line, object), parsed by Python so that every problem has its line."""
        chunk: list[tuple[int, dict]] = []
        seen = 0
        with self._open() as f:
            for line, text in enumerate(io.TextIOWrapper(f, encoding="utf-8"), 1):
                if not text.strip():
                    continue
                try:
                    value = json.loads(text)
                except json.JSONDecodeError as e:
                    raise InputError(f"{self.name} line {line}: not valid JSON ({e.msg} at column {e.colno})",
                                     self.name, line=line) from None
                if not isinstance(value, dict):
                    raise InputError(f"{self.name} line {line}: not a JSON object", self.name, line=line)
                chunk.append((line, value))
                seen += 1
                if len(chunk) >= _JSON_CHUNK_LINES:
                    yield chunk
                    chunk = []
                if max_rows is not None and seen >= max_rows:
                    break
        if chunk:
            yield chunk

    def _line_of(self, index: int) -> int:
        number = -1
        with self._open() as f:
            for line, text in enumerate(io.TextIOWrapper(f, encoding="utf-8"), 1):
                if text.strip():
                    number += 1
                    if number == index:
                        return line
        return -1

    def _fields(self, max_rows: int | None) -> list[pa.Field]:
        kinds: dict[str, dict[str, int]] = {}  # field -> kind -> the first line it was seen on
        texts: dict[str, TextKinds] = {}
        nested: dict[str, pa.DataType] = {}
        for chunk in self._objects(max_rows):
            values: dict[tuple[str, str], list] = {}
            for line, obj in chunk:
                for key, v in obj.items():
                    seen = kinds.setdefault(key, {})
                    if v is None:
                        continue
                    kind = _json_kind(v)
                    if kind not in seen:
                        other = [k for k in seen if _JSON_GROUPS[k] != _JSON_GROUPS[kind]]
                        if other:
                            raise InputError(f"{self.name}: field {key!r} holds {_JSON_GROUPS[other[0]]} (line "
                                             f"{seen[other[0]]}) and {_JSON_GROUPS[kind]} (line {line})", self.name,
                                             field=key)
                        seen[kind] = line
                    if kind in ("string", "nested"):
                        values.setdefault((kind, key), []).append(v)
            for (kind, name), vs in values.items():
                if kind == "string":
                    texts.setdefault(name, TextKinds(STRING_CANDIDATES)).update(pa.array(vs, pa.string()))
                    continue
                try:
                    t = plain(pa.array(vs).type)
                except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
                    raise InputError(f"{self.name}: field {name!r} holds values of different shapes: {e}",
                                     self.name, field=name) from None
                nested[name] = merge_types(name, nested[name], t, self.name) if name in nested else t
        fields = []
        for name, seen in kinds.items():
            if "nested" in seen:
                t = nested[name]
            elif "string" in seen:
                t = texts[name].result()
            else:
                t = next((_JSON_TYPES[k] for k in ("double", "long", "boolean") if k in seen), pa.string())
            fields.append(pa.field(name, t))
        return fields

    def _read(self, schema: pa.Schema, defaults: Mapping[str, Any]) -> Iterator[pa.RecordBatch]:
        natives = [_json_native(f.type) for f in schema]
        if any(t is None for t in natives):
            yield from self._read_python(schema, defaults)
            return
        native = pa.schema([pa.field(f.name, t) for f, t in zip(schema, natives)])
        base = 0
        try:
            with self._open() as f:
                reader = pajson.open_json(f, read_options=pajson.ReadOptions(block_size=_BLOCK_BYTES),
                                          parse_options=pajson.ParseOptions(explicit_schema=native,
                                                                            unexpected_field_behavior="error"))
                for batch in reader:
                    columns = {f.name: self._typed(batch.column(f.name), f, base) for f in schema}
                    yield self._conform(columns, batch.num_rows, schema, defaults, base)
                    base += batch.num_rows
        except pa.ArrowInvalid as e:
            # pyarrow's messages do not tell the line, field and value: Python's parser finds them
            # (and reads what pyarrow's parser refuses but Python's takes: an empty file, NaN)
            if base == 0:
                yield from self._read_python(schema, defaults)
                return
            for _ in self._read_python(schema, defaults):
                pass
            raise InputError(f"{self.name}: {str(e).splitlines()[0]}", self.name) from None

    def _read_python(self, schema: pa.Schema, defaults: Mapping[str, Any]) -> Iterator[pa.RecordBatch]:
        names = set(schema.names)
        for chunk in self._objects():
            lines = [line for line, _ in chunk]
            for line, obj in chunk:
                unknown = [k for k in obj if k not in names]
                if unknown:
                    raise InputError(f"{self.name} line {line}: unknown field {unknown[0]!r}; the fields are "
                                     f"{schema.names}", self.name, line=line, field=unknown[0])
            columns = {}
            for f in schema:
                values = [obj.get(f.name) for _, obj in chunk]
                try:
                    columns[f.name] = json_array(values, f.type)
                except BAD_VALUE:
                    i = first_bad(len(values), lambda lo, hi: json_array(values[lo:hi], f.type))
                    raise InputError(f"{self.name} line {lines[i]}: field {f.name!r}: {values[i]!r} is not a "
                                     f"{type_name(f.type)}", self.name, line=lines[i], field=f.name,
                                     value=values[i]) from None
                if columns[f.name].null_count and not f.nullable and f.name not in defaults:
                    i = int(pc.index(columns[f.name].is_null(), True).as_py())
                    raise InputError(f"{self.name} line {lines[i]}: field {f.name!r} is required, but the value is "
                                     f"{self.null_word}", self.name, line=lines[i], field=f.name)
            yield self._conform(columns, len(chunk), schema, defaults, 0)


_JSON_TYPES = {"double": pa.float64(), "long": pa.int64(), "boolean": pa.bool_()}


class ParquetInput(InputFile):
    format = "parquet"

    @property
    def bytes_read(self) -> int:
        return self._done  # a Parquet file is read by seeks: progress by rows

    def _schema(self) -> pa.Schema:
        with self._open() as f:
            try:
                return pq.read_schema(f).remove_metadata()
            except pa.ArrowInvalid as e:
                raise InputError(f"{self.name}: not a readable Parquet file: {e}", self.name) from None

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
            self._check_columns(names, schema, defaults)
            total = max(1, parquet.metadata.num_rows)
            base = 0
            for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, use_threads=False):
                columns = {name: self._typed(batch.column(name), schema.field(name), base) for name in names}
                yield self._conform(columns, batch.num_rows, schema, defaults, base)
                base += batch.num_rows
                self._done = self.size * base // total


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
        uuids = [f["name"] for f in writer["fields"] if type_kind(f["type"]) == "uuid"]

        def batch_of(rows: list[dict], base: int) -> pa.RecordBatch:
            for row in rows:
                for name in uuids:
                    if isinstance(row.get(name), uuid.UUID):
                        row[name] = str(row[name])
            batch = pa.RecordBatch.from_pylist(rows, schema=arrow)
            columns = {name: self._typed(batch.column(name), schema.field(name), base) for name in arrow.names}
            return self._conform(columns, len(rows), schema, defaults, base)

        with self._open() as f:
            rows: list[dict] = []
            base = 0
            for record in fastavro.reader(f):
                rows.append(record)
                if len(rows) >= _BATCH_ROWS:
                    yield batch_of(rows, base)
                    base += len(rows)
                    rows = []
            if rows:
                yield batch_of(rows, base)
