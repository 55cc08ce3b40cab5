"""Planning and reading a scan: prune partitions and files with a predicate, then stream
the rows that match as Arrow batches.

Planning binds the predicate to the schema, projects it through the partition functions
(inclusive projection) and checks each file's statistics, so only files that may hold a
match are opened. Reading streams each file's batches, reads them with the schema of the
snapshot (columns matched by field id: see :mod:`cdkds.formats.projection`), drops the rows of newer tombstones and of the
file's deletion vectors, and the rows expired by TTL at the moment the scan was planned,
and filters rows exactly.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.errors import CdkdsError, DataFileError
from cdkds.catalog.expressions import (
    ALWAYS_FALSE, ALWAYS_TRUE, Expression, and_, as_expression, bind, drop_matching, filter_batch, references,
)
from cdkds.catalog.expressions.metrics import may_match
from cdkds.catalog.expressions.pruning import FileFilter
from cdkds.catalog.keyed.deletion import load_deletes
from cdkds.catalog.keyed.ttl import TimeToLive
from cdkds.catalog.log.commit import clock
from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.log.files import FileTable
from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.read.columns import select_columns
from cdkds.catalog.read.readahead import read_ahead
from cdkds.catalog.storage import ObjectStore, store_failure
from cdkds.catalog.work_columns import POSITION
from cdkds.formats.files import DEFAULT_BATCH_ROWS, KeepRowGroup, Split, file_format


SPLIT_BYTES = 64 * 1024 * 1024  # a plain-Python scan reads pieces of larger files side by side


@dataclass(frozen=True)
class FileScanTask:
    """One file to read, the (bound) tombstone predicates that apply to it and the (bound)
    predicate its rows must satisfy to be visible (not expired by TTL). Its deletion
    vectors travel with the file (``file.deletes``)."""

    file: AddFile
    tombstones: tuple[Expression, ...] = ()
    visible: Expression = ALWAYS_TRUE
    split: Split | None = None  # part of the file to read (default: all of it)

    @property
    def length(self) -> int:
        """The bytes of the file this task reads."""
        return self.file.size if self.split is None else self.split.length


def file_task(snapshot: Snapshot, file: AddFile, now_ms: int) -> FileScanTask:
    """How to read ``file`` of ``snapshot`` as of ``now_ms``: its tombstones and TTL."""
    ttl = TimeToLive.of(snapshot.descriptor)
    visible = ALWAYS_TRUE if ttl is None else bind(ttl.visible(now_ms, file), snapshot.descriptor.fields)
    return FileScanTask(file, tuple(t.predicate for t in snapshot.tombstones_for(file)), visible)


@dataclass(frozen=True)
class ScanPlan:
    """The files a scan reads, the bound predicate rows must satisfy and the output columns."""

    dataset: str
    snapshot: Snapshot
    predicate: Expression
    columns: tuple[str, ...]
    tasks: Sequence[FileScanTask]
    now: int = 0  # ms: rows expired by TTL at this moment are not read

    @property
    def files(self) -> list[AddFile]:
        return [t.file for t in self.tasks]

    @property
    def total_files(self) -> int:
        return len(self.snapshot.files)

    @property
    def output_schema(self) -> pa.Schema:
        schema = self.snapshot.descriptor.arrow_schema
        return pa.schema([schema.field(c) for c in self.columns])


def plan_scan(dataset: str, snapshot: Snapshot, where: Expression | str | None = None,
              columns: Sequence[str] | None = None, now_ms: int | None = None) -> ScanPlan:
    """The files of ``snapshot`` that may hold visible rows matching ``where`` at ``now_ms``
    (default: now)."""
    descriptor = snapshot.descriptor
    predicate = bind(as_expression(where, dataset), descriptor.fields, dataset)
    selected = select_columns(dataset, descriptor, columns)
    now = clock() if now_ms is None else now_ms
    matches = FileFilter.of(predicate, descriptor)
    candidates = snapshot.files.matching_table(matches)
    if TimeToLive.of(descriptor) is None:
        return ScanPlan(dataset, snapshot, predicate, selected, FileScanTasks(snapshot, _with_live_rows(candidates), now),
                        now)
    tasks = []
    for f in candidates.files():
        if f.may_have_live_rows:
            task = file_task(snapshot, f, now)
            if task.visible is ALWAYS_TRUE or FileFilter.of(and_(predicate, task.visible), descriptor).may_match(f):
                tasks.append(task)
    return ScanPlan(dataset, snapshot, predicate, selected, tuple(tasks), now)


def _with_live_rows(files: FileTable) -> FileTable:
    """The files of which some row may survive the deletion vectors (``AddFile.may_have_live_rows``)."""
    if not len(files):
        return files
    live = pc.greater(pc.subtract(files.table.column("rows"), files.table.column("deleted_rows")), 0)
    if pc.all(live).as_py():
        return files
    doubtful = [i for i, keep in enumerate(live.to_pylist()) if not keep]
    rows = FileTable(files.table.take(doubtful), files.descriptor).files()
    survivors = {i for i, f in zip(doubtful, rows) if f.may_have_live_rows}
    return files.filter(pa.array([keep or i in survivors for i, keep in enumerate(live.to_pylist())]))


@dataclass(frozen=True, eq=False)
class Splits:
    """The piece each of some tasks reads, as columns: bytes ``[start[i], start[i] +
    length[i])`` of its file where ``cut[i]``, else the whole file (``length[i]`` bytes)."""

    start: np.ndarray
    length: np.ndarray
    cut: np.ndarray

    def split(self, i: int) -> Split | None:
        return Split(int(self.start[i]), int(self.length[i])) if self.cut[i] else None

    def take(self, rows: np.ndarray) -> "Splits":
        return Splits(self.start[rows], self.length[rows], self.cut[rows])

    def slice(self, start: int, stop: int) -> "Splits":
        return Splits(self.start[start:stop], self.length[start:stop], self.cut[start:stop])


class FileScanTasks(Sequence[FileScanTask]):
    """The tasks of a plan without TTL, one a file of ``files`` (reading the pieces
    ``splits`` says, when given), made when first read: a plan over a million files knows
    them column-wise and makes their objects only for whoever iterates (a task of a Spark
    job makes its own). Pickled, it carries its files' rows and, of its snapshot, what a
    task needs besides its file (the descriptor and tombstones), never the snapshot's
    other files."""

    def __init__(self, snapshot: Snapshot, files: FileTable, now_ms: int, splits: Splits | None = None):
        self.snapshot = snapshot
        self.files = files
        self.now_ms = now_ms
        self.splits = splits
        self._made: tuple[FileScanTask, ...] | None = None

    def _tasks(self) -> tuple[FileScanTask, ...]:
        if self._made is None:
            made = [file_task(self.snapshot, f, self.now_ms) for f in self.files.files()]
            if self.splits is not None:
                made = [dataclasses.replace(t, split=self.splits.split(i)) if self.splits.cut[i] else t
                        for i, t in enumerate(made)]
            self._made = tuple(made)
        return self._made

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i):  # type: ignore[override]
        return self._tasks()[i]

    def __iter__(self) -> Iterator[FileScanTask]:
        return iter(self._tasks())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __reduce__(self):
        kept = {f.name: getattr(self.snapshot, f.name) for f in dataclasses.fields(Snapshot)
                if f.name not in _NOT_PICKLED}
        return _unpickled_tasks, (kept, self.files, self.now_ms, self.splits)

    @property
    def lengths(self) -> np.ndarray:
        """The bytes each task reads (int64)."""
        if self.splits is not None:
            return self.splits.length
        return self.files.table.column("size").to_numpy()

    def take(self, rows: np.ndarray, splits: Splits | None = None) -> "FileScanTasks":
        """The tasks of the files at ``rows`` (of these tasks, each reading its whole file),
        reading the pieces ``splits`` says when given."""
        if self.splits is not None:
            raise ValueError("take() picks rows of whole files; these tasks are pieces already")
        return self._at(rows, splits)

    def slice(self, start: int, stop: int) -> "FileScanTasks":
        """Tasks ``start`` to ``stop`` (no copy)."""
        files = FileTable(self.files.table.slice(start, stop - start), self.files.descriptor)
        return FileScanTasks(self.snapshot, files, self.now_ms,
                             None if self.splits is None else self.splits.slice(start, stop))

    def restricted(self, paths: frozenset[str] | set[str]) -> "FileScanTasks":
        """The tasks of the files among ``paths``."""
        keep = pc.is_in(self.files.paths, value_set=pa.array(sorted(paths), pa.string()))
        rows = np.flatnonzero(keep.to_numpy(zero_copy_only=False))
        return self._at(rows, None if self.splits is None else self.splits.take(rows))

    def _at(self, rows: np.ndarray, splits: Splits | None) -> "FileScanTasks":
        files = FileTable(self.files.table.take(pa.array(rows, pa.int64())), self.files.descriptor)
        return FileScanTasks(self.snapshot, files, self.now_ms, splits)


_NOT_PICKLED = ("files", "index", "transactions", "tags", "branches")  # of a snapshot: a task needs none of them


def _unpickled_tasks(kept: dict, files: FileTable, now_ms: int, splits: Splits | None) -> FileScanTasks:
    return FileScanTasks(Snapshot(files={}, **kept), files, now_ms, splits)


def check_batch_rows(dataset: str, batch_rows: object) -> None:
    """:class:`CdkdsError` unless ``batch_rows`` is a positive whole number."""
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise CdkdsError(f"dataset {dataset!r}: batch_rows must be a positive whole number of rows, got {batch_rows!r}")


def read_plan(store: ObjectStore, plan: ScanPlan, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """The matching rows of the plan's files, batch by batch, in the output columns, every
    file read by cdkds's own reader (:func:`read_task`)."""
    return read_tasks(store, plan, plan.tasks, batch_rows)


def read_tasks(store: ObjectStore, plan: ScanPlan, tasks: Sequence[FileScanTask],
               batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """The matching rows of ``tasks`` (some of the plan's), read by :func:`read_task` a few
    files ahead, pieces of large files side by side."""
    from cdkds.catalog.read.splits import split

    descriptor = plan.snapshot.descriptor
    tasks = split(tasks, SPLIT_BYTES, file_format(descriptor.format).splittable)  # large files in parallel
    yield from read_ahead(functools.partial(read_task, store, descriptor, plan.predicate, plan.columns, task, batch_rows)
                          for task in tasks)


def batch_reader(schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> pa.RecordBatchReader:
    """``batches`` as a ``pyarrow.RecordBatchReader`` whose ``close()`` closes them at once
    (a scan's read-ahead threads stop, its files are closed).

    ``RecordBatchReader.from_batches`` holds on to its iterator until the reader is garbage
    collected, whatever ``close()`` says; a reader imported through the Arrow C stream
    interface releases its source on ``close()``, and that source holds the only reference
    to the iterator."""
    return pa.RecordBatchReader.from_stream(pa.RecordBatchReader.from_batches(schema, batches))


def read_task(store: ObjectStore, descriptor: DatasetDescriptor, predicate: Expression, columns: Sequence[str],
              task: FileScanTask, batch_rows: int = DEFAULT_BATCH_ROWS, positions: bool = False
              ) -> Iterator[pa.RecordBatch]:
    """The rows of one file that survive its tombstones, deletion vectors and TTL and match
    ``predicate``, in ``columns`` (and, with ``positions``, an int64
    :data:`~cdkds.catalog.work_columns.POSITION`: each row's position in the file)."""
    if task.visible is ALWAYS_FALSE:
        return
    predicate = and_(predicate, task.visible)
    referenced = set(references(predicate)).union(*(references(t) for t in task.tombstones))
    needed = list(dict.fromkeys([*columns, *sorted(referenced)]))
    if not needed:
        needed = [next(iter(descriptor.fields))]  # a file must be read to count its rows
    projection = descriptor.projection(needed, task.file.partition, task.file.spec_id)
    output = [*columns, POSITION] if positions else list(columns)
    fmt = file_format(descriptor.format)
    where = store.display(task.file.path)
    row_groups = row_group_filter(predicate)
    try:
        deleted = load_deletes(store, task.file.deletes)
        for start, batch in fmt.scan(store.fs, store.path(task.file.path), projection, batch_rows, task.file.size,
                                     task.split, row_groups):
            if positions:
                batch = batch.append_column(POSITION, pa.array(np.arange(start, start + batch.num_rows, dtype=np.int64)))
            if deleted is not None:
                keep = deleted.keep_mask(start, batch.num_rows)
                if keep is not None:
                    batch = batch.filter(pa.array(keep))
            batch = filter_batch(drop_matching(batch, task.tombstones), predicate)
            if batch.num_rows:
                yield batch.select(output) if batch.schema.names != output else batch
    except Exception as e:  # noqa: BLE001 - named, or passed on, by reading_error
        raise reading_error(e, where, task.file) from None


def row_group_filter(predicate: Expression) -> KeepRowGroup | None:
    """Whether a row group may hold rows matching ``predicate``: the test files pass at
    planning (:func:`may_match`), on the row group's own statistics (``None``: read every
    row group). Parquet's float bounds leave NaN out, which is sound here: a comparison
    with NaN is unknown, never true."""
    if predicate is ALWAYS_TRUE or predicate is ALWAYS_FALSE:
        return None
    return functools.partial(may_match, predicate)


def read_rows(store: ObjectStore, descriptor: DatasetDescriptor, file: AddFile, positions: np.ndarray,
              columns: Sequence[str]) -> pa.Table:
    """The rows of one data file at ``positions`` (sorted, unique) in ``columns`` plus an
    int64 :data:`~cdkds.catalog.work_columns.POSITION` column, conformed to the current
    schema. Parquet files are read only in the row groups that hold them. Deletion vectors
    and TTL are not applied."""
    schema = descriptor.arrow_schema
    projection = descriptor.projection(list(dict.fromkeys(columns)) or [schema.names[0]], file.partition,
                                       file.spec_id)
    positions = np.asarray(positions, dtype=np.int64)
    out_schema = pa.schema([*(schema.field(c) for c in dict.fromkeys(columns)), pa.field(POSITION, pa.int64())])
    where = store.display(file.path)
    pieces = []
    try:
        for start, batch in file_format(descriptor.format).read_at(
                store.fs, store.path(file.path), projection, positions, file.size):
            lo, hi = np.searchsorted(positions, [start, start + batch.num_rows])
            if hi > lo:
                wanted = positions[lo:hi]
                taken = batch.take(pa.array(wanted - start))
                pieces.append(pa.RecordBatch.from_arrays(
                    [*(taken.column(c) for c in dict.fromkeys(columns)), pa.array(wanted)], schema=out_schema))
    except Exception as e:  # noqa: BLE001 - named, or passed on, by reading_error
        raise reading_error(e, where, file) from None
    table = pa.Table.from_batches(pieces, schema=out_schema)
    if table.num_rows != len(positions):
        raise DataFileError(f"data file {where} has {file.row_count} rows; positions beyond it were asked for")
    return table


def reading_error(error: Exception, where: str, file: AddFile) -> Exception:
    """What a failed read of data ``file`` raises: a :class:`DataFileError` naming the file
    and the revision that added it, or the :class:`StorageError` kind of a failed connection;
    other cdkds errors and foreign ones pass unchanged."""
    added = f"added at revision {file.revision}"
    failure = store_failure(error, f"reading data file {where} ({added})", unclassified=False)
    if failure is not None:
        return failure
    if isinstance(error, FileNotFoundError):
        return DataFileError(f"data file {where} ({added}) is missing")
    if isinstance(error, DataFileError):
        return DataFileError(f"{error} ({added})")
    if isinstance(error, CdkdsError) or not isinstance(error, (pa.ArrowException, OSError, ValueError, EOFError)):
        return error
    return DataFileError(f"data file {where} ({added}) is damaged: {type(error).__name__}: {error}")
