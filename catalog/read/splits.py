"""How the files of a scan become the input partitions of a parallel read, by Spark's
rules for its own file sources: a split size from the bytes to read and the parallelism
available, large files cut into splits of that size (Parquet: by row group, see
:class:`~cdkds.formats.files.Split`), and the pieces packed largest first into partitions
of about the split size, each piece costing its bytes plus the cost of opening a file.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from cdkds.catalog.read.scan import FileScanTask
from cdkds.formats.files import Split

FILE_OPEN_COST = 4 * 1024 * 1024  # spark.sql.files.openCostInBytes: a small file still costs a task this much
MIN_SPLIT_BYTES = 1024 * 1024  # smaller splits mostly hold no row group's middle: empty tasks, millions of them


def split_size(tasks: Sequence[FileScanTask], max_partition_bytes: int, parallelism: int) -> int:
    """Bytes per split: ``min(max_partition_bytes, max(open cost, bytes / parallelism))``,
    so a scan smaller than ``parallelism`` full partitions still keeps every core busy;
    never below 1 MiB."""
    total = sum(t.length + FILE_OPEN_COST for t in tasks)
    return max(MIN_SPLIT_BYTES, min(max_partition_bytes, max(FILE_OPEN_COST, total // max(parallelism, 1))))


def split(tasks: Sequence[FileScanTask], size: int, splittable: bool) -> list[FileScanTask]:
    """``tasks`` with each file larger than ``size`` cut into splits of ``size`` bytes
    (when its format can read splits)."""
    out: list[FileScanTask] = []
    for task in tasks:
        length = task.file.size
        if not splittable or task.split is not None or length <= size:
            out.append(task)
            continue
        out.extend(dataclasses.replace(task, split=Split(start, min(size, length - start)))
                   for start in range(0, length, size))
    return out


def pack(tasks: Sequence[FileScanTask], max_bytes: int) -> list[list[FileScanTask]]:
    """Tasks packed into groups of about ``max_bytes``: largest first, a group closes when
    the next task's bytes would take it past ``max_bytes`` (Spark's next-fit packing)."""
    groups: list[list[FileScanTask]] = []
    current: list[FileScanTask] = []
    size = 0
    for task in sorted(tasks, key=lambda t: t.length, reverse=True):
        if current and size + task.length > max_bytes:
            groups.append(current)
            current, size = [], 0
        current.append(task)
        size += task.length + FILE_OPEN_COST
    if current:
        groups.append(current)
    return groups


def input_partitions(tasks: Sequence[FileScanTask], max_partition_bytes: int, parallelism: int,
                     splittable: bool) -> list[list[FileScanTask]]:
    """The groups of (pieces of) files that parallel tasks read."""
    size = split_size(tasks, max_partition_bytes, parallelism)
    return pack(split(tasks, size, splittable), size)
