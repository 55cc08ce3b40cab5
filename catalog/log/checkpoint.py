"""Checkpoints: the full state of a dataset at one revision.

``_log/<revision>.checkpoint.parquet`` holds one row per action of the state (protocol,
metadata, the live data files, every live tombstone, every live record-index file, the
last batch of each application, each tag) with columns ``action``, ``revision`` and ``json``, and
key-value metadata naming the revision, its commit uuid and timestamp and a SHA-256 of the
rows. ``_log/_last_checkpoint`` is a hint naming the newest checkpoint; readers fall back to
listing when it is missing or stale.

The live files are held in one of two ways (``docs/FORMAT.md`` §4, §4.1):

- version 1 (logs below protocol 4): an ``add`` row per file, with the revision that added
  it and its deletion vectors;
- version 2 (protocol 4, :data:`PARTED_CHECKPOINT_PROTOCOL`): a ``part`` row per part
  (:class:`~cdkds.catalog.log.parts.CheckpointPart`), the files being in the part objects;
  decoding reads none of them: the snapshot's files load a part when asked for.
"""

from __future__ import annotations

import gc
import hashlib
import io
import json
from dataclasses import dataclass
from types import MappingProxyType

from typing import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.log.actions import (
    AddFile, AddIndex, BranchRef, SetTransaction, Tag, Tombstone, check_readable, decode_actions, encode_actions,
)
from cdkds.catalog.errors import CorruptLogError, UnsupportedLogVersionError
from cdkds.catalog.log.live import LiveFiles
from cdkds.catalog.log.parts import CheckpointPart, PartLoader
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.formats.parquet import parquet_in_memory

LAST_CHECKPOINT = "_last_checkpoint"
SUFFIX = ".checkpoint.parquet"
_SCHEMA = pa.schema([("action", pa.string()), ("revision", pa.int64()), ("json", pa.string())])


def checkpoint_name(revision: int) -> str:
    return f"{revision:020d}{SUFFIX}"


def checkpoint_revision(name: str) -> int | None:
    """The revision of a checkpoint object's name, ``None`` for other names."""
    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else ""
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


@dataclass(frozen=True)
class CheckpointHeader:
    revision: int
    uuid: str
    timestamp: int


def encode(snapshot: Snapshot, parts: Sequence[CheckpointPart] | None = None) -> bytes:
    """The checkpoint file of a snapshot: of version 2 naming ``parts`` (which hold its live
    files) when they are given, of version 1 (an ``add`` row per live file) otherwise."""
    rows: list[tuple[str, int, str]] = [
        ("protocol", snapshot.version, json.dumps(snapshot.protocol.to_json(None))),
        ("metadata", snapshot.descriptor_version, json.dumps({"metadata": {"descriptor": snapshot.descriptor.to_json(
            as_loaded=True), "schemaSince": snapshot.schema_since}})),  # a descriptor from before ids loads as one again
    ]
    if parts is None:
        for add in snapshot.files.values():
            rows.append(("add", add.revision, json.dumps(encode_actions((add,), snapshot.descriptor)[0])))
    else:
        for part in parts:
            rows.append(("part", part.revision, json.dumps(part.to_json(snapshot.descriptor))))
    for tombstone in snapshot.tombstones:
        rows.append(("tombstone", tombstone.revision, json.dumps(tombstone.to_json(snapshot.descriptor))))
    for entry in snapshot.index.values():
        rows.append(("index", entry.revision, json.dumps(entry.to_json(None))))
    for txn in snapshot.transactions.values():
        rows.append(("txn", snapshot.version, json.dumps(txn.to_json(None))))
    for name, revision in sorted(snapshot.tags.items()):
        rows.append(("tag", revision, json.dumps(Tag(name, revision).to_json(None))))
    for branch in snapshot.branches.values():
        rows.append(("branch", branch.base, json.dumps(branch.to_json(None))))
    table = pa.table({"action": [r[0] for r in rows], "revision": [r[1] for r in rows], "json": [r[2] for r in rows]},
                     schema=_SCHEMA)
    table = table.replace_schema_metadata({
        "cdkds.checkpoint.revision": str(snapshot.version), "cdkds.checkpoint.uuid": snapshot.commit_uuid,
        "cdkds.checkpoint.timestamp": str(snapshot.timestamp), "cdkds.checksum": _checksum(rows),
        "cdkds.checkpoint.format": "1" if parts is None else "2",
    })
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def _checksum(rows: list[tuple[str, int, str]]) -> str:
    digest = hashlib.sha256()
    for action, revision, text in rows:
        digest.update(f"{action}\x00{revision}\x00{text}\x01".encode())
    return digest.hexdigest()


def header(data: bytes, where: str) -> CheckpointHeader:
    try:
        meta = parquet_in_memory(data).schema_arrow.metadata or {}
        return CheckpointHeader(int(meta[b"cdkds.checkpoint.revision"]), meta[b"cdkds.checkpoint.uuid"].decode(),
                                int(meta[b"cdkds.checkpoint.timestamp"]))
    except Exception as e:  # noqa: BLE001 - any failure to parse is corruption
        raise CorruptLogError(f"checkpoint {where} is corrupt or truncated: {type(e).__name__}: {e}") from None


def decode(data: bytes, where: str, loader: PartLoader | None = None) -> Snapshot:
    """The snapshot a checkpoint file holds; :class:`CorruptLogError` if it is damaged,
    :class:`UnsupportedLogVersionError` if its protocol is newer than this build reads. The
    files of a version 2 checkpoint are its parts, read through ``loader`` when asked for."""
    collecting = gc.isenabled()
    gc.disable()  # a checkpoint decodes into millions of objects, none garbage: collecting them was a quarter of it
    try:
        return _decode(data, where, loader)
    finally:
        if collecting:
            gc.enable()


def part_keys(data: bytes, where: str) -> list[str]:
    """The keys of the parts a checkpoint object names (none for version 1), without decoding it."""
    try:
        table = parquet_in_memory(data).read(columns=["action", "json"])
        parted = table.filter(pc.equal(table.column("action"), "part"))
        return [json.loads(text)["part"]["key"] for text in parted.column("json").to_pylist()]
    except Exception as e:  # noqa: BLE001 - any failure to parse is corruption
        raise CorruptLogError(f"checkpoint {where} is corrupt or truncated: {type(e).__name__}: {e}") from None


def parts_of(snapshot: Snapshot) -> tuple[CheckpointPart, ...] | None:
    """The parts the files of a snapshot decoded from a version 2 checkpoint are read from;
    ``None`` when its files are not held in parts."""
    files = snapshot.files
    return files.parts if isinstance(files, LiveFiles) and files.parts else None


def _decode(data: bytes, where: str, loader: PartLoader | None) -> Snapshot:
    head = header(data, where)
    try:
        table = parquet_in_memory(data).read()
        rows = list(zip(table.column("action").to_pylist(), table.column("revision").to_pylist(),
                        table.column("json").to_pylist()))
        if (table.schema.metadata or {}).get(b"cdkds.checksum", b"").decode() != _checksum(rows):
            raise ValueError("checksum mismatch")
        files: dict[str, AddFile] = {}
        parts: list[CheckpointPart] = []
        tombstones: list[Tombstone] = []
        index: dict[str, AddIndex] = {}
        transactions: dict[str, SetTransaction] = {}
        tags: dict[str, int] = {}
        branches: dict[str, BranchRef] = {}
        for action, revision, text in rows:
            item = json.loads(text)
            if action in ("protocol", "metadata"):
                (decoded,) = decode_actions([item], None, revision)
                if action == "protocol":
                    protocol = decoded
                    check_readable(decoded, where)
                else:
                    descriptor, descriptor_version = decoded.descriptor, revision
                    # checkpoints from before it was recorded: only files of the current descriptor are known
                    schema_since = int(item["metadata"].get("schemaSince", revision))
            elif action == "add":
                (add,) = decode_actions([item], descriptor, revision)
                files[add.path] = add
            elif action == "part":
                parts.append(CheckpointPart.from_json(item["part"], descriptor))
            elif action == "tombstone":
                (tombstone,) = decode_actions([item], descriptor, revision)
                tombstones.append(tombstone)
            elif action == "index":
                (entry,) = decode_actions([item], descriptor, revision)
                index[entry.path] = entry
            elif action == "txn":
                (txn,) = decode_actions([item], descriptor, revision)
                transactions[txn.app_id] = txn
            elif action == "tag":
                (tag,) = decode_actions([item], descriptor, revision)
                if not isinstance(tag, Tag):
                    raise ValueError(f"a tag row holds {tag!r}")
                tags[tag.name] = tag.revision
            elif action == "branch":
                (branch,) = decode_actions([item], descriptor, revision)
                if not isinstance(branch, BranchRef):
                    raise ValueError(f"a branch row holds {branch!r}")
                branches[branch.name] = branch
            else:
                raise ValueError(f"unknown checkpoint row {action!r}")
        # part rows make it one of parts whatever its metadata says: they are under the checksum, it is not
        parted = bool(parts) or (table.schema.metadata or {}).get(b"cdkds.checkpoint.format") == b"2"
        if parted and files:
            raise ValueError("a checkpoint of parts holds add rows")
        live: Mapping[str, AddFile] = MappingProxyType(files) if not parted else \
            _in_parts(tuple(parts), loader, descriptor, where)
        return Snapshot(head.revision, head.timestamp, head.uuid, descriptor, descriptor_version,
                        live, tuple(tombstones), protocol, MappingProxyType(index),
                        MappingProxyType(transactions), schema_since, MappingProxyType(tags),
                        MappingProxyType(branches))
    except (CorruptLogError, UnsupportedLogVersionError):
        raise
    except Exception as e:  # noqa: BLE001 - any failure to parse is corruption
        raise CorruptLogError(f"checkpoint {where} is corrupt or truncated: {type(e).__name__}: {e}") from None


def _in_parts(parts: tuple[CheckpointPart, ...], loader: PartLoader | None, descriptor: DatasetDescriptor,
              where: str) -> Mapping[str, AddFile]:
    """The live files of a version 2 checkpoint: its parts, read on demand."""
    if loader is None:
        raise CorruptLogError(f"checkpoint {where} holds its files in parts, and no store to read them was given")
    return LiveFiles.over(parts, loader, descriptor)
