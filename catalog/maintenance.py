"""Keeping a dataset healthy: compaction of small files and garbage collection (vacuum)."""

from __future__ import annotations

import datetime as dt
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdkds.catalog.actions import AddFile
from cdkds.catalog.errors import CdkdsError
from cdkds.catalog.expressions import ALWAYS_TRUE, Expression, as_expression, bind, evaluate
from cdkds.catalog.log import LOG_FOLDER
from cdkds.catalog.scan import FileScanTask, read_task
from cdkds.catalog.writer import DATA_FOLDER, DEFAULT_TARGET_FILE_SIZE, RewriteFiles

if TYPE_CHECKING:
    from cdkds.catalog.dataset import Dataset

DEFAULT_RETENTION = dt.timedelta(days=7)  # Delta's default
MINIMUM_RETENTION = dt.timedelta(hours=1)
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
    one file is rewritten only when tombstones apply to it."""
    snapshot = dataset.snapshot
    descriptor = snapshot.descriptor
    strategy = descriptor.partition_strategy
    partitions: Expression = ALWAYS_TRUE
    if strategy is not None:
        partitions = strategy.project(bind(as_expression(where), descriptor.fields, dataset.name), descriptor.fields)
    elif where is not None:
        raise CdkdsError(f"dataset {dataset.name!r} is not partitioned; compact it whole (where=None)")
    by_partition: dict[tuple, list[AddFile]] = defaultdict(list)
    for f in snapshot.files.values():
        if partitions is ALWAYS_TRUE or evaluate(partitions, f.partition) is True:
            if f.size < target_file_size * SMALL_FILE_FRACTION or snapshot.tombstones_for(f):
                by_partition[tuple(sorted(f.partition.items(), key=lambda kv: kv[0]))].append(f)
    groups = []
    for files in by_partition.values():
        files.sort(key=lambda f: f.size)
        group: list[AddFile] = []
        size = 0
        for f in files:
            if group and size + f.size > target_file_size:
                groups.append(tuple(group))
                group, size = [], 0
            group.append(f)
            size += f.size
        if group:
            groups.append(tuple(group))
    worth = tuple(g for g in groups if len(g) > 1 or snapshot.tombstones_for(g[0]))
    return CompactionPlan(worth)


def compact(dataset: "Dataset", target_file_size: int = DEFAULT_TARGET_FILE_SIZE,
            where: Expression | str | None = None) -> int | None:
    """Rewrite the planned groups in one commit; returns its revision (``None`` if nothing to do)."""
    plan = plan_compaction(dataset, target_file_size, where)
    if not plan.groups:
        return None
    snapshot = dataset.snapshot
    columns = list(snapshot.descriptor.fields)
    with dataset.writer(mode=RewriteFiles(plan.files), target_file_size=target_file_size) as writer:
        for f in plan.files:
            task = FileScanTask(f, tuple(t.predicate for t in snapshot.tombstones_for(f)))
            for batch in read_task(dataset.store, snapshot.descriptor, ALWAYS_TRUE, columns, task):
                writer.write_batch(batch)
    return dataset.version


def vacuum(dataset: "Dataset", retention: dt.timedelta = DEFAULT_RETENTION, dry_run: bool = True,
           force: bool = False) -> list[str]:
    """Data files no retained revision references, older than ``retention`` (and stale
    temporary log files); deleted unless ``dry_run``. Returns their keys."""
    if not isinstance(retention, dt.timedelta):
        raise CdkdsError(f"dataset {dataset.name!r}: retention must be a datetime.timedelta, got {retention!r}")
    if retention < MINIMUM_RETENTION and not force:
        raise CdkdsError(
            f"dataset {dataset.name!r}: a retention of {retention} is below the safe minimum of {MINIMUM_RETENTION}: "
            f"files of writers that have not committed yet could be deleted; pass force=True if none are running")
    referenced = dataset.log.retained_files()
    cutoff = time.time() - retention.total_seconds()
    doomed = []
    for key, info in dataset.store.walk_files(DATA_FOLDER):
        if key not in referenced and modified(info) < cutoff:
            doomed.append(key)
    for key, info in dataset.store.walk_files(LOG_FOLDER):
        if key.rsplit("/", 1)[-1].startswith(".") and key.endswith(".tmp") and modified(info) < cutoff:
            doomed.append(key)
    if not dry_run:
        for key in doomed:
            dataset.store.delete(key)
    return sorted(doomed)


def modified(info: dict[str, Any]) -> float:
    """Modification time (epoch seconds) from an fsspec ``info`` dict of any backend."""
    for name in ("mtime", "LastModified", "last_modified", "created", "updated"):
        value = info.get(name)
        if value is None:
            continue
        if isinstance(value, dt.datetime):
            return (value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)).timestamp()
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return time.time()  # unknown age: treat as new, so it is never collected by mistake
