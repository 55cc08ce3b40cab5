"""Which data files an inline pass of the table services looks at: those of the partitions
the writes before it touched (as Delta's auto compaction does), never the whole dataset, so
that a write's pass costs what the write touched. ``cdkds maintain`` looks at every file.

A write touches the partitions it added files to and those of the files whose rows it
deleted (deletion vectors); a delete without a record key touches the files its tombstone
may match. Removing files makes no work, so it touches nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from cdkds.catalog.errors import ExpressionError
from cdkds.catalog.expressions import Expression, bind
from cdkds.catalog.expressions.pruning import SPEC_NAME, FileFilter
from cdkds.catalog.log.actions import Action, AddFile, DeleteRows, Tombstone

if TYPE_CHECKING:
    from cdkds.catalog.log.snapshot import Snapshot


def partition_key(file: AddFile) -> tuple:
    """A file's partition as a hashable key: its (name, value) pairs sorted by name, then
    ``(SPEC_NAME, spec id)`` for a file of a spec other than 0 (a partition is a spec's: files
    of two specs with equal values are in two partitions)."""
    key = tuple(sorted(file.partition.items(), key=lambda kv: kv[0]))
    return (*key, (SPEC_NAME, file.spec_id)) if file.spec_id else key


def key_partition(key: tuple) -> dict[str, Any]:
    """The partition a :func:`partition_key` names, its spec as :data:`SPEC_NAME`."""
    return {SPEC_NAME: 0, **dict(key)}


@dataclass(frozen=True)
class ServiceScope:
    """The partitions (keys as :func:`partition_key` makes them) and the deletes (tombstone
    predicates, as committed) that writes touched."""

    partitions: frozenset[tuple] = frozenset()
    deletes: tuple[Expression, ...] = ()

    def including(self, actions: Iterable[Action], after: "Snapshot") -> "ServiceScope":
        """This scope with what a commit of ``actions`` touched; ``after``: the state it made
        (where the files whose rows it deleted are looked up: only a write that deletes rows,
        which reads those files anyway, asks)."""
        partitions, deletes = set(self.partitions), list(self.deletes)
        for action in actions:
            if isinstance(action, AddFile):
                partitions.add(partition_key(action))
            elif isinstance(action, DeleteRows):
                file = after.files.get(action.path)
                if file is not None:
                    partitions.add(partition_key(file))
            elif isinstance(action, Tombstone):
                deletes.append(action.predicate)
        if len(partitions) == len(self.partitions) and len(deletes) == len(self.deletes):
            return self
        return ServiceScope(frozenset(partitions), tuple(deletes))

    def files(self, snapshot: "Snapshot") -> list[AddFile]:
        """The live files of ``snapshot`` in this scope, found by pruning (a parted checkpoint
        reads only the parts whose bounds may hold them)."""
        descriptor = snapshot.descriptor
        found: dict[str, AddFile] = {}
        if self.partitions:
            wanted = FileFilter.of_partitions((key_partition(key) for key in self.partitions), descriptor)
            found.update((f.path, f) for f in snapshot.files.matching(wanted) if partition_key(f) in self.partitions)
        for predicate in self.deletes:
            try:
                deletes = FileFilter.of(bind(predicate, descriptor.fields), descriptor)
            except ExpressionError:  # a later schema no longer reads it: it is spent, or maintain finds its files
                continue
            found.update((f.path, f) for f in snapshot.files.matching(deletes) if f.path not in found)
        return list(found.values())
