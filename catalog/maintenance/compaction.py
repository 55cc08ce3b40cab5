"""Compaction: merge small files per partition and materialise tombstones, in one commit."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.errors import CdkdsError
from cdkds.catalog.expressions import ALWAYS_TRUE, Expression, as_expression, bind, evaluate
from cdkds.catalog.log.commit import clock
from cdkds.catalog.maintenance.rewrite import keeps_expiry, may_have_expired, rewrite
from cdkds.catalog.write.writer import DEFAULT_TARGET_FILE_SIZE, check_target_file_size

if TYPE_CHECKING:
    from cdkds.catalog.dataset import Dataset
    from cdkds.catalog.log.snapshot import Snapshot

SMALL_FILE_FRACTION = 0.75  # files under this share of the target are worth merging


@dataclass(frozen=True)
class CompactionPlan:
    groups: tuple[tuple[AddFile, ...], ...]

    @property
    def files(self) -> list[AddFile]:
        return [f for group in self.groups for f in group]


def plan_compaction(dataset: "Dataset", target_file_size: int = DEFAULT_TARGET_FILE_SIZE,
                    where: Expression | str | None = None) -> CompactionPlan:
    """Per partition, bin-pack small files into groups of about the target size; a group of
    one file is rewritten only when rows of it are deleted or expired. Files whose rows'
    expiry a rewrite would change are left (:func:`~cdkds.catalog.maintenance.rewrite.keeps_expiry`)."""
    check_target_file_size(dataset.name, target_file_size)
    snapshot = dataset.snapshot
    now = clock()
    descriptor = snapshot.descriptor
    strategy = descriptor.partition_strategy
    partitions: Expression = ALWAYS_TRUE
    if strategy is not None:
        predicate = bind(as_expression(where, dataset.name), descriptor.fields, dataset.name)
        partitions = strategy.project(predicate, descriptor.fields)
    elif where is not None:
        raise CdkdsError(f"dataset {dataset.name!r} is not partitioned; compact it whole (where=None)")
    by_partition: dict[tuple, list[AddFile]] = defaultdict(list)
    for f in snapshot.files.values():
        if not keeps_expiry(descriptor, f, now):
            continue
        if partitions is ALWAYS_TRUE or evaluate(partitions, f.partition) is True:
            if f.size < target_file_size * SMALL_FILE_FRACTION or _has_deletes(snapshot, f, now):
                by_partition[tuple(sorted(f.partition.items(), key=lambda kv: kv[0]))].append(f)
    groups = [g for files in by_partition.values() for g in bin_pack(files, target_file_size)]
    worth = tuple(g for g in groups if len(g) > 1 or _has_deletes(snapshot, g[0], now))
    return CompactionPlan(worth)


def bin_pack(files: list[AddFile], size: int) -> list[tuple[AddFile, ...]]:
    """``files`` bin-packed, smallest first, into groups of at most ``size`` bytes (a file
    larger than that alone)."""
    groups: list[tuple[AddFile, ...]] = []
    group: list[AddFile] = []
    total = 0
    for f in sorted(files, key=lambda f: f.size):
        if group and total + f.size > size:
            groups.append(tuple(group))
            group, total = [], 0
        group.append(f)
        total += f.size
    if group:
        groups.append(tuple(group))
    return groups


def compact(dataset: "Dataset", target_file_size: int = DEFAULT_TARGET_FILE_SIZE,
            where: Expression | str | None = None) -> int | None:
    """Rewrite the planned groups in one commit; returns its revision (``None`` if nothing to do)."""
    plan = plan_compaction(dataset, target_file_size, where)
    if not plan.groups:
        return None
    return rewrite(dataset, plan.files, target_file_size).revision


def _has_deletes(snapshot: "Snapshot", f: AddFile, now_ms: int) -> bool:
    """Whether rewriting ``f`` alone drops rows: tombstones or deletion vectors apply, or
    its statistics say some of its rows may have expired (TTL)."""
    return bool(f.deletes or snapshot.tombstones_for(f)) or may_have_expired(snapshot.descriptor, f, now_ms)
