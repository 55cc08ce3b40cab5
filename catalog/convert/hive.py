"""Hive-style partitioned Parquet folders (``country=NZ/day=2026-01-01/part-0.parquet``).

Every file not hidden (no path segment starting with ``.`` or ``_``, as pyarrow's and
Spark's discovery skip ``_SUCCESS``, ``.crc`` and ``_temporary``) is a Parquet data file
whose folders are ``name=value`` segments, the same names in the same order for every file.
Values are percent-decoded, ``__HIVE_DEFAULT_PARTITION__`` is null. A partition column's
type is given (``partition_types``) or inferred as pyarrow's hive partitioning infers it
(whole numbers in ASCII digits with an optional ``-``: ``int``, or ``long`` beyond it when
written without leading zeros), and dates (``YYYY-MM-DD``) too; anything else (``+5``,
numbers beyond a long) is a string; a
partition column the files hold takes the files' type (and must hold the folder's value).
The schema is the files' (all must agree, partition columns aside) followed by the
partition columns the files lack; each partition is an identity function of its column (named ``<column>_copy``,
as a partition may not be named as a field).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Mapping
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from cdkds.catalog.convert.source import Found, SourceFile, identity_strategy, visible_files
from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import ConversionError, InvalidDescriptorError
from cdkds.formats.errors import InvalidSchemaError
from cdkds.catalog.storage import ObjectStore
from cdkds.formats import schema as schemas
from cdkds.formats.files import open_data_file
from cdkds.formats.schema import PARQUET_FIELD_ID

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
# partition column types one may give, as Avro types, and how a folder's text becomes a value (no floating
# types: an identity partition cannot take one)
PARTITION_TYPES: Mapping[str, tuple[Any, Any]] = {
    "int": ("int", int), "long": ("long", int), "string": ("string", str), "boolean": ("boolean", None),
    "date": ({"type": "int", "logicalType": "date"}, dt.date.fromisoformat),
}
_INT32 = (-2 ** 31, 2 ** 31 - 1)
_INT64 = (-2 ** 63, 2 ** 63 - 1)
# ASCII only, as pyarrow parses them ('\d' and int() take other scripts' digits, '+', '_')
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_WHOLE = re.compile(r"-?[0-9]+")


def check_partition_types(types: Mapping[str, str] | None) -> dict[str, str]:
    """``types`` (partition column -> type name), each a type this module knows; a
    :class:`ConversionError` naming the first that is not."""
    out = {}
    for name, kind in (types or {}).items():
        if not isinstance(name, str) or not name or kind not in PARTITION_TYPES:
            raise ConversionError(f"partition type {name}={kind}: the type must be one of "
                                  f"{', '.join(PARTITION_TYPES)}")
        out[name] = kind
    return out


def read_hive(store: ObjectStore, partition_types: Mapping[str, str] | None = None) -> Found:
    """The dataset a Hive-style folder of Parquet files (``store``'s root) becomes."""
    types = check_partition_types(partition_types)
    files = [(key, None) for key in visible_files(store)]
    if not files:
        raise ConversionError(f"{store.url} holds no data file to convert")
    folders = {key: _folders(store, key) for key, _ in files}
    names = [n for n, _ in folders[files[0][0]]]
    for key, parts in folders.items():
        if [n for n, _ in parts] != names:
            raise ConversionError(f"data file {store.display(key)} lies under partition folders "
                                  f"{[n for n, _ in parts]}, other files under {names}: every file needs the same ones")
    if len(set(names)) < len(names):
        raise ConversionError(f"data file {store.display(files[0][0])} lies under partition folders {names}: a "
                              f"partition column may appear once in a path")
    unknown = set(types) - set(names)
    if unknown:
        raise ConversionError(f"partition type given for {sorted(unknown)}, but the partition folders of "
                              f"{store.url} are {names}")
    layouts = {key: _file_schema(store, key) for key, _ in files}
    schema = _agreed_schema(store, layouts, set(names))
    kinds = {}
    for i, name in enumerate(names):
        texts = [folders[key][i][1] for key, _ in files]
        in_files = _partition_column_type(store, layouts, name, types.get(name))
        kinds[name] = in_files if in_files is not None else types.get(name) or _inferred(texts)
    descriptor = _descriptor(store, files[0][0], schema, names, kinds)
    _check_field_ids(store, layouts, descriptor)
    partition = {f.source: f.name for f in descriptor.partition_strategy.functions} if names else {}
    values = {key: {partition[n]: _value(store, key, n, text, kinds[n]) for n, text in folders[key]}
              for key, _ in files}
    for key, layout in layouts.items():
        _check_held_values(store, key, layout, folders[key], {n: values[key][partition[n]] for n in names})
    return Found("hive", descriptor, tuple(SourceFile(key, values[key]) for key, _ in files))


def _folders(store: ObjectStore, key: str) -> list[tuple[str, str]]:
    """The ``(name, text)`` of each folder of a file's path."""
    out = []
    for segment in key.split("/")[:-1]:
        name, eq, text = segment.partition("=")
        if not eq or not name:
            raise ConversionError(f"data file {store.display(key)} lies in folder {segment!r}, which is not a "
                                  f"Hive partition folder (name=value)")
        out.append((unquote(name), unquote(text)))
    return out


def _file_schema(store: ObjectStore, key: str) -> pa.Schema:
    try:
        with open_data_file(store.fs, store.path(key)) as f:
            return pq.ParquetFile(f).schema_arrow.remove_metadata()
    except Exception as e:  # noqa: BLE001 - whatever pyarrow raises, the file cannot be read
        raise ConversionError(f"data file {store.display(key)} is not a readable Parquet file: "
                              f"{type(e).__name__}: {e}") from None


def _agreed_schema(store: ObjectStore, layouts: Mapping[str, pa.Schema], partition: set[str]) -> pa.Schema:
    """The one schema of the files (partition columns left out): the first file's; a file
    that lacks a field, has another or types one otherwise is named with the field."""
    first, reference = next(iter(layouts.items()))
    fields = {f.name: f for f in reference if f.name not in partition}
    for key, layout in layouts.items():
        theirs = {f.name: f for f in layout if f.name not in partition}
        for name in list(fields) + [n for n in theirs if n not in fields]:
            mine, other = fields.get(name), theirs.get(name)
            if other is None or mine is None or not other.type.equals(mine.type):
                raise ConversionError(
                    f"the schemas of the data files disagree: {store.display(key)} has field {name!r} as "
                    f"{other.type if other is not None else 'absent'}, {store.display(first)} as "
                    f"{mine.type if mine is not None else 'absent'}")
    return pa.schema([f.with_nullable(True) if not f.nullable else f for f in fields.values()])


def _partition_column_type(store: ObjectStore, layouts: Mapping[str, pa.Schema], name: str,
                           given: str | None) -> str | None:
    """The type name of partition column ``name`` as the files that hold it have it (``None``:
    no file does); files that disagree, or a given type that differs, are named."""
    found: tuple[str, pa.DataType] | None = None
    for key, layout in layouts.items():
        if name not in layout.names:
            continue
        t = layout.field(name).type
        if found is not None and not t.equals(found[1]):
            raise ConversionError(f"the schemas of the data files disagree: {store.display(key)} has partition "
                                  f"column {name!r} as {t}, {store.display(found[0])} as {found[1]}")
        found = found or (key, t)
    if found is None:
        return None
    kind = _type_name(found[1])
    if kind is None or (given is not None and given != kind):
        raise ConversionError(f"data file {store.display(found[0])} holds partition column {name!r} as {found[1]}, "
                              f"{'not ' + given if given else 'not a type a partition folder can hold'}")
    return kind


def _check_held_values(store: ObjectStore, key: str, layout: pa.Schema, folders: list[tuple[str, str]],
                       values: Mapping[str, Any]) -> None:
    """A file that holds partition columns holds its folders' values in them: pyarrow reads
    the folder's value, cdkds the file's column (docs/FORMAT.md §8), so a file that disagrees
    is named, not adopted to read otherwise (only these columns are read)."""
    held = [n for n in values if n in layout.names]
    if not held:
        return
    with open_data_file(store.fs, store.path(key)) as f:
        table = pq.read_table(f, columns=held)
    texts = dict(folders)
    for name in held:
        other = next((v for v in table.column(name).unique().to_pylist() if v != values[name]), _AGREES)
        if other is not _AGREES:
            raise ConversionError(f"data file {store.display(key)} holds {other!r} in partition column {name!r}, "
                                  f"under folder {name}={texts[name]}: a file's partition column must hold its "
                                  f"folder's value (pyarrow reads the folder's, cdkds the file's)")


_AGREES = object()


def _check_field_ids(store: ObjectStore, layouts: Mapping[str, pa.Schema], descriptor: DatasetDescriptor) -> None:
    """Files that carry Parquet field ids are read by them (docs/FORMAT.md §5.1): a file
    whose ids are not those the dataset gives its columns (one written by Iceberg, say) would
    be misread, and is named."""
    ids = descriptor.field_ids
    for key, layout in layouts.items():
        for f in layout:
            raw = (f.metadata or {}).get(PARQUET_FIELD_ID)
            if raw is not None and int(raw) != ids.get(f.name):
                raise ConversionError(f"data file {store.display(key)} carries field id {int(raw)} for column "
                                      f"{f.name!r}, which the converted dataset gives id {ids.get(f.name)}: its "
                                      f"columns would be misread (files with field ids of their own cannot be "
                                      f"adopted from a Hive-style folder)")


def _type_name(t: pa.DataType) -> str | None:
    names = {pa.int32(): "int", pa.int64(): "long", pa.string(): "string", pa.large_string(): "string",
             pa.bool_(): "boolean", pa.date32(): "date"}
    return names.get(t)


def _inferred(texts: list[str]) -> str:
    present = [t for t in texts if t != HIVE_NULL]
    if present and all(_WHOLE.fullmatch(t) for t in present):
        if all(_INT32[0] <= int(t) <= _INT32[1] for t in present):
            return "int"
        if all(_INT64[0] <= int(t) <= _INT64[1] and str(int(t)) == t for t in present):
            return "long"  # where pyarrow keeps text: only when no text is lost ('0300...' stays text)
        return "string"
    if present and all(_DATE.fullmatch(t) and _date(t) is not None for t in present):
        return "date"
    return "string"


def _date(text: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        return None


def _value(store: ObjectStore, key: str, name: str, text: str, kind: str) -> Any:
    if text == HIVE_NULL:
        return None
    parse = PARTITION_TYPES[kind][1]
    try:
        if parse is None:  # boolean
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        plain = {"int": _WHOLE, "long": _WHOLE, "date": _DATE}.get(kind)
        if plain is not None and not plain.fullmatch(text):
            raise ValueError(text)
        value = parse(text)
        bounds = {"int": _INT32, "long": _INT64}.get(kind)
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            raise ValueError(text)
        return value
    except ValueError:
        raise ConversionError(f"data file {store.display(key)}: partition folder {name}={text} is not a {kind}") \
            from None


def _descriptor(store: ObjectStore, first: str, schema: pa.Schema, names: list[str], kinds: Mapping[str, str]
                ) -> DatasetDescriptor:
    """The descriptor of files of ``schema`` (that of ``first`` and every other file)."""
    try:
        avro = schemas.from_arrow(schema)
    except InvalidSchemaError as e:
        raise ConversionError(f"data file {store.display(first)} (and the others) cannot be adopted: {e}") from None
    avro["fields"] += [{"name": n, "type": ["null", PARTITION_TYPES[kinds[n]][0]], "default": None}
                       for n in names]
    strategy = identity_strategy(names)
    try:
        return DatasetDescriptor(avro, strategy)
    except InvalidDescriptorError as e:
        raise ConversionError(f"{store.url} cannot become a dataset: {e}") from None
