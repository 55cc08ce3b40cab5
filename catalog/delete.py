"""Delete by predicate: remove the files wholly inside it, tombstone the rest.

A file whose partition lies wholly inside the predicate (strict projection) or whose
statistics prove every row matches is removed; a file that may hold some matching rows
keeps them until compaction, hidden by one :class:`Tombstone` that every read of an
older file applies. Files that cannot match are untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdkds.catalog.log.actions import Action, AddFile, RemoveFile, Tombstone
from cdkds.catalog.log.conflicts import ReadPartitions
from cdkds.catalog.expressions import ALWAYS_TRUE, Expression, as_expression, bind, evaluate, may_match, must_match
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
    """What deleting the rows matching ``where`` takes."""
    descriptor = snapshot.descriptor
    fields = descriptor.fields
    predicate = bind(as_expression(where), fields, dataset)
    strategy = descriptor.partition_strategy
    inclusive = strategy.project(predicate, fields) if strategy is not None else ALWAYS_TRUE
    strict = strategy.project_strict(predicate, fields) if strategy is not None else None
    removed, partial = [], []
    for f in snapshot.files.values():
        if inclusive is not ALWAYS_TRUE and evaluate(inclusive, f.partition) is not True:
            continue
        if not may_match(predicate, f.row_count, f.statistics):
            continue
        whole = predicate is ALWAYS_TRUE or must_match(predicate, f.row_count, f.statistics) or \
            (strict is not None and evaluate(strict, f.partition) is True)
        (removed if whole else partial).append(f)
    return DeletePlan(predicate, tuple(removed), tuple(partial), ReadPartitions(inclusive, predicate))
