"""Kite datasets on disk, written the way Kite writes them, for the conversion tests.

Nothing here calls cdkds: the metadata is what Kite's ``FileSystemMetadataProvider`` and
``SchemaManager`` write (``Properties.store`` text, pretty-printed schemas, Hadoop's
``.crc`` checksum files beside them), the data files are written by fastavro or pyarrow
into Kite's partition folders, and partition values are computed the way Java computes
them (``hashCode`` with int overflow, ``Calendar`` fields, ``URLEncoder``).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import quote_plus

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

# ---------------------------------------------------------------- Java's hashCode and friends


def _int32(h: int) -> int:
    h &= 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_string_hash(text: str) -> int:
    """``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, in int arithmetic."""
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = _int32(31 * h + int.from_bytes(units[i:i + 2], "big"))
    return h


def java_utf8_hash(text: str) -> int:
    """Avro's ``Utf8.hashCode()``: the same over the UTF-8 bytes as Java's signed bytes."""
    h = 0
    for b in text.encode("utf-8"):
        h = _int32(31 * h + (b - 256 if b > 127 else b))
    return h


def java_long_hash(v: int) -> int:
    """``Long.hashCode()``: ``(int)(value ^ (value >>> 32))``."""
    return _int32(v ^ ((v & 0xFFFFFFFFFFFFFFFF) >> 32))


def kite_bucket(hash_code: int, buckets: int) -> int:
    """``HashFieldPartitioner.apply``: ``(hashCode & Integer.MAX_VALUE) % buckets``."""
    return (hash_code & 0x7FFFFFFF) % buckets


def utc(millis: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=millis)


def url_encode(text: str) -> str:
    """``URLEncoder.encode(text, "UTF-8")``: letters, digits and ``.-*_`` kept, space as ``+``."""
    return quote_plus(text, safe="*")


# ---------------------------------------------------------------- Properties.store


def _save_convert(text: str, escape_space: bool) -> str:
    out = []
    for i, c in enumerate(text):
        if 61 < ord(c) < 127:
            out.append("\\\\" if c == "\\" else c)
        elif c == " ":
            out.append("\\ " if i == 0 or escape_space else " ")
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif c in "=:#!":
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            out.extend(f"\\u{unit:04X}" for unit in _utf16_units(c))
        else:
            out.append(c)
    return "".join(out)


def _utf16_units(c: str) -> list[int]:
    data = c.encode("utf-16-be")
    return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]


def java_properties(properties: Mapping[str, str], comment: str) -> bytes:
    """What ``Properties.store(OutputStream, comment)`` writes (ISO-8859-1, ``\\uXXXX`` beyond ASCII)."""
    lines = [f"#{comment}", "#Wed Nov 25 09:31:24 UTC 2026"]
    lines += [f"{_save_convert(k, True)}={_save_convert(v, False)}" for k, v in properties.items()]
    return ("\n".join(lines) + "\n").encode("latin-1")


# ---------------------------------------------------------------- a dataset folder


class KiteFolder:
    """A Kite dataset folder ``<root>/<namespace>/<name>`` being written."""

    def __init__(self, root: Path, namespace: str, name: str):
        self.root, self.namespace, self.name = root, namespace, name
        self.path = root / namespace / name
        self.path.mkdir(parents=True)

    def _put(self, relative: str, data: bytes, checksum: bool = True) -> None:
        target = self.path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if checksum:  # Hadoop's local file system keeps a checksum beside every file
            (target.parent / f".{target.name}.crc").write_bytes(b"crc\x00" + data[:8])

    def write_metadata(self, schemas: list[dict], format: str = "avro", compression: str = "snappy",
                       partition_expression: str | None = None, properties: Mapping[str, str] | None = None,
                       location: str | None = "here", numbered: bool = True) -> None:
        """``FileSystemMetadataProvider.writeDescriptor`` after each schema version: the
        schema in ``schema.avsc`` and ``schemas/<N>.avsc``, then the properties."""
        for n, schema in enumerate(schemas, 1):
            text = json.dumps(schema, indent=2).encode()
            self._put(".metadata/schema.avsc", text)
            if numbered:
                self._put(f".metadata/schemas/{n}.avsc", text)
        stored = {"version": "1", "format": format, "compressionType": compression}
        if location is not None:
            stored["location"] = f"file:{self.path}" if location == "here" else location
        if partition_expression is not None:
            stored["partitionExpression"] = partition_expression
        stored.update(properties or {})
        self.write_properties(java_properties(stored, f"Dataset descriptor for {self.name}"))

    def write_properties(self, data: bytes) -> None:
        self._put(".metadata/descriptor.properties", data)

    def write_rows(self, rows: Iterable[dict], folder_of: Callable[[dict], str], schema: dict,
                   format: str = "avro", codec: str = "snappy") -> dict[str, list[dict]]:
        """One data file per partition folder (``folder_of(row)``), as Kite's writers make them."""
        groups: dict[str, list[dict]] = {}
        for row in rows:
            groups.setdefault(folder_of(row), []).append(row)
        for folder, group in groups.items():
            self.write_file(folder, group, schema, format, codec)
        return groups

    def write_file(self, folder: str, rows: list[dict], schema: dict, format: str = "avro",
                   codec: str = "snappy") -> str:
        name = f"{uuid.uuid4()}.{format}"
        relative = f"{folder}/{name}" if folder else name
        target = self.path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if format == "avro":
            with open(target, "wb") as out:
                fastavro.writer(out, fastavro.parse_schema(schema), rows, codec=codec)
        else:
            table = pa.Table.from_pylist(rows, schema=arrow_schema(schema))
            pq.write_table(table, target, compression=codec)
        (target.parent / f".{name}.crc").write_bytes(b"crc")
        return relative


_ARROW = {"int": pa.int32(), "long": pa.int64(), "string": pa.string(), "double": pa.float64(),
          "boolean": pa.bool_()}


def arrow_schema(schema: dict) -> pa.Schema:
    """Parquet columns of a flat Avro record as parquet-avro writes them (no field ids)."""
    fields = []
    for f in schema["fields"]:
        t = f["type"]
        nullable = isinstance(t, list)
        base = next(x for x in t if x != "null") if nullable else t
        fields.append(pa.field(f["name"], _ARROW[base], nullable=nullable))
    return pa.schema(fields)


def read_all(folder: Path, format: str) -> list[dict[str, Any]]:
    """Every row of the Kite dataset as Kite's own readers see them (fastavro / pyarrow)."""
    rows = []
    for path in sorted(folder.rglob(f"*.{format}")):
        if any(part.startswith((".", "_")) for part in path.relative_to(folder).parts):
            continue
        if format == "avro":
            with open(path, "rb") as f:
                rows.extend(fastavro.reader(f))
        else:
            rows.extend(pq.read_table(path).to_pylist())
    return rows


def read_file(path: Path, format: str) -> list[dict[str, Any]]:
    """The rows of one data file, read by fastavro or pyarrow."""
    if format == "avro":
        with open(path, "rb") as f:
            return list(fastavro.reader(f))
    return pq.read_table(path).to_pylist()


def kite_fixed_range(value: int, size: int) -> int:
    """``LongFixedSizeRangeFieldPartitioner.apply``: ``Math.round(Math.floor(value / (double) size)) * size``
    (IEEE doubles as in Java, the product wrapped to a long)."""
    product = int(math.floor(float(value) / float(size))) * size
    return (product + 2**63) % 2**64 - 2**63


def julian_month(millis: int) -> int:
    """The month Java's ``GregorianCalendar`` gives a time before 1582-10-15 (Julian calendar)."""
    day = millis // 86_400_000 + 719_163 + 1721424  # the Julian day number (proleptic Gregorian ordinal + offset)
    c = day + 32082
    d = (4 * c + 3) // 1461
    e = c - 1461 * d // 4
    m = (5 * e + 2) // 153
    return m + 3 - 12 * (m // 10)
