"""The transaction log: one object per commit, replayed into snapshots.

Commit ``n`` of a dataset is the object ``_log/<n as 20 digits>.json``, created only if
absent (see :mod:`cdkds.catalog.storage`), so writers racing for ``n`` have exactly one
winner. Each commit holds its revision, a uuid, the previous commit's uuid, a timestamp
(strictly increasing, kept in the commit), the operation, engine information and its
actions: :class:`AddFile`, :class:`RemoveFile`, :class:`SetMetadata` (the descriptor)
and :class:`SetProtocol`. Replaying commits ``0..n`` gives the :class:`Snapshot` at ``n``.
The byte format is specified in ``docs/FORMAT.md``.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import time
import uuid
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Sequence

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import (
    CommitConflictError, CorruptLogError, DatasetExistsError, DatasetNotFoundError, InvalidTimeTravelError,
)
from cdkds.catalog.storage import ObjectStore
from cdkds.formats import values
from cdkds.formats.errors import SchemaMismatchError
from cdkds.formats.statistics import ColumnStatistics

LOG_FOLDER = "_log"
READER_VERSION = 1
WRITER_VERSION = 1
ENGINE = "cdkds/0.1.0"
MAX_COMMIT_ATTEMPTS = 20


def commit_key(revision: int) -> str:
    return f"{LOG_FOLDER}/{revision:020d}.json"


@dataclass(frozen=True)
class AddFile:
    """A data file joins the dataset: its path (relative to the dataset), typed partition
    values, size, rows and per-column statistics."""

    path: str
    partition: Mapping[str, Any]
    size: int
    row_count: int
    statistics: Mapping[str, ColumnStatistics] = field(default_factory=dict)

    def to_json(self, descriptor: DatasetDescriptor) -> dict:
        kinds = _partition_kinds(descriptor)
        fields = descriptor.fields
        return {"add": {
            "path": self.path,
            "partition": {k: values.to_json(v, kinds[k]) for k, v in self.partition.items()},
            "size": self.size,
            "rows": self.row_count,
            "stats": {k: s.to_json(fields[k].kind) for k, s in self.statistics.items() if k in fields},
        }}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], descriptor: DatasetDescriptor) -> "AddFile":
        kinds = _partition_kinds(descriptor)
        fields = descriptor.fields
        return cls(
            data["path"],
            MappingProxyType({k: values.from_json(v, kinds[k]) for k, v in data["partition"].items()}),
            int(data["size"]), int(data["rows"]),
            MappingProxyType({k: ColumnStatistics.from_json(s, fields[k].kind)
                              for k, s in data.get("stats", {}).items() if k in fields}),
        )


@dataclass(frozen=True)
class RemoveFile:
    """A data file leaves the dataset (it stays on storage until garbage collection)."""

    path: str

    def to_json(self, descriptor: DatasetDescriptor) -> dict:
        return {"remove": {"path": self.path}}


@dataclass(frozen=True)
class SetMetadata:
    """The dataset's descriptor from this commit on."""

    descriptor: DatasetDescriptor

    def to_json(self, descriptor: DatasetDescriptor) -> dict:
        return {"metadata": {"descriptor": self.descriptor.to_json()}}


@dataclass(frozen=True)
class SetProtocol:
    """The log format versions a reader and a writer must understand."""

    reader_version: int = READER_VERSION
    writer_version: int = WRITER_VERSION

    def to_json(self, descriptor: DatasetDescriptor | None) -> dict:
        return {"protocol": {"reader": self.reader_version, "writer": self.writer_version}}


Action = AddFile | RemoveFile | SetMetadata | SetProtocol


def _partition_kinds(descriptor: DatasetDescriptor) -> dict[str, str]:
    strategy = descriptor.partition_strategy
    return strategy.kinds(descriptor.fields) if strategy is not None else {}


@dataclass(frozen=True)
class Commit:
    revision: int
    uuid: str
    previous: str | None
    timestamp: int  # milliseconds since the epoch, strictly increasing along the log
    operation: str
    info: Mapping[str, Any]
    actions: tuple[Action, ...]

    def to_bytes(self, descriptor: DatasetDescriptor | None) -> bytes:
        encoded = []
        for action in self.actions:
            if isinstance(action, SetMetadata):
                descriptor = action.descriptor
            encoded.append(action.to_json(descriptor))
        return json.dumps({
            "revision": self.revision, "uuid": self.uuid, "previous": self.previous, "timestamp": self.timestamp,
            "operation": self.operation, "info": dict(self.info), "actions": encoded,
        }, separators=(",", ":"), sort_keys=False).encode("utf-8")

    @staticmethod
    def from_bytes(data: bytes, descriptor: DatasetDescriptor | None, where: str) -> "Commit":
        try:
            raw = json.loads(data)
            actions: list[Action] = []
            for item in raw["actions"]:
                (kind, body), = item.items()
                if kind == "metadata":
                    descriptor = DatasetDescriptor.from_json(body["descriptor"])
                    actions.append(SetMetadata(descriptor))
                elif kind == "protocol":
                    actions.append(SetProtocol(int(body["reader"]), int(body["writer"])))
                elif kind == "add":
                    if descriptor is None:
                        raise ValueError("an add before any metadata")
                    actions.append(AddFile.from_json(body, descriptor))
                elif kind == "remove":
                    actions.append(RemoveFile(body["path"]))
                else:
                    raise ValueError(f"unknown action {kind!r}")
            return Commit(int(raw["revision"]), str(raw["uuid"]), raw["previous"], int(raw["timestamp"]),
                          str(raw["operation"]), MappingProxyType(dict(raw.get("info", {}))), tuple(actions))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CorruptLogError(f"commit {where} is corrupt or truncated: {type(e).__name__}: {e}") from None


@dataclass(frozen=True)
class Snapshot:
    """A dataset as of one revision: its descriptor and live data files."""

    version: int
    timestamp: int
    commit_uuid: str
    descriptor: DatasetDescriptor
    files: Mapping[str, AddFile]

    @property
    def row_count(self) -> int:
        return sum(f.row_count for f in self.files.values())

    def apply(self, commit: Commit) -> "Snapshot":
        descriptor = self.descriptor
        files = dict(self.files)
        for action in commit.actions:
            if isinstance(action, AddFile):
                files[action.path] = action
            elif isinstance(action, RemoveFile):
                files.pop(action.path, None)
            elif isinstance(action, SetMetadata):
                descriptor = action.descriptor
        return Snapshot(commit.revision, commit.timestamp, commit.uuid, descriptor, MappingProxyType(files))


@dataclass(frozen=True)
class HistoryEntry:
    revision: int
    timestamp: int
    operation: str
    info: Mapping[str, Any]
    added_files: int
    removed_files: int
    added_rows: int


class TransactionLog:
    """The commits of one dataset, under its store's ``_log/`` folder."""

    def __init__(self, store: ObjectStore, dataset: str):
        self.store = store
        self.dataset = dataset

    def revisions(self) -> list[int]:
        found = []
        for name in self.store.list(LOG_FOLDER):
            stem, dot, ext = name.partition(".")
            if ext == "json" and stem.isdigit() and len(stem) == 20:
                found.append(int(stem))
        return sorted(found)

    def exists(self) -> bool:
        return self.store.exists(commit_key(0))

    def _read(self, revision: int, descriptor: DatasetDescriptor | None) -> Commit:
        key = commit_key(revision)
        try:
            data = self.store.read(key)
        except FileNotFoundError:
            raise CorruptLogError(f"dataset {self.dataset!r}: commit {self.store.display(key)} is missing") from None
        commit = Commit.from_bytes(data, descriptor, f"{self.store.display(key)} of dataset {self.dataset!r}")
        if commit.revision != revision:
            raise CorruptLogError(f"dataset {self.dataset!r}: {self.store.display(key)} says it is revision {commit.revision}")
        return commit

    def commits(self, upto: int | None = None) -> Iterable[Commit]:
        """Commits from revision 0 on, checking the chain of uuids as it goes."""
        revisions = self.revisions()
        if not revisions or revisions[0] != 0:
            raise DatasetNotFoundError(f"dataset {self.dataset!r} does not exist at {self.store.url}")
        last = revisions[-1] if upto is None else min(upto, revisions[-1])
        previous: Commit | None = None
        descriptor: DatasetDescriptor | None = None
        for revision in range(0, last + 1):
            commit = self._read(revision, descriptor)
            if previous is not None and commit.previous != previous.uuid:
                raise CorruptLogError(
                    f"dataset {self.dataset!r}: commit {revision} follows {commit.previous!r}, but commit "
                    f"{revision - 1} is {previous.uuid!r}; the log's chain is broken")
            for action in commit.actions:
                if isinstance(action, SetMetadata):
                    descriptor = action.descriptor
                elif isinstance(action, SetProtocol) and action.reader_version > READER_VERSION:
                    raise CorruptLogError(
                        f"dataset {self.dataset!r} needs log reader version {action.reader_version}; "
                        f"this cdkds reads version {READER_VERSION}")
            previous = commit
            yield commit

    def snapshot(self, version: int | None = None, timestamp: Any = None) -> Snapshot:
        """The snapshot at a revision, at the last commit at or before a time, or the latest."""
        snapshot: Snapshot | None = None
        limit = _millis(timestamp) if timestamp is not None else None
        for commit in self.commits(upto=version):
            if limit is not None and commit.timestamp > limit:
                break
            snapshot = _first_snapshot(commit) if snapshot is None else snapshot.apply(commit)
        if snapshot is None:
            raise DatasetNotFoundError(
                f"dataset {self.dataset!r} has no revision at or before {timestamp!r}")
        if version is not None and snapshot.version != version:
            raise DatasetNotFoundError(
                f"dataset {self.dataset!r} has no revision {version}; its latest is {snapshot.version}")
        return snapshot

    def history(self) -> list[HistoryEntry]:
        out = []
        for c in self.commits():
            adds = [a for a in c.actions if isinstance(a, AddFile)]
            out.append(HistoryEntry(c.revision, c.timestamp, c.operation, c.info, len(adds),
                                    sum(isinstance(a, RemoveFile) for a in c.actions), sum(a.row_count for a in adds)))
        return out

    def create(self, descriptor: DatasetDescriptor, info: Mapping[str, Any] | None = None) -> Snapshot:
        commit = Commit(0, uuid.uuid4().hex, None, _now(0), "create", _info(info),
                        (SetProtocol(), SetMetadata(descriptor)))
        try:
            self.store.put_if_absent(commit_key(0), commit.to_bytes(None))
        except FileExistsError:
            raise DatasetExistsError(f"dataset {self.dataset!r} already exists at {self.store.url}") from None
        return _first_snapshot(commit)

    def commit(self, base: Snapshot, operation: str, actions: Sequence[Action],
               info: Mapping[str, Any] | None = None, commit_uuid: str | None = None) -> Snapshot:
        """Append one commit after ``base``; returns the snapshot it makes.

        When another writer took the next revision first, a commit that only adds files
        is rebased onto the newer commits (appends never conflict) unless one of them
        changed the descriptor; anything else raises :class:`CommitConflictError`.
        """
        actions = tuple(actions)
        commit_uuid = commit_uuid or uuid.uuid4().hex
        current = base
        for attempt in range(MAX_COMMIT_ATTEMPTS):
            commit = Commit(current.version + 1, commit_uuid, current.commit_uuid, _now(current.timestamp),
                            operation, _info(info), actions)
            try:
                self.store.put_if_absent(commit_key(commit.revision), commit.to_bytes(current.descriptor))
                return current.apply(commit)
            except FileExistsError:
                pass
            current = self._catch_up(current, commit, actions)
            if current.commit_uuid == commit_uuid:
                return current  # our earlier attempt landed though its acknowledgement was lost
            time.sleep(random.uniform(0, min(0.2, 0.005 * 2 ** attempt)))
        raise CommitConflictError(
            f"dataset {self.dataset!r}: gave up committing {operation!r} after {MAX_COMMIT_ATTEMPTS} attempts "
            f"lost to concurrent writers")

    def _catch_up(self, current: Snapshot, ours: Commit, actions: tuple[Action, ...]) -> Snapshot:
        appends_only = all(isinstance(a, AddFile) for a in actions)
        revision = current.version + 1
        while self.store.exists(commit_key(revision)):
            theirs = self._read(revision, current.descriptor)
            if theirs.uuid == ours.uuid:
                return current.apply(theirs)
            if not appends_only:
                raise CommitConflictError(
                    f"dataset {self.dataset!r}: {ours.operation!r} was planned on revision {current.version}, but "
                    f"revision {revision} ({theirs.operation!r}) committed first; re-read the dataset and retry")
            if any(isinstance(a, SetMetadata) for a in theirs.actions):
                raise CommitConflictError(
                    f"dataset {self.dataset!r}: revision {revision} ({theirs.operation!r}) changed the descriptor "
                    f"while {ours.operation!r} was writing files for the old one")
            current = current.apply(theirs)
            revision += 1
        return current


def _first_snapshot(commit: Commit) -> Snapshot:
    empty = Snapshot(-1, 0, "", None, MappingProxyType({}))  # type: ignore[arg-type]
    snapshot = empty.apply(commit)
    if snapshot.descriptor is None:
        raise CorruptLogError(f"commit 0 ({commit.uuid}) holds no descriptor")
    return snapshot


def _now(previous: int) -> int:
    return max(int(time.time() * 1000), previous + 1)


def _info(info: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return {"engine": ENGINE, **(info or {})}


def _millis(timestamp: Any) -> int:
    if isinstance(timestamp, (int, float)) and not isinstance(timestamp, bool):
        return int(timestamp)
    if isinstance(timestamp, str):
        try:
            timestamp = values.coerce(timestamp, "timestamp-micros")
        except SchemaMismatchError:
            raise InvalidTimeTravelError(f"cannot read {timestamp!r} as a time to travel to") from None
    if isinstance(timestamp, dt.datetime):
        if timestamp.tzinfo is None:
            timestamp = timestamp.replace(tzinfo=dt.timezone.utc)
        return int(timestamp.timestamp() * 1000)
    raise InvalidTimeTravelError(f"cannot read {timestamp!r} as a time to travel to")
