"""The Iceberg mirror: Iceberg table metadata (format version 2) under ``<dataset>/metadata/``
describing cdkds's own data files, one Iceberg snapshot per cdkds revision.

Revision ``r`` is snapshot id ``r + 1`` with sequence number ``r + 1`` (Iceberg's sequence
numbers start at 1) in ``metadata/v<r + 1>.metadata.json``; ``metadata/version-hint.text``
names the newest. Manifests are kept per *origin*, the revision that added their files:
``data-<origin>-<written>.avro`` lists the live files an origin added, and
``deletes-<origin>-<written>.avro`` the positional delete files of those files (one per data
file, holding all its deleted positions, replaced whole when they change). A revision
writes a manifest for the files it adds and rewrites only the manifests of origins whose
files it removes or deletes rows of; the rest are carried forward in the manifest list, so
its work is proportional to the commit. Delete files live under ``metadata/deletes/``: they
belong to the mirror, not to cdkds's data, and go with it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import struct
import uuid
from collections import defaultdict
from dataclasses import dataclass

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import CdkdsError
from cdkds.catalog.log import TransactionLog
from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.mirror.iceberg_manifests import (
    ADDED, DATA, DELETED, EXISTING, FILE_PATH_ID, POS_ID, POSITION_DELETES, Manifest, entry, entry_bound,
    manifest_bytes, manifest_list_bytes, manifest_record, position_delete_bytes, read_entries, read_manifest_list,
)
from cdkds.catalog.mirror.iceberg_schema import (
    bound, iceberg_schema, identity_fields, last_column_id, partition_avro, partition_record, partition_spec,
    promotion_refusal, schema_refusal,
)
from cdkds.catalog.mirror.state import Changes, deleted_positions
from cdkds.catalog.storage import ObjectStore

METADATA = "metadata"
HINT_KEY = f"{METADATA}/version-hint.text"
_METADATA_FILE = re.compile(r"^v(\d+)\.metadata\.json$")
_MANIFEST = re.compile(r"(data|deletes)-(\d{20})-\d{20}\.avro$")
_PREVIOUS_VERSIONS = 100  # metadata-log entries kept, as Iceberg's write.metadata.previous-versions-max


class IcebergMirrorError(CdkdsError):
    """The Iceberg mirror's own objects contradict each other or the log."""


def metadata_key(revision: int) -> str:
    return f"{METADATA}/v{revision + 1}.metadata.json"


def snapshot_id(revision: int) -> int:
    """The Iceberg snapshot id (and sequence number) of cdkds revision ``revision``."""
    return revision + 1


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
        return schema_refusal(descriptor)

    def __init__(self, store: ObjectStore, dataset: str):
        self.store = store
        self.dataset = dataset

    # ---------------------------------------------------------------- reading the mirror

    def version(self) -> int | None:
        """The newest cdkds revision the mirror describes (None: no mirror yet)."""
        number = self._newest_number()
        return None if number is None else number - 1

    def _newest_number(self, known: int | None = None) -> int | None:
        """The newest metadata file's number: the hint's, moved past files written after it.
        ``known``: a number this process wrote, whose file need not be looked up again (the
        hint is written after the file it names)."""
        number = None
        try:
            number = int(self.store.read(HINT_KEY).decode().strip())
        except (FileNotFoundError, ValueError):
            pass
        if number is None or (number != known and not self.store.exists(f"{METADATA}/v{number}.metadata.json")):
            found = [int(m.group(1)) for m in map(_METADATA_FILE.match, self.store.list(METADATA)) if m]
            number = max(found, default=None)
        if number is None:
            return None
        while self.store.exists(f"{METADATA}/v{number + 1}.metadata.json"):
            number += 1
        return number

    def _table(self, revision: int) -> _Table:
        metadata = json.loads(self.store.read(metadata_key(revision)))
        current = _snapshot(metadata, snapshot_id(revision))
        return _Table(revision, metadata, tuple(read_manifest_list(self._read_url(current["manifest-list"]))))

    def _read_url(self, location: str) -> bytes:
        return self.store.read(self._key(location))

    def _key(self, location: str) -> str:
        prefix = self.store.url + "/"
        if not location.startswith(prefix):
            raise IcebergMirrorError(f"dataset {self.dataset!r}: the Iceberg mirror names {location!r}, which is "
                                     f"outside the dataset's folder {self.store.url}")
        return location[len(prefix):]

    def _url(self, key: str) -> str:
        return f"{self.store.url}/{key}"

    # ---------------------------------------------------------------- writing

    def update(self, log: TransactionLog, snapshot: Snapshot) -> int:
        """Bring the mirror up to ``snapshot.version``, one Iceberg snapshot per revision;
        returns the number of versions written (see the mirror interface)."""
        recent = _RECENT.get(self.store.url)
        number = self._newest_number(recent.revision + 1 if recent is not None else None)
        newest = None if number is None else number - 1
        written = 0
        if newest is None:
            before = log.replay.oldest()
            if before.version > snapshot.version:
                return 0
            table = self._write(None, None, before, "create" if before.version == 0 else "checkpoint", log)
            written = 1
        elif newest >= snapshot.version:
            return 0
        else:
            if recent is not None and recent.revision == newest and recent.state is not None:
                table, before = recent, recent.state
            else:
                table, before = self._table(newest), log.snapshot(version=newest)
        for commit, after in log.replay.walk(before, upto=snapshot.version):
            table = self._write(table, before, after, commit.operation, log)
            before = after
            written += 1
        _remember(self.store.url, dataclasses.replace(table, state=before))
        return written

    def _write(self, table: _Table | None, before: Snapshot | None, after: Snapshot, operation: str,
               log: TransactionLog) -> _Table:
        """Write the version of revision ``after.version`` on ``table`` (the one before it)."""
        revision = after.version
        if table is not None:
            current = table.metadata["current-schema-id"]
            problem = promotion_refusal(next(s for s in table.metadata["schemas"] if s["schema-id"] == current),
                                        iceberg_schema(after.descriptor, 0))
            if problem is not None:
                raise IcebergMirrorError(f"dataset {self.dataset!r}: revision {revision} cannot be mirrored as "
                                         f"Iceberg: {problem}; the mirror stays at revision {table.revision}")
        changes = Changes.between(before, after)
        objects: dict[str, bytes] = {}
        manifests = {m.path: m for m in (table.manifests if table else ())}
        plan = _ManifestPlan(self, after, revision, manifests, objects)
        plan.deletes(changes, initial=before is None)
        plan.data(changes)
        manifest_list = sorted(plan.kept(), key=lambda m: (-m.record["sequence_number"], m.path))
        sid = snapshot_id(revision)
        parent = snapshot_id(table.revision) if table else None
        list_key = f"{METADATA}/snap-{sid}-{after.commit_uuid}.avro"
        objects[list_key] = manifest_list_bytes(manifest_list, sid, parent, sid)
        self.store.put_all(objects)  # every file of the version before the version itself
        metadata = self._metadata(table, after, changes, operation, self._url(list_key), log)
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
                  manifest_list: str, log: TransactionLog) -> dict:
        revision, descriptor = after.version, after.descriptor
        previous = table.metadata if table else None
        schemas = list(previous["schemas"]) if previous else []
        schema = iceberg_schema(descriptor, 0)
        same = [s["schema-id"] for s in schemas if s["fields"] == schema["fields"]]
        schema_id = same[-1] if same else max((s["schema-id"] for s in schemas), default=-1) + 1
        if not same:
            schemas.append({**schema, "schema-id": schema_id})
        sid = snapshot_id(revision)
        marker = log.listing.expiry_marker()
        retained = marker.expired_before if marker is not None else 0
        snapshots = [s for s in (previous["snapshots"] if previous else ()) if s["snapshot-id"] - 1 >= retained]
        snapshots.append({
            "snapshot-id": sid, **({"parent-snapshot-id": snapshot_id(table.revision)} if table else {}),
            "sequence-number": sid, "timestamp-ms": after.timestamp, "manifest-list": manifest_list,
            "schema-id": schema_id, "summary": _summary(after, changes, operation)})
        log_entries = [s for s in (previous["snapshot-log"] if previous else ()) if s["snapshot-id"] - 1 >= retained]
        metadata_log = list(previous["metadata-log"]) if previous else []
        if previous:
            metadata_log.append({"metadata-file": self._url(metadata_key(table.revision)),
                                 "timestamp-ms": previous["last-updated-ms"]})
        spec = partition_spec(descriptor)
        return {
            "format-version": 2,
            "table-uuid": previous["table-uuid"] if previous else str(uuid.uuid5(uuid.NAMESPACE_URL, after.commit_uuid)),
            "location": self.store.url,
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
            "properties": {"cdkds.dataset": self.dataset, "cdkds.mirror": "iceberg"},
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
        manifests = {m.path for s in metadata["snapshots"]
                     for m in read_manifest_list(self._read_url(s["manifest-list"])) if m.content == DATA}
        return {self._key(e["data_file"]["file_path"]) for path in manifests
                for e in read_entries(self._read_url(path)) if e["status"] != DELETED}

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
            expected = len(deleted_positions(self.store, snapshot, add)) if _may_delete(snapshot, add) else 0
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


class _ManifestPlan:
    """The manifests one version writes: new ones for added files and delete files, and
    rewrites of the origins whose files left or changed their deleted rows."""

    def __init__(self, mirror: IcebergMirror, after: Snapshot, revision: int, manifests: dict[str, Manifest],
                 objects: dict[str, bytes]):
        self.mirror, self.after, self.revision = mirror, after, revision
        self.sid = snapshot_id(revision)
        self.objects = objects
        self.manifests = dict(manifests)
        self.origins: dict[tuple[str, int], Manifest] = {}
        for m in manifests.values():
            match = _MANIFEST.search(m.path)
            if match is None:
                raise IcebergMirrorError(f"dataset {mirror.dataset!r}: the Iceberg mirror lists manifest {m.path}, "
                                         f"which it did not write")
            self.origins[(match.group(1), int(match.group(2)))] = m
        descriptor = after.descriptor
        self.partition = partition_avro(descriptor)
        self.schema_json = json.dumps(iceberg_schema(descriptor, 0))
        self.spec_json = json.dumps(partition_spec(descriptor)["fields"])

    def kept(self) -> list[Manifest]:
        return list(self.manifests.values())

    def deletes(self, changes: Changes, initial: bool) -> None:
        """Positional delete files for the files whose deleted rows changed (all of them, for
        the first version); their origins' delete manifests rewritten without the old ones."""
        changed = {f.path: f for f in changes.redeleted}
        changed.update({f.path: f for f in changes.added if f.deletes or (initial and _may_delete(self.after, f))})
        new: dict[int, list[dict]] = defaultdict(list)
        for path, add in sorted(changed.items()):
            positions = deleted_positions(self.mirror.store, self.after, add)
            if len(positions):
                new[add.revision].append(self._delete_entry(add, positions))
        gone = {self.mirror._url(p) for p in changed} | {self.mirror._url(f.path) for f in changes.removed}
        origins = {f.revision for f in changed.values()} | {f.revision for f in changes.removed}
        for origin in sorted(origins):
            old = self.origins.get(("deletes", origin))
            entries = read_entries(self.mirror._read_url(old.path)) if old else []
            kept = _carried(entries, lambda e: entry_bound(e, "lower_bounds", FILE_PATH_ID).decode() in gone, self.sid)
            if old is not None and not new[origin] and all(e["status"] == EXISTING for e in kept):
                continue  # nothing of this origin's deletes changed
            self._replace(old, "deletes", origin, kept + new[origin], POSITION_DELETES)

    def data(self, changes: Changes) -> None:
        """A manifest for the added files (per origin: the first version adds files of many);
        the origins of removed files rewritten with those marked deleted."""
        added: dict[int, list[AddFile]] = defaultdict(list)
        for f in changes.added:
            added[f.revision].append(f)
        removed: dict[int, set[str]] = defaultdict(set)
        for f in changes.removed:
            removed[f.revision].add(self.mirror._url(f.path))
        for origin in sorted(set(added) | set(removed)):
            old = self.origins.get(("data", origin))
            if origin in removed and old is None:
                raise IcebergMirrorError(f"dataset {self.mirror.dataset!r}: revision {self.revision} removes files "
                                         f"added at revision {origin}, which the Iceberg mirror does not list")
            entries = read_entries(self.mirror._read_url(old.path)) if old else []
            kept = _carried(entries, lambda e: e["data_file"]["file_path"] in removed[origin], self.sid)
            new = [self._data_entry(f) for f in sorted(added[origin], key=lambda f: f.path)]
            self._replace(old, "data", origin, kept + new, DATA)

    def _replace(self, old: Manifest | None, kind: str, origin: int, entries: list[dict], content: int) -> None:
        if old is not None:
            del self.manifests[old.path]
        if not any(e["status"] != DELETED for e in entries):
            return  # the origin has nothing live left: its manifest leaves the list
        key = f"{METADATA}/{kind}-{origin:020d}-{self.revision:020d}.avro"
        metadata = {"schema": self.schema_json, "schema-id": "0", "partition-spec": self.spec_json,
                    "partition-spec-id": "0"}
        data = manifest_bytes(entries, self.partition, content, metadata, key)
        self.objects[key] = data
        url = self.mirror._url(key)
        self.manifests[url] = manifest_record(url, len(data), content, self.sid, self.sid, entries,
                                              self._summaries(entries))

    def _data_entry(self, add: AddFile) -> dict:
        descriptor = self.after.descriptor
        fields, ids = descriptor.fields, descriptor.field_ids
        stats = {ids[n]: (s, fields[n].avro) for n, s in add.statistics.items() if n in ids}
        lower = {i: bound(s.min, avro) for i, (s, avro) in stats.items() if s.min is not None}
        upper = {i: bound(s.max, avro) for i, (s, avro) in stats.items() if s.max is not None}
        origin = snapshot_id(add.revision)
        return entry(ADDED if add.revision == self.revision else EXISTING, origin, origin, DATA,
                     self.mirror._url(add.path), "PARQUET", partition_record(descriptor, add.partition),
                     add.row_count, add.size,
                     value_counts={i: add.row_count for i in stats}, null_counts={i: s.null_count for i, (s, _) in
                                                                                   stats.items()},
                     lower={i: b for i, b in lower.items() if b is not None},
                     upper={i: b for i, b in upper.items() if b is not None})

    def _delete_entry(self, add: AddFile, positions) -> dict:
        target = self.mirror._url(add.path)
        key = f"{METADATA}/deletes/{self.revision:020d}-{hashlib.sha256(add.path.encode()).hexdigest()[:24]}.parquet"
        data = position_delete_bytes(target, positions)
        self.objects[key] = data
        first, last = struct.pack("<q", int(positions[0])), struct.pack("<q", int(positions[-1]))
        return entry(ADDED, self.sid, self.sid, POSITION_DELETES, self.mirror._url(key), "PARQUET",
                     partition_record(self.after.descriptor, add.partition), len(positions), len(data),
                     value_counts={FILE_PATH_ID: len(positions), POS_ID: len(positions)},
                     null_counts={FILE_PATH_ID: 0, POS_ID: 0},
                     lower={FILE_PATH_ID: target.encode(), POS_ID: first},
                     upper={FILE_PATH_ID: target.encode(), POS_ID: last})

    def _summaries(self, entries: list[dict]) -> list[dict] | None:
        """Per partition field: whether a live entry's value is null, and the bounds of the others."""
        descriptor = self.after.descriptor
        fields = identity_fields(descriptor)
        if not fields:
            return None
        out = []
        for name, source in fields:
            avro = descriptor.fields[source].avro
            values = [e["data_file"]["partition"].get(name) for e in entries if e["status"] != DELETED]
            present = [v for v in values if v is not None]
            out.append({"contains_null": len(present) < len(values), "contains_nan": False,
                        "lower_bound": bound(min(present), avro) if present else None,
                        "upper_bound": bound(max(present), avro) if present else None})
        return out


def _carried(entries: list[dict], leaving, sid: int) -> list[dict]:
    """A rewritten manifest's earlier entries: live ones ``leaving`` marked deleted by snapshot
    ``sid``, the other live ones existing; entries deleted by earlier snapshots dropped."""
    out = []
    for e in entries:
        if e["status"] == DELETED:
            continue
        if leaving(e):
            out.append({**e, "status": DELETED, "snapshot_id": sid})
        else:
            out.append({**e, "status": EXISTING})
    return out


def _may_delete(snapshot: Snapshot, add: AddFile) -> bool:
    """Whether some rows of ``add`` may be deleted at ``snapshot`` (vectors or tombstones)."""
    return bool(add.deletes) or bool(snapshot.tombstones_for(add))


def _snapshot(metadata: dict, sid: int) -> dict:
    for s in metadata["snapshots"]:
        if s["snapshot-id"] == sid:
            return s
    raise IcebergMirrorError(f"Iceberg metadata of table {metadata.get('location')} has no snapshot {sid}")


_WRITTEN = [(re.compile(r"/(?:data|deletes)-\d{20}-(\d{20})\.avro$"), 0), (re.compile(r"/snap-(\d+)-\w+\.avro$"), -1),
            (re.compile(r"/deletes/(\d{20})-\w+\.parquet$"), 0)]


def _written_revision(key: str) -> int | None:
    """The revision whose version wrote the mirror object ``key`` (None: not one it collects)."""
    for pattern, offset in _WRITTEN:
        match = pattern.search("/" + key)
        if match:
            return int(match.group(1)) + offset
    return None


def _metadata_revision(location: str) -> int:
    match = re.search(r"/v(\d+)\.metadata\.json$", location)
    return int(match.group(1)) - 1 if match else -1


def _summary(after: Snapshot, changes: Changes, operation: str) -> dict[str, str]:
    if not changes.removed and not changes.redeleted:
        kind = "append"
    elif not changes.added:
        kind = "delete"
    else:
        kind = "replace" if operation == "compact" else "overwrite"
    return {
        "operation": kind, "cdkds.revision": str(after.version), "cdkds.commit": after.commit_uuid,
        "cdkds.operation": operation,
        "added-data-files": str(len(changes.added)), "deleted-data-files": str(len(changes.removed)),
        "added-records": str(sum(f.row_count for f in changes.added)),
        "deleted-records": str(sum(f.row_count for f in changes.removed)),
        "total-data-files": str(len(after.files)), "total-records": str(sum(f.row_count for f in after.files.values())),
    }
