"""A dataset as of one revision: its descriptor, live data files (with their deletion
vectors), live tombstones, live record-index files and its tags."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping

import pyarrow as pa

from cdkds.catalog.keyed.deletion import DeletionVectorRef
from cdkds.catalog.log.live import LiveFiles
from cdkds.catalog.log.actions import (
    AddFile, AddIndex, BranchRef, DeleteRows, DropBranch, RemoveFile, RemoveIndex, SetMetadata, SetProtocol,
    SetTransaction, Tag, Tombstone, Untag,
)
from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import ExpressionError, IncompatibleDescriptorError, InvalidDescriptorError
from cdkds.catalog.expressions import Expression, bind, references, transform
from cdkds.catalog.expressions.pruning import FileFilter
from cdkds.formats import evolution
from cdkds.formats.schema import to_arrow

if TYPE_CHECKING:
    from cdkds.catalog.log.commit import Commit


@dataclass(frozen=True)
class Snapshot:
    """The state of a dataset at ``version`` (a revision of its log); ``transactions``:
    the last batch each application recorded (:class:`SetTransaction`); ``tags``: the
    revision each tag names (:class:`Tag`)."""

    version: int
    timestamp: int
    commit_uuid: str
    descriptor: DatasetDescriptor
    descriptor_version: int
    files: Mapping[str, AddFile]
    tombstones: tuple[Tombstone, ...] = ()
    protocol: SetProtocol = SetProtocol()
    index: Mapping[str, AddIndex] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    transactions: Mapping[str, SetTransaction] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    # the oldest descriptor revision whose data files are laid out as the current descriptor's
    # (the same columns, names, types and ids): a file written at or after it is read as it is
    schema_since: int = -1
    tags: Mapping[str, int] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    # the live branches by name (docs/FORMAT.md §12)
    branches: Mapping[str, BranchRef] = dataclasses.field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not isinstance(self.files, LiveFiles):  # files given in memory (a dict)
            object.__setattr__(self, "files", LiveFiles.of(self.files, self.descriptor))

    @property
    def row_count(self) -> int:
        """Rows in the live files less those deleted by deletion vectors (rows deleted by
        tombstones or expired by TTL still count until compaction)."""
        return self.files.live_rows

    def pinned_revisions(self) -> Mapping[int, tuple[str, ...]]:
        """The revisions that must stay readable whatever expiry and vacuum are asked, each
        with the refs that pin it (``"tag 'q3'"``, ``"branch 'audit'"``: a branch's state is
        main's at its base plus its own commits): the one place expiry and vacuum learn them."""
        pins: dict[int, list[str]] = {}
        for name, revision in sorted(self.tags.items()):
            pins.setdefault(revision, []).append(f"tag {name!r}")
        for name, branch in sorted(self.branches.items()):
            pins.setdefault(branch.base, []).append(f"branch {name!r}")
        return MappingProxyType({r: tuple(refs) for r, refs in sorted(pins.items())})

    def index_files(self, bucket: int) -> tuple[AddIndex, ...]:
        """The live record-index files of ``bucket`` in the order their entries apply: the
        base, then the deltas oldest first (a later entry for a key replaces an earlier one)."""
        files = [f for f in self.index.values() if f.bucket == bucket]
        return tuple(sorted(files, key=lambda f: (not f.base, f.revision)))

    def tombstones_for(self, file: AddFile) -> tuple[Tombstone, ...]:
        """The tombstones that apply to ``file``: newer than it and able to match its rows,
        with their predicates bound to the schema."""
        return tuple(t for t, deletes in self._bound_tombstones
                     if t.revision > file.revision and deletes.may_match(file))

    def evolve(self, new: DatasetDescriptor, dataset: str) -> DatasetDescriptor:
        """The descriptor to record when ``new`` replaces this snapshot's (see
        :meth:`DatasetDescriptor.evolve`); :class:`IncompatibleDescriptorError` naming the
        dataset, the field and the delete if a live tombstone could not be read with it."""
        try:
            evolved = self.descriptor.evolve(new)
        except InvalidDescriptorError as e:  # a mirror's refusal of a new partition spec, say
            raise type(e)(f"dataset {dataset!r}: {e}") from None
        renames = top_level_renames(self.descriptor, evolved)
        old_ids, new_ids = self.descriptor.field_ids, evolved.field_ids
        for t in applying(self):
            try:
                bind(rename(t.predicate, renames), evolved.fields)
                # a field dropped and added again under its name is another field: the delete must not read it
                for name in references(t.predicate):
                    if name in old_ids and old_ids[name] != new_ids.get(renames.get(name, name)):
                        raise ExpressionError(f"field {name!r} was dropped; the field now named so is a new one")
            except ExpressionError as e:
                raise IncompatibleDescriptorError(
                    f"dataset {dataset!r}: the live delete '{t.predicate}' of revision {t.revision} cannot be "
                    f"read with the new schema ({e}); compact the files it applies to first") from None
        return evolved

    def applying_tombstones(self) -> tuple[Tombstone, ...]:
        """The tombstones that apply to some live file (the others delete nothing any more)."""
        applying = {t.revision for f in self.files.values() for t in self.tombstones_for(f)}
        return tuple(t for t in self.tombstones if t.revision in applying)

    @cached_property
    def _bound_tombstones(self) -> tuple[tuple[Tombstone, FileFilter], ...]:
        out = []
        for t in self.tombstones:
            bound = dataclasses.replace(t, predicate=bind(t.predicate, self.descriptor.fields))
            out.append((bound, FileFilter.of(bound.predicate, self.descriptor)))
        return tuple(out)

    def apply(self, commit: "Commit") -> "Snapshot":
        descriptor, descriptor_version, protocol = self.descriptor, self.descriptor_version, self.protocol
        schema_since = self.schema_since
        files: LiveFiles = self.files
        tombstones = list(self.tombstones)
        index = dict(self.index)
        transactions, tags = self.transactions, self.tags
        branches = self.branches
        added: list[AddFile] = []
        removed: list[str] = []
        deleted: list[tuple[str, DeletionVectorRef]] = []

        def settle() -> LiveFiles:  # the file changes so far, in the order the log gives them
            nonlocal added, removed, deleted
            changed = files.apply(added, removed, deleted)
            added, removed, deleted = [], [], []
            return changed

        for action in commit.actions:
            if isinstance(action, AddFile):
                added.append(action.landed(commit.revision, commit.timestamp))
            elif isinstance(action, RemoveFile):
                if added or deleted:
                    files = settle()
                removed.append(action.path)
            elif isinstance(action, DeleteRows):
                deleted.append((action.path, action.vector))
            elif isinstance(action, AddIndex):
                index[action.path] = action.at(commit.revision)
            elif isinstance(action, RemoveIndex):
                index.pop(action.path, None)
            elif isinstance(action, Tombstone):
                tombstones.append(action.at(commit.revision))
            elif isinstance(action, SetMetadata):
                files = settle()
                if descriptor is not None:
                    if tombstones:  # spent ones go, so the new schema need not read them (see evolve)
                        tombstones = applying(dataclasses.replace(
                            self, descriptor=descriptor, files=files, tombstones=tuple(tombstones)))
                    renames = top_level_renames(descriptor, action.descriptor)
                    tombstones = [dataclasses.replace(t, predicate=rename(t.predicate, renames)) for t in tombstones]
                    files = files.evolve(action.descriptor)
                else:
                    files = LiveFiles.of(files.added, action.descriptor)
                if descriptor is None or not same_file_layout(descriptor, action.descriptor):
                    schema_since = commit.revision
                descriptor, descriptor_version = action.descriptor, commit.revision
            elif isinstance(action, SetProtocol):
                protocol = action
            elif isinstance(action, SetTransaction):
                transactions = MappingProxyType({**transactions, action.app_id: action})
            elif isinstance(action, Tag):
                tags = MappingProxyType({**tags, action.name: action.revision})
            elif isinstance(action, Untag):
                tags = MappingProxyType({n: r for n, r in tags.items() if n != action.name})
            elif isinstance(action, BranchRef):  # it starts at the revision of the commit that records it
                branches = MappingProxyType({**branches, action.name: dataclasses.replace(action, base=commit.revision)})
            elif isinstance(action, DropBranch):
                branches = MappingProxyType({n: b for n, b in branches.items() if n != action.name})
        files = settle()
        if tombstones:
            oldest = files.oldest_revision(commit.revision + 1)
            tombstones = [t for t in tombstones if t.revision > oldest]  # a tombstone no file predates is spent
        return Snapshot(commit.revision, commit.timestamp, commit.uuid, descriptor, descriptor_version,
                        files, tuple(tombstones), protocol, MappingProxyType(index), transactions, schema_since, tags,
                        branches)

    def written_as_current(self, file: AddFile) -> bool:
        """Whether ``file`` was written with the current descriptor's file layout, so its
        columns are the current ones as they are (known from the log, without opening it)."""
        return 0 <= self.schema_since <= file.schema_version

    @staticmethod
    def first(commit: "Commit") -> "Snapshot":
        """The snapshot made by commit 0 (or by replaying a checkpoint's actions)."""
        empty = Snapshot(-1, 0, "", None, -1, MappingProxyType({}))  # type: ignore[arg-type]
        return empty.apply(commit)


def applying(snapshot: Snapshot) -> list[Tombstone]:
    """The tombstones of ``snapshot`` that are not spent; all of them in a log whose schema
    already lost a field a tombstone reads (older versions allowed it: its reads fail until
    an update gives the field back, which must stay possible)."""
    try:
        return list(snapshot.applying_tombstones())
    except ExpressionError:
        return list(snapshot.tombstones)


def same_file_layout(before: DatasetDescriptor, after: DatasetDescriptor) -> bool:
    """Whether data files written with ``before`` hold the columns ``after`` reads, as they are."""
    return before.format == after.format and \
        schema_of_files(before).equals(schema_of_files(after), check_metadata=True)


def schema_of_files(descriptor: DatasetDescriptor) -> pa.Schema:
    """The Arrow schema (with Parquet field ids) the data files of ``descriptor`` are written with."""
    return to_arrow(descriptor.schema, ids=True)


def top_level_renames(before: DatasetDescriptor, after: DatasetDescriptor) -> dict[str, str]:
    """Old name -> new name of the top-level fields that ``after`` renamed (by field id)."""
    return {n: m for n, m in evolution.top_level_renames(before.schema, after.schema).items() if n != m}


def rename(predicate: Expression, renames: dict[str, str]) -> Expression:
    """``predicate`` reading fields by their new names."""
    if not renames:
        return predicate
    return transform(predicate, lambda p: dataclasses.replace(p, name=renames.get(p.name, p.name)))
