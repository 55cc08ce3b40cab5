"""When a commit that lost a race may be rebased onto the commits that won it.

Each kind of write says what it assumed about the dataset when it was planned; a
concurrent commit that breaks the assumption is a conflict (:class:`CommitConflictError`),
anything else is rebased. Rules common to all: a concurrent descriptor change conflicts,
and so does a concurrent removal of a file (data or index) this commit also removes or
deletes rows of.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from cdkds.catalog.log.actions import Action, AddFile, DeleteRows, RemoveFile, RemoveIndex, SetMetadata, Tombstone
from cdkds.catalog.expressions import bind
from cdkds.catalog.expressions.pruning import FileFilter

if TYPE_CHECKING:
    from cdkds.catalog.log.transaction import Commit
    from cdkds.catalog.log.snapshot import Snapshot


class ConflictRule(ABC):
    """What one kind of write assumed when it was planned."""

    def conflict(self, ours: tuple[Action, ...], theirs: "Commit", base: "Snapshot") -> str | None:
        """Why ``theirs`` (committed after ``base``) conflicts with ``ours``, or ``None``."""
        if any(isinstance(a, SetMetadata) for a in theirs.actions):
            return "it changed the descriptor"
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
        return self.specific_conflict(theirs, base)

    @abstractmethod
    def specific_conflict(self, theirs: "Commit", base: "Snapshot") -> str | None:
        """The rule of this kind of write."""


class BlindAppend(ConflictRule):
    """Adding files assumes nothing about existing data."""

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
    """A dynamic partition overwrite replaces exactly the partitions it wrote."""

    partitions: frozenset[tuple]
    names: tuple[str, ...]

    def specific_conflict(self, theirs: "Commit", base: "Snapshot") -> str | None:
        for add in _adds(theirs.actions):
            if tuple(add.partition.get(n) for n in self.names) in self.partitions:
                return f"it added {add.path} to a partition this commit replaces"
        return None


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


class Exclusive(ConflictRule):
    """Descriptor updates were checked against the state they read: any concurrent commit
    that is not a blind append invalidates that check."""

    def specific_conflict(self, theirs: "Commit", base: "Snapshot") -> str | None:
        if any(not isinstance(a, AddFile) for a in theirs.actions):
            return f"its {theirs.operation!r} changed what this commit was checked against"
        return None


def _adds(actions: Iterable[Action]) -> Iterable[AddFile]:
    return (a for a in actions if isinstance(a, AddFile))
