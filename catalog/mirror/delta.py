"""The Delta Lake mirror: a Delta log under ``<dataset>/_delta_log/`` over the dataset's own
data files, one Delta version per cdkds revision (Delta version N reads revision N's rows).

- the schema with column mapping in ``id`` mode (:mod:`.delta_schema`); identity partitions
  (but of strings and bytes) as Delta partition columns, other files unpartitioned with
  statistics;
- deleted rows — deletion vectors, and tombstones materialised by the reader — as Delta
  deletion vectors (:mod:`.delta_vectors`);
- a Parquet checkpoint every ``delta.checkpointInterval`` versions (10 by default), and one
  at the oldest retained revision when the mirror starts on an expired log or the log's
  oldest revision moves on, below which the mirror's older versions are deleted, as Delta's
  log cleanup does (their files may have been vacuumed).

A version's deletion-vector file is written before its JSON; the JSON is created only if
absent, so concurrent updaters agree on every version. A revision Delta readers would read
otherwise than cdkds (a live file lacking a field with a non-null default) is not written:
:class:`MirrorError`, and the mirror starts again at the first later revision they read right.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Iterable, Iterator

import numpy as np

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import CdkdsError, InvalidTimeTravelError, MirrorError
from cdkds.catalog.log.actions import AddFile, DeleteRows, RemoveFile, SetMetadata, SetProtocol, Tombstone
from cdkds.catalog.log.commit import Commit
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.log.transaction import TransactionLog
from cdkds.catalog.mirror.delta_log import (
    DELTA_LOG, DeltaListing, DeltaState, checkpoint_key, decode_version, delta_path, encode_version, read_state,
    version_key,
    write_checkpoint,
)
from cdkds.catalog.mirror.delta_schema import (
    defaulted_fields, delta_schema, field_paths, file_statistics, max_column_id, parquet_fields, partition_columns,
    partition_values, schema_refusal, uses_ntz,
)
from cdkds.catalog.mirror.delta_vectors import VectorFile, read_vector, vector_key, version_vectors_key
from cdkds.catalog.mirror.settings import spec_refusal
from cdkds.catalog.mirror.state import Changes, deleted_positions
from cdkds.catalog.read.native import footer_schema
from cdkds.catalog.read.scan import FileScanTask
from cdkds.catalog.storage import ObjectStore
from cdkds.formats.cache import BoundedCache

CHECKPOINT_INTERVAL = "delta.checkpointInterval"
DEFAULT_CHECKPOINT_INTERVAL = 10
_ENGINE = "cdkds"


class DeltaMirror:
    """The Delta Lake log of one dataset, kept in step with its cdkds log."""

    name = "delta"

    @staticmethod
    def refusal(descriptor: DatasetDescriptor) -> str | None:
        """Why a dataset with this descriptor cannot be mirrored to Delta (None: it can)."""
        if descriptor.format != "parquet":
            return f"Delta Lake reads Parquet data files only; this dataset's format is {descriptor.format}"
        keyed = descriptor.keyed
        if keyed.ttl is not None or keyed.ttl_field is not None:
            return ("rows expire with time (ttl) without a commit, and a Delta version's rows never change; "
                    "remove the ttl properties first")
        return schema_refusal(descriptor) or spec_refusal(
            descriptor, lambda spec_id: [f"{c} (partition {n})" for c, n in sorted(partition_columns(descriptor, spec_id).items())],
            "Delta")

    def __init__(self, store: ObjectStore, dataset: str):
        self.store = store
        self.dataset = dataset

    def version(self) -> int | None:
        """The newest cdkds revision the mirror describes (None: no mirror yet, or a
        ``_delta_log/`` that is a Delta table's own, such as a converted table's)."""
        listing = DeltaListing.of(self.store)
        return listing.newest if self._ours(listing) else None

    def _ours(self, listing: DeltaListing) -> bool:
        """Whether ``_delta_log/`` holds a mirror cdkds wrote: its newest version's
        ``commitInfo`` says so (a log that begins at a checkpoint with no version after it
        is taken as a mirror's start)."""
        if not listing.versions:
            return bool(listing.checkpoints)
        try:
            first = decode_version(self.store.read(version_key(listing.versions[-1])))[:1]
        except (FileNotFoundError, ValueError):
            return True  # removed or rewritten under us: the caller's reads say what is wrong
        return bool(first) and "cdkds" in first[0].get("commitInfo", {})

    # ---------------------------------------------------------------- update

    def update(self, log: TransactionLog, snapshot: Snapshot) -> int:
        """Bring the mirror up to ``snapshot.version``, a version per revision; returns how
        many versions were written. Where this process left the mirror at the previous
        revision (cached) is trusted without listing it; a version found written is taken as
        another updater wrote it, and a log that moved on under the cache (an expiry) sends
        it back to the listing. :class:`MirrorError` (nothing written) when ``snapshot``
        cannot be mirrored, or when a revision cannot and neither can ``snapshot``."""
        reason = self.refusal(snapshot.descriptor) or (
            "its log began before field ids: files without them, read by name, cannot be described by id"
            if snapshot.descriptor.files_may_lack_ids else None)
        if reason is not None:
            raise MirrorError(f"dataset {self.dataset!r}: revision {snapshot.version} cannot be mirrored to Delta "
                              f"Lake: {reason}")
        position, written = _STATES.get((self.store.url, snapshot.version - 1)), 0
        if position is not None and not self._holds(position[1].version):
            position = None  # the mirror was removed or rewritten since
        while True:
            cached = position is not None
            try:
                if position is None:
                    position, started = self._position(log, snapshot.version)
                    written += started
                    if position is None:
                        return written
                before, state = position
                for commit, after in log.replay.walk(before, upto=snapshot.version):
                    changes = commit_changes(before, commit, after)
                    if changes.metadata:
                        self._check_faithful(after, since=before.descriptor)
                    else:
                        self._check_faithful(after, changes.added)
                    try:
                        state = self._append(log, state, before, commit, after, changes)
                        written += 1
                    except FileExistsError:  # another updater wrote this version: take it as it is
                        state = read_state(self.store, after.version)
                    before = after
                    _STATES.put((self.store.url, before.version), (before, state))
                return written
            except _Unfaithful as e:
                return written + self._skip_to(log, snapshot, e)
            except CdkdsError:
                if not cached:
                    raise
                position = None

    def _check_faithful(self, snapshot: Snapshot, files: Iterable[AddFile] | None = None,
                        since: DatasetDescriptor | None = None) -> None:
        """Raise :class:`_Unfaithful` when Delta readers would read ``snapshot`` otherwise than
        cdkds: its descriptor cannot be mirrored (checked when ``files`` is not given), or a
        live file written before a field with a non-null default was added reads the
        default in cdkds, but null (or fails, if required) in Delta; a live file holding, under
        a current field's name, the column of another field (dropped or renamed since) is read
        as that field by readers matching names. Only files written with an older layout are
        looked at (their footers): ``files`` (default all), for the fields new since the
        descriptor ``since`` (default all)."""
        if files is None and (reason := self.refusal(snapshot.descriptor)) is not None:
            raise _Unfaithful(snapshot.version, reason)  # an older descriptor than the one the property was set on
        schema = snapshot.descriptor.schema
        paths, defaulted = field_paths(schema), defaulted_fields(schema)
        if since is not None:
            before = field_paths(since.schema)
            paths = {p: i for p, i in paths.items() if before.get(p) != i}
            defaulted = {i: p for i, p in defaulted.items() if i not in before.values()}
        if not paths and not defaulted:
            return
        for f in snapshot.files.values() if files is None else files:
            if snapshot.written_as_current(f):
                continue  # (a file whose rows are all deleted counts: readers open it, and fail on a required column)
            held = self._file_fields(f)
            reused = [p for p, i in held.items() if p in paths and paths[p] != i]
            if reused:
                raise _Unfaithful(snapshot.version, f"data file {f.path!r} holds column {reused[0]!r} of another "
                                                    f"field than the one named so now, which readers matching "
                                                    f"columns by name would take for it")
            missing = [p for i, p in defaulted.items() if i not in held.values()]
            if missing:
                raise _Unfaithful(snapshot.version, f"field {missing[0]!r} has a default that data file {f.path!r}, "
                                                    f"written before the field was added, does not hold, and Delta "
                                                    f"has no defaults for missing columns")

    def _file_fields(self, file: AddFile) -> dict[str, int]:
        key = (self.store.url, file.path, file.size)
        fields = _FILE_FIELDS.get(key)
        if fields is None:
            fields = parquet_fields(footer_schema(self.store, FileScanTask(file, ())))
            _FILE_FIELDS.put(key, fields)
        return fields

    def _skip_to(self, log: TransactionLog, snapshot: Snapshot, unfaithful: "_Unfaithful") -> int:
        """Start the mirror again at ``snapshot`` (a checkpoint; the versions before it go)
        when it reads as cdkds does; else fail naming the revision that does not."""
        try:
            self._check_faithful(snapshot)
        except _Unfaithful:
            raise MirrorError(
                f"dataset {self.dataset!r}: the Delta mirror cannot describe revision {unfaithful.revision}: "
                f"{unfaithful.reason}; it stays at version {self.version()} until compaction rewrites such "
                f"files") from None
        state, wrote = self._start(log, snapshot)
        _STATES.put((self.store.url, snapshot.version), (snapshot, state))
        return int(wrote)

    def _holds(self, version: int) -> bool:
        """Whether the mirror still has version ``version`` (one look-up, not a listing)."""
        return self.store.exists(version_key(version)) or self.store.exists(checkpoint_key(version))

    def _position(self, log: TransactionLog, target: int) -> tuple[tuple[Snapshot, DeltaState] | None, int]:
        """Where the mirror stands, from its listing (None: at or past ``target``), and 1 if
        it had to be started."""
        listing = DeltaListing.of(self.store)
        if listing.newest is not None and not self._ours(listing):
            raise MirrorError(f"dataset {self.dataset!r}: {self.store.display(DELTA_LOG)} holds a Delta table's own "
                              f"log, not a cdkds mirror (the dataset was converted from it?); move it aside to mirror "
                              f"the dataset to Delta Lake")
        current = listing.newest
        if current is not None and current >= target:
            return None, 0
        if current is None or self._expired_past(log, current):
            start = log.replay.oldest()
            self._check_faithful(start)
            state, wrote = self._start(log, start)
            _STATES.put((self.store.url, start.version), (start, state))
            return (start, state), int(wrote)
        return (log.snapshot(version=current), read_state(self.store, current)), 0

    def _expired_past(self, log: TransactionLog, version: int) -> bool:
        """Whether cdkds's log no longer holds revision ``version`` (the mirror fell behind an
        expiry): the mirror then starts again at the oldest retained revision."""
        oldest = _oldest_revision(log)
        return oldest is not None and version < oldest

    def _start(self, log: TransactionLog, start: Snapshot) -> tuple[DeltaState, bool]:
        """The mirror's first version, at revision ``start``: version 0's JSON, or after
        expiry a checkpoint holding the state (Delta's log may begin at a checkpoint); and
        whether this call wrote it (else another updater did)."""
        table_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"cdkds:{log.listing.raw(0)['uuid']}"))
        empty = DeltaState(-1, {}, {"id": table_id}, {})
        actions, vectors = self._actions(empty, None, start, Changes.between(None, start), start.timestamp)
        state = empty.apply(start.version, actions)
        try:
            if start.version == 0:
                self._write(state, vectors, [_commit_info(start, "create")] + actions)
            else:
                if vectors is not None:
                    self.store.put(vectors.key, vectors.data)
                write_checkpoint(self.store, state, create=True)
                self._clean(state.version)
        except FileExistsError:  # another updater started the mirror there: the same state
            return state, False
        return state, True

    def _append(self, log: TransactionLog, state: DeltaState, before: Snapshot, commit: Commit,
                after: Snapshot, changes: Changes) -> DeltaState:
        """Write version ``after.version``; returns the state it makes. ``FileExistsError``:
        another updater wrote it first."""
        actions, vectors = self._actions(state, before, after, changes, commit.timestamp)
        new = state.apply(after.version, actions)
        self._write(new, vectors, [_commit_info(after, commit.operation)] + actions)
        if after.version % _interval(after.descriptor) == 0:
            write_checkpoint(self.store, new)
            self._expire(log, new.version)
        return new

    def _write(self, state: DeltaState, vectors: VectorFile | None, actions: list[dict]) -> None:
        if vectors is not None:
            self.store.put(vectors.key, vectors.data)
        self.store.put_if_absent(version_key(state.version), encode_version(actions))

    def _actions(self, state: DeltaState, before: Snapshot | None, after: Snapshot, changes: Changes,
                 timestamp: int) -> tuple[list[dict], VectorFile | None]:
        """The Delta actions taking ``state`` (the mirror at ``before``) to ``after``, and the
        deletion vectors they reference."""
        actions: list[dict] = _descriptor_actions(state, after) if changes.metadata else []
        redeleted = {}
        for f in changes.redeleted:
            positions = self._positions(after, f)
            if len(positions) != _cardinality(state.files[f.path]):  # rows are only ever deleted more
                redeleted[f.path] = positions
        deleted = {p: v for p, v in redeleted.items() if len(v)}
        for f in changes.added:
            if len(positions := self._positions(after, f)):
                deleted[f.path] = positions
        vectors = VectorFile.of(state.metadata["id"], after.version, deleted) if deleted else None
        dvs = vectors.descriptors if vectors is not None else {}
        added = {f.path for f in changes.added}
        for f in changes.removed:
            old = state.files.get(f.path)
            if old is not None and not (f.path in added and "deletionVector" not in old and f.path not in dvs):
                actions.append({"remove": _remove(old, timestamp)})  # else the add replaces it (same key)
        actions += [{"remove": _remove(state.files[p], timestamp)} for p in redeleted]
        actions += [{"add": _add(f, after, dvs.get(f.path), True)} for f in changes.added]
        actions += [{"add": _add(after.files[p], after, dvs.get(p), True)} for p in redeleted]
        if changes.metadata and _schema_changed(state, after):  # statistics keyed for the new schema
            actions += [{"add": _add(f, after, state.files[p].get("deletionVector"), False)}
                        for p, f in after.files.items() if p not in added and p not in redeleted]
        return actions, vectors

    def _positions(self, snapshot: Snapshot, file: AddFile) -> np.ndarray:
        if not file.deletes and not snapshot.tombstones_for(file):
            return np.empty(0, np.int64)
        return deleted_positions(self.store, snapshot, file)

    def _expire(self, log: TransactionLog, newest: int) -> None:
        """Once cdkds's log is expired, drop the versions before its oldest retained revision
        (their files may be vacuumed), keeping a checkpoint at that revision."""
        oldest = _oldest_revision(log)
        if oldest is None or oldest > newest:
            return
        if oldest not in DeltaListing.of(self.store).checkpoints:
            write_checkpoint(self.store, read_state(self.store, oldest))
        self._clean(oldest)

    def _clean(self, oldest: int) -> None:
        """Delete the versions below the newest checkpoint at or before ``oldest`` (the
        oldest cdkds revision retained), and their deletion-vector files no later version
        references (Delta's log cleanup)."""
        listing = DeltaListing.of(self.store)
        floor = max((c for c in listing.checkpoints if c <= oldest), default=None)
        if floor is None or (listing.oldest is not None and listing.oldest >= floor):
            return
        state = read_state(self.store, floor, listing)
        kept = _vector_keys(self._retained_from(state, listing))
        # older checkpoints first, then versions from the oldest: wherever this stops, the
        # oldest version readers start from (version 0, else the oldest checkpoint) has every later one
        for c in listing.checkpoints:
            if c < floor:
                self.store.delete(checkpoint_key(c))
        for v in listing.versions:
            if v < floor:
                self.store.delete(version_key(v))
        for v in range(listing.oldest or 0, floor):
            key = version_vectors_key(state.metadata["id"], v)
            if key not in kept:
                try:
                    self.store.delete(key)
                except FileNotFoundError:
                    pass

    # ---------------------------------------------------------------- checks

    def referenced(self) -> set[str]:
        """Data files (dataset-relative paths) the mirror's retained versions reference."""
        return {p for state in self._retained() for p in state.files}

    def _retained(self) -> Iterator[DeltaState]:
        listing = DeltaListing.of(self.store)
        if listing.oldest is not None:
            yield from self._retained_from(read_state(self.store, listing.oldest, listing), listing)

    def _retained_from(self, state: DeltaState, listing: DeltaListing) -> Iterator[DeltaState]:
        """``state`` and the state of each later version."""
        yield state
        for v in range(state.version + 1, (listing.newest or 0) + 1):
            state = state.apply(v, decode_version(self.store.read(version_key(v))))
            yield state

    def verify(self, log: TransactionLog) -> list[str]:
        """Where the mirror's newest version disagrees with the log's snapshot at that
        revision: live files, sizes, row counts, deleted-row counts, schema."""
        version = self.version()
        if version is None:
            return []
        where = self.store.display(version_key(version))
        try:
            state = read_state(self.store, version)
            snapshot = log.snapshot(version=version)
        except FileNotFoundError as e:
            return [f"Delta mirror version {version} ({where}) cannot be read: {e} is missing"]
        except InvalidTimeTravelError:
            return [f"Delta mirror version {version} ({where}) describes a revision the log no longer holds"]
        problems = []
        expected = json.dumps(delta_schema(snapshot.descriptor.schema), sort_keys=True)
        if json.dumps(json.loads(state.metadata.get("schemaString", "null")), sort_keys=True) != expected:
            problems.append(f"Delta mirror version {version} ({where}): its schema differs from the descriptor's")
        for path in sorted(set(state.files) - set(snapshot.files)):
            problems.append(f"Delta mirror version {version} ({where}) lists {path!r}, which revision {version} "
                            f"does not hold")
        for path, f in sorted(snapshot.files.items()):
            add = state.files.get(path)
            if add is None:
                problems.append(f"Delta mirror version {version} ({where}) lacks data file {path!r}")
                continue
            problems += self._check_file(version, where, snapshot, f, add)
        return problems

    def _check_file(self, version: int, where: str, snapshot: Snapshot, f: AddFile, add: dict) -> list[str]:
        out = []
        rows = json.loads(add.get("stats") or "{}").get("numRecords")
        if add.get("size") != f.size or rows != f.row_count:
            out.append(f"Delta mirror version {version} ({where}): data file {f.path!r} has size {add.get('size')} "
                       f"and {rows} rows there, {f.size} and {f.row_count} in the log")
        deleted = len(self._positions(snapshot, f))
        dv = add.get("deletionVector")
        try:
            held = 0 if dv is None else len(read_vector(self.store.read(vector_key(dv["pathOrInlineDv"])), dv))
        except (FileNotFoundError, ValueError) as e:
            return out + [f"Delta mirror version {version} ({where}): the deletion vector of {f.path!r} cannot be "
                          f"read ({e})"]
        if held != deleted:
            out.append(f"Delta mirror version {version} ({where}): data file {f.path!r} has {held} deleted rows "
                       f"there, {deleted} in the log")
        return out


# ---------------------------------------------------------------- actions


def commit_changes(before: Snapshot, commit: Commit, after: Snapshot) -> Changes:
    """:meth:`Changes.between` ``before`` and ``after`` (the state ``commit`` makes of it),
    looking only at the files the commit names: files join, leave and get deletion vectors by
    name; only a tombstone or a descriptor change (rare) can change other files' rows."""
    if any(isinstance(a, (Tombstone, SetMetadata, SetProtocol)) for a in commit.actions):
        return Changes.between(before, after)
    named = {a.path for a in commit.actions if isinstance(a, (AddFile, RemoveFile, DeleteRows))}

    def only_named(snapshot: Snapshot) -> Snapshot:
        return dataclasses.replace(snapshot, files={p: snapshot.files[p] for p in named if p in snapshot.files})

    return Changes.between(only_named(before), only_named(after))


def _oldest_revision(log: TransactionLog) -> int | None:
    """The oldest revision cdkds's log still holds the state of, once it is expired (None: not expired)."""
    listing = log.listing.list()
    if not listing.expired:
        return None
    return min((r for r in listing.checkpoints if r >= listing.suffix_start - 1), default=None)


def _interval(descriptor: DatasetDescriptor) -> int:
    try:
        return max(1, int(descriptor.properties.get(CHECKPOINT_INTERVAL, DEFAULT_CHECKPOINT_INTERVAL)))
    except ValueError:
        return DEFAULT_CHECKPOINT_INTERVAL


def _commit_info(snapshot: Snapshot, operation: str) -> dict:
    return {"commitInfo": {"timestamp": snapshot.timestamp, "operation": operation, "operationParameters": {},
                           "engineInfo": _ENGINE, "cdkds": {"revision": snapshot.version, "uuid": snapshot.commit_uuid,
                                                            "operation": operation}}}


def _descriptor_actions(state: DeltaState, snapshot: Snapshot) -> list[dict]:
    descriptor = snapshot.descriptor
    schema = descriptor.schema
    features = ["columnMapping", "deletionVectors"] + (["timestampNtz"] if uses_ntz(schema) else [])
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": features, "writerFeatures": features}
    metadata = {
        "id": state.metadata["id"], "name": None, "description": None,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(delta_schema(schema), separators=(",", ":")),
        "partitionColumns": list(partition_columns(descriptor)),
        "createdTime": state.metadata.get("createdTime", snapshot.timestamp),
        "configuration": {"delta.columnMapping.mode": "id", "delta.columnMapping.maxColumnId": str(max_column_id(schema)),
                          "delta.enableDeletionVectors": "true",
                          CHECKPOINT_INTERVAL: str(_interval(descriptor))},
    }
    metadata = {k: v for k, v in metadata.items() if v is not None}
    out = [] if protocol == dict(state.protocol) else [{"protocol": protocol}]
    return out + ([] if metadata == dict(state.metadata) else [{"metaData": metadata}])


def _schema_changed(state: DeltaState, snapshot: Snapshot) -> bool:
    """Whether the schema the files' statistics are keyed for changed (their adds are restated)."""
    if "schemaString" not in state.metadata:
        return False
    return json.loads(state.metadata["schemaString"]) != delta_schema(snapshot.descriptor.schema)


def _cardinality(add: dict) -> int:
    """Rows a Delta ``add`` deletes."""
    dv = add.get("deletionVector")
    return 0 if dv is None else int(dv["cardinality"])


def _add(file: AddFile, snapshot: Snapshot, dv: dict | None, data_change: bool) -> dict:
    out = {"path": delta_path(file.path), "partitionValues": partition_values(file, snapshot.descriptor),
           "size": file.size, "modificationTime": file.timestamp or snapshot.timestamp, "dataChange": data_change,
           "stats": file_statistics(file, snapshot.descriptor, tight=dv is None)}
    if dv is not None:
        out["deletionVector"] = dv
    return out


def _remove(add: dict, timestamp: int) -> dict:
    out = {"path": add["path"], "deletionTimestamp": timestamp, "dataChange": True, "extendedFileMetadata": True,
           "partitionValues": add["partitionValues"], "size": add["size"]}
    if "deletionVector" in add:
        out["deletionVector"] = add["deletionVector"]
    return out


def _vector_keys(states: Iterator[DeltaState]) -> set[str]:
    return {vector_key(a["deletionVector"]["pathOrInlineDv"])
            for state in states for a in state.files.values() if "deletionVector" in a}


# where each mirror stood after its last update in this process: (url, version) -> (revision, state)
_STATES: BoundedCache[tuple[Snapshot, DeltaState]] = BoundedCache(16, lambda _: 1)
_FILE_FIELDS: BoundedCache[dict[str, int]] = BoundedCache(65536, len)  # data files are immutable


class _Unfaithful(MirrorError):
    def __init__(self, revision: int, reason: str):
        super().__init__(f"revision {revision}: {reason}")
        self.revision, self.reason = revision, reason
