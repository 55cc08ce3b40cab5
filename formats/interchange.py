"""Files in interchange formats as Arrow: CSV, JSON lines, Parquet and Avro, read to import them
into a dataset (or to infer a schema from them) and written to export one.

Reading streams (one batch at a time, bounded memory) and puts every batch into a *target*
Arrow schema (a dataset's): input columns are matched to fields by name; a column the schema
does not have is an error naming it; a missing column reads as the field's default, or as null
when the field has none (an error if the field is required). A null (an empty CSV value, a
JSON null or missing key) in a required field takes the field's default if it has one, else it
is an error. A value that does not fit its field is an :class:`InputError` naming the file, the
line (CSV and JSON lines: 1-based, the CSV header is line 1) or row (Parquet and Avro: 1-based),
the field and the value.

The format is given, or told by the name: ``.csv``, ``.jsonl``/``.ndjson``/``.json`` (one
object per line), ``.parquet``, ``.avro``; CSV and JSON lines may be gzip-compressed
(``.csv.gz``). Files are opened through fsspec (local paths or URLs, with storage options).

**CSV.** A header row is required (names are trimmed; they must be Avro names when a schema is
inferred). Parsed by pyarrow with every column as text, then converted per column with
vectorised casts, so the rules are the same whether the schema is inferred or given:

- an unquoted empty value is null; a quoted empty value (``""``) is the empty string in a
  string field (and null in any other); values of non-string fields are trimmed;
- booleans are ``true``/``false`` (any case; ``1``/``0`` too when the field is boolean);
- dates are ``YYYY-MM-DD``; timestamps ISO 8601 (``2026-03-01T10:00:00Z``, a space for the
  ``T`` and a fraction allowed) — in a timestamp field a value without a zone is UTC, in a local
  timestamp field a zone is an error; times are ``HH:MM[:SS[.f]]``;
- bytes and fixed are base64; arrays, maps and records are JSON text;
- an empty line is skipped, except in a one-column file, where it is an empty value (as
  pyarrow writes a null there). JSON lines skip empty lines too.

**Inference** (CSV, Kite's rule extended): every non-empty value of a column is checked, and
the column is a ``long`` if all parse as longs, else a ``double`` if all parse as doubles
(``nan`` and ``inf`` included), else a ``boolean`` if all are ``true``/``false``, else a ``date``
if all are ``YYYY-MM-DD``, else a UTC ``timestamp`` (micros) if all are ISO timestamps with a
zone, else a ``local timestamp`` if all are ISO timestamps without one, else a ``string``; a
column with no non-empty value is a string. JSON lines: numbers are longs (doubles if any has a
fraction or exponent, or is beyond a long), booleans, strings (dates and timestamps by the same
text rules), arrays and objects (records); a field holding values of two kinds (a number and a
string) is an error naming it. Parquet and Avro files carry their schema. Every field inferred
from CSV or JSON lines is nullable (Kite's csv-import made inferred fields nullable; a field
``required`` by the caller is made required). Several files' schemas are merged: fields in
first-seen order, a long and a double make a double, a string and any other scalar type make a
string, other differences are an error naming the field and both files.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import datetime as dt
import decimal
import gzip
import io
import json
import re
import uuid
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import fastavro
import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from cdkds.formats.avro import AvroFileWriter
from cdkds.formats.errors import CdkdsError
from cdkds.formats.schema import from_arrow, to_arrow, type_kind

FORMATS = ("csv", "jsonl", "parquet", "avro")
EXPORT_FORMATS = ("parquet", "csv", "jsonl", "avro")
_EXTENSIONS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet",
               ".avro": "avro"}
_BLOCK_BYTES = 1 << 20  # CSV and JSON text parsed per batch
_BATCH_ROWS = 65_536  # Parquet and Avro rows per batch
_JSON_CHUNK_LINES = 16_384  # JSON lines parsed in Python per batch (inference, maps, diagnosis)
_FIELD_SIZE_LIMIT = 2**31 - 1  # Python's csv module refuses values over 128 KiB by default
_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DATE = r"^\d{4}-\d{2}-\d{2}$"
_DATETIME = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?"
_ZONE = r"(Z|[+-]\d{2}(:?\d{2})?)$"
_TIME = r"^\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?$"
_BAD = (ValueError, TypeError, OverflowError, decimal.InvalidOperation, pa.ArrowInvalid, pa.ArrowTypeError)
_UTC_MICROS = pa.timestamp("us", tz="UTC")
_LOCAL_MICROS = pa.timestamp("us")


class InputError(CdkdsError, ValueError):
    """An input file that cannot be read into the schema: the message names the file and, for a
    value, its line (or row), field and the value."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None, row: int | None = None,
                 field: str | None = None, value: Any = None):
        super().__init__(message)
        self.path, self.line, self.row, self.field, self.value = path, line, row, field, value


def input_format(path: str, format: str | None = None) -> tuple[str, str | None]:
    """The format of the file named ``path`` (``format`` if given) and its compression (``gzip``
    for a name ending in ``.gz``, else ``None``)."""
    name = path.rstrip("/").rsplit("/", 1)[-1].lower()
    compression = "gzip" if name.endswith(".gz") else None
    name = name.removesuffix(".gz")
    if format is not None:
        format = {"json": "jsonl", "ndjson": "jsonl"}.get(format.lower(), format.lower())
        if format not in FORMATS:
            raise InputError(f"{path}: unknown format {format!r}; use one of {', '.join(FORMATS)}", path)
    else:
        ext = name[name.rfind("."):] if "." in name else ""
        if ext not in _EXTENSIONS:
            raise InputError(f"{path}: cannot tell its format from the name; name it .csv, .jsonl, .parquet or "
                             f".avro (.csv.gz, .jsonl.gz), or give the format", path)
        format = _EXTENSIONS[ext]
    if compression and format in ("parquet", "avro"):
        raise InputError(f"{path}: a {format} file cannot be gzip-compressed (it compresses its own blocks)", path)
    return format, compression


def type_name(t: pa.DataType) -> str:
    """An Arrow type in the words of the dataset model (Avro's names)."""
    if pa.types.is_timestamp(t):
        unit = {"s": "millis", "ms": "millis"}.get(t.unit, "micros")
        return f"timestamp-{unit}" if t.tz is not None else f"local-timestamp-{unit}"
    simple = {pa.int64(): "long", pa.int32(): "int", pa.float64(): "double", pa.float32(): "float",
              pa.bool_(): "boolean", pa.string(): "string", pa.large_string(): "string", pa.date32(): "date",
              pa.binary(): "bytes (base64)", pa.large_binary(): "bytes (base64)", pa.time32("ms"): "time-millis",
              pa.time64("us"): "time-micros"}
    for candidate, name in simple.items():
        if t.equals(candidate):
            return name
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_fixed_size_binary(t):
        return f"fixed({t.byte_width}) (base64)"
    return str(t)


# ---------------------------------------------------------------- text -> Arrow

def _blank_null(a: pa.Array) -> pa.Array:
    trimmed = pc.utf8_trim_whitespace(a)
    return pc.if_else(pc.equal(trimmed, ""), pa.scalar(None, pa.string()), trimmed)


def _all_match(a: pa.Array, pattern: str) -> bool:
    return a.null_count == len(a) or bool(pc.all(pc.match_substring_regex(a, pattern)).as_py())


def _timestamp_from_text(t: pa.DataType) -> Callable[[pa.Array], pa.Array]:
    def convert(a: pa.Array) -> pa.Array:
        s = _blank_null(a)
        if t.tz is None:
            return s.cast(t)
        zoned = pc.match_substring_regex(s, _ZONE)
        if pc.all(zoned).as_py() is not False:
            return s.cast(t)
        null = pa.scalar(None, pa.string())
        with_zone = pc.if_else(zoned, s, null).cast(t)
        without = pc.if_else(zoned, null, s).cast(pa.timestamp(t.unit)).cast(t)  # no zone: UTC
        return pc.coalesce(with_zone, without)
    return convert


def _time_from_text(t: pa.DataType) -> Callable[[pa.Array], pa.Array]:
    def convert(a: pa.Array) -> pa.Array:
        s = _blank_null(a)
        if not _all_match(s, _TIME):
            raise ValueError("not a time")
        moments = pc.binary_join_element_wise("1970-01-01T", s, "").cast(pa.timestamp(t.unit))
        ticks = moments.cast(pa.int64())
        return (ticks.cast(pa.int32()) if pa.types.is_time32(t) else ticks).cast(t)
    return convert


def _base64_from_text(t: pa.DataType) -> Callable[[pa.Array], pa.Array]:
    def convert(a: pa.Array) -> pa.Array:
        return pa.array([None if v is None else base64.b64decode(v, validate=True) for v in a.to_pylist()], t)
    return convert


def _json_from_text(t: pa.DataType) -> Callable[[pa.Array], pa.Array]:
    def convert(a: pa.Array) -> pa.Array:
        return pa.array([None if v is None else _for_arrow(json.loads(v), t) for v in a.to_pylist()], t)
    return convert


def _for_arrow(value: Any, t: pa.DataType) -> Any:
    """A decoded JSON value in the form ``pa.array`` takes for type ``t`` (maps as key-value pairs)."""
    if value is None:
        return None
    if pa.types.is_map(t):
        if not isinstance(value, dict):
            raise ValueError("not a JSON object")
        return [(k, _for_arrow(v, t.item_type)) for k, v in value.items()]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        if not isinstance(value, list):
            raise ValueError("not a JSON array")
        return [_for_arrow(v, t.value_type) for v in value]
    if pa.types.is_struct(t):
        if not isinstance(value, dict):
            raise ValueError("not a JSON object")
        names = {t.field(i).name: t.field(i).type for i in range(t.num_fields)}
        unknown = [k for k in value if k not in names]
        if unknown:
            raise ValueError(f"unknown field {unknown[0]!r}")
        return {k: _for_arrow(v, names[k]) for k, v in value.items()}
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return base64.b64decode(value, validate=True) if isinstance(value, str) else value
    return value


def _text_converter(t: pa.DataType) -> Callable[[pa.Array], pa.Array] | None:
    """How a text column becomes a column of type ``t`` (raising on any value that does not
    fit, so a failure can be narrowed to its row); ``None`` if text cannot hold ``t``."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return lambda a: a.cast(t)
    if pa.types.is_timestamp(t):
        return _timestamp_from_text(t)
    if pa.types.is_time(t):
        return _time_from_text(t)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return _base64_from_text(t)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_struct(t) or pa.types.is_map(t):
        return _json_from_text(t)
    if pa.types.is_null(t):
        def nulls(a: pa.Array) -> pa.Array:
            if _blank_null(a).null_count != len(a):
                raise ValueError("not null")
            return pa.nulls(len(a))
        return nulls
    if (pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            or pa.types.is_date(t)):
        return lambda a: _blank_null(a).cast(t)
    return None


def _first_bad(n: int, convert: Callable[[int, int], Any]) -> int:
    """The index of the first of ``n`` values whose conversion fails, given that converting
    them all fails and that ``convert(start, stop)`` converts a slice value by value."""
    lo, hi = 0, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            convert(lo, mid)
        except _BAD:
            hi = mid
        else:
            lo = mid
    return lo


# ---------------------------------------------------------------- inference

_CSV_CANDIDATES = ("long", "double", "boolean", "date", "timestamp", "local-timestamp")
_CANDIDATE_TYPES = {"long": pa.int64(), "double": pa.float64(), "boolean": pa.bool_(), "date": pa.date32(),
                    "timestamp": _UTC_MICROS, "local-timestamp": _LOCAL_MICROS, "string": pa.string()}


def _fits(a: pa.Array, candidate: str) -> bool:
    """Whether every (trimmed, non-null) value of a text array reads as ``candidate``."""
    if candidate == "boolean":
        return bool(pc.all(pc.is_in(pc.utf8_lower(a), pa.array(["true", "false"]))).as_py())
    pattern = {"date": _DATE, "timestamp": _DATETIME + _ZONE, "local-timestamp": _DATETIME + "$"}.get(candidate)
    if pattern is not None and not _all_match(a, pattern):
        return False
    try:
        a.cast(_CANDIDATE_TYPES[candidate])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


class _TextKinds:
    """What every value of a text column seen so far could be."""

    def __init__(self, candidates: Sequence[str]):
        self.candidates = list(candidates)
        self.values = 0

    def update(self, a: pa.Array) -> None:
        values = _blank_null(a).drop_null()
        if not len(values):
            return
        self.values += len(values)
        self.candidates = [c for c in self.candidates if _fits(values, c)]

    def result(self) -> pa.DataType:
        if not self.values or not self.candidates:
            return pa.string()
        return _CANDIDATE_TYPES[self.candidates[0]]


def _merge_types(name: str, a: pa.DataType, b: pa.DataType, where: str) -> pa.DataType:
    if a.equals(b):
        return a
    if pa.types.is_null(a):
        return b
    if pa.types.is_null(b):
        return a
    numbers = (pa.types.is_integer, pa.types.is_floating)
    if any(f(a) for f in numbers) and any(f(b) for f in numbers):
        return pa.float64() if pa.types.is_floating(a) or pa.types.is_floating(b) else pa.int64()
    if pa.types.is_string(a) or pa.types.is_large_string(a) or pa.types.is_string(b) or pa.types.is_large_string(b):
        if not any(pa.types.is_nested(x) for x in (a, b)):
            return pa.string()
    if pa.types.is_nested(a) and pa.types.is_nested(b):
        try:
            return pa.unify_schemas([pa.schema([(name, a)]), pa.schema([(name, b)])],
                                    promote_options="permissive").field(name).type
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            pass
    raise InputError(f"field {name!r} is a {type_name(a)} and a {type_name(b)} ({where})", field=name)


def _plain(t: pa.DataType) -> pa.DataType:
    """A type without dictionary encoding and with 32-bit offsets, as the dataset model has it."""
    if pa.types.is_dictionary(t):
        return _plain(t.value_type)
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return pa.list_(t.value_field.with_type(_plain(t.value_type)))
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_plain(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_plain(t.field(i).type)) for i in range(t.num_fields)])
    return t


def infer_schema(paths: Sequence[str] | Sequence["InputFile"], fs: Any = None, format: str | None = None,
                 storage_options: Mapping[str, Any] | None = None, required: Iterable[str] = (),
                 max_rows: int | None = None, delimiter: str = ",") -> pa.Schema:
    """The Arrow schema of the files (merged as the module docstring says); fields named in
    ``required`` are not nullable. ``max_rows``: look at only that many rows of each CSV or JSON
    lines file (default: all)."""
    files = [p if isinstance(p, InputFile) else InputFile(p, fs, format, storage_options, delimiter) for p in paths]
    if not files:
        raise InputError("no input files to infer a schema from")
    merged: dict[str, pa.Field] = {}
    origin: dict[str, str] = {}
    for f in files:
        for field in f.infer(max_rows):
            if field.name in merged:
                t = _merge_types(field.name, merged[field.name].type, field.type, f"in {origin[field.name]} and {f.name}")
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
    """The rows of one file as batches in ``schema`` (see the module docstring); ``defaults``:
    field name -> Avro default value, for required fields."""
    return InputFile(path, fs, format, storage_options, delimiter).read(schema, defaults)


# ---------------------------------------------------------------- input files

class InputFile:
    """One file to read: its format, size, and how much of it has been read (for progress)."""

    def __init__(self, path: str, fs: Any = None, format: str | None = None,
                 storage_options: Mapping[str, Any] | None = None, delimiter: str = ","):
        self.name = path
        self.format, self.compression = input_format(path, format)
        if fs is None:
            fs, path = fsspec.core.url_to_fs(path, **dict(storage_options or {}))
        self.fs, self.path = fs, path
        if len(delimiter) != 1:
            raise InputError(f"a CSV delimiter is one character, got {delimiter!r}")
        self.delimiter = delimiter
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
        return f"InputFile({self.name!r}, {self.format!r})"

    @property
    def bytes_read(self) -> int:
        """Bytes of the (compressed) file read so far by the current or last read."""
        if self.format != "parquet" and self._raw is not None and not self._raw.closed:
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
        """The column names the file declares (CSV header, Parquet and Avro schema); ``None`` for
        JSON lines, whose objects name their own fields."""
        if self.format == "csv":
            return self._csv_header()[1]
        if self.format == "parquet":
            return self._parquet_schema().names
        if self.format == "avro":
            return self._avro_schema()[1].names
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
        """The file's own schema (inferred for CSV and JSON lines)."""
        if self.format == "parquet":
            fields = [pa.field(f.name, _plain(f.type), f.nullable) for f in self._parquet_schema()]
        elif self.format == "avro":
            fields = list(self._avro_schema()[1])
        elif self.format == "csv":
            fields = self._csv_infer(max_rows)
        else:
            fields = self._json_infer(max_rows)
        bad = [f.name for f in fields if not _AVRO_NAME.fullmatch(f.name)]
        if bad:
            raise InputError(f"{self.name}: column name {bad[0]!r} is not a valid field name (letters, digits and '_', "
                             f"not starting with a digit)", self.name, field=bad[0])
        return pa.schema(fields)

    # ------------------------------------------------------------ reading

    def read(self, schema: pa.Schema, defaults: Mapping[str, Any] | None = None) -> Iterator[pa.RecordBatch]:
        """The file's rows as batches in ``schema``, streamed."""
        defaults = dict(defaults or {})
        if self.format == "csv":
            return self._csv_read(schema, defaults)
        if self.format == "jsonl":
            return self._json_read(schema, defaults)
        if self.format == "parquet":
            return self._parquet_read(schema, defaults)
        return self._avro_read(schema, defaults)

    def _bad_value(self, index: int, field: str, value: Any, t: pa.DataType) -> InputError:
        where = self._where(index)
        shown = value if not isinstance(value, str) or len(value) <= 80 else value[:77] + "..."
        return InputError(f"{self.name} {where}: field {field!r}: {shown!r} is not a {type_name(t)}", self.name,
                          field=field, value=value, **self._location(index))

    def _location(self, index: int) -> dict:
        if self.format in ("csv", "jsonl"):
            return {"line": self._line_of(index)}
        return {"row": index + 1}

    def _where(self, index: int) -> str:
        location = self._location(index)
        return f"line {location['line']}" if "line" in location else f"row {location['row']}"

    def _line_of(self, index: int) -> int:
        """The line on which record ``index`` (0-based, the header not counted) starts."""
        if self.format == "csv":
            with contextlib.closing(self._csv_records()) as records:
                for number, (line, _) in enumerate(records):
                    if number == index:
                        return line
        else:
            number = -1
            with self._open() as f:
                for line, text in enumerate(io.TextIOWrapper(f, encoding="utf-8"), 1):
                    if text.strip():
                        number += 1
                        if number == index:
                            return line
        return -1

    def _conform(self, columns: Mapping[str, pa.Array], rows: int, schema: pa.Schema, defaults: Mapping[str, Any],
                 base: int, null_word: str) -> pa.RecordBatch:
        """A batch in ``schema`` from converted input columns: missing ones filled, nulls checked."""
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
                    index = int(pc.index(column.is_null(), True).as_py())
                    raise InputError(f"{self.name} {self._where(base + index)}: field {f.name!r} is required, but "
                                     f"the value is {null_word}", self.name, field=f.name, **self._location(base + index))
            arrays.append(column)
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    def _typed(self, column: pa.Array, f: pa.Field, base: int) -> pa.Array:
        """A column of any type as field ``f``'s type: text through the text rules, the rest cast
        losslessly; a value that does not fit names its row."""
        if pa.types.is_dictionary(column.type):
            column = column.dictionary_decode()
        if column.type.equals(f.type):
            return column
        text = pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
        if text and not (pa.types.is_string(f.type) or pa.types.is_large_string(f.type)):
            convert = _text_converter(f.type)
        else:
            def convert(a: pa.Array) -> pa.Array:
                return a.cast(f.type, safe=True)
        try:
            if convert is None:
                raise pa.ArrowNotImplementedError("")
            return convert(column)
        except pa.ArrowNotImplementedError:
            raise InputError(f"{self.name}: column {f.name!r} holds {column.type}, which cannot be read as a "
                             f"{type_name(f.type)}", self.name, field=f.name) from None
        except _BAD:
            i = _first_bad(len(column), lambda lo, hi: convert(column.slice(lo, hi - lo)))
            raise self._bad_value(base + i, f.name, column[i].as_py(), f.type) from None

    # ------------------------------------------------------------ CSV

    def _csv_records(self) -> Iterator[tuple[int, list[str]]]:
        """Each non-empty data record with the line it starts on, read by Python's csv module
        (used to find lines: pyarrow's reader does not count them)."""
        csv.field_size_limit(max(csv.field_size_limit(), _FIELD_SIZE_LIMIT))
        with self._open() as f:
            reader = csv.reader(io.TextIOWrapper(f, encoding="utf-8-sig", newline=""), delimiter=self.delimiter)
            header = next(reader, None) or []
            start = reader.line_num + 1
            for record in reader:
                if record or len(header) == 1:  # as pyarrow reads them (see _csv_text_batches)
                    yield start, record or [""]
                start = reader.line_num + 1

    def _csv_header(self) -> tuple[list[str], list[str]]:
        """The header as written and trimmed."""
        with self._open() as f:
            text = io.TextIOWrapper(f, encoding="utf-8-sig", newline="")
            header = next(csv.reader(text, delimiter=self.delimiter), None)
        if not header:
            raise InputError(f"{self.name}: the file is empty; a CSV file needs a header row", self.name)
        names = [h.strip() for h in header]
        for i, n in enumerate(names):
            if not n:
                raise InputError(f"{self.name}: column {i + 1} of the header has no name", self.name)
            if n in names[:i]:
                raise InputError(f"{self.name}: column {n!r} appears twice in the header", self.name, field=n)
        return header, names

    def _csv_text_batches(self) -> Iterator[tuple[list[str], pa.RecordBatch]]:
        raw, names = self._csv_header()
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
                batches = iter(reader)
                while True:
                    batch = next(batches, None)
                    if batch is None:
                        return
                    yield names, batch
            except pa.ArrowInvalid as e:
                error = e
        raise self._csv_parse_error(error, len(names))

    def _csv_parse_error(self, error: Exception, width: int) -> InputError:
        for line, record in self._csv_records():
            if len(record) != width:
                return InputError(f"{self.name} line {line}: {len(record)} value{'s' if len(record) != 1 else ''} "
                                  f"where the header has {width} columns", self.name, line=line)
        return InputError(f"{self.name}: {str(error).splitlines()[0]}", self.name)

    def _csv_infer(self, max_rows: int | None) -> list[pa.Field]:
        names = self._csv_header()[1]
        kinds = [_TextKinds(_CSV_CANDIDATES) for _ in names]
        seen = 0
        for _, batch in self._csv_text_batches():
            if max_rows is not None and seen + batch.num_rows > max_rows:
                batch = batch.slice(0, max_rows - seen)
            for kind, column in zip(kinds, batch.columns):
                kind.update(column)
            seen += batch.num_rows
            if max_rows is not None and seen >= max_rows:
                break
        return [pa.field(n, k.result()) for n, k in zip(names, kinds)]

    def _csv_read(self, schema: pa.Schema, defaults: Mapping[str, Any]) -> Iterator[pa.RecordBatch]:
        names = self._csv_header()[1]
        self._check_columns(names, schema, defaults)
        base = 0
        for names, batch in self._csv_text_batches():
            columns = {}
            for name, column in zip(names, batch.columns):
                f = schema.field(name)
                columns[name] = self._typed(column, f, base)
            yield self._conform(columns, batch.num_rows, schema, defaults, base, "empty")
            base += batch.num_rows

    # ------------------------------------------------------------ JSON lines

    def _json_objects(self, max_rows: int | None = None) -> Iterator[list[tuple[int, dict]]]:
        """Chunks of (line, object), parsed in Python so that every problem has its line."""
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

    def _json_infer(self, max_rows: int | None) -> list[pa.Field]:
        kinds: dict[str, dict[str, int]] = {}  # field -> kind -> first line
        texts: dict[str, _TextKinds] = {}
        nested: dict[str, pa.DataType] = {}
        for chunk in self._json_objects(max_rows):
            values: dict[str, list] = {}
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
                        values.setdefault(f"{kind}:{key}", []).append(v)
            for key, vs in values.items():
                kind, name = key.split(":", 1)
                if kind == "string":
                    texts.setdefault(name, _TextKinds(("date", "timestamp", "local-timestamp"))).update(pa.array(vs))
                else:
                    try:
                        t = _plain(pa.array(vs).type)
                    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
                        raise InputError(f"{self.name}: field {name!r} holds values of different shapes: {e}",
                                         self.name, field=name) from None
                    nested[name] = _merge_types(name, nested[name], t, self.name) if name in nested else t
        fields = []
        for name, seen in kinds.items():
            if "nested" in seen:
                t = nested[name]
            elif "string" in seen:
                t = texts[name].result()
            elif "double" in seen:
                t = pa.float64()
            elif "long" in seen:
                t = pa.int64()
            elif "boolean" in seen:
                t = pa.bool_()
            else:
                t = pa.string()
            fields.append(pa.field(name, t))
        return fields

    def _json_read(self, schema: pa.Schema, defaults: Mapping[str, Any]) -> Iterator[pa.RecordBatch]:
        natives = [_json_native(f.type) for f in schema]
        if any(t is None for t in natives):
            yield from self._json_read_python(schema, defaults)
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
                    yield self._conform(columns, batch.num_rows, schema, defaults, base, "null or missing")
                    base += batch.num_rows
        except pa.ArrowInvalid as e:
            # pyarrow's messages do not tell the line, field and value: Python's parser finds them
            # (and reads what pyarrow's parser refuses but Python's takes: an empty file, NaN)
            if base == 0:
                yield from self._json_read_python(schema, defaults)
                return
            for _ in self._json_read_python(schema, defaults):
                pass
            raise InputError(f"{self.name}: {str(e).splitlines()[0]}", self.name) from None

    def _json_read_python(self, schema: pa.Schema, defaults: Mapping[str, Any]) -> Iterator[pa.RecordBatch]:
        names = set(schema.names)
        for chunk in self._json_objects():
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
                    columns[f.name] = _python_array(values, f.type)
                except _BAD:
                    i = _first_bad(len(values), lambda lo, hi: _python_array(values[lo:hi], f.type))
                    raise InputError(f"{self.name} line {lines[i]}: field {f.name!r}: {values[i]!r} is not a "
                                     f"{type_name(f.type)}", self.name, line=lines[i], field=f.name,
                                     value=values[i]) from None
            for f in schema:
                column = columns[f.name]
                if column.null_count and not f.nullable and f.name not in defaults:
                    i = int(pc.index(column.is_null(), True).as_py())
                    raise InputError(f"{self.name} line {lines[i]}: field {f.name!r} is required, but the value is "
                                     f"null or missing", self.name, line=lines[i], field=f.name)
            yield self._conform(columns, len(chunk), schema, defaults, 0, "null or missing")

    # ------------------------------------------------------------ Parquet

    def _parquet_schema(self) -> pa.Schema:
        with self._open() as f:
            try:
                return pq.read_schema(f).remove_metadata()
            except pa.ArrowInvalid as e:
                raise InputError(f"{self.name}: not a readable Parquet file: {e}", self.name) from None

    def _parquet_read(self, schema: pa.Schema, defaults: Mapping[str, Any]) -> Iterator[pa.RecordBatch]:
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
                yield self._conform(columns, batch.num_rows, schema, defaults, base, "null")
                base += batch.num_rows
                self._done = self.size * base // total  # a Parquet file is read by seeks: progress by rows

    # ------------------------------------------------------------ Avro

    def _avro_schema(self) -> tuple[dict, pa.Schema]:
        with self._open() as f:
            try:
                writer = fastavro.reader(f).writer_schema
            except Exception as e:  # fastavro raises ValueError, EOFError, its own types...
                raise InputError(f"{self.name}: not a readable Avro file: {e}", self.name) from None
        try:
            return writer, to_arrow(writer)
        except (CdkdsError, KeyError, TypeError) as e:
            raise InputError(f"{self.name}: its Avro schema has no Arrow form: {e}", self.name) from None

    def _avro_read(self, schema: pa.Schema, defaults: Mapping[str, Any]) -> Iterator[pa.RecordBatch]:
        writer, arrow = self._avro_schema()
        self._check_columns(arrow.names, schema, defaults)
        uuids = [f["name"] for f in writer["fields"] if type_kind(f["type"]) == "uuid"]
        base = 0

        def batch_of(rows: list[dict]) -> pa.RecordBatch:
            for row in rows:
                for name in uuids:
                    if isinstance(row.get(name), uuid.UUID):
                        row[name] = str(row[name])
            batch = pa.RecordBatch.from_pylist(rows, schema=arrow)
            columns = {name: self._typed(batch.column(name), schema.field(name), base) for name in arrow.names}
            return self._conform(columns, len(rows), schema, defaults, base, "null")

        with self._open() as f:
            rows: list[dict] = []
            for record in fastavro.reader(f):
                rows.append(record)
                if len(rows) >= _BATCH_ROWS:
                    yield batch_of(rows)
                    base += len(rows)
                    rows = []
            if rows:
                yield batch_of(rows)


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
    if (pa.types.is_boolean(t) or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_decimal(t)
            or pa.types.is_timestamp(t)):
        return t
    if pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t) \
            or pa.types.is_large_binary(t):
        return pa.string()  # then converted by the text rules
    if pa.types.is_list(t):
        inner = _json_native(t.value_type)
        return pa.list_(t.value_field.with_type(inner)) if inner is not None and inner.equals(t.value_type) else None
    if pa.types.is_struct(t):
        inner = [_json_native(t.field(i).type) for i in range(t.num_fields)]
        if all(x is not None and x.equals(t.field(i).type) for i, x in enumerate(inner)):
            return t
    return None


def _python_array(values: list, t: pa.DataType) -> pa.Array:
    """JSON values (decoded by Python) as an array of type ``t``; raises on a value that does not fit."""
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        allowed = int if pa.types.is_integer(t) else (int, float)
        if not all(v is None or (isinstance(v, allowed) and not isinstance(v, bool)) for v in values):
            raise ValueError("not a number")
        return pa.array(values, pa.int64() if pa.types.is_integer(t) else pa.float64()).cast(t)
    if pa.types.is_boolean(t):
        if not all(v is None or isinstance(v, bool) for v in values):
            raise ValueError("not a boolean")
        return pa.array(values, t)
    if pa.types.is_decimal(t):
        if not all(v is None or (isinstance(v, (int, float, str)) and not isinstance(v, bool)) for v in values):
            raise ValueError("not a number")
        return pa.array([None if v is None else decimal.Decimal(str(v)) for v in values], t)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or _json_native(t) == pa.string() \
            or pa.types.is_timestamp(t):
        if not all(v is None or isinstance(v, str) for v in values):
            raise ValueError("not a string")
        column = pa.array(values, pa.string())
        return column if pa.types.is_string(t) else _text_converter(t)(column)
    return pa.array([_for_arrow(v, t) for v in values], t)


# ---------------------------------------------------------------- output files

def output_format(path: str, format: str | None = None) -> str:
    """The format to export to: ``format``, or the one the name tells (``.parquet``, ``.csv``,
    ``.jsonl``/``.json``/``.ndjson``, ``.avro``)."""
    if format is not None:
        format = {"json": "jsonl", "ndjson": "jsonl"}.get(format.lower(), format.lower())
        if format not in EXPORT_FORMATS:
            raise InputError(f"{path}: unknown format {format!r}; use one of {', '.join(EXPORT_FORMATS)}", path)
        return format
    name = path.rstrip("/").rsplit("/", 1)[-1].lower()
    ext = name[name.rfind("."):] if "." in name else ""
    if ext not in _EXTENSIONS:
        raise InputError(f"{path}: cannot tell the format to write from the name; name it .parquet, .csv, .jsonl or "
                         f".avro, or give the format", path)
    return _EXTENSIONS[ext]


class OutputFile:
    """One file written batch by batch in a format; ``close()`` returns its size. CSV and JSON
    lines follow the reading rules (bytes as base64, nested values as JSON text in CSV, times
    in ISO 8601), so an exported file imports back."""

    def __init__(self, path: str, schema: pa.Schema, format: str | None = None, fs: Any = None,
                 storage_options: Mapping[str, Any] | None = None, avro_schema: dict | None = None,
                 overwrite: bool = False):
        self.name = path
        self.format = output_format(path, format)
        if fs is None:
            fs, path = fsspec.core.url_to_fs(path, **dict(storage_options or {}))
        self.fs, self.path, self.schema = fs, path, schema
        if not overwrite and fs.exists(path):
            raise InputError(f"{self.name} exists; it is not overwritten unless asked", self.name)
        self.rows = 0
        self._avro_schema = avro_schema if avro_schema is not None else from_arrow(schema)
        self._stream: Any = None
        self._writer: Any = None

    def _open(self) -> None:
        if self.format == "avro":
            self._writer = AvroFileWriter(self.fs, self.path, self._avro_schema, self.schema, "deflate", {})
            return
        parent = self.path.rsplit("/", 1)[0] if "/" in self.path else ""
        if parent:
            with contextlib.suppress(Exception):
                self.fs.makedirs(parent, exist_ok=True)
        self._stream = self.fs.open(self.path, "wb")
        if self.format == "parquet":
            self._writer = pq.ParquetWriter(self._stream, self.schema, compression="snappy")
        elif self.format == "csv":
            self._writer = pacsv.CSVWriter(self._stream, _csv_schema(self.schema))

    def write(self, batch: pa.RecordBatch) -> None:
        if self._stream is None and self._writer is None:
            self._open()
        self.rows += batch.num_rows
        if self.format == "csv":
            self._writer.write_batch(_csv_batch(batch))
        elif self.format == "jsonl":
            self._stream.write("".join(_JSON.encode(r) + "\n" for r in _json_rows(batch)).encode())
        else:
            self._writer.write(batch) if self.format == "avro" else self._writer.write_batch(batch)

    def close(self) -> int:
        """Finish the file (an empty one if nothing was written); its size in bytes."""
        if self._stream is None and self._writer is None:
            self._open()
        if self.format == "avro":
            return self._writer.close().size
        if self._writer is not None:
            self._writer.close()
        self._stream.close()
        return int(self.fs.size(self.path))

    def abort(self) -> None:
        """Stop and remove what was written."""
        with contextlib.suppress(Exception):
            if self.format == "avro" and self._writer is not None:
                self._writer.abort()
                return
            if self._writer is not None:
                self._writer.close()
        with contextlib.suppress(Exception):
            if self._stream is not None:
                self._stream.close()
        with contextlib.suppress(Exception):
            if self.fs.exists(self.path):
                self.fs.rm(self.path)


def _as_text(t: pa.DataType) -> bool:
    return (pa.types.is_nested(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)
            or pa.types.is_fixed_size_binary(t))


def _csv_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, pa.string() if _as_text(f.type) else f.type) for f in schema])


def _csv_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    columns = []
    for f, column in zip(batch.schema, batch.columns):
        if _as_text(f.type):
            values = column.to_pylist(maps_as_pydicts="lossy") if pa.types.is_nested(f.type) else column.to_pylist()
            column = pa.array([None if v is None else base64.b64encode(v).decode() if isinstance(v, bytes)
                               else json.dumps(v, default=_json_default, ensure_ascii=False) for v in values],
                              pa.string())
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=_csv_schema(batch.schema))


def _json_rows(batch: pa.RecordBatch) -> list[dict]:
    """The rows as dicts ready for ``json.dumps``: times, decimals and bytes as text (converted
    column by column: making Python datetimes of every value costs more than the JSON)."""
    columns = []
    for column in batch.columns:
        t = column.type
        if pa.types.is_timestamp(t):
            column = pc.replace_substring(column.cast(pa.string()), " ", "T", max_replacements=1)
        elif pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_decimal(t):
            column = column.cast(pa.string())
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
            column = pa.array([None if v is None else base64.b64encode(v).decode() for v in column.to_pylist()],
                              pa.string())
        columns.append(column.to_pylist(maps_as_pydicts="lossy") if pa.types.is_nested(t) else column.to_pylist())
    names = batch.schema.names
    return [dict(zip(names, row)) for row in zip(*columns)]


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        text = value.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


_JSON = json.JSONEncoder(default=_json_default, ensure_ascii=False)  # NaN and infinities as Python writes them


__all__ = ["EXPORT_FORMATS", "FORMATS", "InputError", "InputFile", "OutputFile", "infer_schema", "input_format",
           "output_format", "read_batches", "type_name"]
