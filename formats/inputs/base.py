"""What every input format shares: the :class:`InputFile` base (opening, column checks, typed
columns, conforming a batch to the target schema), :class:`InputError` and type merging."""

from __future__ import annotations

import contextlib
import gzip
from abc import ABC, abstractmethod
from typing import Any, Iterator, Mapping, Sequence

import fsspec
import pyarrow as pa
import pyarrow.compute as pc

from cdkds.formats.conversion import RefusedValue, as_nullable, conform_column
from cdkds.formats.errors import CdkdsError, SchemaMismatchError
from cdkds.formats.schema import from_arrow
from cdkds.formats.text import BAD_VALUE, first_bad, is_text, misfit, text_converter, type_name
from cdkds.formats.schema_rules import is_field_name

FORMATS = ("csv", "jsonl", "parquet", "avro")
EXTENSIONS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet",
              ".avro": "avro"}
BLOCK_BYTES = 1 << 20  # CSV and JSON text parsed per batch
BATCH_ROWS = 65_536  # Parquet and Avro rows per batch
JSON_CHUNK_LINES = 16_384  # JSON lines parsed by Python per batch
FIELD_SIZE_LIMIT = 2**31 - 1  # Python's csv module refuses values over 128 KiB by default


class InputError(CdkdsError, ValueError):
    """A file that cannot be read into the schema: the message names the file and, for a value,
    its line (or row), field and value (also kept as attributes)."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None, row: int | None = None,
                 field: str | None = None, value: Any = None):
        super().__init__(message)
        self.path, self.line, self.row, self.field, self.value = path, line, row, field, value


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
        self._types: dict[str, Any] = {}  # field name -> Avro type its values are checked for
        self._declared: set[str] = set()  # the fields that declare a default

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

    def check(self, schema: pa.Schema, defaults: Mapping[str, Any] | None = None,
              avro: Mapping[str, Any] | None = None) -> None:
        """Raise an :class:`InputError` now if the file's columns do not fit ``schema`` (``avro``:
        its Avro form, as for :meth:`read`)."""
        self._expect(schema, avro)
        names = self.columns()
        if names is not None:
            self._check_columns(names, schema, defaults or {})

    def _expect(self, schema: pa.Schema, avro: Mapping[str, Any] | None) -> None:
        """Take the Avro form of the target schema: how values are checked, which fields have defaults."""
        record = avro if avro is not None else from_arrow(schema)  # (there, nullable fields default to null)
        self._types = {f["name"]: as_nullable(f["type"]) for f in record["fields"]}
        self._declared = {f["name"] for f in record["fields"] if "default" in f}

    def _check_columns(self, names: Sequence[str], schema: pa.Schema, defaults: Mapping[str, Any]) -> None:
        """A file's columns must be fields of ``schema``, and a field without a default must have one
        (as for ``write()`` and ``write_batch``: a nullable field with no default too)."""
        unknown = [n for n in names if schema.get_field_index(n) < 0]
        if unknown:
            listed = ", ".join(repr(n) for n in unknown)
            raise InputError(f"{self.name}: unknown column{'s' if len(unknown) > 1 else ''} {listed}; the fields are "
                             f"{schema.names}", self.name, field=unknown[0])
        for f in schema:
            if f.name not in names and f.name not in defaults and f.name not in self._declared:
                required = "required field" if not f.nullable else "field"
                hint = "" if not f.nullable else ' (a nullable field needs "default": null to be left out)'
                raise InputError(f"{self.name}: no column for the {required} {f.name!r} (it has no default){hint}",
                                 self.name, field=f.name)

    def infer(self, max_rows: int | None = None) -> pa.Schema:
        """The file's own schema (inferred from the values of CSV and JSON lines)."""
        fields = self._fields(max_rows)
        bad = [f.name for f in fields if not is_field_name(f.name)]
        if bad:
            raise InputError(f"{self.name}: column name {bad[0]!r} is not a valid field name (letters, digits and '_', "
                             f"not starting with a digit)", self.name, field=bad[0])
        return pa.schema(fields)

    @abstractmethod
    def _fields(self, max_rows: int | None) -> list[pa.Field]:
        """The fields of the file's own schema."""

    # ------------------------------------------------------------ reading

    def read(self, schema: pa.Schema, defaults: Mapping[str, Any] | None = None,
             avro: Mapping[str, Any] | None = None) -> Iterator[pa.RecordBatch]:
        """The file's rows as batches in ``schema``, streamed; every value checked by the
        rules of :mod:`cdkds.formats.conversion` for the fields of ``avro``, the Avro form of
        ``schema`` (a dataset's schema: its enums, UUIDs... ; by default the plain Avro form of
        ``schema``)."""
        self._expect(schema, avro)  # (top-level nulls are checked by _conform: a required field's default fills them)
        return self._read(schema, dict(defaults or {}))

    @abstractmethod
    def _read(self, schema: pa.Schema, defaults: Mapping[str, Any]) -> Iterator[pa.RecordBatch]:
        """The rows in ``schema``."""

    def _location(self, index: int) -> dict:
        """Where record ``index`` (0-based) is, as :class:`InputError` attributes."""
        return {"row": index + 1}

    def refused(self, e: RefusedValue, index: int) -> InputError:
        """An :class:`InputError` for a value refused in record ``index`` (0-based) of the file."""
        location = self._location(index)
        where = " ".join(f"{k} {v}" for k, v in location.items())
        return InputError(f"{self.name} {where}: {e.describe()}", self.name, field=e.path, value=e.value, **location)

    def _where(self, index: int) -> str:
        return " ".join(f"{k} {v}" for k, v in self._location(index).items())

    def _bad_value(self, index: int, field: str, value: Any, t: pa.DataType, location: dict | None = None
                   ) -> InputError:
        """The error for ``value`` of record ``index`` not fitting type ``t``; inside a nested
        value, the part that does not is named by its path (``arr[0]``)."""
        location = location or self._location(index)
        inside, part, expected = misfit(value, t)
        shown = part if not isinstance(part, str) or len(part) <= 80 else part[:77] + "..."
        where = " ".join(f"{k} {v}" for k, v in location.items())
        article = "" if expected.startswith("a ") else "a "
        return InputError(f"{self.name} {where}: field {field + inside!r}: {shown!r} is not {article}{expected}",
                          self.name, field=field + inside, value=part, **location)

    def _typed(self, column: pa.Array, f: pa.Field, base: int) -> pa.Array:
        """A column of any type as field ``f``'s type: text by the text rules, then every value
        by :func:`cdkds.formats.conversion.conform_column`; a value that does not fit is an
        error naming its line or row."""
        if pa.types.is_dictionary(column.type):
            column = column.dictionary_decode()
        if is_text(column.type) and not is_text(f.type):
            convert = text_converter(f.type)
            if convert is None:
                raise InputError(f"{self.name}: column {f.name!r} holds {column.type}, which cannot be read as a "
                                 f"{type_name(f.type)}", self.name, field=f.name) from None
            try:
                column = convert(column)
            except BAD_VALUE:
                i = first_bad(len(column), lambda lo, hi: convert(column.slice(lo, hi - lo)))
                raise self._bad_value(base + i, f.name, column[i].as_py(), f.type) from None
        return self._checked(column, f, base)

    def _checked(self, column: pa.Array, f: pa.Field, base: int) -> pa.Array:
        """A typed column with every value checked for field ``f``; rows counted from ``base``."""
        try:
            avro = self._types.get(f.name) or from_arrow(pa.schema([f.with_nullable(True)]))["fields"][0]["type"]
            return conform_column(column, avro, f.name)
        except RefusedValue as e:
            raise self.refused(e, base + e.row) from None
        except SchemaMismatchError as e:
            raise InputError(f"{self.name}: {e}", self.name, field=f.name) from None

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


class LinesInput(InputFile):
    """A text format whose records start on lines: errors name the line."""

    def _location(self, index: int) -> dict:
        return {"line": self._line_of(index)}

    @abstractmethod
    def _line_of(self, index: int) -> int:
        """The line on which record ``index`` (0-based, a header not counted) starts."""
