"""Compaction: merge small files per partition, materialise tombstones and rewrite files of
older partition specs into the current strategy, in one commit."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.errors import CdkdsError
from cdkds.catalog.expressions import ALWAYS_TRUE, Expression, as_expression, bind, evaluate
from cdkds.catalog.expressions.pruning import SPEC_NAME, FileFilter
from cdkds.catalog.log.commit import clock
from cdkds.catalog.maintenance.rewrite import keeps_expiry, may_have_expired, rewrite
from cdkds.catalog.write.writer import DEFAULT_TARGET_FILE_SIZE, check_target_file_size

if TYPE_CHECKING:
    from cdkds.catalog.dataset import Dataset
    from cdkds.catalog.descriptor import DatasetDescriptor
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
    """Per partition, bin-pack small files into groups of about the target size (the files
    of an older partition spec together, whatever their partition); a group of one file is rewritten only when rows of it are deleted or
    expired, or when it was written with an older partition spec (:func:`outdated`): rewritten,
    its rows take the current strategy. Files whose rows' expiry a rewrite would change are
    left (:func:`~cdkds.catalog.maintenance.rewrite.keeps_expiry`)."""
    check_target_file_size(dataset.name, target_file_size)
    snapshot = dataset.snapshot
    now = clock()
    descriptor = snapshot.descriptor
    partitions: FileFilter | None = None
    if descriptor.partition_strategy is not None or descriptor.has_past_specs:
        predicate = bind(as_expression(where, dataset.name), descriptor.fields, dataset.name)
        partitions = FileFilter.of(predicate, descriptor)  # each file by its own spec's strategy
    elif where is not None:
        raise CdkdsError(f"dataset {dataset.name!r} is not partitioned; compact it whole (where=None)")
    by_partition: dict[tuple, list[AddFile]] = defaultdict(list)
    for f in snapshot.files.values():
        if not keeps_expiry(descriptor, f, now):
            continue
        if partitions is None or partitions.inclusive is ALWAYS_TRUE or \
                evaluate(partitions.inclusive, {**f.partition, SPEC_NAME: f.spec_id}) is True:
            if f.size < target_file_size * SMALL_FILE_FRACTION or _has_deletes(snapshot, f, now) or \
                    outdated(descriptor, f):
                by_partition[_pool(descriptor, f)].append(f)
    groups = [g for files in by_partition.values() for g in bin_pack(files, target_file_size)]
    worth = tuple(g for g in groups if len(g) > 1 or _has_deletes(snapshot, g[0], now) or outdated(descriptor, g[0]))
    return CompactionPlan(worth)


def outdated(descriptor: "DatasetDescriptor", f: AddFile) -> bool:
    """Whether ``f`` was written with a partition spec other than the current one (a
    rewrite moves its rows into the current strategy)."""
    return f.spec_id != descriptor.partition_spec_id


def _pool(descriptor: "DatasetDescriptor", f: AddFile) -> tuple:
    """The files ``f`` is bin-packed with: those of its partition, or all of its partition
    spec when that is an older one (their rows are partitioned anew, wherever they lay)."""
    if outdated(descriptor, f):
        return (f.spec_id,)
    return (f.spec_id, *sorted(f.partition.items(), key=lambda kv: kv[0]))


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
