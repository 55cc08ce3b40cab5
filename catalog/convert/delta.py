"""Delta tables: the current version's files, schema, partitions and deletion vectors.

The table is read with ``deltalake`` (delta-rs): its live files (``get_add_actions``), with
typed partition values, its schema and partition columns. Each partition column becomes an
identity function (named ``<column>_copy``: a partition may not be named as a field); its
files usually lack that column and read the partition value (docs/FORMAT.md §8).

Column mapping (``delta.columnMapping.mode`` ``name`` or ``id``): the fields keep Delta's
column-mapping ids as their field ids (files written in ``id`` mode carry them as Parquet
field ids), and the descriptor's name mapping names each field's physical column, so files
are read by the physical names they hold.

Deletion vectors are not exposed by delta-rs's add actions, so the ``deletionVector`` of
each live file is found by replaying the log (the newest checkpoint, then the commits up to
the version read) and decoded here (Delta's PROTOCOL.md, "Deletion Vector Format"): the
``RoaringBitmapArray`` (magic 1681511377 little-endian, then the portable ``RoaringTreemap``:
a 64-bit count of 32-bit roaring bitmaps, each after its 32-bit key — the high half of its
positions), inline (``i``: Z85 text in the log) or in a file (``u``: a path from the table
folder rebuilt from a Z85-encoded UUID; ``p``: an absolute path) holding a version byte (1),
then at the descriptor's offset a big-endian size, the data and a big-endian CRC-32 of it.
Files and deletion-vector files with absolute paths or outside the table folder are refused.
"""

from __future__ import annotations

import json
import struct
import uuid
import zlib
from typing import Any, Mapping
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap

from cdkds.catalog.convert.source import Found, SourceFile, identity_strategy
from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import ConversionError, InvalidDescriptorError
from cdkds.catalog.log.actions import dataset_path
from cdkds.catalog.storage import ObjectStore
from cdkds.formats import schema as schemas
from cdkds.formats.projection import NameMapping
from cdkds.formats.schema import FIELD_ID, LAST_FIELD_ID, NAME_MAPPING

DELTA_LOG = "_delta_log"
PORTABLE_MAGIC = 1681511377
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}
PHYSICAL_NAME = "delta.columnMapping.physicalName"
COLUMN_ID = "delta.columnMapping.id"


# ---------------------------------------------------------------- deletion vectors

def z85_decode(text: str) -> bytes:
    """Z85 text (ZeroMQ's Base85, as Delta writes it) as bytes; ``ValueError`` if it is not."""
    if len(text) % 5:
        raise ValueError(f"Z85 text of {len(text)} characters (not a multiple of 5)")
    out = bytearray()
    for i in range(0, len(text), 5):
        value = 0
        for c in text[i:i + 5]:
            if c not in _Z85_VALUE:
                raise ValueError(f"{c!r} is not a Z85 character")
            value = value * 85 + _Z85_VALUE[c]
        if value >= 1 << 32:
            raise ValueError(f"Z85 group {text[i:i + 5]!r} is out of range")
        out += value.to_bytes(4, "big")
    return bytes(out)


def decode_bitmap_array(data: bytes) -> np.ndarray:
    """The row positions of a serialised ``RoaringBitmapArray`` (portable form), sorted."""
    if len(data) < 12 or struct.unpack_from("<I", data)[0] != PORTABLE_MAGIC:
        raise ValueError("not a portable RoaringBitmapArray (bad magic number)")
    count, = struct.unpack_from("<Q", data, 4)
    at, parts = 12, []
    for _ in range(count):
        if at + 4 > len(data):
            raise ValueError("truncated RoaringBitmapArray")
        high, = struct.unpack_from("<I", data, at)
        bitmap = BitMap.deserialize(data[at + 4:])
        at += 4 + len(bitmap.serialize())  # the portable form's size is the bitmap's own
        low = np.frombuffer(bitmap.to_array(), dtype=np.uint32).astype(np.int64)
        parts.append(low + (high << 32))
    if at != len(data):
        raise ValueError(f"RoaringBitmapArray holds {len(data) - at} bytes after its bitmaps")
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def vector_file(descriptor: Mapping[str, Any]) -> str | None:
    """The path (from the table folder) of the file a deletion-vector descriptor points
    into; ``None`` for an inline one; ``ValueError`` for an absolute path or another storage type."""
    kind, text = descriptor["storageType"], descriptor["pathOrInlineDv"]
    if kind == "i":
        return None
    if kind == "u":
        prefix, encoded = text[:-20], text[-20:]
        name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
        return f"{prefix}/{name}" if prefix else name
    if kind == "p":
        raise ValueError(f"deletion vector {text} has an absolute path")
    raise ValueError(f"deletion vector storage type {kind!r} is not Delta's (u, i or p)")


def read_vector(store: ObjectStore, descriptor: Mapping[str, Any]) -> np.ndarray:
    """The row positions a Delta deletion-vector descriptor deletes (``ValueError`` naming what is wrong)."""
    size, cardinality = int(descriptor["sizeInBytes"]), int(descriptor["cardinality"])
    path = vector_file(descriptor)
    if path is None:
        data = z85_decode(descriptor["pathOrInlineDv"])[:size]
    else:
        path = dataset_path(path, "deletion vector")
        raw = store.read(path)
        offset = int(descriptor.get("offset") or 1)
        if not raw or raw[0] != 1:
            raise ValueError(f"deletion vector file {store.display(path)} is not of format version 1")
        stored, = struct.unpack_from(">I", raw, offset)
        data = raw[offset + 4:offset + 4 + stored]
        crc, = struct.unpack_from(">I", raw, offset + 4 + stored)
        if stored != size or len(data) != size:
            raise ValueError(f"deletion vector in {store.display(path)} holds {stored} bytes, the log says {size}")
        if zlib.crc32(data) != crc:
            raise ValueError(f"deletion vector in {store.display(path)} fails its CRC-32 check")
    positions = decode_bitmap_array(data)
    if len(positions) != cardinality:
        raise ValueError(f"deletion vector holds {len(positions)} positions, the log says {cardinality}")
    return positions


# ---------------------------------------------------------------- the log's deletion vectors

def live_vectors(store: ObjectStore, version: int) -> dict[str, Mapping[str, Any]]:
    """The ``deletionVector`` of each live file of ``version`` that has one, by the file's
    (decoded) path: the newest checkpoint at or before it, then the commits after it. A live
    file is a path and a vector (Delta's key): a ``remove`` takes away the one it names."""
    live: dict[str, dict[str | None, Mapping[str, Any] | None]] = {}

    def apply(kind: str, body: Mapping[str, Any]) -> None:
        path, vector = unquote(body["path"]), body.get("deletionVector") or None
        if kind == "add":
            live.setdefault(path, {})[_vector_id(vector)] = vector
        else:
            live.get(path, {}).pop(_vector_id(vector), None)

    start = 0
    checkpoint = _checkpoint(store, version)
    if checkpoint is not None:
        start, parts = checkpoint
        for part in parts:
            with store.fs.open(store.path(f"{DELTA_LOG}/{part}"), "rb") as f:
                table = pq.read_table(f, columns=["add"])
            for add in table.column("add").to_pylist():
                if add:
                    apply("add", add)
        start += 1
    for v in range(start, version + 1):
        for line in store.read(f"{DELTA_LOG}/{v:020d}.json").decode().splitlines():
            action = json.loads(line) if line.strip() else {}
            for kind in ("add", "remove"):
                if kind in action:
                    apply(kind, action[kind])
    out = {}
    for path, vectors in live.items():
        if len(vectors) > 1:
            raise ConversionError(f"Delta table {store.url}: data file {path} is live with {len(vectors)} deletion "
                                  f"vectors at version {version}; its log is inconsistent")
        vector = next(iter(vectors.values()), None)
        if vector is not None:
            out[path] = vector
    return out


def _vector_id(vector: Mapping[str, Any] | None) -> str | None:
    """Delta's unique id of a deletion vector (with the path, the identity of a live file)."""
    if vector is None:
        return None
    offset = vector.get("offset")
    return f"{vector['storageType']}{vector['pathOrInlineDv']}" + (f"@{offset}" if offset is not None else "")


def _checkpoint(store: ObjectStore, version: int) -> tuple[int, list[str]] | None:
    """The newest classic (single or multi-part) checkpoint at or before ``version``."""
    found: dict[int, list[str]] = {}
    for name in store.list(DELTA_LOG):
        parts = name.split(".")
        if len(parts) >= 3 and parts[1] == "checkpoint" and name.endswith(".parquet") and parts[0].isdigit():
            if len(parts) == 3 or len(parts) == 5:  # NNN.checkpoint.parquet, NNN.checkpoint.i.n.parquet
                found.setdefault(int(parts[0]), []).append(name)
            else:
                raise ConversionError(f"Delta checkpoint {store.display(DELTA_LOG + '/' + name)} is a v2 "
                                      f"checkpoint, which cdkds does not read; write a classic checkpoint first")
    usable = [v for v in found if v <= version]
    return (max(usable), sorted(found[max(usable)])) if usable else None


# ---------------------------------------------------------------- the table

def delta_storage_options(store: ObjectStore) -> dict[str, str]:
    """delta-rs's options for the store fsspec opened (S3: endpoint, keys, region; delta-rs
    reads the rest from the environment, as boto does)."""
    if not store.url.startswith(("s3://", "s3a://")):
        return {}
    given = getattr(store.fs, "storage_options", {}) or {}
    client = given.get("client_kwargs") or {}
    out = {}
    endpoint = client.get("endpoint_url") or given.get("endpoint_url")
    if endpoint:
        out["AWS_ENDPOINT_URL"] = endpoint
        if endpoint.startswith("http://"):
            out["AWS_ALLOW_HTTP"] = "true"
    for option, name in (("key", "AWS_ACCESS_KEY_ID"), ("secret", "AWS_SECRET_ACCESS_KEY"),
                         ("token", "AWS_SESSION_TOKEN")):
        if given.get(option):
            out[name] = given[option]
    if client.get("region_name"):
        out["AWS_REGION"] = client["region_name"]
    return out


def read_delta(store: ObjectStore) -> Found:
    """The dataset the Delta table at ``store``'s root becomes (its current version)."""
    try:
        from deltalake import DeltaTable
    except ImportError:
        raise ConversionError(f"{store.url} is a Delta table; converting it needs the deltalake package "
                              f"(pip install deltalake)") from None
    try:
        table = DeltaTable(store.url, storage_options=delta_storage_options(store))
        metadata = table.metadata()
        adds = pa.table(table.get_add_actions(flatten=True)).to_pylist()
        delta_schema = json.loads(table.schema().to_json())
        arrow = pa.schema(table.schema().to_arrow())
        version = table.version()
    except Exception as e:  # noqa: BLE001 - delta-rs's errors, named
        raise ConversionError(f"{store.url} is not a readable Delta table: {type(e).__name__}: {e}") from None
    mode = metadata.configuration.get("delta.columnMapping.mode", "none")
    descriptor = _descriptor(store, delta_schema, arrow, list(metadata.partition_columns), mode)
    names = {f.source: f.name for f in descriptor.partition_strategy.functions} if metadata.partition_columns else {}
    vectors = live_vectors(store, version)
    files = []
    for add in adds:
        path = unquote(add["path"])  # the log holds a URI: the folder's own escapes escaped again
        try:
            dataset_path(path, "data file")
        except ValueError:
            raise ConversionError(f"Delta table {store.url}: data file {path} lies outside the table folder "
                                  f"(an absolute path or '..'); cdkds adopts only files inside it") from None
        deleted = None
        if path in vectors:
            try:
                deleted = read_vector(store, vectors[path])
            except (ValueError, KeyError, struct.error, FileNotFoundError) as e:
                raise ConversionError(f"Delta table {store.url}: the deletion vector of data file {path} cannot be "
                                      f"read: {e}") from None
        partition = {names[c]: add.get(f"partition.{c}") for c in metadata.partition_columns}
        files.append(SourceFile(path, partition, deleted))
    return Found("delta", descriptor, tuple(files))


def _descriptor(store: ObjectStore, delta_schema: dict, arrow: pa.Schema, partition_columns: list[str],
                mode: str) -> DatasetDescriptor:
    avro = schemas.from_arrow(arrow)
    if mode in ("name", "id"):
        _carry_ids(avro["fields"], delta_schema["fields"])
        avro[LAST_FIELD_ID] = max(_ids(avro["fields"]), default=0)
        avro[NAME_MAPPING] = _physical_mapping(avro["fields"], delta_schema["fields"])
    elif mode != "none":
        raise ConversionError(f"Delta table {store.url} has column mapping mode {mode!r}, which cdkds does not read")
    strategy = identity_strategy(partition_columns)
    try:
        return DatasetDescriptor(avro, strategy)
    except InvalidDescriptorError as e:
        raise ConversionError(f"Delta table {store.url} cannot become a dataset: {e}") from None


def _delta_struct(t: Any) -> list | None:
    """The fields of a Delta type's record (directly, or as array elements or map values)."""
    if isinstance(t, dict):
        if t.get("type") == "struct":
            return t["fields"]
        if t.get("type") == "array":
            return _delta_struct(t["elementType"])
        if t.get("type") == "map":
            return _delta_struct(t["valueType"])
    return None


def _carry_ids(fields: list[dict], delta_fields: list[dict]) -> None:
    """Delta's column-mapping ids as the Avro fields' ids, at every depth."""
    for f, d in zip(fields, delta_fields):
        f[FIELD_ID] = int(d["metadata"][COLUMN_ID])
        inner, delta_inner = schemas.record_of(f["type"]), _delta_struct(d["type"])
        if inner is not None and delta_inner is not None:
            _carry_ids(inner["fields"], delta_inner)


def _ids(fields: list[dict]) -> list[int]:
    out = []
    for f in fields:
        out.append(f[FIELD_ID])
        inner = schemas.record_of(f["type"])
        if inner is not None:
            out += _ids(inner["fields"])
    return out


def _physical_mapping(fields: list[dict], delta_fields: list[dict]) -> list[dict]:
    """The name mapping of the physical column names Delta's files use (§5.2)."""
    out = []
    for f, d in zip(fields, delta_fields):
        item: dict[str, Any] = {"field-id": f[FIELD_ID], "names": [d["metadata"].get(PHYSICAL_NAME, d["name"])]}
        inner, delta_inner = schemas.record_of(f["type"]), _delta_struct(d["type"])
        if inner is not None and delta_inner is not None:
            item["fields"] = _physical_mapping(inner["fields"], delta_inner)
        out.append(item)
    return NameMapping.from_json(out).to_json() if out else out
