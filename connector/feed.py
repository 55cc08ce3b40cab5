"""What a cdkds stream reads, planned from the log alone: positions in the log, what each
commit gives a stream of appends, and micro-batches of files within a budget.

A stream is a sequence of data files: optionally the live files of the snapshot it
started on, then the files each later commit added, each run sorted by path. A
:class:`StreamPosition` says how far the stream has gone: every file before file
``index`` of revision ``revision`` (of its snapshot, for the first run) has been emitted.
Positions are rebuilt from the log at any time, so a query restarted from its checkpoint
resumes exactly where it stopped; :class:`StreamLog` keeps the commits it read only to
avoid reading them twice.

Per commit (:class:`StreamCommit`): files added by a pure append (insert-only keyed writes
included) are streamed as they were added; commits that change no rows (compaction,
descriptor changes, index rebuilds, commits of transactions only) are passed over; a commit
that removes files or deletes rows cannot be followed by a stream of appends, and fails
the stream unless the stream skips such commits whole (``skipChangeCommits``, as Delta).
Every file is read with the stream's descriptor (the latest when the query started),
columns matched by field id; a later descriptor change that drops, renames or retypes a
column the stream outputs fails the stream, additive ones do not.

Nothing here needs Spark: :mod:`cdkds.connector.streaming` adapts it to Spark's stream reader.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterator, Sequence

from cdkds.catalog.read.changes import NO_DATA_CHANGE, first_revision_since
from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import CdkdsError, CorruptLogError, InvalidTimeTravelError
from cdkds.catalog.expressions import ALWAYS_TRUE, Expression, and_, bind
from cdkds.catalog.expressions.pruning import FileFilter
from cdkds.catalog.keyed.ttl import TimeToLive
from cdkds.catalog.log import TransactionLog
from cdkds.catalog.log.commit import Commit
from cdkds.catalog.log.actions import AddFile, DeleteRows, RemoveFile, SetMetadata, Tombstone, evolve_statistics
from cdkds.catalog.log.snapshot import Snapshot, rename, top_level_renames
from cdkds.catalog.read.scan import FileScanTask
from cdkds.connector.options import InvalidOptionError, StreamStart, output_columns



class StreamingReadError(CdkdsError):
    """A stream cannot go on: a commit it cannot follow, a change of its output columns, or
    a revision it needs has been expired from the log."""


# ---------------------------------------------------------------- positions

@dataclass(frozen=True)
class StreamPosition:
    """Everything before file ``index`` of revision ``revision`` has been emitted: of the
    files its commit added, or, with ``snapshot``, of the live files of the snapshot at it."""

    revision: int
    index: int = 0
    snapshot: bool = False

    @property
    def key(self) -> tuple[int, int, int]:
        """Stream order: a snapshot holds its revision's commit, and precedes the next one."""
        return self.revision, int(self.snapshot), self.index

    def next_run(self) -> "StreamPosition":
        """The start of the run after this one: the next commit's files."""
        return StreamPosition(self.revision + 1)

    def at(self, index: int) -> "StreamPosition":
        return dataclasses.replace(self, index=index)

    def to_json(self) -> dict:
        return {"revision": self.revision, "index": self.index, "snapshot": self.snapshot}

    @classmethod
    def from_json(cls, data: Any) -> "StreamPosition":
        revision, index, snapshot = data["revision"], data["index"], data["snapshot"]
        if not (isinstance(revision, int) and isinstance(index, int) and isinstance(snapshot, bool)) \
                or isinstance(revision, bool) or isinstance(index, bool) or revision < 0 or index < 0:
            raise TypeError("revision and index must be integers >= 0, snapshot a boolean")
        return cls(revision, index, snapshot)


INITIAL_OFFSET = {"initial": True}  # a new query's start, resolved when its first batch is planned


@dataclass(frozen=True)
class StreamOffset:
    """Spark's offset of a cdkds stream: its position, and its origin (where its first batch
    started). Spark plans a query's first batch from the initial offset again when it
    replays it after a restart; the origin in that batch's end says where it really began
    (a new query starts at the latest revision, which may have moved since)."""

    position: StreamPosition
    origin: StreamPosition

    def to_json(self) -> dict:
        """JSON for Spark (which compares offsets by their text: keys keep this order)."""
        return {**self.position.to_json(), "origin": self.origin.to_json()}

    @staticmethod
    def is_initial(offset: Any) -> bool:
        return offset == INITIAL_OFFSET

    @classmethod
    def from_json(cls, offset: Any, dataset: str) -> "StreamOffset":
        try:
            return cls(StreamPosition.from_json(offset), StreamPosition.from_json(offset["origin"]))
        except (KeyError, TypeError) as e:
            raise StreamingReadError(f"dataset {dataset!r}: the stream offset {offset!r} is not a cdkds offset "
                                     f"({e}); was the checkpoint written by another source?") from None


@dataclass(frozen=True)
class Budget:
    """How much one micro-batch may take: files, bytes and rows (``None``: no bound). The
    bounds are soft for bytes and rows: a batch always takes at least one file."""

    files: int | None = None
    bytes: int | None = None
    rows: int | None = None

    def admits(self, taken: "Taken", file: AddFile) -> bool:
        if taken.files == 0:
            return True
        return ((self.files is None or taken.files < self.files)
                and (self.bytes is None or taken.bytes + file.size <= self.bytes)
                and (self.rows is None or taken.rows + file.row_count <= self.rows))


@dataclass(frozen=True)
class Taken:
    files: int = 0
    bytes: int = 0
    rows: int = 0

    def plus(self, file: AddFile) -> "Taken":
        return Taken(self.files + 1, self.bytes + file.size, self.rows + file.row_count)


# ---------------------------------------------------------------- commits

class CommitKind(Enum):
    APPEND = "append"  # added files only: streamed
    NO_DATA = "no data"  # changes no rows: passed over
    CHANGE = "change"  # removes or deletes rows: fails the stream, or is skipped whole


@dataclass(frozen=True)
class StreamCommit:
    """One commit as a stream sees it: its kind, the files it added (sorted by path, with
    their commit's revision and time; statistics as written, under ``files_descriptor``),
    and the descriptor in effect after it (``descriptor_changed``: it set one)."""

    revision: int
    uuid: str
    timestamp: int
    operation: str
    kind: CommitKind
    files: tuple[AddFile, ...]
    files_descriptor: DatasetDescriptor
    descriptor: DatasetDescriptor
    descriptor_changed: bool


def stream_commit(commit: Commit, before: DatasetDescriptor) -> StreamCommit:
    """What ``commit`` (decoded with ``before``, the descriptor in effect before it) gives a stream."""
    actions = commit.actions
    adds = sorted((a.landed(commit.revision, commit.timestamp) for a in actions if isinstance(a, AddFile)),
                  key=lambda a: a.path)
    changes = any(isinstance(a, (RemoveFile, Tombstone, DeleteRows)) for a in actions)
    if commit.operation in NO_DATA_CHANGE or (not changes and not adds):
        kind = CommitKind.NO_DATA
    else:
        kind = CommitKind.CHANGE if changes else CommitKind.APPEND
    descriptor, files_descriptor = before, before
    for action in actions:
        if isinstance(action, SetMetadata):
            descriptor = action.descriptor
        elif isinstance(action, AddFile):
            files_descriptor = descriptor  # adds are decoded with the descriptor in effect at them
    changed = any(isinstance(a, SetMetadata) for a in actions)
    return StreamCommit(commit.revision, commit.uuid, commit.timestamp, commit.operation, kind, tuple(adds),
                        files_descriptor, descriptor, changed)


class StreamLog:
    """The commits of one dataset as streams read them, checked along the chain, with the
    ones read kept until :meth:`forget_before` (a cache: any revision can be read again)."""

    def __init__(self, log: TransactionLog):
        self.log = log
        self.dataset = log.dataset
        self._commits: dict[int, StreamCommit] = {}
        self._snapshot: Snapshot | None = None
        self._snapshot_files: tuple[AddFile, ...] = ()
        self._before: tuple[int, DatasetDescriptor, str | None] | None = None  # the state before an unread commit

    def latest(self) -> Snapshot:
        return self.log.snapshot()

    def snapshot(self, revision: int) -> Snapshot:
        """The snapshot at ``revision`` (a stream's first run); :class:`StreamingReadError` when expired."""
        if self._snapshot is None or self._snapshot.version != revision:
            try:
                snapshot = self.log.snapshot(version=revision)
            except InvalidTimeTravelError:
                raise self._expired(revision, "its snapshot") from None
            self._snapshot = snapshot
            self._snapshot_files = tuple(sorted(snapshot.files.values(), key=lambda f: f.path))
        return self._snapshot

    def snapshot_files(self, revision: int) -> tuple[AddFile, ...]:
        """The live files of the snapshot at ``revision``, sorted by path."""
        self.snapshot(revision)
        return self._snapshot_files

    def commit(self, revision: int) -> StreamCommit | None:
        """Commit ``revision``; ``None`` when it has not been written yet."""
        cached = self._commits.get(revision)
        if cached is not None:
            return cached
        previous = self._commits.get(revision - 1)
        if previous is not None:
            before, previous_uuid = previous.descriptor, previous.uuid
        elif self._before is not None and self._before[0] == revision:
            _, before, previous_uuid = self._before
        else:
            before, previous_uuid = self._state_before(revision)
            self._before = (revision, before, previous_uuid)  # a stream polls the next commit until it comes
        while True:
            commit = self.log.listing.commit(revision, before)
            if commit is not None:
                break
            if not self._written_meanwhile(revision):
                return None
        if previous_uuid is not None and commit.previous != previous_uuid:
            raise CorruptLogError(f"dataset {self.dataset!r}: commit {revision} follows {commit.previous!r}, but "
                                  f"commit {revision - 1} is {previous_uuid!r}; the log's chain is broken")
        entry = stream_commit(commit, before)
        self._commits[revision] = entry
        return entry

    def forget_before(self, revision: int) -> None:
        """Drop the commits before ``revision`` (a stream that committed its offset never rereads them)."""
        for r in [r for r in self._commits if r < revision - 1]:  # keep one: the next commit chains onto it
            del self._commits[r]
        if self._snapshot is not None and self._snapshot.version < revision - 1:
            self._snapshot, self._snapshot_files = None, ()

    def first_since(self, timestamp_ms: int) -> int:
        """The first revision committed at or after ``timestamp_ms``; the next one when there is none yet."""
        try:
            return first_revision_since(self.log, timestamp_ms)
        except InvalidTimeTravelError as e:
            raise StreamingReadError(
                f"dataset {self.dataset!r}: option startingTimestamp={timestamp_ms} ms reaches back to revisions that "
                f"have been expired from the log ({e}); give a later startingTimestamp or a startingVersion at or "
                f"after {self._oldest()}") from None

    # ---------------------------------------------------------------- internals

    def _state_before(self, revision: int) -> tuple[DatasetDescriptor, str | None]:
        """The descriptor in effect before ``revision`` and the uuid of the commit before it
        (``None`` when only the state at ``revision`` itself is retained)."""
        if revision == 0:
            return None, None  # type: ignore[return-value] - commit 0 sets the first descriptor
        try:
            before = self.log.snapshot(version=revision - 1)
            return before.descriptor, before.commit_uuid
        except InvalidTimeTravelError:
            pass
        try:  # the oldest retained state may be a checkpoint at this very revision
            at = self.log.snapshot(version=revision)
        except InvalidTimeTravelError:
            raise self._expired(revision, f"commit {revision}") from None
        return at.descriptor, None

    def _written_meanwhile(self, revision: int) -> bool:
        """Whether the missing commit ``revision`` has appeared since it was read; raises when
        later ones exist: it was expired, or the log has a hole."""
        listing = self.log.listing.list()
        if revision in listing.commits:
            return True
        later = listing.beyond(revision)
        if later is None:
            return False
        if listing.expired and revision < listing.suffix_start:
            raise self._expired(revision, f"commit {revision}")
        raise CorruptLogError(f"dataset {self.dataset!r}: commit {revision} is missing but {later} exists; "
                              f"the log has a hole")

    def _oldest(self) -> int:
        listing = self.log.listing.list()
        return listing.suffix_start if listing.expired else 0

    def _expired(self, revision: int, what: str) -> StreamingReadError:
        oldest = self._oldest()
        return StreamingReadError(
            f"dataset {self.dataset!r}: the stream needs revision {revision}, but {what} has been expired from the "
            f"log (the oldest revision a stream can start at is {oldest}); start the query from a new checkpoint "
            f"with option startingVersion at or after {oldest} (or without it: the latest snapshot)")


# ---------------------------------------------------------------- the feed

@dataclass(frozen=True)
class _FileStep:
    position: StreamPosition
    file: AddFile


@dataclass(frozen=True)
class _RunEnd:
    next: StreamPosition


@dataclass(frozen=True)
class _Blocked:
    error: StreamingReadError


class StreamFeed:
    """The files of one stream: where it starts, how far a micro-batch goes, and how to read
    the files between two positions. The stream's descriptor is ``latest``'s (the query
    started on it), taking on the partition specs of later commits; ``columns`` are the columns it outputs; ``where`` prunes files and filters rows."""

    def __init__(self, log: StreamLog, latest: Snapshot, columns: Sequence[str], where: Expression,
                 skip_change_commits: bool):
        self.log = log
        self.dataset = log.dataset
        self.descriptor = latest.descriptor
        self.descriptor_version = latest.descriptor_version
        self.fields = self.descriptor.fields
        self.columns = output_columns(self.dataset, self.descriptor, columns)
        try:
            self.predicate = bind(where, self.fields, self.dataset)
        except CdkdsError as e:
            raise InvalidOptionError(f"dataset {self.dataset!r}: option where: {e}") from None
        self.matches = FileFilter.of(self.predicate, self.descriptor)
        self.skip_change_commits = skip_change_commits
        self._ttl = TimeToLive.of(self.descriptor)

    # ---------------------------------------------------------------- planning

    def initial(self, start: StreamStart) -> StreamPosition:
        """The first position of a new query."""
        latest = self.log.latest()
        if start.kind == "snapshot":
            return StreamPosition(latest.version, 0, snapshot=True)
        if start.kind == "latest":
            return StreamPosition(latest.version + 1)
        if start.kind == "version":
            revision = start.value
            if revision > latest.version:
                raise InvalidOptionError(f"dataset {self.dataset!r}: option startingVersion={revision}, but the "
                                         f"latest revision is {latest.version}")
        else:
            revision = self.log.first_since(start.value)
        self.log.commit(revision)  # fails now if it has been expired
        return StreamPosition(revision)

    def advance(self, start: StreamPosition, budget: Budget, until: StreamPosition | None = None) -> StreamPosition:
        """How far a micro-batch from ``start`` goes within ``budget``, never at or past
        ``until``; ``start`` itself when there is nothing new. A commit the stream cannot
        follow ends the batch before it, and fails the batch that would start with it."""
        end, taken = start, Taken()
        for step in self._steps(start, until):
            if isinstance(step, _RunEnd):
                end = step.next
            elif isinstance(step, _FileStep):
                if not budget.admits(taken, step.file):
                    return step.position
                taken = taken.plus(step.file)
                end = step.position.at(step.position.index + 1)
            else:
                if taken.files:
                    return end
                raise step.error
        return end

    def tasks(self, start: StreamPosition, end: StreamPosition, now_ms: int) -> list[FileScanTask]:
        """How to read the files from ``start`` to ``end``, rows expired by TTL at ``now_ms`` left out."""
        tasks = []
        for step in self._steps(start, end):
            if isinstance(step, _Blocked):
                raise step.error
            if isinstance(step, _FileStep):
                task = self._task(step, now_ms)
                if task is not None:
                    tasks.append(task)
        return tasks

    # ---------------------------------------------------------------- internals

    def _steps(self, start: StreamPosition, until: StreamPosition | None) -> Iterator[_FileStep | _RunEnd | _Blocked]:
        """The files that may match from ``start`` on, and the end of each run, up to ``until``."""
        position = start
        while until is None or position.key < until.key:
            run = self._run(position)
            if run is None:
                return
            if isinstance(run, StreamingReadError):
                yield _Blocked(run)
                return
            for index in range(position.index, len(run)):
                step = _FileStep(position.at(index), run[index])
                if until is not None and step.position.key >= until.key:
                    return
                if self.matches.may_match(step.file) and step.file.may_have_live_rows:
                    yield step
            position = position.next_run()
            yield _RunEnd(position)

    def _run(self, position: StreamPosition) -> tuple[AddFile, ...] | StreamingReadError | None:
        """The files of the run at ``position`` (statistics under the stream's descriptor); an
        empty run for a commit passed over; the error of one the stream cannot follow; ``None``
        past the end of the log."""
        if position.snapshot:
            files = self.log.snapshot_files(position.revision)
            return self._as_stream(files, self.log.snapshot(position.revision).descriptor)
        commit = self.log.commit(position.revision)
        if commit is None:
            return None
        if commit.descriptor_changed and commit.revision > self.descriptor_version:
            problem = breaking_change(self.descriptor, commit.descriptor, self.columns)
            if problem is not None:
                return StreamingReadError(
                    f"dataset {self.dataset!r}: revision {commit.revision} ({commit.operation!r}) {problem}, a column "
                    f"this stream outputs; restart the query to read with the new schema (from a new checkpoint if "
                    f"its sink or state cannot take the change)")
        if commit.kind is CommitKind.NO_DATA:
            return ()
        if commit.kind is CommitKind.CHANGE:
            if self.skip_change_commits:
                return ()
            return StreamingReadError(
                f"dataset {self.dataset!r}: revision {commit.revision} ({commit.operation!r}) removes or deletes rows, "
                f"which a stream of appends cannot follow; set option skipChangeCommits=true to skip such commits "
                f"whole (the rows they add too), or start a new query after it (option startingVersion="
                f"{commit.revision + 1})")
        problem = self._learn_specs(commit.files_descriptor, commit.revision)
        if problem is not None:
            return problem
        return self._as_stream(commit.files, commit.files_descriptor)

    def _learn_specs(self, descriptor: DatasetDescriptor, revision: int) -> StreamingReadError | None:
        """Take on the partition specs of ``descriptor`` (files of ``revision`` are written with
        them) that the stream's descriptor lacks, so that each file is pruned and read by its
        own spec; the error when the stream cannot (a spec partitions by a field it does not have)."""
        if set(descriptor.partition_specs) <= set(self.descriptor.partition_specs):
            return None
        try:
            layout = descriptor.with_schema(self.descriptor.schema)  # sources named as the stream names them
        except CdkdsError as e:
            return StreamingReadError(
                f"dataset {self.dataset!r}: revision {revision} changed the partitioning in a way this stream cannot "
                f"follow ({e}); restart the query to read with the new schema")
        self.descriptor = self.descriptor.replace(partition_strategy=layout.partition_strategy,
                                                  partition_specs=dict(layout.partition_specs),
                                                  partition_spec_id=layout.partition_spec_id)
        self.fields = self.descriptor.fields
        self.matches = FileFilter.of(self.predicate, self.descriptor)
        return None

    def _as_stream(self, files: Sequence[AddFile], descriptor: DatasetDescriptor) -> tuple[AddFile, ...]:
        """``files`` (statistics under ``descriptor``) with statistics under the stream's descriptor."""
        if descriptor is self.descriptor or descriptor == self.descriptor:
            return tuple(files)
        moved = evolve_statistics({f.path: f for f in files}, descriptor, self.descriptor)
        return tuple(moved[f.path] for f in files)

    def _task(self, step: _FileStep, now_ms: int) -> FileScanTask | None:
        file = step.file
        tombstones: tuple[Expression, ...] = ()
        if step.position.snapshot:  # the snapshot's deletes; a commit's files are read as they were added
            snapshot = self.log.snapshot(step.position.revision)
            tombstones = tuple(t.predicate for t in snapshot.tombstones_for(snapshot.files[file.path]))
            if tombstones and snapshot.descriptor != self.descriptor:
                renames = top_level_renames(snapshot.descriptor, self.descriptor)
                tombstones = tuple(bind(rename(t, renames), self.fields) for t in tombstones)
        visible = ALWAYS_TRUE
        if self._ttl is not None:
            visible = bind(self._ttl.visible(now_ms, file), self.fields)
            if not FileFilter.of(and_(self.predicate, visible), self.descriptor).may_match(file):
                return None
        return FileScanTask(file, tombstones, visible)


def breaking_change(old: DatasetDescriptor, new: DatasetDescriptor, columns: Sequence[str]) -> str | None:
    """How ``new`` breaks one of ``columns`` of ``old`` for a stream that outputs them:
    dropped, renamed, retyped or made nullable (by field id); ``None`` when it does not."""
    ids = old.field_ids
    names = {i: n for n, i in new.field_ids.items()}
    ours, theirs = old.arrow_schema, new.arrow_schema
    for column in columns:
        name = names.get(ids[column])
        if name is None:
            return f"drops column {column!r}"
        if name != column:
            return f"renames column {column!r} to {name!r}"
        before, now = ours.field(column), theirs.field(name)
        if not before.type.equals(now.type):
            return f"changes the type of column {column!r} from {before.type} to {now.type}"
        if now.nullable and not before.nullable:
            return f"makes column {column!r} nullable"
    return None
