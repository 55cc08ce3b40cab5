"""The change feed: the rows each commit inserted, updated or deleted, read from the log.

Planning (:func:`plan_changes`) walks the commits of a range and turns each into a
:class:`CommitChanges`: the rows it took away and the rows it added, as :class:`RowSource`
reads of data files — an added file whole; a removed file's rows live before the commit;
the rows of the files a tombstone matched; the rows at the positions a deletion vector
added. Nothing is scanned to find them: the log names the files, and on keyed datasets the
deletion vectors name the rows (the record index found them when the write was planned).
Reading (:func:`read_changes`) turns a plan into Arrow batches with three more columns:
``_change_type``, ``_commit_version`` and ``_commit_timestamp``. On a keyed dataset, the rows
of one key a commit took away and added are an ``update_preimage`` and an
``update_postimage``; elsewhere a commit's removed rows are ``delete`` and its added rows
``insert``. Compactions change no rows and yield nothing; neither does expiry by TTL,
which is not a commit (the feed holds the rows as stored).

Each commit is read with the descriptor in effect at it, and its rows are given in the
schema of the range's last revision (fields matched by id, as data files are read).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np
import pyarrow as pa

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import ExpressionError, InvalidTimeTravelError
from cdkds.catalog.expressions import ALWAYS_TRUE, Expression, bind
from cdkds.catalog.expressions.pruning import FileFilter
from cdkds.catalog.keyed.deletion import DeletionVectorRef, load_deletes
from cdkds.catalog.keyed.keys import RecordKey
from cdkds.catalog.log.actions import AddFile, DeleteRows, RemoveFile, Tombstone
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.read.columns import select_columns
from cdkds.catalog.read.scan import FileScanTask, read_rows, read_task
from cdkds.catalog.storage import ObjectStore
from cdkds.catalog.work_columns import POSITION
from cdkds.formats.projection import Projection
from cdkds.formats.schema import to_arrow

if TYPE_CHECKING:
    from cdkds.catalog.log import TransactionLog
    from cdkds.catalog.log.commit import Commit

INSERT = "insert"
UPDATE_PREIMAGE = "update_preimage"
UPDATE_POSTIMAGE = "update_postimage"
DELETE = "delete"
CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
CHANGE_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)
CHANGE_FIELDS = (pa.field(CHANGE_TYPE, pa.string(), False), pa.field(COMMIT_VERSION, pa.int64(), False),
                 pa.field(COMMIT_TIMESTAMP, pa.timestamp("us", tz="UTC"), False))
NO_DATA_CHANGE = frozenset({"compact"})  # operations that rewrite rows without changing them


@dataclass(frozen=True)
class RowSource:
    """Rows of one data file that a commit added or took away: those of ``task`` (read with
    ``descriptor``) matching ``predicate``, or only those at the positions of ``positions``."""

    task: FileScanTask
    descriptor: DatasetDescriptor
    predicate: Expression = ALWAYS_TRUE
    positions: DeletionVectorRef | None = None


@dataclass(frozen=True)
class CommitChanges:
    """What one commit changed: the rows it took away and the rows it added. ``paired``:
    rows of one record key on both sides are an update (a keyed write)."""

    revision: int
    timestamp: int
    removed: tuple[RowSource, ...]
    added: tuple[RowSource, ...]
    paired: bool = False

    def split(self) -> list["CommitChanges"]:
        """Parts that can be read independently (one per file, unless rows are paired)."""
        if self.paired:
            return [self]
        return ([CommitChanges(self.revision, self.timestamp, (s,), ()) for s in self.removed]
                + [CommitChanges(self.revision, self.timestamp, (), (s,)) for s in self.added])


@dataclass(frozen=True)
class ChangePlan:
    """The changes of revisions ``start`` to ``end``, given in the columns ``columns`` of
    ``descriptor`` (the descriptor at ``end``) plus the change columns."""

    dataset: str
    start: int
    end: int
    descriptor: DatasetDescriptor
    columns: tuple[str, ...]
    commits: tuple[CommitChanges, ...]

    @property
    def output_schema(self) -> pa.Schema:
        return change_schema(self.descriptor, self.columns)


def change_schema(descriptor: DatasetDescriptor, columns: Sequence[str]) -> pa.Schema:
    """The schema of change rows: the columns, then the change columns."""
    schema = descriptor.arrow_schema
    return pa.schema([*(schema.field(c) for c in columns), *CHANGE_FIELDS])


def change_columns(dataset: str, descriptor: DatasetDescriptor, columns: Sequence[str] | None) -> tuple[str, ...]:
    """The dataset columns a change feed gives (``columns``, default: all) before the change
    columns; :class:`ExpressionError` when one is named like a change column (in any case:
    Spark resolves names so), as the feed's rows could not hold both."""
    selected = select_columns(dataset, descriptor, columns)
    reserved = {c.lower() for c in CHANGE_COLUMNS}
    for c in selected:
        if c.lower() in reserved:
            raise ExpressionError(f"dataset {dataset!r}: field {c!r} has the name of a change feed column "
                                  f"({', '.join(CHANGE_COLUMNS)}); read the change feed with columns that "
                                  f"leave it out, or rename the field (dataset.alter().rename)")
    return selected


def plan_changes(log: "TransactionLog", start: int, end: int | None = None,
                 columns: Sequence[str] | None = None) -> ChangePlan:
    """The changes of revisions ``start`` to ``end`` (default: the latest), both included;
    with no ``end``, ``start`` may be the revision after the latest (no changes yet)."""
    name = log.dataset
    for what, value in (("start_version", start), ("end_version", end)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise InvalidTimeTravelError(f"dataset {name!r}: the change feed's {what} must be a revision (an "
                                         f"integer >= 0), got {value!r}")
    if end is not None and end < start:
        raise InvalidTimeTravelError(f"dataset {name!r}: the change feed's end_version {end} is before its "
                                     f"start_version {start}")
    last = log.snapshot(version=end)
    selected = change_columns(name, last.descriptor, columns)
    if start == last.version + 1 and end is None:
        return ChangePlan(name, start, last.version, last.descriptor, selected, ())
    if start > last.version:
        raise InvalidTimeTravelError(f"dataset {name!r} has no revision {start}; its latest is {last.version}")
    branch = log.branch
    if branch is not None and start <= branch.base:
        raise InvalidTimeTravelError(f"dataset {name!r}, branch {branch.name!r} starts at revision {branch.base}: its "
                                     f"change feed starts at revision {branch.base + 1} (read main's for revision "
                                     f"{start})")
    oldest = log.replay.oldest().version  # 0, or after expiry the checkpoint the retained commits continue
    expired = InvalidTimeTravelError(
        f"dataset {name!r}: the change feed from revision {start} needs the commits after revision {start - 1}, "
        f"which have been expired from the log; the oldest change feed starts at revision {oldest + 1}")
    if oldest > 0 and start - 1 < oldest:  # commit 0 itself is never expired, the commits after it may be
        raise expired
    try:
        before = log.replay.first() if start == 0 else log.snapshot(version=start - 1)
    except InvalidTimeTravelError:
        raise expired from None
    commits = []
    for commit, after in log.replay.walk(before, upto=last.version):
        changes = commit_changes(before, commit, after)
        if changes is not None:
            commits.append(changes)
        before = after
    return ChangePlan(name, start, last.version, last.descriptor, selected, tuple(commits))


def first_revision_since(log: "TransactionLog", timestamp: Any) -> int:
    """The first revision committed at or after ``timestamp`` (a datetime, ISO text or epoch
    milliseconds); the revision after the latest when there is none yet."""
    from cdkds.catalog.log.commit import millis

    at = millis(timestamp)
    if log.replay.first().timestamp >= at:
        return 0
    return log.snapshot(timestamp=at - 1).version + 1


def commit_changes(before: Snapshot, commit: "Commit", after: Snapshot) -> CommitChanges | None:
    """What ``commit`` changed in ``before`` (it made ``after``); ``None`` if no rows."""
    if before.descriptor is None or commit.operation in NO_DATA_CHANGE:
        return None
    old = before.descriptor
    removed_files = {a.path for a in commit.actions if isinstance(a, RemoveFile) and a.path in before.files}
    removed: list[RowSource] = []
    for path in sorted(removed_files):
        removed.append(RowSource(_task(before, before.files[path]), old))
    for tombstone in (a for a in commit.actions if isinstance(a, Tombstone)):
        predicate = bind(tombstone.predicate, old.fields)
        matches = FileFilter.of(predicate, old)
        for f in sorted(before.files.values(), key=lambda f: f.path):
            if f.path not in removed_files and matches.may_match(f):
                removed.append(RowSource(_task(before, f), old, predicate))
    for deleted in (a for a in commit.actions if isinstance(a, DeleteRows)):
        if deleted.path in before.files and deleted.path not in removed_files:
            removed.append(RowSource(_task(before, before.files[deleted.path]), old, positions=deleted.vector))
    added = [RowSource(FileScanTask(after.files[a.path]), after.descriptor)
             for a in commit.actions if isinstance(a, AddFile) and a.path in after.files]
    if not removed and not added:
        return None
    paired = bool(after.descriptor.record_key) and not removed_files and bool(removed) and bool(added)
    return CommitChanges(commit.revision, commit.timestamp, tuple(removed), tuple(added), paired)


def _task(snapshot: Snapshot, file: AddFile) -> FileScanTask:
    """How to read the rows of ``file`` that are live in ``snapshot`` (TTL aside)."""
    return FileScanTask(file, tuple(t.predicate for t in snapshot.tombstones_for(file)))


# ---------------------------------------------------------------- reading

def read_changes(store: ObjectStore, plan: ChangePlan) -> Iterator[pa.RecordBatch]:
    """The change rows of a plan, commit by commit."""
    output = plan.descriptor.projection(plan.columns)
    for changes in plan.commits:
        yield from read_commit(store, changes, output)


def read_commit(store: ObjectStore, changes: CommitChanges, output: Projection) -> Iterator[pa.RecordBatch]:
    """The change rows of one commit (or part of one), in the fields of ``output``."""
    stamp = (changes.revision, changes.timestamp)
    if not changes.paired:
        for sources, kind in ((changes.removed, DELETE), (changes.added, INSERT)):
            for source in sources:
                for batch in _rows(store, source):
                    yield _labelled(batch, source.descriptor, output, np.full(batch.num_rows, kind, object), *stamp)
        return
    removed = [(s, b) for s in changes.removed for b in _rows(store, s)]
    added = [(s, b) for s in changes.added for b in _rows(store, s)]
    dataset = store.url.rsplit("/", 1)[-1]
    removed_keys = {k for s, b in removed for k in _keys(b, s.descriptor, dataset)}
    added_keys = {k for s, b in added for k in _keys(b, s.descriptor, dataset)}
    for side, other, (paired, alone) in ((removed, added_keys, (UPDATE_PREIMAGE, DELETE)),
                                         (added, removed_keys, (UPDATE_POSTIMAGE, INSERT))):
        for source, batch in side:
            keys = _keys(batch, source.descriptor, dataset)
            kinds = np.array([paired if k in other else alone for k in keys], object)
            yield _labelled(batch, source.descriptor, output, kinds, *stamp)


def _rows(store: ObjectStore, source: RowSource) -> Iterator[pa.RecordBatch]:
    """The rows of a source, in all the fields of its descriptor."""
    names = list(source.descriptor.fields)
    if source.positions is None:
        yield from read_task(store, source.descriptor, source.predicate, names, source.task)
        return
    positions = source.positions.load(store).to_numpy().astype(np.int64)
    earlier = load_deletes(store, source.task.file.deletes)
    if earlier is not None:
        positions = np.setdiff1d(positions, earlier.to_numpy().astype(np.int64))
    if len(positions):
        yield from read_rows(store, source.descriptor, source.task.file, positions, names).drop_columns(
            [POSITION]).to_batches()


def _keys(batch: pa.RecordBatch, descriptor: DatasetDescriptor, dataset: str) -> list[tuple]:
    """The record key of each row, as the index holds it (normalised as every keyed entry
    point normalises keys)."""
    key = RecordKey.of(descriptor, dataset)
    keys = key.conform(batch.select(list(key.names)), "stored row")
    return list(zip(*(keys.column(k).to_pylist() for k in key.names)))


def _labelled(batch: pa.RecordBatch, descriptor: DatasetDescriptor, output: Projection, kinds: np.ndarray,
              revision: int, timestamp: int) -> pa.RecordBatch:
    """``batch`` (all fields of ``descriptor``) in the fields of ``output``, matched by id,
    with the change columns."""
    with_ids = batch.cast(to_arrow(descriptor.schema, ids=True))
    rows = output.resolve(with_ids.schema, "change feed").apply(with_ids)
    n = batch.num_rows
    return pa.RecordBatch.from_arrays(
        [*rows.columns, pa.array(kinds, pa.string()), pa.array(np.full(n, revision, np.int64)),
         pa.array(np.full(n, timestamp * 1000, np.int64)).cast(pa.timestamp("us", tz="UTC"))],
        schema=pa.schema([*rows.schema, *CHANGE_FIELDS]))
