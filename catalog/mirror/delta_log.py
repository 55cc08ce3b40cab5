"""The Delta Lake log a mirror writes under ``<dataset>/_delta_log/`` (``PROTOCOL.md``: Delta
Log Entries, Checkpoints, Last Checkpoint File): one JSON object per version (one action a
line), classic single-file Parquet checkpoints and ``_last_checkpoint``; and the table state
(protocol, metadata, live ``add`` actions) a version of it describes, replayed from the
newest checkpoint at or before it.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.parquet as pq

from cdkds.catalog.storage import ObjectStore

DELTA_LOG = "_delta_log"
LAST_CHECKPOINT = f"{DELTA_LOG}/_last_checkpoint"
_ENTRY = re.compile(r"^(\d{20})\.(json|checkpoint\.parquet)$")

_STRINGS = pa.map_(pa.string(), pa.string())
_VECTOR = pa.struct([("storageType", pa.string()), ("pathOrInlineDv", pa.string()), ("offset", pa.int32()),
                     ("sizeInBytes", pa.int32()), ("cardinality", pa.int64())])
CHECKPOINT_SCHEMA = pa.schema([
    ("txn", pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])),
    ("add", pa.struct([("path", pa.string()), ("partitionValues", _STRINGS), ("size", pa.int64()),
                       ("modificationTime", pa.int64()), ("dataChange", pa.bool_()), ("stats", pa.string()),
                       ("tags", _STRINGS), ("deletionVector", _VECTOR)])),
    ("remove", pa.struct([("path", pa.string()), ("deletionTimestamp", pa.int64()), ("dataChange", pa.bool_())])),
    ("metaData", pa.struct([("id", pa.string()), ("name", pa.string()), ("description", pa.string()),
                            ("format", pa.struct([("provider", pa.string()), ("options", _STRINGS)])),
                            ("schemaString", pa.string()), ("partitionColumns", pa.list_(pa.string())),
                            ("createdTime", pa.int64()), ("configuration", _STRINGS)])),
    ("protocol", pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32()),
                            ("readerFeatures", pa.list_(pa.string())), ("writerFeatures", pa.list_(pa.string()))])),
])


def version_key(version: int) -> str:
    return f"{DELTA_LOG}/{version:020d}.json"


def checkpoint_key(version: int) -> str:
    return f"{DELTA_LOG}/{version:020d}.checkpoint.parquet"


def delta_path(path: str) -> str:
    """A dataset-relative path as a Delta ``add`` names it: a URI path, percent-encoded."""
    return quote(path, safe="/=")


def dataset_path(path: str) -> str:
    return unquote(path)


@dataclass(frozen=True)
class DeltaListing:
    """The versions and checkpoints found under ``_delta_log/``."""

    versions: tuple[int, ...]
    checkpoints: tuple[int, ...]

    @staticmethod
    def of(store: ObjectStore) -> "DeltaListing":
        versions, checkpoints = [], []
        for name in store.list(DELTA_LOG):
            m = _ENTRY.match(name)
            if m:
                (versions if m.group(2) == "json" else checkpoints).append(int(m.group(1)))
        return DeltaListing(tuple(sorted(versions)), tuple(sorted(checkpoints)))

    @property
    def newest(self) -> int | None:
        return max(self.versions + self.checkpoints, default=None)

    @property
    def oldest(self) -> int | None:
        """The oldest version a reader can load: the oldest checkpoint, or version 0."""
        if 0 in self.versions:
            return 0
        return min(self.checkpoints, default=None)


@dataclass(frozen=True)
class DeltaState:
    """What Delta version ``version`` describes: its protocol, metadata and live ``add``
    actions by dataset-relative path."""

    version: int
    protocol: Mapping
    metadata: Mapping
    files: Mapping[str, Mapping]

    def apply(self, version: int, actions: Iterable[Mapping]) -> "DeltaState":
        """The state after a version's actions (a ``remove`` matches by path and vector)."""
        protocol, metadata, files = self.protocol, self.metadata, dict(self.files)
        for action in actions:
            if "add" in action:
                files[dataset_path(action["add"]["path"])] = action["add"]
            elif "remove" in action:
                path = dataset_path(action["remove"]["path"])
                if path in files and _vector_id(files[path]) == _vector_id(action["remove"]):
                    del files[path]
            elif "metaData" in action:
                metadata = action["metaData"]
            elif "protocol" in action:
                protocol = action["protocol"]
        return DeltaState(version, protocol, metadata, MappingProxyType(files))

    def checkpoint_bytes(self) -> bytes:
        """The state as a classic Parquet checkpoint."""
        rows = [{"protocol": dict(self.protocol)}, {"metaData": _metadata_row(self.metadata)}]
        rows += [{"add": _add_row(a)} for _, a in sorted(self.files.items())]
        table = pa.Table.from_pylist(rows, schema=CHECKPOINT_SCHEMA)
        sink = io.BytesIO()
        pq.write_table(table, sink)
        return sink.getvalue()

    @staticmethod
    def from_checkpoint(version: int, data: bytes) -> "DeltaState":
        actions = []
        for row in pq.read_table(io.BytesIO(data)).to_pylist():
            for kind in ("protocol", "metaData", "add"):
                if row.get(kind) is not None:
                    actions.append({kind: _from_row(row[kind])})
        return DeltaState(-1, {}, {}, MappingProxyType({})).apply(version, actions)


def _vector_id(action: Mapping) -> tuple | None:
    dv = action.get("deletionVector")
    return None if dv is None else (dv["storageType"], dv["pathOrInlineDv"], dv.get("offset"))


def _metadata_row(metadata: Mapping) -> dict:
    out = dict(metadata)
    out["format"] = {"provider": metadata["format"]["provider"], "options": list(metadata["format"]["options"].items())}
    out["configuration"] = list(metadata["configuration"].items())
    return out


def _add_row(add: Mapping) -> dict:
    out = dict(add)
    out["partitionValues"] = list(add["partitionValues"].items())
    return out


def _from_row(row: dict) -> dict:
    """A checkpoint row's struct back as its JSON action (maps as dicts, nulls left out)."""
    out = {}
    for k, v in row.items():
        if v is None:
            continue
        if k in ("partitionValues", "configuration", "options", "tags"):
            v = dict(v)
        elif isinstance(v, dict):
            v = _from_row(v)
        out[k] = v
    return out


def encode_version(actions: Iterable[Mapping]) -> bytes:
    return "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions).encode()


def decode_version(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


def read_state(store: ObjectStore, version: int, listing: DeltaListing | None = None) -> DeltaState:
    """The state Delta version ``version`` describes, from the newest checkpoint at or before
    it (or version 0) and the versions after; ``FileNotFoundError`` when a part is missing."""
    listing = listing or DeltaListing.of(store)
    start = max((c for c in listing.checkpoints if c <= version), default=None)
    if start is None:
        state = DeltaState(-1, {}, {}, MappingProxyType({}))
    else:
        state = DeltaState.from_checkpoint(start, store.read(checkpoint_key(start)))
    for v in range(state.version + 1, version + 1):
        state = state.apply(v, decode_version(store.read(version_key(v))))
    return state


def write_checkpoint(store: ObjectStore, state: DeltaState, create: bool = False) -> None:
    """The checkpoint of ``state``, then ``_last_checkpoint`` pointing at it (never backwards).
    ``create``: only if there is none (``FileExistsError`` otherwise), as a first version."""
    data = state.checkpoint_bytes()
    (store.put_if_absent if create else store.put)(checkpoint_key(state.version), data)
    try:
        known = json.loads(store.read(LAST_CHECKPOINT))["version"]
    except (FileNotFoundError, ValueError, KeyError):
        known = -1
    if known < state.version:
        store.put(LAST_CHECKPOINT, json.dumps({"version": state.version, "size": len(state.files) + 2,
                                               "sizeInBytes": len(data), "numOfAddFiles": len(state.files)}).encode())
