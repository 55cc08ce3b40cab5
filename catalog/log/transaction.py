"""The transaction log: one object per commit, checkpoints, time travel and expiry.

Commit ``n`` of a dataset is the object ``_log/<n as 20 digits>.json``, created only if
absent (see :mod:`cdkds.catalog.storage`), so writers racing for ``n`` have exactly one
winner. Each commit holds its revision, a uuid, the previous commit's uuid, a timestamp
(strictly increasing, kept in the commit), the operation, engine information, its actions
(:mod:`cdkds.catalog.log.actions`) and a checksum. Every ``checkpoint.interval`` commits
(a descriptor property, default 10) a checkpoint holds the whole state, so opening a
dataset reads one checkpoint and at most that many commits. The byte format is
specified in ``docs/FORMAT.md``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import time
import uuid
import warnings
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from cdkds.catalog.log import checkpoint
from cdkds.catalog.log.actions import (
    READER_VERSION, Action, AddFile, SetMetadata, SetProtocol, decode_actions, encode_actions,
)
from cdkds.catalog.log.conflicts import BlindAppend, ConflictRule
from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import (
    CommitConflictError, CorruptLogError, CorruptLogWarning, DatasetExistsError, DatasetNotFoundError,
    InvalidTimeTravelError, StorageError,
)
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.storage import ObjectStore
from cdkds.formats import values
from cdkds.formats.errors import SchemaMismatchError

LOG_FOLDER = "_log"
ENGINE = "cdkds/0.1.0"
MAX_COMMIT_ATTEMPTS = 20
MAX_STORE_FAILURES = 5  # transient store errors tolerated in one commit
DEFAULT_CHECKPOINT_INTERVAL = 10
_MISSING_PROBE = 3  # after a missing commit, look this far ahead for later ones (a hole is corruption)


def commit_key(revision: int) -> str:
    return f"{LOG_FOLDER}/{revision:020d}.json"


def checkpoint_key(revision: int) -> str:
    return f"{LOG_FOLDER}/{checkpoint.checkpoint_name(revision)}"


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
        body = {
            "revision": self.revision, "uuid": self.uuid, "previous": self.previous, "timestamp": self.timestamp,
            "operation": self.operation, "info": dict(self.info), "actions": encode_actions(self.actions, descriptor),
        }
        return json.dumps({**body, "checksum": _checksum(body)}, separators=(",", ":")).encode("utf-8")

    @staticmethod
    def parse(data: bytes, where: str) -> dict:
        """The commit's JSON, checked: parsable, complete and matching its checksum."""
        try:
            raw = json.loads(data)
            checksum = raw.pop("checksum")
            if checksum != _checksum(raw):
                raise ValueError("checksum mismatch")
            for key in ("revision", "uuid", "previous", "timestamp", "operation", "actions"):
                raw[key]  # noqa: B018 - presence check
            return raw
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CorruptLogError(f"commit {where} is corrupt or truncated: {type(e).__name__}: {e}") from None

    @staticmethod
    def from_bytes(data: bytes, descriptor: DatasetDescriptor | None, where: str) -> "Commit":
        raw = Commit.parse(data, where)
        try:
            revision = int(raw["revision"])
            return Commit(revision, str(raw["uuid"]), raw["previous"], int(raw["timestamp"]), str(raw["operation"]),
                          MappingProxyType(dict(raw.get("info", {}))),
                          decode_actions(raw["actions"], descriptor, revision))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CorruptLogError(f"commit {where} is corrupt: {type(e).__name__}: {e}") from None


def _checksum(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class HistoryEntry:
    revision: int
    timestamp: int
    operation: str
    info: Mapping[str, Any]
    added_files: int
    removed_files: int
    added_rows: int
    tombstones: int

    @property
    def time(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.timestamp / 1000, tz=dt.timezone.utc)


class TransactionLog:
    """The commits and checkpoints of one dataset, under its store's ``_log/`` folder."""

    def __init__(self, store: ObjectStore, dataset: str):
        self.store = store
        self.dataset = dataset

    # ---------------------------------------------------------------- listing

    def _listing(self) -> tuple[list[int], list[int]]:
        """Revisions of the commits and of the checkpoints present, ascending."""
        commits, checkpoints = [], []
        for name in self.store.list(LOG_FOLDER):
            stem, _, ext = name.partition(".")
            if ext == "json" and len(stem) == 20 and stem.isdigit():
                commits.append(int(stem))
            elif (revision := checkpoint.checkpoint_revision(name)) is not None:
                checkpoints.append(revision)
        return sorted(commits), sorted(checkpoints)

    def exists(self) -> bool:
        """Commit 0 is never expired: it marks that the dataset exists."""
        return self.store.exists(commit_key(0))

    # ---------------------------------------------------------------- reading commits

    def _fetch(self, key: str) -> bytes | None:
        try:
            return self.store.read(key)
        except FileNotFoundError:
            return None

    def _read(self, revision: int, descriptor: DatasetDescriptor | None) -> Commit | None:
        data = self._fetch(commit_key(revision))
        if data is None:
            return None
        commit = Commit.from_bytes(data, descriptor, self._where(commit_key(revision)))
        if commit.revision != revision:
            raise CorruptLogError(f"dataset {self.dataset!r}: {self.store.display(commit_key(revision))} "
                                  f"says it is revision {commit.revision}")
        return commit

    def _where(self, key: str) -> str:
        return f"{self.store.display(key)} of dataset {self.dataset!r}"

    def _replay(self, snapshot: Snapshot, upto: int | None = None, until_ms: int | None = None) -> Snapshot:
        """``snapshot`` moved forward commit by commit, checking the chain."""
        revision = snapshot.version + 1
        while upto is None or revision <= upto:
            commit = self._read(revision, snapshot.descriptor)
            if commit is None:
                later = [r for r in range(revision + 1, revision + 1 + _MISSING_PROBE)
                         if self.store.exists(commit_key(r))]
                if later:
                    raise CorruptLogError(
                        f"dataset {self.dataset!r}: commit {self.store.display(commit_key(revision))} is missing "
                        f"but commit {later[0]} exists; the log has a hole")
                break
            if until_ms is not None and commit.timestamp > until_ms:
                break
            if commit.previous != snapshot.commit_uuid:
                raise CorruptLogError(
                    f"dataset {self.dataset!r}: commit {revision} follows {commit.previous!r}, but commit "
                    f"{revision - 1} is {snapshot.commit_uuid!r}; the log's chain is broken")
            for action in commit.actions:
                if isinstance(action, SetProtocol) and action.reader_version > READER_VERSION:
                    raise CorruptLogError(f"dataset {self.dataset!r} needs log reader version "
                                          f"{action.reader_version}; this cdkds reads version {READER_VERSION}")
            snapshot = snapshot.apply(commit)
            revision += 1
        return snapshot

    def _first(self) -> Snapshot:
        commit = self._read(0, None)
        if commit is None:
            raise DatasetNotFoundError(f"dataset {self.dataset!r} does not exist at {self.store.url}")
        snapshot = Snapshot.first(commit)
        if snapshot.descriptor is None:
            raise CorruptLogError(f"dataset {self.dataset!r}: commit 0 holds no descriptor")
        return snapshot

    def _load_checkpoint(self, revision: int) -> Snapshot | None:
        data = self._fetch(checkpoint_key(revision))
        if data is None:
            return None
        try:
            return checkpoint.decode(data, self._where(checkpoint_key(revision)))
        except CorruptLogError as e:
            warnings.warn(f"{e}; reading from the previous checkpoint instead", CorruptLogWarning, stacklevel=4)
            return None

    def _start(self, upto: int | None) -> Snapshot:
        """The newest readable state at or before ``upto`` to replay from."""
        hint = self._hint()
        if hint is not None and (upto is None or hint <= upto):
            start = self._load_checkpoint(hint)
            if start is not None:
                return start
        _, checkpoints = self._listing()
        for revision in reversed(checkpoints):
            if upto is None or revision <= upto:
                start = self._load_checkpoint(revision)
                if start is not None:
                    return start
        return self._first()

    def _hint(self) -> int | None:
        data = self._fetch(f"{LOG_FOLDER}/{checkpoint.LAST_CHECKPOINT}")
        try:
            return int(json.loads(data)["revision"]) if data is not None else None
        except (ValueError, KeyError, TypeError):
            warnings.warn(f"dataset {self.dataset!r}: the _last_checkpoint hint is unreadable; listing the log instead",
                          CorruptLogWarning, stacklevel=3)
            return None

    # ---------------------------------------------------------------- snapshots

    def snapshot(self, version: int | None = None, timestamp: Any = None) -> Snapshot:
        """The latest snapshot, the one at revision ``version``, or the last one at or before ``timestamp``."""
        if not self.exists():
            raise DatasetNotFoundError(f"dataset {self.dataset!r} does not exist at {self.store.url}")
        if timestamp is not None:
            return self._at_time(_millis(timestamp), timestamp)
        if version == 0:
            return self._first()
        start = self._start(version)
        if start.version == 0 and version is not None:
            self._check_not_expired(f"revision {version}")
        snapshot = self._replay(start, upto=version)
        if version is not None and snapshot.version != version:
            latest = self.snapshot().version
            raise InvalidTimeTravelError(
                f"dataset {self.dataset!r} has no revision {version}; its latest is {latest}" if version > latest else
                f"dataset {self.dataset!r}: revision {version} has been expired from the log")
        return snapshot

    def _at_time(self, until: int, given: Any) -> Snapshot:
        first = self._first()
        if first.timestamp > until:
            raise InvalidTimeTravelError(f"dataset {self.dataset!r} has no revision at or before {given!r}; "
                                         f"it was created at {first.timestamp} ms")
        _, checkpoints = self._listing()
        best = None
        lo, hi = 0, len(checkpoints) - 1
        while lo <= hi:  # the newest checkpoint at or before the time (timestamps grow with revisions)
            mid = (lo + hi) // 2
            data = self._fetch(checkpoint_key(checkpoints[mid]))
            head = checkpoint.header(data, self._where(checkpoint_key(checkpoints[mid]))) if data else None
            if head is not None and head.timestamp <= until:
                best, lo = checkpoints[mid], mid + 1
            else:
                hi = mid - 1
        start = (self._load_checkpoint(best) if best is not None else None) or first
        if start is first:
            self._check_not_expired(f"the revision at {given!r}")
        return self._replay(start, until_ms=until)

    def _check_not_expired(self, what: str) -> None:
        """Replaying from commit 0 past an expired prefix would look like a hole in the log."""
        commits, checkpoints = self._listing()
        if 1 not in commits and any(c > 0 for c in checkpoints):
            raise InvalidTimeTravelError(f"dataset {self.dataset!r}: {what} has been expired from the log")

    def history(self) -> list[HistoryEntry]:
        """The retained commits, oldest first."""
        commits, _ = self._listing()
        out = []
        for revision in commits:
            raw = Commit.parse(self.store.read(commit_key(revision)), self._where(commit_key(revision)))
            kinds = [next(iter(a)) for a in raw["actions"]]
            out.append(HistoryEntry(
                revision, int(raw["timestamp"]), raw["operation"], MappingProxyType(dict(raw.get("info", {}))),
                kinds.count("add"), kinds.count("remove"),
                sum(int(a["add"]["rows"]) for a in raw["actions"] if "add" in a), kinds.count("tombstone")))
        return out

    # ---------------------------------------------------------------- writing

    def create(self, descriptor: DatasetDescriptor, info: Mapping[str, Any] | None = None) -> Snapshot:
        commit = Commit(0, uuid.uuid4().hex, None, _now(0), "create", _info(info),
                        (SetProtocol(), SetMetadata(descriptor)))
        try:
            self.store.put_if_absent(commit_key(0), commit.to_bytes(None))
        except FileExistsError:
            raise DatasetExistsError(f"dataset {self.dataset!r} already exists at {self.store.url}") from None
        return Snapshot.first(commit)

    def commit(self, base: Snapshot, operation: str, actions: Sequence[Action],
               info: Mapping[str, Any] | None = None, commit_uuid: str | None = None,
               rule: ConflictRule | None = None) -> Snapshot:
        """Append one commit after ``base``; returns the snapshot it makes.

        When other writers took the next revisions first, the commit is rebased onto
        theirs unless ``rule`` (default: a blind append) finds a conflict, which raises
        :class:`CommitConflictError` naming the commit that won.
        """
        actions = tuple(actions)
        rule = rule or BlindAppend()
        commit_uuid = commit_uuid or uuid.uuid4().hex
        current = base
        failures = 0
        for attempt in range(MAX_COMMIT_ATTEMPTS):
            commit = Commit(current.version + 1, commit_uuid, current.commit_uuid, _now(current.timestamp),
                            operation, _info(info), actions)
            try:
                self.store.put_if_absent(commit_key(commit.revision), commit.to_bytes(current.descriptor))
            except FileExistsError:
                pass
            except (OSError, TimeoutError) as e:  # a transient store failure: the object may or may not be there
                failures += 1
                if failures > MAX_STORE_FAILURES:
                    raise StorageError(f"dataset {self.dataset!r}: committing {operation!r} failed {failures} "
                                       f"times on the object store; last error: {e}") from e
            else:
                snapshot = current.apply(commit)
                self._maybe_checkpoint(snapshot)
                return snapshot
            current = self._catch_up(current, commit, rule, base)
            if current.commit_uuid == commit_uuid:
                return current  # an earlier attempt landed though its acknowledgement was lost
            time.sleep(random.uniform(0, min(0.2, 0.005 * 2 ** attempt)))
        raise CommitConflictError(f"dataset {self.dataset!r}: gave up committing {operation!r} after "
                                  f"{MAX_COMMIT_ATTEMPTS} attempts lost to concurrent writers")

    def _catch_up(self, current: Snapshot, ours: Commit, rule: ConflictRule, base: Snapshot) -> Snapshot:
        revision = current.version + 1
        while True:
            theirs = self._read(revision, current.descriptor)
            if theirs is None:
                return current
            if theirs.uuid == ours.uuid:
                return current.apply(theirs)
            reason = rule.conflict(ours.actions, theirs, base)
            if reason is not None:
                raise CommitConflictError(
                    f"dataset {self.dataset!r}: {ours.operation!r} planned on revision {base.version} conflicts with "
                    f"revision {revision} ({theirs.operation!r}), which committed first: {reason}; nothing of "
                    f"{ours.operation!r} was committed — re-read the dataset and retry")
            current = current.apply(theirs)
            revision += 1

    def _maybe_checkpoint(self, snapshot: Snapshot) -> None:
        interval = checkpoint_interval(snapshot.descriptor)
        if snapshot.version % interval == 0:
            try:
                self.write_checkpoint(snapshot)
            except Exception as e:  # noqa: BLE001 - the commit stands; the next checkpoint or listing covers it
                warnings.warn(f"dataset {self.dataset!r}: checkpoint at revision {snapshot.version} failed: {e}",
                              CorruptLogWarning, stacklevel=4)

    def write_checkpoint(self, snapshot: Snapshot) -> None:
        """Write the checkpoint of ``snapshot`` and point the hint at it."""
        try:
            self.store.put_if_absent(checkpoint_key(snapshot.version), checkpoint.encode(snapshot))
        except FileExistsError:
            pass  # a checkpoint of a revision has one possible content
        hint = self._hint()
        if hint is None or hint < snapshot.version:
            self.store.put(f"{LOG_FOLDER}/{checkpoint.LAST_CHECKPOINT}",
                           json.dumps({"revision": snapshot.version}).encode())

    # ---------------------------------------------------------------- retention

    def expire(self, older_than: Any) -> list[str]:
        """Remove commits and checkpoints older than a time, from the start of the log only.

        The newest checkpoint at or before the time is kept, so every revision from it on
        stays readable; commit 0 is kept as the dataset's birth record. Returns the keys removed.
        """
        cutoff = _cutoff(older_than)
        commits, checkpoints = self._listing()
        keep = None
        for revision in checkpoints:
            data = self._fetch(checkpoint_key(revision))
            if data is None:
                continue
            head = checkpoint.header(data, self._where(checkpoint_key(revision)))
            if head.timestamp > cutoff:
                break
            if self._load_checkpoint(revision) is not None:
                keep = revision
        if keep is None:
            return []
        removed = []
        for revision in commits:  # oldest first: what remains is always a readable suffix
            if 0 < revision < keep:
                self.store.delete(commit_key(revision))
                removed.append(commit_key(revision))
        for revision in checkpoints:
            if revision < keep:
                self.store.delete(checkpoint_key(revision))
                removed.append(checkpoint_key(revision))
        return removed

    def retained_files(self) -> set[str]:
        """Paths of the data files any retained revision references."""
        commits, checkpoints = self._listing()
        start = self._first()
        if any(r > 0 for r in commits) and 1 not in commits:  # expired: the earliest checkpoint starts the rest
            for revision in checkpoints:
                loaded = self._load_checkpoint(revision)
                if loaded is not None:
                    start = loaded
                    break
        paths = set(start.files)
        snapshot = start
        while (commit := self._read(snapshot.version + 1, snapshot.descriptor)) is not None:
            paths.update(a.path for a in commit.actions if isinstance(a, AddFile))
            snapshot = snapshot.apply(commit)
        return paths


def checkpoint_interval(descriptor: DatasetDescriptor) -> int:
    return int(descriptor.properties.get("checkpoint.interval", DEFAULT_CHECKPOINT_INTERVAL))


def _now(previous: int) -> int:
    return max(int(time.time() * 1000), previous + 1)


def _info(info: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return {"engine": ENGINE, **(info or {})}


def _cutoff(older_than: Any) -> int:
    if isinstance(older_than, dt.timedelta):
        return int((time.time() - older_than.total_seconds()) * 1000)
    return _millis(older_than)


def _millis(timestamp: Any) -> int:
    if isinstance(timestamp, (int, float)) and not isinstance(timestamp, bool):
        return int(timestamp)
    if isinstance(timestamp, str):
        try:
            timestamp = values.coerce(timestamp, "timestamp-micros")
        except SchemaMismatchError:
            raise InvalidTimeTravelError(f"cannot read {timestamp!r} as a time") from None
    if isinstance(timestamp, dt.datetime):
        if timestamp.tzinfo is None:
            timestamp = timestamp.replace(tzinfo=dt.timezone.utc)
        return int(timestamp.timestamp() * 1000)
    raise InvalidTimeTravelError(f"cannot read {timestamp!r} as a time")

