"""Kite datasets, found in Kite's file-system repository layout and adopted in place.

A Kite dataset folder ``<root>/<namespace>/<name>/`` holds ``.metadata/descriptor.properties``
(written by Kite's ``FileSystemMetadataProvider``: ``version=1``, ``format``,
``compressionType``, ``location``, ``partitionExpression`` and the user's properties as
plain keys), its schema in ``.metadata/schemas/<N>.avsc`` (the highest ``N`` is current;
datasets written before Kite 1.0 have ``.metadata/schema.avsc`` only) and its Avro or
Parquet data files under one ``<partition name>=<value>`` folder per partition function,
in order. Names starting with ``.`` or ``_`` are Kite's hidden and temporary files.

Kite's partition functions map to cdkds's with the same values, except where Kite's
paths hold something else (see :class:`KitePartition`): ``hash``, ``identity``,
``range`` (string bounds: the bound; int bounds: Kite's folder holds the bound's index),
``fixedSizeRange`` (cdkds's ``range`` of a size), ``year``, ``month``, ``day``, ``hour``,
``minute`` and ``dateFormat``. Kite's ``provided`` partitions have no source field, so no
cdkds counterpart.

Kite computed each value in Java, and a few of Java's results depend on more than the
value (its hash of text is that of the ``String`` or of Avro's ``Utf8`` the writing job
held, which differ beyond ASCII; its calendar is Julian before 1582; its fixed-size
ranges divide in doubles). So every row's partition values are computed again the
cdkds way and must be those of the folder its file is in: a dataset converted prunes
exactly as Kite did, or is refused naming the file and the row's value.
"""

from __future__ import annotations

import datetime as dt
import json
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence
from urllib.parse import unquote, unquote_plus, urlsplit

import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.convert.kite_expression import (
    KiteCall, KiteDatasetError, parse_partition_expression, parse_properties,
)
from cdkds.catalog.convert.source import Found, SourceFile, visible_files
from cdkds.catalog.descriptor import KNOWN_PROPERTIES, DatasetDescriptor
from cdkds.catalog.errors import CdkdsError, InvalidDescriptorError, InvalidPartitionStrategyError, InvalidSchemaError
from cdkds.catalog.partitioning import PartitionStrategy
from cdkds.catalog.partitioning.functions import STRING_KINDS, PartitionFunction
from cdkds.catalog.partitioning.strategy import make_function
from cdkds.catalog.storage import ObjectStore
from cdkds.formats import schema as schemas, values
from cdkds.formats.files import file_format
from cdkds.formats.schema import INTEGER_KINDS, TIMESTAMP_KINDS
from cdkds.formats.schema_rules import check_schema

__all__ = ["KiteDatasetError", "KitePartition", "is_kite", "read_kite"]

METADATA = ".metadata"
DESCRIPTOR_FILE = ".metadata/descriptor.properties"
SCHEMAS_FOLDER = ".metadata/schemas"
OLD_SCHEMA_FILE = ".metadata/schema.avsc"
METADATA_VERSION = "1"
_RESERVED = ("version", "format", "compressionType", "location", "partitionExpression")
# Kite's format -> its compression names -> cdkds's. cdkds writes no bzip2: new files of a
# bzip2 Avro dataset are deflated (its bzip2 files stay readable as they are).
_COMPRESSIONS = {
    "avro": {"snappy": "snappy", "deflate": "deflate", "bzip2": "deflate", "uncompressed": "none"},
    "parquet": {"snappy": "snappy", "deflate": "gzip", "uncompressed": "none"},
}
_READ_ONLY_FORMATS = ("csv", "json", "inputformat")
_CALENDAR = ("year", "month", "day", "hour", "minute")
_GREGORIAN_MILLIS = -12_219_292_800_000  # 1582-10-15T00:00Z: Java's calendar is Julian before it
# Kite's default partition names (PartitionFunctions with a null name)
_DEFAULT_NAMES = {"hash": "{}_hash", "identity": "{}_copy", "range": "{}_bound", "fixedSizeRange": "{}_range"}
_SIGNATURES = {  # what PartitionFunctions takes: s a string, n a string or null, i an integer, * more of the last
    "hash": ("s i", "s n i"), "identity": ("s i", "s n s i"), "range": ("s n i *", "s n s *"),
    "fixedSizeRange": ("s n i",), "dateFormat": ("s s s",), **{unit: ("s n",) for unit in _CALENDAR},
}


def is_kite(store: ObjectStore) -> bool:
    """Whether the folder is a Kite dataset: it has a ``.metadata`` folder (a broken one
    too, so that :func:`read_kite` says what is wrong rather than the folder being taken
    for plain partitioned files)."""
    return bool(store.list(METADATA))


def read_kite(store: ObjectStore) -> Found:
    """The descriptor and data files of the Kite dataset in ``store``'s folder.

    :class:`KiteDatasetError` names the file when the metadata is missing or malformed, the
    format or a partition function has no cdkds counterpart, the schema breaks cdkds's
    rules, the data lives elsewhere (``location``: the conversion is in place), a data file
    is not where Kite's layout puts it, or a row is not in the partition cdkds computes.
    """
    where = store.display(DESCRIPTOR_FILE)
    properties = _read_properties(store, where)
    _check_location(properties.get("location"), store, where)
    fmt = properties.get("format", "avro")
    if fmt in _READ_ONLY_FORMATS:
        raise KiteDatasetError(f"{where}: format={fmt}: Kite reads {fmt} datasets but cannot write them, "
                               "and cdkds keeps only Avro and Parquet data files")
    if fmt not in _COMPRESSIONS:
        raise KiteDatasetError(f"{where}: unknown format {fmt!r}; a Kite dataset cdkds can adopt is avro or parquet")
    kite_compression = properties.get("compressionType", "snappy")
    if kite_compression not in _COMPRESSIONS[fmt]:
        raise KiteDatasetError(f"{where}: compressionType={kite_compression} is not one Kite writes {fmt} with "
                               f"({', '.join(_COMPRESSIONS[fmt])})")
    schema_where, schema = _current_schema(store)
    partitions = _partitions(properties.get("partitionExpression"), where)
    descriptor = _descriptor(schema, schema_where, partitions, fmt, _COMPRESSIONS[fmt][kite_compression],
                             _user_properties(properties, where), where)
    files = tuple(_data_files(store, descriptor, partitions))
    _check_rows(store, descriptor, files)
    return Found("kite", descriptor, files)


# ---------------------------------------------------------------- metadata

def _read_properties(store: ObjectStore, where: str) -> dict[str, str]:
    try:
        data = store.read(DESCRIPTOR_FILE)
    except FileNotFoundError:
        raise KiteDatasetError(f"{where} is missing: a Kite dataset's folder has its descriptor there") from None
    properties = parse_properties(data, where)
    version = properties.get("version")
    if version != METADATA_VERSION:
        found = "has no version" if version is None else f"has version={version}"
        raise KiteDatasetError(f"{where} {found}: it is not a Kite descriptor (Kite writes version={METADATA_VERSION})")
    return properties


def _check_location(location: str | None, store: ObjectStore, where: str) -> None:
    """The data must be in the dataset's own folder: the conversion adopts files in place."""
    if location is None or _same_folder(location, store):
        return
    raise KiteDatasetError(
        f"{where}: location={location} is not this dataset's folder {store.url}: Kite keeps this dataset's data "
        "there, and a conversion adopts data files where they are; convert the folder the data is in (if the "
        "data was moved here, remove or correct the location line)")


def _same_folder(location: str, store: ObjectStore) -> bool:
    parts = urlsplit(location)
    scheme = parts.scheme.lower()
    protocols = store.fs.protocol if isinstance(store.fs.protocol, tuple) else (store.fs.protocol,)
    if scheme in ("", "file"):
        path = parts.path if scheme else location
        if scheme and "file" not in protocols and "local" not in protocols:
            return False
    elif scheme in ("s3", "s3a", "s3n") and ("s3" in protocols or "s3a" in protocols):
        path = parts.netloc + parts.path
    elif scheme in protocols:
        path = parts.netloc + parts.path
    else:
        return False
    return posixpath.normpath("/" + unquote(path)).strip("/") == posixpath.normpath("/" + store.root).strip("/")


def _current_schema(store: ObjectStore) -> tuple[str, dict]:
    """``(file name, schema)`` of the newest schema (Kite's ``SchemaManager``)."""
    numbered = {}
    for name in store.list(SCHEMAS_FOLDER):
        if name.startswith((".", "_")):
            continue  # Hadoop's .crc checksums
        number = name.split(".", 1)[0]
        if not number.isdigit():
            raise KiteDatasetError(f"{store.display(SCHEMAS_FOLDER + '/' + name)}: not a numbered schema "
                                   "(Kite's schema folder holds only <N>.avsc files)")
        numbered[int(number)] = f"{SCHEMAS_FOLDER}/{name}"
    key = numbered[max(numbered)] if numbered else OLD_SCHEMA_FILE
    where = store.display(key)
    try:
        text = store.read(key)
    except FileNotFoundError:
        raise KiteDatasetError(f"{where} is missing, and {store.display(SCHEMAS_FOLDER)} holds no schema: "
                               "a Kite dataset has its schema in one of them") from None
    try:
        schema = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise KiteDatasetError(f"{where}: not an Avro schema in JSON: {e}") from None
    try:
        schemas.load_schema(schema, check_schema)
    except InvalidSchemaError as e:
        raise KiteDatasetError(f"{where}: the schema breaks a rule of cdkds schemas: {e}") from None
    return where, schema


def _user_properties(properties: Mapping[str, str], where: str) -> dict[str, str]:
    """Kite's custom properties: kept as they are, unless cdkds reads the name itself."""
    out = {k: v for k, v in properties.items() if k not in _RESERVED}
    clash = sorted(set(out) & set(KNOWN_PROPERTIES))
    if clash:
        raise KiteDatasetError(f"{where}: Kite property {clash[0]!r} has a meaning in cdkds (see the README's "
                               "descriptor properties) that it did not have in Kite; rename or remove it first")
    return out


def _descriptor(schema: dict, schema_where: str, partitions: Sequence["KitePartition"], fmt: str,
                compression: str, properties: dict[str, str], where: str) -> DatasetDescriptor:
    fields = schemas.fields(schemas.load_schema(schema))
    for p in partitions:
        if p.function.source not in fields and "." in p.function.source:
            raise KiteDatasetError(f"{where}: {p.call.text} partitions by the nested field {p.function.source!r} "
                                   f"of {schema_where}; cdkds partitions by top-level fields only")
    try:
        strategy = PartitionStrategy(tuple(p.function for p in partitions)) if partitions else None
        return DatasetDescriptor(schema, strategy, format=fmt, compression=compression, properties=properties)
    except InvalidPartitionStrategyError as e:
        raise KiteDatasetError(f"{where}: partitionExpression over the schema {schema_where}: {e}") from None
    except InvalidDescriptorError as e:
        raise KiteDatasetError(f"{where}: {e}") from None


# ---------------------------------------------------------------- partition functions

@dataclass(frozen=True)
class KitePartition:
    """One partition function of a Kite dataset: the cdkds ``function`` that computes its
    values, and how Kite wrote a value in a folder name. Kite writes ``name=value``, the
    value's text URL-encoded (``URLEncoder``), month, day, hour and minute with two digits;
    an int ``range`` holds the index of its bound, where cdkds's value is the bound."""

    function: PartitionFunction
    call: KiteCall
    bound_index: bool = False

    def value(self, text: str, kind: str) -> Any:
        """The partition value of a folder's value text (``kind``: the source field's)."""
        if self.bound_index:
            index = int(text)
            if not 0 <= index < len(self.function.bounds):  # type: ignore[attr-defined]
                raise ValueError(f"{self.call.text} has no bound number {index}")
            return self.function.bounds[index]  # type: ignore[attr-defined]
        result = self.function.result_kind(kind)
        value = _typed(text, result)
        buckets = getattr(self.function, "buckets", None)
        if buckets is not None and not 0 <= value < buckets:
            raise ValueError(f"{self.call.text} has no bucket {value}")
        return value


def _typed(text: str, kind: str) -> Any:
    if kind in INTEGER_KINDS or kind in STRING_KINDS or kind == "boolean":
        if kind in INTEGER_KINDS and not re.fullmatch(r"-?[0-9]+", text):
            raise ValueError(f"{text!r} is not an integer")
        return values.coerce(text, kind)
    if kind == "date" or kind in TIMESTAMP_KINDS:  # Kite wrote the Avro value: days or epoch units
        if not re.fullmatch(r"-?[0-9]+", text):
            raise ValueError(f"{text!r} is not an integer")
        unit = "us" if kind.endswith("micros") else "ms"
        arrow = pa.date32() if kind == "date" else pa.timestamp(unit, None if kind.startswith("local-") else "UTC")
        number = pa.array([int(text)], pa.int32() if kind == "date" else pa.int64())
        return values.coerce(number.cast(arrow)[0].as_py(), kind)
    raise ValueError(f"Kite's folder names hold no readable {kind} values")


def _partitions(expression: str | None, where: str) -> tuple[KitePartition, ...]:
    if expression is None:
        return ()
    return tuple(_partition(call, where) for call in parse_partition_expression(expression, where))


def _partition(call: KiteCall, where: str) -> KitePartition:
    """The cdkds function of one call of ``PartitionFunctions`` (by Kite's overloads)."""
    kind, args = call.function, call.args
    if kind == "provided":
        raise KiteDatasetError(f"{where}: {call.text}: Kite's provided partitions take their values from the "
                               "writer, not from a field; cdkds computes every partition from a field, so it has "
                               "no counterpart")
    if kind not in _SIGNATURES:
        raise KiteDatasetError(f"{where}: {call.text}: unknown Kite partition function {kind!r}; Kite's are "
                               f"{', '.join([*_SIGNATURES, 'provided'])}")
    shape = next((s for s in _SIGNATURES[kind] if _fits(args, s.split())), None)
    if shape is None:
        raise KiteDatasetError(f"{where}: {call.text}: Kite's {kind} takes ({' | '.join(_SIGNATURES[kind])}) "
                               "(s: a string, n: a string or null, i: an integer, *: more of the same)")
    source, name = args[0], args[1] if len(args) > 2 else None  # hash(s, i) and identity(s, i) take no name
    extra: dict[str, Any] = {}
    if kind == "hash":
        extra = {"buckets": args[-1]}
    elif kind == "range":
        extra = {"bounds": tuple(args[2:])}
    elif kind == "fixedSizeRange":
        extra = {"size": args[2]}
    elif kind == "dateFormat":
        extra = {"format": args[2]}
    if name is None:
        name = _DEFAULT_NAMES.get(kind, kind).format(source)
    try:
        function = make_function("range" if kind == "fixedSizeRange" else kind, source, name, **extra)
    except InvalidPartitionStrategyError as e:
        raise KiteDatasetError(f"{where}: {call.text}: {e}") from None
    return KitePartition(function, call, bound_index=kind == "range" and isinstance(args[2], int))


def _fits(args: tuple, shape: list[str]) -> bool:
    if shape[-1] == "*":
        shape = shape[:-1] + [shape[-2]] * (len(args) - len(shape) + 1)
    test = {"s": lambda a: isinstance(a, str), "n": lambda a: a is None or isinstance(a, str),
            "i": lambda a: isinstance(a, int)}
    return len(args) == len(shape) and all(test[t](a) for t, a in zip(shape, args))


# ---------------------------------------------------------------- data files

def _data_files(store: ObjectStore, descriptor: DatasetDescriptor,
                partitions: Sequence[KitePartition]) -> list[SourceFile]:
    extension = "." + file_format(descriptor.format).extension
    kinds = {f.name: descriptor.fields[f.source].kind for f in (p.function for p in partitions)}
    out = []
    for key in visible_files(store):  # not metadata, Kite's hidden and temporary files, nor a cdkds log
        segments = key.split("/")
        where = store.display(key)
        if not segments[-1].endswith(extension):
            raise KiteDatasetError(f"{where}: not a {descriptor.format} data file, but Kite reads every visible "
                                   f"file of a {descriptor.format} dataset as one; move or hide it (a name "
                                   "starting with '.' or '_') first")
        folders = segments[:-1]
        if len(folders) != len(partitions):
            expected = "/".join(f"{p.function.name}=..." for p in partitions) or "the dataset's folder itself"
            raise KiteDatasetError(f"{where}: Kite's layout puts this dataset's data files in {expected}, and "
                                   "does not read files elsewhere")
        out.append(SourceFile(key, _partition_of(folders, partitions, kinds, where)))
    return sorted(out, key=lambda f: f.path)


def _partition_of(folders: Sequence[str], partitions: Sequence[KitePartition], kinds: Mapping[str, str],
                  where: str) -> dict[str, Any]:
    partition = {}
    for folder, p in zip(folders, partitions):
        name, equals, text = folder.partition("=")
        if not equals or name != p.function.name:
            raise KiteDatasetError(f"{where}: folder {folder!r} should be {p.function.name}=<value>, the partition "
                                   f"of {p.call.text} at that level of Kite's layout")
        try:
            if re.search(r"%(?![0-9A-Fa-f]{2})", text):
                raise ValueError("a '%' that starts no %XX escape")
            partition[name] = p.value(unquote_plus(text, errors="strict"), kinds[name])
        except (ValueError, UnicodeDecodeError, CdkdsError) as e:
            raise KiteDatasetError(f"{where}: folder {folder!r} holds no value of {p.call.text}: {e}") from None
    return partition


def _check_rows(store: ObjectStore, descriptor: DatasetDescriptor, files: Sequence[SourceFile]) -> None:
    """Every row's partition values, computed by cdkds, are those of its file's folder."""
    strategy = descriptor.partition_strategy
    if strategy is None:
        return
    sources = list(dict.fromkeys(f.source for f in strategy.functions))
    projection = descriptor.projection(sources)
    fmt = file_format(descriptor.format)
    for file in files:
        where = store.display(file.path)
        try:
            for _, batch in fmt.scan(store.fs, store.path(file.path), projection):
                _check_batch(batch, strategy, descriptor, file, where)
        except KiteDatasetError:
            raise
        except CdkdsError as e:
            raise KiteDatasetError(f"{where}: cannot be read as a data file of the Kite dataset: {e}") from None


def _check_batch(batch: pa.RecordBatch, strategy: PartitionStrategy, descriptor: DatasetDescriptor,
                 file: SourceFile, where: str) -> None:
    for source in dict.fromkeys(f.source for f in strategy.functions):
        if batch.column(source).null_count:
            raise KiteDatasetError(f"{where}: a row has no value of partition source {source!r}, which Kite "
                                   "cannot write")
    try:
        computed = strategy.partition_arrays(batch, descriptor.fields)
    except CdkdsError as e:
        raise KiteDatasetError(f"{where}: {e}") from None
    for f, array in zip(strategy.functions, computed):
        expected = file.partition[f.name]
        wrong = pc.invert(pc.equal(array, pa.scalar(expected, array.type)))
        if pc.any(wrong).as_py():
            row = pc.index(wrong, True).as_py()
            value = batch.column(f.source)[row].as_py()
            why = _why(f, value, descriptor.fields[f.source].kind, expected)
            raise KiteDatasetError(
                f"{where}: row {row} has {f.source}={value!r:.100}, whose {f.name} is {array[row].as_py()!r} by "
                f"{f.to_text()}, but the file is in {f.name}={expected!r}{why}; cdkds would not find it there")


def _why(f: PartitionFunction, value: Any, kind: str, expected: Any) -> str:
    """What Kite computed differently, where that is known."""
    if f.type == "hash" and kind in STRING_KINDS and isinstance(value, str):
        for start, avro in ((0, "Avro 1.7's"), (1, "Avro 1.12.1's and later")):
            if (_utf8_hash(value, start) & 0x7FFFFFFF) % f.buckets == expected:  # type: ignore[attr-defined]
                return (f": Kite hashed this text as {avro} Utf8 (over its UTF-8 bytes) rather than as a Java "
                        "String (over UTF-16), as the job that wrote it held it so")
    if f.type in (*_CALENDAR, "dateFormat") and _before_gregorian(value):
        return ": Java's calendar is Julian before 1582-10-15"
    if f.type == "range" and getattr(f, "size", None) is not None and abs(value) >= 2**52:
        return ": Kite divides by the size in doubles, inexact from 2**52"
    return ""


def _before_gregorian(value: Any) -> bool:
    if isinstance(value, int):
        return value < _GREGORIAN_MILLIS
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None) < dt.datetime(1582, 10, 15)
    return isinstance(value, dt.date) and value < dt.date(1582, 10, 15)


def _utf8_hash(text: str, start: int = 0) -> int:
    """``org.apache.avro.util.Utf8.hashCode()`` as an unsigned 32-bit int: over the signed
    bytes of the UTF-8 text, from 0 (Avro 1.7, Kite's) or 1 (Avro 1.12.1 and later)."""
    h = start
    for b in text.encode("utf-8"):
        h = (31 * h + (b - 256 if b > 127 else b)) & 0xFFFFFFFF
    return h
