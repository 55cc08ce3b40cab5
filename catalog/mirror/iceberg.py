"""The Iceberg mirror: Iceberg table metadata (format version 2) under ``<dataset>/metadata/``
describing cdkds's own data files, one Iceberg snapshot per cdkds revision.

Revision ``r`` is snapshot id ``r + 1`` with sequence number ``r + 1`` (Iceberg's sequence
numbers start at 1) in ``metadata/v<r + 1>.metadata.json``; ``metadata/version-hint.text``
names the newest. Manifests are kept by the revisions that added their files, so a
version's work follows its commit (:mod:`~cdkds.catalog.mirror.iceberg_plan`). Deleted rows
are positional delete files, one per data file holding all its deleted positions, under
``metadata/deletes/``: they belong to the mirror, not to cdkds's data (cdkds's vacuum
never sees them), and go with it.
"""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import CdkdsError, CorruptLogError
from cdkds.catalog.log import Commit, TransactionLog
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.mirror.iceberg_manifests import (
    DATA, DELETED, FILE_PATH_ID, POSITION_DELETES, Manifest, entry_bound, manifest_list_bytes, read_entries,
    read_manifest_list,
)
from cdkds.catalog.mirror.iceberg_plan import (
    MANIFEST_NAME, METADATA, IcebergMirrorError, ManifestPlan, may_delete, object_key, snapshot_id,
)
from cdkds.catalog.mirror.iceberg_schema import (
    iceberg_schema, identity_fields, last_column_id, partition_spec, promotion_refusal, schema_refusal,
)
from cdkds.catalog.mirror.settings import spec_refusal
from cdkds.catalog.mirror.state import Changes, deleted_positions
from cdkds.catalog.storage import ObjectStore
from cdkds.formats.projection import NameMapping

__all__ = ["IcebergMirror", "IcebergMirrorError", "metadata_key", "snapshot_id"]

HINT_KEY = f"{METADATA}/version-hint.text"
_METADATA_FILE = re.compile(r"^v(\d+)\.metadata\.json$")
_PREVIOUS_VERSIONS = 100  # metadata-log entries kept, as Iceberg's write.metadata.previous-versions-max
_UNREAD = object()
_READERS = 16  # objects read at once where a mirror reads many


def metadata_key(revision: int) -> str:
    return f"{METADATA}/v{revision + 1}.metadata.json"


@dataclass(frozen=True)
class _Table:
    """A mirror version as the next one builds on it: its metadata and its manifests (and,
    when this process wrote it, the cdkds snapshot it describes)."""

    revision: int
    metadata: dict
    manifests: tuple[Manifest, ...]
    state: Snapshot | None = None


# The last version this process wrote per table location: the next commit's update builds
# on it without reading the metadata back or replaying the log to the previous revision.
_RECENT: dict[str, _Table] = {}
_RECENT_LIMIT = 64


def _remember(location: str, table: _Table) -> None:
    _RECENT.pop(location, None)
    _RECENT[location] = table
    while len(_RECENT) > _RECENT_LIMIT:
        del _RECENT[next(iter(_RECENT))]


class _Reads:
    """Reads of a store made at once on an object store, where each is a round trip, and one
    after the other on local files and memory, where starting threads costs more."""

    def __init__(self, store: ObjectStore, workers: int = 4):
        local = isinstance(store.fs, (LocalFileSystem, MemoryFileSystem))
        self.pool = None if local else ThreadPoolExecutor(max_workers=workers)

    def __enter__(self) -> "_Reads":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown()

    def submit(self, read: Callable[..., Any], *args: Any) -> "Future[Any]":
        if self.pool is not None:
            return self.pool.submit(read, *args)
        done: Future[Any] = Future()
        try:
            done.set_result(read(*args))
        except BaseException as e:  # noqa: BLE001 - handed to the caller by result(), as the pool does
            done.set_exception(e)
        return done

    def map(self, read: Callable[[Any], Any], items: Any) -> Any:
        return self.pool.map(read, items) if self.pool is not None else map(read, items)


class IcebergMirror:
    """Iceberg metadata kept in step with one dataset's log (see the module docstring)."""

    name = "iceberg"

    @staticmethod
    def refusal(descriptor: DatasetDescriptor) -> str | None:
        """Why a dataset with this descriptor cannot be mirrored as Iceberg (None: it can)."""
        keyed = descriptor.keyed
        if keyed.ttl is not None or keyed.ttl_field is not None:
            return ("rows expire with time (ttl) without a commit, and an Iceberg snapshot cannot change what it "
                    "holds")
        if descriptor.format != "parquet":
            return (f"the dataset's data files are {descriptor.format}; the mirror describes Parquet files only "
                    f"(pyiceberg reads no Avro data files)")
        # one partition spec in this version of the mirror (Iceberg's own spec evolution is not written)
        return schema_refusal(descriptor) or spec_refusal(
            descriptor, lambda spec_id: [f"{n} (identity of {source})" for n, source in identity_fields(descriptor, spec_id)],
            "mirrored Iceberg")

    def __init__(self, store: ObjectStore, dataset: str):
        self.store = store
        self.dataset = dataset

    # ---------------------------------------------------------------- reading the mirror

    def version(self) -> int | None:
        """The newest cdkds revision the mirror describes (None: no mirror yet)."""
        number = self._newest_number()
        return None if number is None else number - 1

    def _newest_number(self, known: int | None = None, hint: "int | None | object" = _UNREAD,
                       ahead: bool | None = None) -> int | None:
        """The newest metadata file's number: the hint's, moved past files written after it.
        ``known``: a number this process wrote, whose file need not be looked up again (the
        hint is written after the file it names); ``hint`` and ``ahead`` (whether the file
        after ``known`` exists) when already read."""
        number = self._hint() if hint is _UNREAD else hint
        if number is None or (number != known and not self.store.exists(f"{METADATA}/v{number}.metadata.json")):
            found = [int(m.group(1)) for m in map(_METADATA_FILE.match, self.store.list(METADATA)) if m]
            number = max(found, default=None)
        if number is None or (number == known and ahead is False):
            return number
        while self._present(f"{METADATA}/v{number + 1}.metadata.json"):
            number += 1
        return number

    def _present(self, key: str) -> bool:
        """Whether the object exists, in one request when it does not (an object store's
        ``exists`` of a missing key also lists it as a folder)."""
        try:
            self.store.read(key)
            return True
        except FileNotFoundError:
            return False

    def _hint(self) -> int | None:
        try:
            return int(self.store.read(HINT_KEY).decode().strip())
        except (FileNotFoundError, ValueError):
            return None

    def _table(self, revision: int) -> _Table:
        metadata = json.loads(self.store.read(metadata_key(revision)))
        current = _snapshot(metadata, snapshot_id(revision))
        return _Table(revision, metadata, tuple(read_manifest_list(self._read_url(current["manifest-list"]))))

    def _read_url(self, location: str) -> bytes:
        return self.store.read(self._key(location))

    def _key(self, location: str) -> str:
        return object_key(self.store, self.dataset, location)

    def _url(self, key: str) -> str:
        return f"{self.store.absolute_url}/{key}"

    # ---------------------------------------------------------------- writing

    def update(self, log: TransactionLog, snapshot: Snapshot) -> int:
        """Bring the mirror up to ``snapshot.version``, one Iceberg snapshot per revision;
        returns the number of versions written (see the mirror interface)."""
        recent = _RECENT.get(self.store.url)
        newest, retained, following = self._look(log, snapshot, recent)
        if newest is not None and newest >= snapshot.version:
            return 0
        written = 0
        behind = newest is not None and newest < retained and newest < log.replay.oldest().version
        if newest is None or behind:  # no mirror yet, or one whose newest revision the log expired since
            before = log.replay.oldest()
            if before.version > snapshot.version:
                return 0
            table = self._write(None, None, before, None, retained,
                                self._table(newest).metadata["table-uuid"] if behind else None)
            written = 1
        elif recent is not None and recent.revision == newest and recent.state is not None:
            table, before = recent, recent.state
            if following is not None and following.uuid == snapshot.commit_uuid and \
                    following.previous == before.commit_uuid:  # the commit after it makes ``snapshot``
                table = self._write(table, before, snapshot, following, retained)
                _remember(self.store.url, dataclasses.replace(table, state=snapshot))
                return 1
        else:
            table, before = self._table(newest), log.snapshot(version=newest)
        remembered = table is recent
        try:
            for commit, after in log.replay.walk(before, upto=snapshot.version):
                table = self._write(table, before, after, commit, retained)
                before = after
                written += 1
        except CorruptLogError:
            if not remembered or written:
                raise
            # what this process remembers is not this log's past (the dataset was dropped and
            # created again elsewhere): carry on from the mirror as it is stored
            _RECENT.pop(self.store.url, None)
            return self.update(log, snapshot)
        _remember(self.store.url, dataclasses.replace(table, state=before))
        return written

    def _look(self, log: TransactionLog, snapshot: Snapshot,
              recent: _Table | None) -> tuple[int | None, int, Commit | None]:
        """What an update starts from: the newest revision mirrored, the oldest revision the
        log retains, and (when this process wrote the version before ``snapshot``) the commit
        of ``snapshot``'s revision, read at once on an object store: a round trip, not four."""
        known = recent.revision + 1 if recent is not None else None
        with _Reads(self.store) as reads:
            hint = reads.submit(self._hint)
            marker = reads.submit(log.listing.expiry_marker)
            ahead = reads.submit(self._present, f"{METADATA}/v{known + 1}.metadata.json") if known else None
            following = reads.submit(log.listing.commit, known, recent.state.descriptor) \
                if known == snapshot.version and recent.state is not None else None
            number = self._newest_number(known, hint.result(), ahead.result() if ahead else None)
            expired = marker.result()
            raw = following.result() if following is not None else None
        retained = expired.expired_before if expired is not None else 0
        return (None if number is None else number - 1), retained, raw

    def _write(self, table: _Table | None, before: Snapshot | None, after: Snapshot, commit: Commit | None,
               retained: int, table_uuid: str | None = None) -> _Table:
        """Write the version of revision ``after.version`` (made by ``commit`` from ``before``,
        described by ``table``; the first version has neither), keeping the snapshots of
        revisions ``retained`` and later. ``table_uuid``: the table's, when a first version
        starts an existing table's history again (after an expiry left it behind)."""
        revision = after.version
        if table is not None:
            current = table.metadata["current-schema-id"]
            problem = promotion_refusal(next(s for s in table.metadata["schemas"] if s["schema-id"] == current),
                                        iceberg_schema(after.descriptor, 0))
            if problem is not None:
                raise IcebergMirrorError(f"dataset {self.dataset!r}: revision {revision} cannot be mirrored as "
                                         f"Iceberg: {problem}; the mirror stays at revision {table.revision}")
        changes = Changes.of(before, after, commit) if commit is not None else Changes.between(None, after)
        operation = commit.operation if commit is not None else "create" if revision == 0 else "checkpoint"
        objects: dict[str, bytes] = {}
        plan = ManifestPlan(self.store, self.dataset, after, table.manifests if table else (), objects)
        plan.deletes(changes, initial=before is None)
        plan.data(changes)
        manifest_list = plan.manifests()
        sid = snapshot_id(revision)
        parent = snapshot_id(table.revision) if table else None
        list_key = f"{METADATA}/snap-{sid}-{after.commit_uuid}.avro"
        objects[list_key] = manifest_list_bytes(manifest_list, sid, parent, sid)
        self.store.put_all(objects)  # every file of the version before the version itself
        metadata = self._metadata(table, after, changes, operation, self._url(list_key), retained, table_uuid)
        key = metadata_key(revision)
        try:
            self.store.put_if_absent(key, json.dumps(metadata, separators=(",", ":")).encode())
        except FileExistsError:  # another updater wrote this version: carry on from theirs
            return self._table(revision)
        self.store.put(HINT_KEY, str(revision + 1).encode())
        if table is not None and len(metadata["snapshots"]) <= len(table.metadata["snapshots"]):
            self._collect(metadata, revision)  # snapshots of expired revisions left
        return _Table(revision, metadata, tuple(manifest_list))

    def _collect(self, metadata: dict, revision: int) -> None:
        """Delete the manifest lists, manifests and delete files (written at ``revision`` or
        before: a concurrent updater's newer ones are not yet listed anywhere) that no
        snapshot of ``metadata`` references, as Iceberg's expire_snapshots does."""
        keep: set[str] = set()
        for s in metadata["snapshots"]:
            keep.add(self._key(s["manifest-list"]))
            for m in read_manifest_list(self._read_url(s["manifest-list"])):
                if self._key(m.path) in keep:
                    continue
                keep.add(self._key(m.path))
                if m.content == POSITION_DELETES:
                    keep.update(self._key(e["data_file"]["file_path"]) for e in read_entries(self._read_url(m.path)))
        for key, _ in list(self.store.walk_files(METADATA)):
            written = _written_revision(key)
            if written is not None and written <= revision and key not in keep:
                self.store.delete(key)

    def _metadata(self, table: _Table | None, after: Snapshot, changes: Changes, operation: str,
                  manifest_list: str, retained: int, table_uuid: str | None = None) -> dict:
        revision, descriptor = after.version, after.descriptor
        previous = table.metadata if table else None
        schemas = list(previous["schemas"]) if previous else []
        schema = iceberg_schema(descriptor, 0)
        same = [s["schema-id"] for s in schemas if s["fields"] == schema["fields"]]
        schema_id = same[-1] if same else max((s["schema-id"] for s in schemas), default=-1) + 1
        if not same:
            schemas.append({**schema, "schema-id": schema_id})
        sid = snapshot_id(revision)
        snapshots = [s for s in (previous["snapshots"] if previous else ()) if s["snapshot-id"] - 1 >= retained]
        snapshots.append({
            "snapshot-id": sid, **({"parent-snapshot-id": snapshot_id(table.revision)} if table else {}),
            "sequence-number": sid, "timestamp-ms": after.timestamp, "manifest-list": manifest_list,
            "schema-id": schema_id,
            "summary": _summary(after, changes, operation, previous["snapshots"][-1]["summary"] if previous else None)})
        log_entries = [s for s in (previous["snapshot-log"] if previous else ()) if s["snapshot-id"] - 1 >= retained]
        metadata_log = list(previous["metadata-log"]) if previous else []
        if previous:
            metadata_log.append({"metadata-file": self._url(metadata_key(table.revision)),
                                 "timestamp-ms": previous["last-updated-ms"]})
        spec = partition_spec(descriptor)
        return {
            "format-version": 2,
            "table-uuid": previous["table-uuid"] if previous else table_uuid or _table_uuid(after),
            "location": self.store.absolute_url,
            "last-sequence-number": sid,
            "last-updated-ms": after.timestamp,
            "last-column-id": max(last_column_id(descriptor), previous["last-column-id"] if previous else 0),
            "current-schema-id": schema_id,
            "schemas": schemas,
            "default-spec-id": 0,
            "partition-specs": [spec],
            "last-partition-id": max((f["field-id"] for f in spec["fields"]), default=999),
            "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}],
            "properties": _properties(self.dataset, descriptor),
            "current-snapshot-id": sid,
            "refs": {"main": {"snapshot-id": sid, "type": "branch"}},
            "snapshots": snapshots,
            "snapshot-log": [*log_entries, {"snapshot-id": sid, "timestamp-ms": after.timestamp}],
            "metadata-log": [m for m in metadata_log if _metadata_revision(m["metadata-file"]) >= retained]
            [-_PREVIOUS_VERSIONS:],
        }

    # ---------------------------------------------------------------- for vacuum and check

    def referenced(self) -> set[str]:
        """Data files (dataset-relative paths) that the mirror's retained versions reference."""
        newest = self.version()
        if newest is None:
            return set()
        metadata = json.loads(self.store.read(metadata_key(newest)))
        with _Reads(self.store, _READERS) as pool:
            lists = pool.map(lambda s: read_manifest_list(self._read_url(s["manifest-list"])), metadata["snapshots"])
            manifests = {m.path for listed in lists for m in listed if m.content == DATA}
            entries = pool.map(lambda path: read_entries(self._read_url(path)), sorted(manifests))
            return {self._key(e["data_file"]["file_path"]) for read in entries for e in read
                    if e["status"] != DELETED}

    def verify(self, log: TransactionLog) -> list[str]:
        """Problems (one sentence each, naming the mirror object) where the mirror's newest
        version disagrees with the log's snapshot at that revision. Empty: it agrees."""
        newest = self.version()
        where = self.store.display(METADATA)
        if newest is None:
            return [f"{where}: no Iceberg metadata has been written"]
        where = self.store.display(metadata_key(newest))
        try:
            snapshot = log.snapshot(version=newest)
        except CdkdsError as e:
            return [f"{where} describes revision {newest}, which the log cannot give: {e}"]
        try:
            table = self._table(newest)
            files, deletes = self._live(table)
        except (FileNotFoundError, IcebergMirrorError, ValueError, KeyError) as e:
            return [f"{where}: the mirror cannot be read ({type(e).__name__}: {e})"]
        problems = []
        schema = next(s for s in table.metadata["schemas"] if s["schema-id"] == table.metadata["current-schema-id"])
        if schema["fields"] != iceberg_schema(snapshot.descriptor, 0)["fields"]:
            problems.append(f"{where}: its schema differs from the descriptor of revision {newest}")
        for path in sorted(set(snapshot.files) - set(files)):
            problems.append(f"{where}: data file {path} of revision {newest} is missing")
        for path in sorted(set(files) - set(snapshot.files)):
            problems.append(f"{where}: data file {path} is not live at revision {newest}")
        for path, add in sorted(snapshot.files.items()):
            if path not in files:
                continue
            size, rows = files[path]
            if (size, rows) != (add.size, add.row_count):
                problems.append(f"{where}: data file {path} has size {size} and {rows} rows, the log says "
                                f"{add.size} and {add.row_count}")
            expected = len(deleted_positions(self.store, snapshot, add)) if may_delete(snapshot, add) else 0
            if deletes.get(path, 0) != expected:
                problems.append(f"{where}: data file {path} has {deletes.get(path, 0)} deleted rows, the log "
                                f"{expected}")
        return problems

    def _live(self, table: _Table) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
        """The live data files (path -> size, rows) and deleted-row counts of a version."""
        files, deletes = {}, defaultdict(int)
        for manifest in table.manifests:
            for e in read_entries(self._read_url(manifest.path)):
                if e["status"] == DELETED:
                    continue
                data_file = e["data_file"]
                if manifest.content == DATA:
                    files[self._key(data_file["file_path"])] = (data_file["file_size_in_bytes"],
                                                                data_file["record_count"])
                else:
                    if not self.store.exists(self._key(data_file["file_path"])):
                        raise IcebergMirrorError(f"delete file {data_file['file_path']} is missing")
                    target = entry_bound(e, "lower_bounds", FILE_PATH_ID)
                    deletes[self._key(target.decode())] += data_file["record_count"]
        return files, dict(deletes)


def _properties(dataset: str, descriptor: DatasetDescriptor) -> dict[str, str]:
    """The table's properties: a dataset whose files may carry no field ids (converted, or
    begun before ids) has the name mapping cdkds reads such files by, which Iceberg readers
    apply to them too."""
    properties = {"cdkds.dataset": dataset, "cdkds.mirror": "iceberg"}
    if descriptor.files_may_lack_ids:
        properties["schema.name-mapping.default"] = json.dumps(NameMapping.of(descriptor.schema).to_json())
    return properties


def _snapshot(metadata: dict, sid: int) -> dict:
    for s in metadata["snapshots"]:
        if s["snapshot-id"] == sid:
            return s
    raise IcebergMirrorError(f"Iceberg metadata of table {metadata.get('location')} has no snapshot {sid}")


_WRITTEN = [(MANIFEST_NAME, 0), (re.compile(r"/snap-(\d+)-\w+\.avro$"), -1),
            (re.compile(r"/deletes/(\d{20})-\w+\.parquet$"), 0)]


def _written_revision(key: str) -> int | None:
    """The revision whose version wrote the mirror object ``key`` (None: not one it collects)."""
    for pattern, offset in _WRITTEN:
        match = pattern.search("/" + key)
        if match:
            return int(match.group(match.lastindex)) + offset
    return None


def _table_uuid(first: Snapshot) -> str:
    """The table's uuid, from the first revision mirrored: the same for every updater."""
    return str(uuid.uuid5(uuid.NAMESPACE_OID, first.commit_uuid))


def _metadata_revision(location: str) -> int:
    match = re.search(r"/v(\d+)\.metadata\.json$", location)
    return int(match.group(1)) - 1 if match else -1


def _summary(after: Snapshot, changes: Changes, operation: str, previous: dict | None) -> dict[str, str]:
    """A snapshot's summary; ``previous``: the summary of the snapshot before (totals carry on)."""
    if not changes.removed and not changes.redeleted:
        kind = "append"
    elif not changes.added:
        kind = "delete"
    else:
        kind = "replace" if operation == "compact" else "overwrite"
    added, removed = sum(f.row_count for f in changes.added), sum(f.row_count for f in changes.removed)
    total = int(previous["total-records"]) + added - removed if previous else \
        sum(f.row_count for f in after.files.values())
    return {
        "operation": kind, "cdkds.revision": str(after.version), "cdkds.commit": after.commit_uuid,
        "cdkds.operation": operation,
        "added-data-files": str(len(changes.added)), "deleted-data-files": str(len(changes.removed)),
        "added-records": str(added), "deleted-records": str(removed),
        "total-data-files": str(len(after.files)), "total-records": str(total),
    }
