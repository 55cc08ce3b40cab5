"""Which manifests one Iceberg mirror version writes, so that its work follows the commit.

Manifests hold the files of a range of *origins*, the revisions that added the data files
(``data-<level>-<first>-<last>-<written>.avro``; ``deletes-...`` for the positional delete
files of those data files): ranges of one kind never overlap, so the manifest holding a
file is found from the file's revision alone. A version writes one manifest for the files
it adds, rewrites only the manifests holding files it removes or whose deleted rows
changed, and carries the others forward. Like Iceberg's manifest merging, a run of
``MERGE_COUNT`` neighbouring manifests of one level becomes one manifest of the next level
(a new manifest starts at the level its size reaches), so a long history keeps a few dozen
manifests, each file's entry rewritten about log(history) times.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

import numpy as np

from cdkds.catalog.errors import MirrorError
from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.mirror.iceberg_manifests import (
    ADDED, DATA, DELETED, EXISTING, FILE_PATH_ID, POS_ID, POSITION_DELETES, Manifest, entry, entry_bound,
    manifest_bytes, manifest_record, position_delete_bytes, read_entries,
)
from cdkds.catalog.mirror.iceberg_schema import (
    bound, iceberg_schema, identity_fields, partition_avro, partition_record, partition_spec,
)
from cdkds.catalog.mirror.state import Changes, deleted_positions
from cdkds.catalog.storage import ObjectStore

METADATA = "metadata"
MERGE_COUNT = 16
MANIFEST_NAME = re.compile(r"/(data|deletes)-(\d+)-(\d{20})-(\d{20})-(\d{20})\.avro$")
_KINDS = {"data": DATA, "deletes": POSITION_DELETES}


class IcebergMirrorError(MirrorError):
    """The Iceberg mirror's own objects contradict each other or the log, or a revision it
    cannot describe."""


def object_key(store: ObjectStore, dataset: str, location: str) -> str:
    """The key in the dataset's folder of an absolute location the mirror wrote."""
    prefix = store.absolute_url + "/"
    if not location.startswith(prefix):
        raise IcebergMirrorError(f"dataset {dataset!r}: the Iceberg mirror names {location!r}, which is outside "
                                 f"the dataset's folder {store.absolute_url}")
    return location[len(prefix):]


def snapshot_id(revision: int) -> int:
    """The Iceberg snapshot id (and sequence number) of cdkds revision ``revision``."""
    return revision + 1


def may_delete(snapshot: Snapshot, add: AddFile) -> bool:
    """Whether some rows of ``add`` may be deleted at ``snapshot`` (vectors or tombstones)."""
    return bool(add.deletes) or bool(snapshot.tombstones_for(add))


@dataclass(frozen=True)
class _Range:
    """A manifest of the list and the origins it holds."""

    kind: str
    level: int
    first: int
    last: int
    manifest: Manifest


class ManifestPlan:
    """The manifests of one version of revision ``after.version``, built on the previous
    version's ``manifests``; the objects to write are added to ``objects``."""

    def __init__(self, store: ObjectStore, dataset: str, after: Snapshot, manifests: tuple[Manifest, ...],
                 objects: dict[str, bytes]):
        self.store, self.dataset, self.after = store, dataset, after
        self.revision = after.version
        self.sid = snapshot_id(self.revision)
        self.objects = objects
        self.written: dict[str, list[dict]] = {}  # entries of the manifests this version wrote, by location
        self.ranges: dict[str, list[_Range]] = {"data": [], "deletes": []}
        for m in manifests:
            match = MANIFEST_NAME.search(m.path)
            if match is None:
                raise IcebergMirrorError(f"dataset {dataset!r}: the Iceberg mirror lists manifest {m.path}, "
                                         f"which it did not write")
            kind, level, first, last = match.group(1), *map(int, match.group(2, 3, 4))
            self.ranges[kind].append(_Range(kind, level, first, last, m))
        descriptor = after.descriptor
        self.partition = partition_avro(descriptor)
        self.header = {"schema": json.dumps(iceberg_schema(descriptor, 0)), "schema-id": "0",
                       "partition-spec": json.dumps(partition_spec(descriptor)["fields"]), "partition-spec-id": "0"}

    def manifests(self) -> list[Manifest]:
        """The version's manifest list: newest first."""
        out = [r.manifest for kind in ("data", "deletes") for r in self.ranges[kind]]
        return sorted(out, key=lambda m: (-m.record["sequence_number"], m.path))

    def url(self, key: str) -> str:
        return f"{self.store.absolute_url}/{key}"

    # ---------------------------------------------------------------- the changes

    def deletes(self, changes: Changes, initial: bool) -> None:
        """Positional delete files for the files whose deleted rows changed (all of them, for
        the first version), replacing their earlier ones in the delete manifests."""
        changed = {f.path: f for f in changes.redeleted}
        changed.update({f.path: f for f in changes.added if f.deletes or (initial and may_delete(self.after, f))})
        new: dict[int, list[dict]] = defaultdict(list)
        for path, add in sorted(changed.items()):
            positions = deleted_positions(self.store, self.after, add)
            if len(positions):
                new[add.revision].append(self._delete_entry(add, positions))
        gone = {self.url(p) for p in changed} | {self.url(f.path) for f in changes.removed}
        origins = {f.revision for f in changed.values()} | {f.revision for f in changes.removed}
        touched: dict[int, _Range] = {}
        for origin in origins:
            held = self._holding("deletes", origin)
            if held is not None:
                touched[id(held)] = held
        for held in touched.values():
            kept = _carried(self._entries(held.manifest),
                            lambda e: entry_bound(e, "lower_bounds", FILE_PATH_ID).decode() in gone, self.sid)
            additions = [e for o in sorted(o for o in new if held.first <= o <= held.last) for e in new.pop(o)]
            if not additions and all(e["status"] == EXISTING for e in kept):
                continue  # none of this range's delete files changed
            self._replace(held, "deletes", held.level, held.first, held.last, kept + additions)
        for origin, entries in sorted(new.items()):
            self._replace(None, "deletes", _level(len(entries)), origin, origin, entries)
        self._merge("deletes")

    def data(self, changes: Changes) -> None:
        """One manifest for the added files; the manifests holding removed files rewritten
        with those marked deleted."""
        removed: dict[int, tuple[_Range, set[str]]] = {}
        for f in changes.removed:
            held = self._holding("data", f.revision)
            if held is None:
                raise IcebergMirrorError(f"dataset {self.dataset!r}: revision {self.revision} removes {f.path}, added "
                                         f"at revision {f.revision}, which the Iceberg mirror does not list")
            removed.setdefault(id(held), (held, set()))[1].add(self.url(f.path))
        for held, paths in removed.values():
            kept = _carried(self._entries(held.manifest), lambda e: e["data_file"]["file_path"] in paths, self.sid)
            self._replace(held, "data", held.level, held.first, held.last, kept)
        if changes.added:
            origins = [f.revision for f in changes.added]
            self._replace(None, "data", _level(len(origins)), min(origins), max(origins),
                          [self._data_entry(f) for f in sorted(changes.added, key=lambda f: f.path)])
        self._merge("data")

    # ---------------------------------------------------------------- manifests

    def _holding(self, kind: str, origin: int) -> _Range | None:
        for r in self.ranges[kind]:
            if r.first <= origin <= r.last:
                return r
        return None

    def _entries(self, manifest: Manifest) -> list[dict]:
        if manifest.path in self.written:
            return self.written[manifest.path]
        return read_entries(self.store.read(object_key(self.store, self.dataset, manifest.path)))

    def _replace(self, old: _Range | None, kind: str, level: int, first: int, last: int, entries: list[dict]) -> None:
        """``old`` (if any) leaves the list; a manifest of ``entries`` joins it unless none is live."""
        if old is not None:
            self.ranges[kind].remove(old)
            self.objects.pop(object_key(self.store, self.dataset, old.manifest.path), None)  # written and replaced now
        if not any(e["status"] != DELETED for e in entries):
            return
        key = f"{METADATA}/{kind}-{level}-{first:020d}-{last:020d}-{self.revision:020d}.avro"
        data = manifest_bytes(entries, self.partition, _KINDS[kind], self.header, key)
        self.objects[key] = data
        url = self.url(key)
        self.written[url] = entries
        record = manifest_record(url, len(data), _KINDS[kind], self.sid, self.sid, entries, self._summaries(entries))
        self.ranges[kind].append(_Range(kind, level, first, last, record))

    def _merge(self, kind: str) -> None:
        """Merge runs of ``MERGE_COUNT`` neighbouring manifests of one level into one of the next."""
        while True:
            ordered = sorted(self.ranges[kind], key=lambda r: r.first)
            run: list[_Range] = []
            for r in ordered:
                run = run + [r] if run and run[-1].level == r.level else [r]
                if len(run) == MERGE_COUNT:
                    break
            if len(run) < MERGE_COUNT:
                return
            entries = [e for r in run for e in _carried(self._entries(r.manifest), lambda e: False, self.sid)]
            for r in run[1:]:
                self._replace(r, kind, 0, 0, 0, [])
            self._replace(run[0], kind, run[0].level + 1, run[0].first, run[-1].last, entries)

    # ---------------------------------------------------------------- entries

    def _data_entry(self, add: AddFile) -> dict:
        descriptor = self.after.descriptor
        fields, ids = descriptor.fields, descriptor.field_ids
        stats = {ids[n]: (s, fields[n].avro) for n, s in add.statistics.items() if n in ids}
        lower = {i: bound(s.min, avro) for i, (s, avro) in stats.items() if s.min is not None}
        upper = {i: bound(s.max, avro) for i, (s, avro) in stats.items() if s.max is not None}
        origin = snapshot_id(add.revision)
        return entry(ADDED if add.revision == self.revision else EXISTING, origin, origin, DATA,
                     self.url(add.path), "PARQUET", partition_record(descriptor, add.partition), add.row_count,
                     add.size, value_counts={i: add.row_count for i in stats},
                     null_counts={i: s.null_count for i, (s, _) in stats.items()},
                     lower={i: b for i, b in lower.items() if b is not None},
                     upper={i: b for i, b in upper.items() if b is not None})

    def _delete_entry(self, add: AddFile, positions: np.ndarray) -> dict:
        target = self.url(add.path)
        key = f"{METADATA}/deletes/{self.revision:020d}-{hashlib.sha256(add.path.encode()).hexdigest()[:24]}.parquet"
        data = position_delete_bytes(target, positions)
        self.objects[key] = data
        first, last = struct.pack("<q", int(positions[0])), struct.pack("<q", int(positions[-1]))
        return entry(ADDED, self.sid, self.sid, POSITION_DELETES, self.url(key), "PARQUET",
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


def _level(entries: int) -> int:
    """The level of a new manifest of ``entries`` files: the level merged ones of its size
    reach, so that a large one (a big commit, the first version) is not merged again soon."""
    level = 0
    while entries >= MERGE_COUNT ** (level + 1):
        level += 1
    return level


def _carried(entries: list[dict], leaving: Callable[[dict], bool], sid: int) -> list[dict]:
    """A rewritten manifest's entries at snapshot ``sid``: live ones ``leaving`` marked deleted
    by it, other live ones existing (added if ``sid`` added them), deleted ones dropped
    unless ``sid`` deleted them."""
    out = []
    for e in entries:
        own = e["snapshot_id"] == sid
        if e["status"] == DELETED:
            if own:
                out.append(e)
        elif leaving(e):
            out.append({**e, "status": DELETED, "snapshot_id": sid})
        else:
            out.append({**e, "status": ADDED if own and e["status"] == ADDED else EXISTING})
    return out
