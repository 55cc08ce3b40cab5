"""Delete by predicate: remove the files wholly inside it, tombstone the rest.

A file whose partition lies wholly inside the predicate (strict projection) or whose
statistics prove every row matches is removed; a file that may hold some matching rows
keeps them until compaction, hidden by one :class:`Tombstone` that every read of an
older file applies. Files that cannot match are untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdkds.catalog.errors import ExpressionError
from cdkds.catalog.log.actions import Action, AddFile, RemoveFile, Tombstone
from cdkds.catalog.log.conflicts import ReadPartitions
from cdkds.catalog.expressions import Expression, as_expression, bind
from cdkds.catalog.expressions.pruning import FileFilter
from cdkds.catalog.log.snapshot import Snapshot


@dataclass(frozen=True)
class DeletePlan:
    predicate: Expression
    removed: tuple[AddFile, ...]
    partial: tuple[AddFile, ...]
    rule: ReadPartitions

    @property
    def actions(self) -> list[Action]:
        actions: list[Action] = [RemoveFile(f.path) for f in self.removed]
        if self.partial:
            actions.append(Tombstone(self.predicate))
        return actions


def plan_delete(dataset: str, snapshot: Snapshot, where: Expression | str) -> DeletePlan:
    """What deleting the rows matching ``where`` takes; a missing or empty predicate is
    refused (it would mean every row)."""
    if where is None or isinstance(where, str) and not where.strip():
        raise ExpressionError(f"dataset {dataset!r}: delete needs a predicate, got {where!r}; to remove every row, "
                              f"overwrite the dataset with nothing")
    predicate = bind(as_expression(where), snapshot.descriptor.fields, dataset)
    matches = FileFilter.of(predicate, snapshot.descriptor)
    removed, partial = [], []
    for f in snapshot.files.values():
        if matches.may_match(f):
            (removed if matches.must_match(f) else partial).append(f)
    return DeletePlan(predicate, tuple(removed), tuple(partial), ReadPartitions(matches))
