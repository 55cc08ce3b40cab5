"""Spark Structured Streaming for cdkds: a source of appended rows and an exactly-once sink.

Source (``spark.readStream.format("cdkds").load(url)``): the driver plans micro-batches of
data files from the log (:mod:`cdkds.connector.feed`): the latest snapshot when the query
first starts (unless a starting revision or time is given), then the files each later
commit added. An offset is a position in that sequence, rebuilt from the log alone, so a
query restarted from its checkpoint resumes exactly where it stopped. Executors read the
files as batch reads do.

Sink (``df.writeStream.format("cdkds").start(url)``): each micro-batch is one commit, which
records the batch as a :class:`SetTransaction` of the query (its id, which a restart from
the same checkpoint keeps). A batch Spark replays after a failure — committed to cdkds, but
not yet to Spark's checkpoint — finds itself recorded and commits nothing. Output modes:
``append`` appends (on a keyed dataset: upserts, or what option ``operation`` says);
``complete`` replaces the whole dataset with each batch. Spark refuses ``update`` for
Python sinks (pyspark 4.3: "does not support Update mode"); a keyed dataset in ``append``
mode gives its effect for a stream of rows.

Spark imports this module only when a stream is planned (see :mod:`cdkds.connector.source`).
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from pyspark.sql.datasource import DataSourceStreamArrowWriter, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadLimit, ReadMaxBytes, ReadMaxFiles, ReadMaxRows, SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from cdkds.catalog.errors import CdkdsError, CommitConflictError
from cdkds.catalog.log.actions import SetTransaction
from cdkds.catalog.log.commit import clock
from cdkds.catalog.read.splits import pack
from cdkds.connector.feed import INITIAL_OFFSET, Budget, StreamFeed, StreamLog, StreamOffset, StreamPosition
from cdkds.connector.options import InvalidOptionError, Location, StreamReadOptions, location, stream_read_options, write_location
from cdkds.connector.source import FileGroup, open_dataset, read_group
from cdkds.connector.writer import CdkdsCommitMessage, CdkdsWriter, StagedRows, commit_once, plan_write

if TYPE_CHECKING:
    import pyarrow as pa

    from cdkds.catalog import DatasetDescriptor

QUERY_ID_PROPERTY = "sql.streaming.queryId"  # Spark's local properties of a streaming task
BATCH_ID_PROPERTY = "streaming.sql.batchId"
KEYED_ATTEMPTS = 10  # a keyed batch re-planned after concurrent writes to the same keys


# ---------------------------------------------------------------- the source

def plan_stream_read(options: Mapping[str, str], schema: StructType) -> "CdkdsStreamReader":
    """A stream reader for ``options``, checked; it reads nothing until Spark asks."""
    where = location(options)
    return CdkdsStreamReader(where, stream_read_options(options, where.view, where.name), schema)


class CdkdsStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The cdkds stream source (see the module docstring). Spark builds one on the driver,
    which keeps it for the query, and one per planning, pickled to executors for
    :meth:`read`; the driver's state (the log it read) is never pickled."""

    def __init__(self, where: Location, options: StreamReadOptions, schema: StructType):
        self.where = where
        self.options = options
        self.schema = schema
        self._feed: StreamFeed | None = None
        self._until: StreamPosition | None = None  # Trigger.AvailableNow: nothing at or after it
        self._origin: StreamPosition | None = None  # where this run of a new query starts

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_feed": None}

    @property
    def feed(self) -> StreamFeed:
        if self._feed is None:
            dataset = open_dataset(self.where)
            self._feed = StreamFeed(StreamLog(dataset.log), dataset.snapshot, [f.name for f in self.schema.fields],
                                    self.options.where, self.options.skip_change_commits)
        return self._feed

    def initialOffset(self) -> dict:  # noqa: N802 - Spark's names
        return dict(INITIAL_OFFSET)  # the same at every call: Spark calls it again to replay a first batch

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        if self.options.max_bytes is not None:
            return ReadMaxBytes(self.options.max_bytes)
        return ReadMaxFiles(self.options.max_files)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:  # noqa: N802
        begin = self.offset(start)
        end = self.feed.advance(begin.position, self.budget(limit), self._until)
        if end == begin.position and not StreamOffset.is_initial(start):
            return start
        # a new query's first offset is resolved even when nothing is new: Spark plans the first batch
        # from the initial offset to this one, and the origin it records is where the query starts
        return StreamOffset(end, begin.origin).to_json()

    def offset(self, offset: dict, end: dict | None = None) -> StreamOffset:
        """Spark's ``offset``, the initial one resolved: to the origin ``end`` records (a
        replayed first batch), else to where this run of a new query starts (the first
        time it is asked, so every batch of the run agrees)."""
        if not StreamOffset.is_initial(offset):
            return StreamOffset.from_json(offset, self.where.name)
        if end is not None:
            origin = StreamOffset.from_json(end, self.where.name).origin
        else:
            if self._origin is None:
                self._origin = self.feed.initial(self.options.start)
                if self._until is not None and self._origin.snapshot and self._origin.key >= self._until.key:
                    self._until = self._origin.next_run()  # committed since AvailableNow began: its snapshot still
            origin = self._origin
        return StreamOffset(origin, origin)

    def budget(self, limit: ReadLimit) -> Budget:
        """What a micro-batch may take under Spark's ``limit``: the limit itself, and the
        other bound the options set (Spark passes one limit; Delta applies both)."""
        options = self.options
        if isinstance(limit, ReadMaxFiles):
            return Budget(files=limit.max_files, bytes=options.max_bytes)
        if isinstance(limit, ReadMaxBytes):
            return Budget(files=options.max_files, bytes=limit.max_bytes)
        if isinstance(limit, ReadMaxRows):
            return Budget(rows=limit.max_rows)
        return Budget()  # ReadAllAvailable (and limits that ask for more, not less)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self._until = StreamPosition(self.feed.log.latest().version + 1)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        if StreamOffset.is_initial(end):
            return []
        feed = self.feed
        last = self.offset(end).position
        tasks = feed.tasks(self.offset(start, end).position, last, clock())
        return [FileGroup(group, feed.descriptor, feed.predicate, last.revision)
                for group in pack(tasks, self.options.max_partition_bytes)]

    def read(self, partition: InputPartition) -> Iterator["pa.RecordBatch"]:
        assert isinstance(partition, FileGroup)
        return read_group(self.where, self.schema, self.options.batch_rows, partition)

    def commit(self, end: dict) -> None:
        if self._feed is not None and not StreamOffset.is_initial(end):
            self._feed.log.forget_before(self.offset(end).position.revision)


# ---------------------------------------------------------------- the sink

@dataclass(frozen=True)
class StreamBatch:
    """One micro-batch as the tasks that wrote it saw it: the application (the query id),
    the batch, the commit's uuid (all tasks of one attempt agree on it), and the job they
    wrote for (revision planned on, descriptor written with)."""

    app_id: str
    batch_id: int
    transaction: str
    base: int | None
    descriptor_version: int
    descriptor: "DatasetDescriptor"

    @staticmethod
    def of(messages: Sequence[Any], batch_id: int, dataset: str) -> "StreamBatch | None":
        """The batch the tasks' messages describe (``None`` when no task reported)."""
        batches = {m.batch.transaction: m.batch for m in messages if isinstance(m, StreamCommitMessage)}
        if not batches:
            return None
        if len(batches) > 1:
            raise CdkdsError(f"dataset {dataset!r}: the tasks of streaming batch {batch_id} disagree on what they "
                             f"wrote for: {sorted(batches)}; nothing was committed")
        batch, = batches.values()
        if batch.batch_id != batch_id:
            raise CdkdsError(f"dataset {dataset!r}: Spark commits batch {batch_id} with the files of batch "
                             f"{batch.batch_id}; nothing was committed")
        return batch

    def txn(self) -> SetTransaction:
        return SetTransaction(self.app_id, self.batch_id)


class StreamCommitMessage(CdkdsCommitMessage):
    """What a task of a micro-batch wrote, and for which batch."""

    def __init__(self, message: CdkdsCommitMessage, batch: StreamBatch):
        super().__init__(message.adds, message.staged, message.change)
        self.batch = batch


def plan_stream_write(options: Mapping[str, str], schema: StructType, overwrite: bool) -> "CdkdsStreamWriter":
    """A stream writer, checked on the driver as batch writes are. Spark plans one for the
    tasks of each micro-batch, and another for each commit or abort."""
    name = write_location(options).name
    for option in ("txnAppId", "txnVersion"):
        if any(k.lower() == option.lower() for k in options):
            raise InvalidOptionError(f"dataset {name!r}: option {option} is for batch writes (foreachBatch); a "
                                     f"streaming write records its query's id and batch by itself")
    job = plan_write(dict(options), schema, overwrite, keyed_operation="insert" if overwrite else "upsert")
    return CdkdsStreamWriter(job, uuid.uuid4().hex)


class CdkdsStreamWriter(DataSourceStreamArrowWriter):
    """The exactly-once streaming sink (see the module docstring). ``run`` is this planning's
    own id: a batch replayed by a restarted query writes under a new commit uuid."""

    def __init__(self, job: CdkdsWriter, run: str):
        self.job = job
        self.run = run

    def write(self, iterator: Iterator["pa.RecordBatch"]) -> StreamCommitMessage:
        from pyspark import TaskContext

        context = TaskContext.get()
        query = context.getLocalProperty(QUERY_ID_PROPERTY) if context is not None else None
        batch = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
        if query is None or batch is None:
            raise CdkdsError(f"dataset {self.job.where.name!r}: a streaming write runs in a streaming query's tasks "
                             f"(Spark gave no query id or batch id)")
        return self.write_batch(iterator, query, int(batch))

    def write_batch(self, iterator: Iterator["pa.RecordBatch"], query_id: str, batch_id: int) -> StreamCommitMessage:
        """Write one task's rows of batch ``batch_id`` of query ``query_id``."""
        batch = self.batch(query_id, batch_id)
        message = self.job.replaced(transaction=batch.transaction).write(iterator)
        return StreamCommitMessage(message, batch)

    def batch(self, query_id: str, batch_id: int) -> StreamBatch:
        transaction = uuid.uuid5(uuid.NAMESPACE_URL, f"cdkds:stream:{query_id}:{batch_id}:{self.run}").hex
        job = self.job
        return StreamBatch(query_id, batch_id, transaction, job.base, job.descriptor_version, job.descriptor)

    def commit(self, messages: list, batchId: int) -> None:  # noqa: N803 - Spark's name
        batch = StreamBatch.of(messages, batchId, self.job.where.name)
        if batch is None:  # no task ran: nothing was written, so nothing is recorded either
            if self.job.mode == "overwrite":  # an empty result still replaces the dataset
                self.job.commit([])
            return
        job = self.job.replaced(transaction=batch.transaction, base=batch.base,
                                descriptor_version=batch.descriptor_version, descriptor=batch.descriptor)
        if job.mode != "overwrite" and not any(m.adds or m.staged for m in messages if m is not None):
            return  # an empty batch: replaying it writes nothing either
        staged = StagedRows(job.where, messages)
        try:
            self._commit(job, messages, staged, batch.txn())
        finally:
            staged.drop()

    def _commit(self, job: CdkdsWriter, messages: list, staged: StagedRows, txn: SetTransaction) -> None:
        """Commit the batch once (a keyed batch that lost a race for its keys is planned again),
        then run the inline table services."""
        dataset = job.target(prefer_latest=True)
        for attempt in range(KEYED_ATTEMPTS):
            before = dataset.version
            try:
                commit_once(dataset, txn, lambda extra: job.commit_to(dataset, messages, staged, extra),
                            lambda: job.discard(dataset, messages))
                job.serve(dataset, before)
                return
            except CommitConflictError:
                if job.operation is None or attempt == KEYED_ATTEMPTS - 1:
                    raise
                time.sleep(min(2.0, 0.01 * 2 ** attempt) * (0.5 + random.random()))
                dataset = job.target(prefer_latest=True)  # a first batch's dataset may have been unborn

    def abort(self, messages: list, batchId: int) -> None:  # noqa: N803 - Spark's name
        batch = StreamBatch.of(messages, batchId, self.job.where.name)
        if batch is not None:
            self.job.replaced(transaction=batch.transaction, base=batch.base).abort(messages)

