"""The change feed in Spark: ``option("readChangeFeed", "true")`` on ``spark.read`` and
``spark.readStream`` (see :mod:`cdkds.catalog.changes`).

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
    from cdkds.catalog.changes import ChangePlan, CommitChanges
    from cdkds.connector.options import ChangeFeedOptions, Location

def change_feed_schema(dataset: "Dataset", columns: Sequence[str] | None) -> StructType:
    """The Spark schema of the change rows: the columns of the latest revision, then the
    change columns."""
    from cdkds.catalog.changes import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, _columns

    struct = dataset.descriptor.spark_schema_json()
    by_name = {f["name"]: f for f in struct["fields"]}
    selected = _columns(dataset.name, dataset.descriptor, columns)
    fields = [by_name[c] for c in selected] + [
        {"name": CHANGE_TYPE, "type": "string", "nullable": False, "metadata": {}},
        {"name": COMMIT_VERSION, "type": "long", "nullable": False, "metadata": {}},
        {"name": COMMIT_TIMESTAMP, "type": "timestamp", "nullable": False, "metadata": {}}]
    return StructType.fromJson({"type": "struct", "fields": fields})


def _start(dataset: "Dataset", feed: "ChangeFeedOptions") -> int:
    """The first revision of a feed whose start is a revision or a time."""
    from cdkds.catalog.changes import first_revision_since

    if feed.start.kind == "timestamp":
        return first_revision_since(dataset.log, feed.start.value)
    return feed.start.value  # type: ignore[return-value]


def _end(dataset: "Dataset", feed: "ChangeFeedOptions") -> int | None:
    if feed.end_timestamp is not None:
        return dataset.log.snapshot(timestamp=feed.end_timestamp).version
    return feed.end_version


class ChangeGroup(InputPartition):
    """Commits (or parts of commits) one Spark task reads the changes of."""

    def __init__(self, changes: "Sequence[CommitChanges]", descriptor: "DatasetDescriptor", columns: Sequence[str]):
        super().__init__(len(changes))
        self.changes = tuple(changes)
        self.descriptor = descriptor
        self.columns = tuple(columns)


def change_groups(plan: "ChangePlan", max_bytes: int) -> list[ChangeGroup]:
    """The plan's changes in groups of about ``max_bytes`` of data files to read."""
    from cdkds.connector.source import FILE_OPEN_COST

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

    from cdkds.catalog.changes import read_commit
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
        from cdkds.catalog.changes import plan_changes
        from cdkds.connector.source import open_dataset

        dataset = open_dataset(self.where)
        columns = [f.name for f in self.schema.fields][:-3]
        plan = plan_changes(dataset.log, _start(dataset, self.feed), _end(dataset, self.feed), columns)
        return change_groups(plan, self.feed.max_partition_bytes) or [ChangeGroup((), plan.descriptor, plan.columns)]

    def read(self, partition: InputPartition) -> Iterator["pa.RecordBatch"]:
        assert isinstance(partition, ChangeGroup)
        yield from read_group(self.where, self.schema, partition)


class ChangeFeedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("cdkds").option("readChangeFeed", "true")``: offsets are
    ``{"revision": r, "origin": o}``, the next revision to read and the stream's first; a
    micro-batch reads whole commits, as many as keep it under ``maxFilesPerTrigger`` files
    (at least one commit). Under ``Trigger.AvailableNow`` it stops at the revision that was
    the latest when the run began."""

    def __init__(self, where: "Location", feed: "ChangeFeedOptions", schema: StructType):
        self.where = where
        self.feed = feed
        self.schema = schema
        self._until: int | None = None  # Trigger.AvailableNow: the revision after the last to read

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - Spark's name
        self._until = self._dataset().log.snapshot().version + 1

    def _dataset(self) -> "Dataset":
        from cdkds.connector.source import open_dataset

        return open_dataset(self.where)

    def initialOffset(self) -> dict:  # noqa: N802 - Spark's name
        # "latest" stays unresolved (-1) until the first batch: Spark asks again for the initial
        # offset when it replays a first batch after a restart, and the latest revision moves
        if self.feed.start.kind == "latest":
            return {"revision": -1}
        return {"revision": _start(self._dataset(), self.feed)}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:  # noqa: N802 - Spark's name
        from pyspark.sql.streaming.datasource import ReadAllAvailable

        from cdkds.catalog.changes import plan_changes

        dataset = self._dataset()
        latest = dataset.log.snapshot().version
        if self._until is not None:
            latest = min(latest, self._until - 1)
        first = self._first(start or self.initialOffset(), latest)
        if limit is None or isinstance(limit, ReadAllAvailable):  # pyspark 4.1 passes no limit
            return {"revision": max(first, latest + 1), "origin": first}
        revision, files = first, 0
        if first <= latest:
            for changes in plan_changes(dataset.log, first, latest, self._columns).commits:
                n = len(changes.removed) + len(changes.added)
                if files and files + n > self.feed.max_files:
                    return {"revision": changes.revision, "origin": first}
                files += n
            revision = latest + 1
        return {"revision": revision, "origin": first}

    @property
    def _columns(self) -> list[str]:
        return [f.name for f in self.schema.fields][:-3]

    @staticmethod
    def _first(start: dict, latest: int) -> int:
        """The first revision after ``start``: an unresolved start is the latest's next."""
        revision = int(start["revision"])
        return latest + 1 if revision == -1 else revision

    def getDefaultReadLimit(self) -> Any:  # noqa: N802 - Spark's name
        from pyspark.sql.streaming.datasource import ReadMaxFiles

        return ReadMaxFiles(self.feed.max_files)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        from cdkds.catalog.changes import plan_changes

        first = int(end["origin"]) if int(start["revision"]) == -1 else int(start["revision"])
        last = int(end["revision"]) - 1
        if last < first:
            return []
        plan = plan_changes(self._dataset().log, first, last, self._columns)
        return change_groups(plan, self.feed.max_partition_bytes)

    def read(self, partition: InputPartition) -> Iterator["pa.RecordBatch"]:
        assert isinstance(partition, ChangeGroup)
        yield from read_group(self.where, self.schema, partition)

    def commit(self, end: dict) -> None:
        pass
