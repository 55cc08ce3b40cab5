"""Delete by predicate: remove the files wholly inside it, tombstone the rest (on a keyed
dataset: delete the matching rows by position, with deletion vectors, so the record index
never has to evaluate predicates).

A file whose partition lies wholly inside the predicate (strict projection) or whose
statistics prove every row matches is removed; a file that may hold some matching rows
keeps them until compaction, hidden by one :class:`Tombstone` that every read of an
older file applies. Files that cannot match are untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from cdkds.catalog.errors import ExpressionError
from cdkds.catalog.keyed.deletion import DeletionVector, DeletionVectorRef
from cdkds.catalog.log.actions import Action, AddFile, DeleteRows, RemoveFile, Tombstone
from cdkds.catalog.log.conflicts import ReadPartitions
from cdkds.catalog.expressions import Expression, as_expression, bind
from cdkds.catalog.expressions.columnar import must_match_mask
from cdkds.catalog.expressions.pruning import FileFilter
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.read.scan import file_task, read_task
from cdkds.catalog.storage import ObjectStore
from cdkds.catalog.work_columns import POSITION


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
    predicate = bind(as_expression(where, dataset), snapshot.descriptor.fields, dataset)
    matches = FileFilter.of(predicate, snapshot.descriptor)
    candidates = snapshot.files.matching_table(matches)  # only the parts and rows that may match are read
    whole = must_match_mask(matches, candidates)
    removed, partial = candidates.filter(whole).files(), candidates.filter(pc.invert(whole)).files()
    return DeletePlan(predicate, tuple(removed), tuple(partial), ReadPartitions(matches))


def row_deletes(store: ObjectStore, snapshot: Snapshot, plan: DeletePlan, now_ms: int) -> list[Action]:
    """The actions of ``plan`` with deletion vectors instead of a tombstone: the matching
    rows of each partially matching file, by position."""
    actions: list[Action] = [RemoveFile(f.path) for f in plan.removed]
    for f in plan.partial:
        task = file_task(snapshot, f, now_ms)
        found = [b.column(POSITION).to_numpy(zero_copy_only=False)
                 for b in read_task(store, snapshot.descriptor, plan.predicate, [], task, positions=True)]
        if found:
            positions = np.concatenate(found)
            actions.append(DeleteRows(f.path, DeletionVectorRef.store(store, DeletionVector.of(positions))))
    return actions
