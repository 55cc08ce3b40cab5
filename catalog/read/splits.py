"""How the files of a scan become the input partitions of a parallel read, by Spark's
rules for its own file sources: a split size from the bytes to read and the parallelism
available, large files cut into splits of that size (Parquet: by row group, see
:class:`~cdkds.formats.files.Split`), and the pieces packed largest first into partitions
of about the split size, each piece costing its bytes plus the cost of opening a file.

The rules are worked out on arrays of byte counts (:func:`bytes_per_split`,
:func:`pieces`, :func:`next_fit`), so a plan that knows its files column-wise
(:class:`~cdkds.catalog.read.scan.FileScanTasks`) is packed from its ``size`` column
without a task object per file; the task-wise functions apply the same arrays to task
objects.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from cdkds.catalog.read.scan import FileScanTask, FileScanTasks, Splits

FILE_OPEN_COST = 4 * 1024 * 1024  # spark.sql.files.openCostInBytes: a small file still costs a task this much
MIN_SPLIT_BYTES = 1024 * 1024  # smaller splits mostly hold no row group's middle: empty tasks, millions of them


# ---------------------------------------------------------------- the rules, on byte counts

def bytes_per_split(lengths: np.ndarray, max_partition_bytes: int, parallelism: int) -> int:
    """Bytes per split for pieces of ``lengths`` bytes: ``min(max_partition_bytes, max(open
    cost, (bytes + open costs) / parallelism))``, so a scan smaller than ``parallelism``
    full partitions still keeps every core busy; never below 1 MiB."""
    total = int(lengths.sum(dtype=np.int64)) + len(lengths) * FILE_OPEN_COST
    return max(MIN_SPLIT_BYTES, min(max_partition_bytes, max(FILE_OPEN_COST, total // max(parallelism, 1))))


def pieces(lengths: np.ndarray, cuttable: np.ndarray, size: int) -> tuple[np.ndarray, Splits]:
    """Files of ``lengths`` bytes with each ``cuttable`` one larger than ``size`` cut into
    splits of ``size`` bytes (the last one shorter), in file order: the file of each piece
    and the pieces."""
    lengths = np.asarray(lengths, dtype=np.int64)
    cut = np.asarray(cuttable, dtype=bool) & (lengths > size)
    counts = np.where(cut, -(-lengths // size), 1)
    row = np.repeat(np.arange(len(lengths)), counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)  # where each file's pieces begin
    start = (np.arange(len(row)) - first) * size
    whole = lengths[row]
    cut = cut[row]
    return row, Splits(np.where(cut, start, 0), np.where(cut, np.minimum(size, whole - start), whole), cut)


def next_fit(lengths: np.ndarray, max_bytes: int) -> list[np.ndarray]:
    """The indices of ``lengths`` packed into groups of about ``max_bytes``: largest first
    (ties in their order), a group closes when the next piece's bytes would take it past
    ``max_bytes``, each piece in it costing its bytes plus the open cost (Spark's next-fit
    packing)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    ordered = lengths[order]
    before = np.concatenate(([0], np.cumsum(ordered + FILE_OPEN_COST)))  # the cost of the pieces before each
    # piece k joins the group begun at i iff before[k] - before[i] + ordered[k] <= max_bytes; the left side
    # grows with k (by the open cost at least), so each group ends at the first k where it fails
    reach = before[:-1] + ordered
    groups = []
    i = 0
    while i < len(ordered):
        end = max(i + 1, int(np.searchsorted(reach, before[i] + max_bytes, side="right")))
        groups.append(order[i:end])
        i = end
    return groups


# ---------------------------------------------------------------- task objects

def _lengths(tasks: Sequence[FileScanTask]) -> np.ndarray:
    if isinstance(tasks, FileScanTasks):
        return tasks.lengths
    return np.fromiter((t.length for t in tasks), dtype=np.int64, count=len(tasks))


def split_size(tasks: Sequence[FileScanTask], max_partition_bytes: int, parallelism: int) -> int:
    """Bytes per split for ``tasks`` (:func:`bytes_per_split`)."""
    return bytes_per_split(_lengths(tasks), max_partition_bytes, parallelism)


def split(tasks: Sequence[FileScanTask], size: int, splittable: bool) -> list[FileScanTask]:
    """``tasks`` with each file larger than ``size`` cut into splits of ``size`` bytes
    (when its format can read splits; a task that is a split already stays whole)."""
    tasks = list(tasks)
    sizes = np.fromiter((t.file.size for t in tasks), dtype=np.int64, count=len(tasks))
    whole = np.fromiter((t.split is None for t in tasks), dtype=bool, count=len(tasks))
    rows, cut = pieces(sizes, whole & splittable, size)
    return [dataclasses.replace(tasks[r], split=cut.split(i)) if cut.cut[i] else tasks[r]
            for i, r in enumerate(rows.tolist())]


def pack(tasks: Sequence[FileScanTask], max_bytes: int) -> list[list[FileScanTask]]:
    """Tasks packed into groups of about ``max_bytes`` (:func:`next_fit`)."""
    tasks = list(tasks)
    return [[tasks[i] for i in group.tolist()] for group in next_fit(_lengths(tasks), max_bytes)]


def input_partitions(tasks: Sequence[FileScanTask], max_partition_bytes: int, parallelism: int,
                     splittable: bool) -> list[Sequence[FileScanTask]]:
    """The groups of (pieces of) files that parallel tasks read. Tasks known column-wise
    (:class:`FileScanTasks`) are packed from their ``size`` column into groups that are
    :class:`FileScanTasks` too, each holding its files' rows: no task object is made
    until a group is read."""
    if not isinstance(tasks, FileScanTasks) or tasks.splits is not None:
        size = split_size(tasks, max_partition_bytes, parallelism)
        return pack(split(tasks, size, splittable), size)  # type: ignore[return-value]
    lengths = tasks.lengths
    size = bytes_per_split(lengths, max_partition_bytes, parallelism)
    rows, cut = pieces(lengths, np.full(len(lengths), splittable), size)
    groups = next_fit(cut.length, size)
    if not groups:
        return []
    order = np.concatenate(groups)
    packed = tasks.take(rows[order], cut.take(order) if cut.cut.any() else None)  # one copy, the groups in order
    ends = np.cumsum([len(g) for g in groups]).tolist()
    return [packed.slice(start, stop) for start, stop in zip([0, *ends[:-1]], ends)]
