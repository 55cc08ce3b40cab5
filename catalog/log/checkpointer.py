"""Writing checkpoints: every ``checkpoint.interval`` commits, and on request.

A checkpoint is derived data (the state of its revision), so a damaged one may be
replaced: writing the checkpoint of a revision whose object fails to read overwrites it.

A dataset of log protocol 4 gets checkpoints of parts (:mod:`~cdkds.catalog.log.parts`),
rewriting only the parts that changed since the checkpoint its state was read from: the
files added since go to new parts; a part holding a file removed since, or one that
got a deletion vector, is rewritten; the other parts are named again as they are. Small
parts are merged once there are many of them. Parts are written before the checkpoint
object that names them.
"""

from __future__ import annotations

import dataclasses
import json
import warnings

import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import CorruptLogError, CorruptLogWarning, InvalidDescriptorError
from cdkds.catalog.keyed.properties import count_property
from cdkds.catalog.log import checkpoint
from cdkds.catalog.log.actions import PARTED_CHECKPOINT_PROTOCOL
from cdkds.catalog.log.files import FileTable
from cdkds.catalog.log.listing import HINT_KEY, LogListing, checkpoint_key
from cdkds.catalog.log.live import LiveFiles
from cdkds.catalog.log.parts import PART_FILES, PARTS_FOLDER, CheckpointPart, StoredParts, write_parts
from cdkds.catalog.log.replay import Replay
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.storage import ObjectStore

DEFAULT_CHECKPOINT_INTERVAL = 10
SMALL_PARTS = 16  # parts under a eighth of checkpoint.partFiles files that are merged when there are more


def checkpoint_interval(descriptor: DatasetDescriptor) -> int:
    return int(descriptor.properties.get("checkpoint.interval", DEFAULT_CHECKPOINT_INTERVAL))


def part_files(descriptor: DatasetDescriptor) -> int:
    """The most data files a checkpoint part holds (``checkpoint.partFiles``)."""
    try:
        return count_property(descriptor.properties, "checkpoint.partFiles", PART_FILES)
    except InvalidDescriptorError:  # recorded before it was checked
        return PART_FILES


class Checkpointer:
    """Writes the checkpoints of one dataset and points the hint at the newest."""

    def __init__(self, listing: LogListing):
        self.listing = listing
        self.store = listing.store

    def write(self, snapshot: Snapshot) -> Snapshot:
        """Write the checkpoint of ``snapshot`` (replacing a damaged one) and point the hint at it.
        Returns ``snapshot``, its files read from the parts of the checkpoint when it wrote one of
        parts: the next checkpoint of a writer that goes on from it rewrites only what changed."""
        key = checkpoint_key(snapshot.version)
        existing = self.listing.fetch(key)
        written = None
        if existing is None or self.listing.decode_checkpoint(existing, snapshot.version) is None:
            written = self._put(key, self._on_newest(snapshot), damaged=existing is not None)
        hint = self.listing.hint()
        if (hint is None or hint < snapshot.version) and self._continued(snapshot.version):
            self.store.put(HINT_KEY, json.dumps({"revision": snapshot.version}).encode())
        if written is None:
            return snapshot
        loader = StoredParts(self.store, self.listing.where(key), key)
        return dataclasses.replace(snapshot, files=LiveFiles.over(written, loader, snapshot.descriptor))

    def _continued(self, revision: int) -> bool:
        """Whether the log keeps the commits after ``revision``, so readers of the latest may
        start from its checkpoint (the hint's): not so for one kept for a tag below the retained
        log (the expiry marker says where it starts; unreadable, the hint is left as it is)."""
        marker = self.listing.expiry_marker()
        return marker is not None and marker.expired_before <= revision

    def _on_newest(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot``, or its state replayed from the newest readable checkpoint before it when
        its files are over parts that checkpoint does not name: expiry deletes the parts no
        retained checkpoint names, so the parts of an older checkpoint a writer went on from
        (another writer's checkpoints since being the retained ones) may be gone, or be about to
        go, and a checkpoint naming them again would make the dataset unreadable."""
        ours = checkpoint.parts_of(snapshot)
        if ours is None:  # no part is named again: every file goes to a new part
            return snapshot
        for revision in reversed([r for r in self.listing.list().checkpoints if r < snapshot.version]):
            newest = self.listing.checkpoint(revision)
            if newest is None:
                continue
            if {p.key for p in ours} <= {p.key for p in checkpoint.parts_of(newest) or ()}:
                return snapshot
            replayed = Replay(self.listing).forward(newest, upto=snapshot.version)
            if replayed.version != snapshot.version:
                raise CorruptLogError(f"dataset {self.listing.dataset!r}: revision {snapshot.version} cannot be "
                                      f"replayed from checkpoint {revision} to write its checkpoint")
            return replayed
        return snapshot

    def _check_parts_there(self, snapshot: Snapshot) -> None:
        """:class:`CorruptLogError` when a part ``snapshot``'s files are over (which the checkpoint
        may name again unread) is missing: named by this checkpoint too, it would outlive the
        remedy of deleting the checkpoint that lost it."""
        ours = checkpoint.parts_of(snapshot)
        if not ours:
            return
        there = {f"{PARTS_FOLDER}/{name}" for name in self.store.list(PARTS_FOLDER)}
        for part in ours:
            if part.key not in there:
                raise CorruptLogError(f"dataset {self.listing.dataset!r}: part {self.store.display(part.key)} of the "
                                      f"checkpoint the state of revision {snapshot.version} was read from is "
                                      f"missing; no checkpoint of revision {snapshot.version} was written")

    def _put(self, key: str, snapshot: Snapshot, damaged: bool) -> list[CheckpointPart] | None:
        """Write the checkpoint object (and its parts first); the parts it names when it is ours."""
        parts = None
        if snapshot.protocol.reader_version >= PARTED_CHECKPOINT_PROTOCOL:
            self._check_parts_there(snapshot)
            parts = PartWriter(self.store, snapshot).parts()
        data = checkpoint.encode(snapshot, parts)
        if damaged:
            self.store.put(key, data)  # a checkpoint of a revision has one possible content
            return parts
        try:
            self.store.put_if_absent(key, data)
        except FileExistsError:  # another writer's, just now: ours are named by nothing
            existing = self.listing.fetch(key)
            if existing is not None and self.listing.decode_checkpoint(existing, snapshot.version) is None:
                self.store.put(key, data)
                return parts
            fresh = {p.key for p in parts or ()} - {p.key for p in checkpoint.parts_of(snapshot) or ()}
            for part in fresh:
                self.store.delete(part)
            return None
        return parts

    def after_commit(self, snapshot: Snapshot) -> Snapshot:
        """Write the checkpoint of a revision the interval falls on; a failure only warns.
        Returns the snapshot to go on from (see :meth:`write`)."""
        if snapshot.version % checkpoint_interval(snapshot.descriptor) == 0:
            try:
                return self.write(snapshot)
            except Exception as e:  # noqa: BLE001 - the commit stands; the next checkpoint or listing covers it
                warnings.warn(f"dataset {self.listing.dataset!r}: checkpoint at revision {snapshot.version} "
                              f"failed: {e}", CorruptLogWarning, stacklevel=4)
        return snapshot


class PartWriter:
    """The parts of the checkpoint of one snapshot, written as few as can be."""

    def __init__(self, store: ObjectStore, snapshot: Snapshot):
        self.store = store
        self.snapshot = snapshot
        self.descriptor = snapshot.descriptor
        self.most = part_files(snapshot.descriptor)

    def parts(self) -> list[CheckpointPart]:
        """Every part of the checkpoint, the new ones written (and durable) when it returns."""
        files = self.snapshot.files
        if not isinstance(files, LiveFiles) or not files.parts:  # not read from parts: every file to a new part
            return self._written([files.table() if isinstance(files, LiveFiles) else
                                  FileTable.of(files.values(), self.descriptor)])
        kept, rewritten = list(range(len(files.parts))), []
        if files.changed_since_parts:
            kept, rewritten = self._without(files)
        fresh = [FileTable.of(files.added.values(), self.descriptor)] if files.added else []
        small = [i for i in kept if files.parts[i].files < self.most // 8]
        if len(small) + sum(len(t) < self.most // 8 for t in fresh) > SMALL_PARTS:  # many: merged with the new files
            kept = [i for i in kept if i not in small]
            fresh = [FileTable.concat([files.part_table(i) for i in small] + fresh, self.descriptor)]
        tables = [FileTable.concat(rewritten, self.descriptor), *fresh]
        return [files.parts[i] for i in kept] + self._written([t for t in tables if len(t)])

    def _without(self, files: LiveFiles) -> tuple[list[int], list[FileTable]]:
        """The parts holding no file removed since or given a deletion vector since (by
        index), and the others' files as they are now."""
        changed = pa.array(sorted({*files.removed, *files.deletes, *files.added}), pa.string())
        kept, rewritten = [], []
        for i in range(len(files.parts)):
            table = files.part_table(i)
            hit = pc.is_in(table.paths, value_set=changed)
            if not pc.any(hit).as_py():
                kept.append(i)
                continue
            vectors = {path: files.deletes[path] for path in table.filter(hit).paths.to_pylist()
                       if path in files.deletes and path not in files.added}
            again = [dataclasses.replace(f, deletes=f.deletes + vectors[f.path])
                     for f in table.filter(pc.is_in(table.paths, value_set=pa.array(list(vectors), pa.string())))
                     .files()] if vectors else []
            rewritten.append(FileTable.concat([table.filter(pc.invert(hit)), FileTable.of(again, self.descriptor)],
                                              self.descriptor))
        return kept, rewritten

    def _written(self, tables: list[FileTable]) -> list[CheckpointPart]:
        return write_parts(self.store, tables, self.snapshot.version, self.most)
