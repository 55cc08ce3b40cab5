"""When a commit that lost a race may be rebased onto the commits that won it.

Each kind of write says what it assumed about the dataset when it was planned; a
concurrent commit that breaks the assumption is a conflict (:class:`CommitConflictError`),
anything else is rebased. Rules common to all: a concurrent descriptor change conflicts
(except for appends, over one that changed only names, fields or the partition strategy:
their files keep the partition spec they were written with, which the descriptor keeps),
so does a concurrent removal of a file (data or index) this commit also removes or
deletes rows of, and so does a concurrent commit of the same application
(:class:`SetTransaction`): two runs of one streaming query must not both commit. Two
commits that tag or untag the same name conflict; a commit that changes only tags
(:class:`Tag`, :class:`Untag`, with the protocol raise that may come with them) changes
no data and conflicts with nothing else.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Iterable, TypeVar

from cdkds.catalog.log.actions import (
    Action, AddFile, AddIndex, BranchRef, DeleteRows, DropBranch, RemoveFile, RemoveIndex, SetMetadata, SetProtocol,
    SetTransaction, Tag, Tombstone, Untag,
)
from cdkds.catalog.expressions import ALWAYS_TRUE, as_expression, bind
from cdkds.catalog.expressions.pruning import SPEC_NAME, FileFilter
from cdkds.catalog.expressions.tree import BoundPredicate as Predicate
from cdkds.catalog.errors import AmbiguousOverwriteError, CdkdsError, ConcurrentRewriteError
from cdkds.catalog.partitioning.coverage import INSIDE, UNKNOWN, coverage
from cdkds.formats import evolution

if TYPE_CHECKING:
    from cdkds.catalog.descriptor import DatasetDescriptor
    from cdkds.catalog.log.transaction import Commit
    from cdkds.catalog.log.snapshot import Snapshot


DELETE_OPERATION = "delete"  # a delete by predicate (Dataset.delete); its info holds the predicate
REPLANS = 5  # plans of one write that lost races to compactions (each a commit that landed)
T = TypeVar("T")


def replanned(dataset: Any, write: Callable[[], T]) -> T:
    """``write()`` (which plans on ``dataset``'s snapshot and commits), planned again on the
    latest revision each time a compaction committed first (:class:`ConcurrentRewriteError`:
    it changed no row, so the write is as valid after it). ``dataset`` ``None``: ``write``
    reads the latest revision itself."""
    for attempt in range(REPLANS):
        try:
            return write()
        except ConcurrentRewriteError:
            if attempt == REPLANS - 1:
                raise
            if dataset is not None:
                dataset.refresh()
    raise AssertionError("unreachable")


class ConflictRule(ABC):
    """What one kind of write assumed when it was planned."""

    rebases_over_schema_changes = False  # whether a concurrent schema change leaves it valid
    # files the commit brings that were referenced in the log already, which a vacuum keeps (a branch's, published)
    referenced_before: frozenset[str] = frozenset()

    def conflict(self, ours: tuple[Action, ...], theirs: "Commit", base: "Snapshot") -> str | None:
        """Why ``theirs`` (committed after ``base``) conflicts with ``ours``, or ``None``."""
        same = ref_conflict(ours, theirs)
        if same is not None or changes_only_refs(theirs.actions):
            return same
        for change in (a for a in theirs.actions if isinstance(a, SetMetadata)):
            if not (self.rebases_over_schema_changes and schema_only(base.descriptor, change.descriptor)):
                return descriptor_change(base.descriptor, change.descriptor)
        removed = {a.path for a in theirs.actions if isinstance(a, RemoveFile)}
        also = sorted(removed & {a.path for a in ours if isinstance(a, RemoveFile)})
        if also:
            return f"it removed {also[0]}, which this commit removes too"
        also = sorted(removed & {a.path for a in ours if isinstance(a, DeleteRows)})
        if also:
            return f"it removed {also[0]}, whose rows this commit deletes"
        removed = {a.path for a in theirs.actions if isinstance(a, RemoveIndex)}
        also = sorted(removed & {a.path for a in ours if isinstance(a, RemoveIndex)})
        if also:
            return f"it removed the index file {also[0]}, which this commit replaces too"
        apps = {a.app_id: a.version for a in theirs.actions if isinstance(a, SetTransaction)}
        for app in (a for a in ours if isinstance(a, SetTransaction) and a.app_id in apps):
            return f"it committed batch {apps[app.app_id]} of application {app.app_id!r}, which this commit records too"
        return self.specific_conflict(theirs, base)

    @abstractmethod
    def specific_conflict(self, theirs: "Commit", base: "Snapshot") -> str | None:
        """The rule of this kind of write."""


class BlindAppend(ConflictRule):
    """Adding files assumes nothing about existing data, nor about names: its files carry
    field ids, so a concurrent rename, drop, reorder or added field leaves them readable."""

    rebases_over_schema_changes = True

    def specific_conflict(self, theirs: "Commit", base: "Snapshot") -> str | None:
        return None


@dataclass(frozen=True)
class ReadPartitions(ConflictRule):
    """Overwrites and deletes read the partitions they replace or delete from: a concurrent
    commit that adds files there would see its rows survive the overwrite, or escape
    the delete's file removals."""

    reads: FileFilter | None = None  # the files read; None: every file

    def specific_conflict(self, theirs: "Commit", base: "Snapshot") -> str | None:
        for add in _adds(theirs.actions):
            if self.reads is None or self.reads.may_match(add):
                return f"it added {add.path} where this commit overwrites or deletes"
        return None


@dataclass(frozen=True)
class ReplacePartitions(ConflictRule):
    """A dynamic partition overwrite replaces exactly the partitions it wrote: the files of
    the current partition spec there and the files of older specs whose every row lies
    there; it cannot be made while a file of an older spec may hold rows both there and
    elsewhere (:class:`AmbiguousOverwriteError`)."""

    partitions: frozenset[tuple]
    names: tuple[str, ...]
    dataset: str = ""

    def replaced(self, base: "Snapshot") -> list[AddFile]:
        """The live files of ``base`` in the partitions replaced (only the checkpoint parts
        that may hold them are read)."""
        descriptor = base.descriptor
        wanted = FileFilter.of_partitions((dict(zip(self.names, k)) for k in self.partitions), descriptor)
        found = [f for f in base.files.matching(wanted) if self._replaces(f, descriptor)]
        if descriptor.has_past_specs:
            older = FileFilter(ALWAYS_TRUE, Predicate("ne", SPEC_NAME, descriptor.partition_spec_id, kind="long"),
                               by_spec=True)
            found += [f for f in base.files.matching(older) if self._replaces(f, descriptor)]
        return found

    def specific_conflict(self, theirs: "Commit", base: "Snapshot") -> str | None:
        for add in _adds(theirs.actions):
            try:
                replaced = self._replaces(add, base.descriptor)
            except AmbiguousOverwriteError:
                replaced = True
            if replaced:
                return f"it added {add.path} to a partition this commit replaces"
        return None

    def _replaces(self, file: AddFile, descriptor: "DatasetDescriptor") -> bool:
        if file.spec_id == descriptor.partition_spec_id:
            return tuple(file.partition.get(n) for n in self.names) in self.partitions
        found = coverage(descriptor, file, self.partitions)
        if found == UNKNOWN:
            old = descriptor.strategy_of(file.spec_id)
            written = sorted(self.partitions, key=repr)
            raise AmbiguousOverwriteError(
                f"dataset {self.dataset!r}: cannot tell whether {file.path}, written with partition spec "
                f"{file.spec_id} ({old.to_text() if old is not None else 'unpartitioned'}"
                f"{', partition ' + _partition_text(file.partition) if file.partition else ''}), holds rows of "
                f"partition {_partition_text(dict(zip(self.names, written[0])))}"
                f"{f' (or the {len(written) - 1} other(s) written)' if len(written) > 1 else ''} only or of others "
                f"too: replacing it would drop those, keeping it would keep rows the overwrite replaces. Compact the "
                f"dataset into the current partition spec first (dataset.compact()); nothing was committed")
        return found == INSIDE


def _partition_text(partition: "dict | Any") -> str:
    return ", ".join(f"{k}={v}" for k, v in dict(partition).items()) or "(unpartitioned)"


@dataclass(frozen=True)
class Rewrite(ConflictRule):
    """Compaction rewrites files with the tombstones and deletion vectors it knew applied; a
    newer tombstone that may match them, or rows newly deleted from them, would not apply to
    the rewritten files, so they conflict. Appends do not: compaction touches only the files
    it read."""

    files: tuple[AddFile, ...]

    def specific_conflict(self, theirs: "Commit", base: "Snapshot") -> str | None:
        rewritten = {f.path for f in self.files}
        for deleted in (a for a in theirs.actions if isinstance(a, DeleteRows)):
            if deleted.path in rewritten:
                return f"it deleted rows of {deleted.path}, which this commit rewrites"
        for tombstone in (a for a in theirs.actions if isinstance(a, Tombstone)):
            deletes = FileFilter.of(bind(tombstone.predicate, base.descriptor.fields), base.descriptor)
            for f in self.files:
                if deletes.may_match(f):
                    return f"its delete ({tombstone.predicate}) may match {f.path}, which this commit rewrites"
        return None


class Trace(ConflictRule):
    """A commit that changes nothing (a vacuum's trace) assumes nothing: it never conflicts."""

    def conflict(self, ours: tuple[Action, ...], theirs: "Commit", base: "Snapshot") -> str | None:
        return None

    def specific_conflict(self, theirs: "Commit", base: "Snapshot") -> str | None:
        return None


class RefChange(ConflictRule):
    """Tagging or untagging assumes nothing of the data: only a commit naming the same tag conflicts."""

    def conflict(self, ours: tuple[Action, ...], theirs: "Commit", base: "Snapshot") -> str | None:
        return ref_conflict(ours, theirs)

    def specific_conflict(self, theirs: "Commit", base: "Snapshot") -> str | None:
        return None


def ref_conflict(ours: Iterable[Action], theirs: "Commit") -> str | None:
    """Why ``theirs`` conflicts with ``ours`` over a tag: both tag or untag one name."""
    names = {a.name for a in theirs.actions if isinstance(a, (Tag, Untag))}
    for name in sorted({a.name for a in ours if isinstance(a, (Tag, Untag))} & names):
        return f"it tagged or untagged {name!r} too"
    return None


def changes_only_refs(actions: Iterable[Action]) -> bool:
    """Whether a commit of ``actions`` changes refs (tags, branches started or dropped) and
    nothing else of main (the protocol it may raise with them aside)."""
    actions = tuple(actions)
    return any(isinstance(a, (Tag, Untag, BranchRef, DropBranch)) for a in actions) and \
        all(isinstance(a, (Tag, Untag, BranchRef, DropBranch, SetProtocol)) for a in actions)


class Exclusive(ConflictRule):
    """Descriptor updates were checked against the state they read: any concurrent commit
    that is not a blind append invalidates that check."""

    def specific_conflict(self, theirs: "Commit", base: "Snapshot") -> str | None:
        if any(not isinstance(a, AddFile) for a in theirs.actions):
            return f"its {theirs.operation!r} changed what this commit was checked against"
        return None


@dataclass(frozen=True)
class Recorded(ConflictRule):
    """What a commit already in a log assumed (a branch's commit being published onto main),
    told from its actions alone and erring towards a conflict: a compaction assumed what
    :class:`Rewrite` says; a descriptor change, what :class:`Exclusive` says (refs aside); a
    keyed write, that no index bucket it wrote was written; a delete by predicate, what
    :class:`ReadPartitions` says of the files its predicate (in its info) may match, whether
    it removed whole files, tombstoned or marked rows; any other removal (an overwrite), that
    nothing was added at all; a plain append assumed nothing. A compaction on main adds no
    row and keeps main's descriptor, so it meets the last three only by the files it removed,
    and a descriptor change only when that built the index (a publish cannot be planned
    again, as a write on main is after one). ``before``: the state it was made on."""

    commit: "Commit"
    before: "Snapshot"
    # the key hashes an index delta holds (given its revision); None: a bucket both wrote conflicts
    index_hashes: "Callable[[AddIndex, int], frozenset[int]] | None" = None

    @property
    def rebases_over_schema_changes(self) -> bool:  # type: ignore[override]
        return all(isinstance(a, (AddFile, SetTransaction)) for a in self.commit.actions) and \
            "overwrite" not in self.commit.operation

    def specific_conflict(self, theirs: "Commit", base: "Snapshot") -> str | None:
        from cdkds.catalog.log.commit import REWRITE_OPERATION
        ours = self.commit.actions
        if self.commit.operation == REWRITE_OPERATION:
            removed = {a.path for a in ours if isinstance(a, RemoveFile)}
            return Rewrite(tuple(f for p, f in self.before.files.items() if p in removed)).specific_conflict(theirs, base)
        if any(isinstance(a, (SetMetadata, SetProtocol)) for a in ours):
            if theirs.operation == REWRITE_OPERATION and not any(isinstance(a, AddIndex) for a in ours):
                return None  # its files hold main's rows in main's descriptor, as the files before it did
            for action in theirs.actions:
                if not isinstance(action, (AddFile, BranchRef, DropBranch)):
                    return f"its {theirs.operation!r} changed what this branch's descriptor change was checked against"
        reason = self._same_keys(theirs)
        if reason is not None:
            return reason
        if theirs.operation == REWRITE_OPERATION:
            return None  # no row added: a tombstone reaches its files as it did those they replace (removals aside)
        deleted = self._deleted()
        if deleted is not None:  # a delete's own rule, whether it removed whole files, tombstoned or marked rows
            return ReadPartitions(deleted).specific_conflict(theirs, base)
        tombstones = [a for a in ours if isinstance(a, Tombstone)]
        if any(isinstance(a, RemoveFile) for a in ours) or "overwrite" in self.commit.operation:
            return ReadPartitions(None).specific_conflict(theirs, base)
        for tombstone in tombstones:
            reads = FileFilter.of(bind(tombstone.predicate, self.before.descriptor.fields), self.before.descriptor)
            reason = ReadPartitions(reads).specific_conflict(theirs, base)
            if reason is not None:
                return reason
        return None


    def _deleted(self) -> FileFilter | None:
        """The files a delete by predicate read (its predicate is in its info), as its own
        rule (:class:`ReadPartitions`) reads them; ``None`` for any other commit."""
        predicate = self.commit.info.get("predicate") if self.commit.operation == DELETE_OPERATION else None
        if not isinstance(predicate, str):
            return None
        descriptor = self.before.descriptor
        try:
            return FileFilter.of(bind(as_expression(predicate), descriptor.fields), descriptor)
        except CdkdsError:  # not readable back: judged by its actions, as any other commit
            return None

    def _same_keys(self, theirs: "Commit") -> str | None:
        """A keyed write assumed nobody else wrote its keys (as ``KeyedWrite`` does): a
        concurrent index delta holding one of them (by hash: a collision errs towards a
        conflict), or a new base of a bucket it wrote, conflicts."""
        ours = [a for a in self.commit.actions if isinstance(a, AddIndex)]
        buckets = {a.bucket for a in ours}
        for entry in (a for a in theirs.actions if isinstance(a, AddIndex) and a.bucket in buckets):
            if entry.base or self.index_hashes is None or any(a.base for a in ours if a.bucket == entry.bucket):
                return f"it wrote index bucket {entry.bucket}, which this branch also wrote"
            written = self.index_hashes(entry, theirs.revision)
            for mine in (a for a in ours if a.bucket == entry.bucket):
                if written & self.index_hashes(mine, self.commit.revision):
                    return f"it wrote a key of index bucket {entry.bucket} that this branch also wrote"
        return None


@dataclass(frozen=True)
class Publish(ConflictRule):
    """Publishing branch ``name`` replays its commits onto main's commits since its base:
    each branch commit is checked by the rule it implies (:class:`Recorded`), and a
    concurrent end of the branch (another publish, a drop) conflicts."""

    name: str
    commits: tuple[Recorded, ...]

    @property
    def rebases_over_schema_changes(self) -> bool:  # type: ignore[override]
        return all(r.rebases_over_schema_changes for r in self.commits)

    def conflict(self, ours: tuple[Action, ...], theirs: "Commit", base: "Snapshot") -> str | None:
        reason = self.specific_conflict(theirs, base)
        if reason is not None:
            return reason
        for recorded in self.commits:
            reason = recorded.conflict(recorded.commit.actions, theirs, base)
            if reason is not None:
                return (f"{reason} (checked against commit {recorded.commit.revision} of branch {self.name!r}, "
                        f"{recorded.commit.operation!r})")
        return None

    def specific_conflict(self, theirs: "Commit", base: "Snapshot") -> str | None:
        if any(isinstance(a, DropBranch) and a.name == self.name for a in theirs.actions):
            return f"it ended branch {self.name!r} ({theirs.operation})"
        return None

    @cached_property
    def referenced_before(self) -> frozenset[str]:  # type: ignore[override]
        """The files the branch's commits reference: a vacuum on main keeps them while the branch
        is live, however old (only the vectors the publish writes itself are new)."""
        from cdkds.catalog.log.vacuum_trace import new_files
        return frozenset(path for r in self.commits for path in new_files(r.commit.actions))


def schema_only(before: "DatasetDescriptor", after: "DatasetDescriptor") -> bool:
    """Whether ``after`` changed only names, order, added or dropped fields, nested fields,
    nullability or the partition strategy of ``before``, so files planned under ``before``
    land unchanged (their statistics, per top-level field, keep their types; their partition
    spec is one of ``after``'s, the same strategy under the same id) with no key."""
    if before.record_key or after.record_key or before.format != after.format:
        return False
    try:
        renamed = before.with_schema(after.schema)
    except CdkdsError:  # a partition source dropped: not a change an append survives
        return False
    specs = after.partition_specs
    if any(specs.get(i, _MISSING) != strategy for i, strategy in renamed.partition_specs.items()):
        return False
    for name, new_name in evolution.top_level_renames(before.schema, after.schema).items():
        old, new = before.fields[name], after.fields[new_name]
        if old.kind != new.kind or (old.kind not in ("record", "array", "map") and old.avro != new.avro):
            return False
    return True


def descriptor_change(before: "DatasetDescriptor", after: "DatasetDescriptor") -> str:
    """Why a commit that changed the descriptor from ``before`` to ``after`` conflicts, in words."""
    if after.partition_spec_id != before.partition_spec_id:
        strategy = after.partition_strategy
        return (f"it changed the partition strategy to "
                f"{strategy.to_text() if strategy is not None else 'none (unpartitioned)'} "
                f"(partition spec {after.partition_spec_id}; this commit was planned on spec "
                f"{before.partition_spec_id})")
    return "it changed the descriptor"


_MISSING = object()


def _adds(actions: Iterable[Action]) -> Iterable[AddFile]:
    return (a for a in actions if isinstance(a, AddFile))
