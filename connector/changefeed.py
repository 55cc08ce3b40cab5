"""The change feed in Spark: ``option("readChangeFeed", "true")`` on ``spark.read`` and
``spark.readStream`` (see :mod:`cdkds.catalog.read.changes`).

The driver plans the changes of a range of revisions from the log; each input partition
reads some commits' changes (a keyed commit whole, since its pre- and post-images are
paired by key; other commits file by file). A stream's offset is the next revision to
read, so a restarted query resumes at the first commit it had not finished.

Like :mod:`cdkds.connector.source`, this module imports cdkds only when a method runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Sequence

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

if TYPE_CHECKING:
    import pyarrow as pa

    from cdkds.catalog import Dataset, DatasetDescriptor
    from cdkds.catalog.read.changes import ChangePlan, CommitChanges
    from cdkds.connector.options import ChangeFeedOptions, Location

def change_feed_schema(dataset: "Dataset", columns: Sequence[str] | None) -> StructType:
    """The Spark schema of the change rows: the columns of the latest revision, then the
    change columns."""
    from cdkds.catalog.read.changes import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, change_columns
    from cdkds.connector.options import output_columns

    struct = dataset.descriptor.spark_schema_json()
    by_name = {f["name"]: f for f in struct["fields"]}
    selected = output_columns(dataset.name, dataset.descriptor, columns, change_columns)
    fields = [by_name[c] for c in selected] + [
        {"name": CHANGE_TYPE, "type": "string", "nullable": False, "metadata": {}},
        {"name": COMMIT_VERSION, "type": "long", "nullable": False, "metadata": {}},
        {"name": COMMIT_TIMESTAMP, "type": "timestamp", "nullable": False, "metadata": {}}]
    return StructType.fromJson({"type": "struct", "fields": fields})


def _start(dataset: "Dataset", feed: "ChangeFeedOptions") -> int:
    """The first revision of a feed whose start is a revision or a time."""
    from cdkds.catalog.read.changes import first_revision_since

    if feed.start.kind == "timestamp":
        return first_revision_since(dataset.log, feed.start.value)
    return feed.start.value  # type: ignore[return-value]


def open_end(where: "Location", end_version: int | None, end_timestamp: int | None) -> "Dataset":
    """The dataset at the end of a batch change feed (the latest without one)."""
    from cdkds.catalog import InvalidTimeTravelError
    from cdkds.connector.options import InvalidOptionError
    from cdkds.connector.source import open_dataset

    try:
        return open_dataset(where, end_version, end_timestamp)
    except InvalidTimeTravelError as e:
        option = "endingVersion" if end_version is not None else "endingTimestamp"
        value = end_version if end_version is not None else end_timestamp
        raise InvalidOptionError(f"option {option}={value}: {e}") from None


class ChangeGroup(InputPartition):
    """Commits (or parts of commits) one Spark task reads the changes of."""

    def __init__(self, changes: "Sequence[CommitChanges]", descriptor: "DatasetDescriptor", columns: Sequence[str]):
        super().__init__(len(changes))
        self.changes = tuple(changes)
        self.descriptor = descriptor
        self.columns = tuple(columns)


def change_groups(plan: "ChangePlan", max_bytes: int) -> list[ChangeGroup]:
    """The plan's changes in groups of about ``max_bytes`` of data files to read."""
    from cdkds.catalog.read.splits import FILE_OPEN_COST

    groups, current, size = [], [], 0
    for part in (p for c in plan.commits for p in c.split()):
        cost = sum(s.task.file.size + FILE_OPEN_COST for s in (*part.removed, *part.added))
        if current and size + cost > max_bytes:
            groups.append(ChangeGroup(current, plan.descriptor, plan.columns))
            current, size = [], 0
        current.append(part)
        size += cost
    if current:
        groups.append(ChangeGroup(current, plan.descriptor, plan.columns))
    return groups


def read_group(where: "Location", schema: StructType, group: ChangeGroup) -> Iterator["pa.RecordBatch"]:
    """The change rows of a group, cast to the types Spark expects."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from cdkds.catalog.read.changes import read_commit
    from cdkds.catalog.storage import ObjectStore

    target = to_arrow_schema(schema, timezone="UTC")
    store = ObjectStore.open(where.url, dict(where.storage_options))
    output = group.descriptor.projection(group.columns)
    for changes in group.changes:
        for batch in read_commit(store, changes, output):
            yield batch.cast(target)


class ChangeFeedReader(DataSourceReader):
    """``spark.read.format("cdkds").option("readChangeFeed", "true")``."""

    def __init__(self, where: "Location", feed: "ChangeFeedOptions", schema: StructType):
        self.where = where
        self.feed = feed
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        from cdkds.catalog.read.changes import plan_changes

        feed = self.feed
        end = open_end(self.where, feed.end_version, feed.end_timestamp)
        columns = [f.name for f in self.schema.fields][:-3]
        ended = feed.end_version is not None or feed.end_timestamp is not None
        plan = plan_changes(end.log, _start(end, feed), end.version if ended else None, columns)
        return change_groups(plan, self.feed.max_partition_bytes) or [ChangeGroup((), plan.descriptor, plan.columns)]

    def read(self, partition: InputPartition) -> Iterator["pa.RecordBatch"]:
        assert isinstance(partition, ChangeGroup)
        yield from read_group(self.where, self.schema, partition)


INITIAL_OFFSET = {"revision": -1}  # a new query's start, resolved by its first batch


class ChangeFeedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("cdkds").option("readChangeFeed", "true")``: offsets are
    ``{"revision": r, "origin": o}``, the next revision to read and the stream's first; a
    micro-batch reads whole commits, as many as keep it under ``maxFilesPerTrigger`` files
    (at least one commit). Under ``Trigger.AvailableNow`` it stops at the revision that was
    the latest when the run began.

    The initial offset is a constant: Spark asks for it again when it replays a first batch
    after a restart, and a start given as ``latest`` or a time resolves to a later revision
    once commits have landed. The first batch's end records the origin it resolved to."""

    def __init__(self, where: "Location", feed: "ChangeFeedOptions", schema: StructType):
        self.where = where
        self.feed = feed
        self.schema = schema
        self._until: int | None = None  # Trigger.AvailableNow: the revision after the last to read
        self._origin: int | None = None  # this run's resolution of the initial offset
        self._descriptor: "DatasetDescriptor | None" = None  # the schema this run reads with

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_descriptor": None}

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - Spark's name
        self._until = self._dataset().log.snapshot().version + 1

    def _dataset(self) -> "Dataset":
        from cdkds.connector.source import open_dataset

        return open_dataset(self.where)

    def initialOffset(self) -> dict:  # noqa: N802 - Spark's name
        return dict(INITIAL_OFFSET)

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:  # noqa: N802 - Spark's name
        from pyspark.sql.streaming.datasource import ReadAllAvailable

        from cdkds.catalog.read.changes import plan_changes

        dataset = self._dataset()
        self._check_schema(dataset)
        latest = dataset.log.snapshot().version
        if self._until is not None:
            latest = min(latest, self._until - 1)
        start = start or self.initialOffset()  # pyspark 4.1 passes neither start nor limit
        initial = start == INITIAL_OFFSET
        origin = self._resolve(dataset) if initial else int(start["origin"])
        first = origin if initial else int(start["revision"])
        end = max(first, latest + 1)
        if first <= latest and limit is not None and not isinstance(limit, ReadAllAvailable):
            files = 0
            for changes in plan_changes(dataset.log, first, latest, self._columns).commits:
                n = len(changes.removed) + len(changes.added)
                if files and files + n > self.feed.max_files:
                    end = changes.revision
                    break
                files += n
        if not initial and end == first:
            return start
        return {"revision": end, "origin": origin}

    def _resolve(self, dataset: "Dataset") -> int:
        """The first revision of a new query, resolved once per run."""
        if self._origin is None:
            self._origin = dataset.log.snapshot().version + 1 if self.feed.start.kind == "latest" else \
                _start(dataset, self.feed)
        return self._origin

    def _check_schema(self, dataset: "Dataset") -> None:
        """Fail when a schema change breaks a column the stream outputs (by field id)."""
        from cdkds.connector.feed import StreamingReadError, breaking_change

        if self._descriptor is None:
            self._descriptor = dataset.descriptor
            return
        problem = breaking_change(self._descriptor, dataset.descriptor, self._columns)
        if problem is not None:
            raise StreamingReadError(
                f"dataset {dataset.name!r}: revision {dataset.descriptor_version} {problem}, a column this change feed "
                f"outputs; restart the query to read with the new schema")

    @property
    def _columns(self) -> list[str]:
        return [f.name for f in self.schema.fields][:-3]

    def getDefaultReadLimit(self) -> Any:  # noqa: N802 - Spark's name
        from pyspark.sql.streaming.datasource import ReadMaxFiles

        return ReadMaxFiles(self.feed.max_files)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        from cdkds.catalog.read.changes import plan_changes

        if end == INITIAL_OFFSET:
            return []
        first = int(end["origin"]) if start == INITIAL_OFFSET else int(start["revision"])
        last = int(end["revision"]) - 1
        if last < first:
            return []
        dataset = self._dataset()
        self._check_schema(dataset)
        plan = plan_changes(dataset.log, first, last, self._columns)
        return change_groups(plan, self.feed.max_partition_bytes)

    def read(self, partition: InputPartition) -> Iterator["pa.RecordBatch"]:
        assert isinstance(partition, ChangeGroup)
        yield from read_group(self.where, self.schema, partition)

    def commit(self, end: dict) -> None:
        pass
