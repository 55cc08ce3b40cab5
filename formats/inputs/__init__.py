"""Files to import — CSV, JSON lines, Parquet, Avro — read as Arrow batches in a target schema,
and the schema inferred from them.

Reading streams (one batch at a time, bounded memory) and puts every batch into the *target*
Arrow schema (a dataset's): input columns are matched to fields by name; a column the schema
does not have is an error naming it; a missing column reads as the field's default, and is an
error when the field has none — a nullable field too, as for ``write()`` and ``write_batch``
(give it ``"default": null``). A null (an empty CSV value, a JSON null or missing key) in a
required field takes the field's default if it has one, else it is an error. Text becomes typed
values by the rules of :mod:`cdkds.formats.text`; then every value, of every format, goes
through :func:`cdkds.formats.conversion.conform_column` for the dataset's field, the one checked
conversion every write uses. A value that does not fit its field is an :class:`InputError`
naming the file, the line (CSV and JSON lines: 1-based, the CSV header is line 1) or row
(Parquet and Avro: 1-based), the field (its path, for a nested value) and the value. A CSV file
ending inside a quoted value (truncated) and a truncated Avro file are errors.

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

from typing import Any, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa

from cdkds.formats.inputs.base import InputError, InputFile, merge_types, plain
from cdkds.formats.inputs.avro_file import AvroInput
from cdkds.formats.inputs.csv_file import CsvInput
from cdkds.formats.inputs.json_lines import JsonLinesInput
from cdkds.formats.inputs.parquet_file import ParquetInput

FORMATS = ("csv", "jsonl", "parquet", "avro")
EXTENSIONS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet",
              ".avro": "avro"}


__all__ = ["FORMATS", "AvroInput", "CsvInput", "InputError", "InputFile", "JsonLinesInput", "ParquetInput",
           "format_of", "infer_schema", "input_format", "merge_types", "open_input", "plain", "read_batches"]


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
    """The rows of one file as batches in ``schema``; ``defaults``: field name -> default value
    (as ``field_defaults`` gives it)."""
    return open_input(path, fs, format, storage_options, delimiter).read(schema, defaults)
