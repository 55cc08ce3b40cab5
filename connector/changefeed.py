"""The change feed in Spark: ``option("readChangeFeed", "true")`` on ``spark.read`` and
``spark.readStream`` (see :mod:`cdkds.catalog.changes`).

The driver plans the changes of a range of revisions from the log; each input partition
reads some commits' changes (a keyed commit whole, since its pre- and post-images are
paired by key; other commits file by file). A stream's offset is the next revision to
read, so a restarted query resumes at the first commit it had not finished.

Like :mod:`cdkds.connector.source`, this module imports cdkds only when a method runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

if TYPE_CHECKING:
    import pyarrow as pa

    from cdkds.catalog import Dataset, DatasetDescriptor
    from cdkds.catalog.changes import ChangePlan, CommitChanges
    from cdkds.connector.options import Location

DEFAULT_MAX_FILES_PER_TRIGGER = 1000


@dataclass(frozen=True)
class ChangeFeedOptions:
    """The options of a change feed read: where it starts and ends (revisions or times)."""

    starting_version: int | None
    starting_timestamp: str | None
    ending_version: int | None
    ending_timestamp: str | None
    columns: tuple[str, ...] | None
    max_files_per_trigger: int


def reads_change_feed(options: Mapping[str, str], dataset: str) -> bool:
    from cdkds.connector.options import _bool

    return _bool(options, "readChangeFeed", dataset)


def change_feed_options(options: Mapping[str, str], dataset: str, streaming: bool) -> ChangeFeedOptions:
    """The change feed options, checked: a start (a revision, a time, or for a stream
    ``latest``), no time travel, no ``where``, and an end only for batch reads."""
    from cdkds.connector.options import InvalidOptionError, _get, _int

    for name in ("versionAsOf", "version", "timestampAsOf", "timestamp", "where", "pushFilters"):
        if _get(options, name) is not None:
            raise InvalidOptionError(f"dataset {dataset!r}: option {name} cannot be combined with readChangeFeed "
                                     f"(the feed's range is startingVersion/startingTimestamp to "
                                     f"endingVersion/endingTimestamp; filter the change rows in Spark)")
    text = _get(options, "startingVersion")
    starting_version = None
    if text is not None and not (streaming and text.strip().lower() == "latest"):
        starting_version = _int(options, "startingVersion", None, dataset)
    elif text is not None:
        starting_version = -1  # latest: the revision after the newest when the stream first starts
    starting_timestamp = _get(options, "startingTimestamp")
    if (text is None) == (starting_timestamp is None):
        raise InvalidOptionError(f"dataset {dataset!r}: readChangeFeed needs one of startingVersion or "
                                 f"startingTimestamp" + ("" if text is None else ", not both"))
    ending_version = _int(options, "endingVersion", None, dataset)
    ending_timestamp = _get(options, "endingTimestamp")
    if streaming and (ending_version is not None or ending_timestamp is not None):
        raise InvalidOptionError(f"dataset {dataset!r}: a streaming change feed has no end; endingVersion and "
                                 f"endingTimestamp are for batch reads")
    if ending_version is not None and ending_timestamp is not None:
        raise InvalidOptionError(f"dataset {dataset!r}: give endingVersion or endingTimestamp, not both")
    columns_text = _get(options, "columns")
    columns = tuple(c.strip() for c in columns_text.split(",") if c.strip()) if columns_text else None
    if columns_text is not None and not columns:
        raise InvalidOptionError(f"dataset {dataset!r}: option columns names no column: {columns_text!r}")
    return ChangeFeedOptions(starting_version, starting_timestamp, ending_version, ending_timestamp, columns,
                             _int(options, "maxFilesPerTrigger", DEFAULT_MAX_FILES_PER_TRIGGER, dataset, 1))


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


def _start(dataset: "Dataset", feed: ChangeFeedOptions) -> int:
    from cdkds.catalog.changes import first_revision_since

    if feed.starting_timestamp is not None:
        return first_revision_since(dataset.log, feed.starting_timestamp)
    if feed.starting_version == -1:
        return dataset.log.snapshot().version + 1
    return feed.starting_version  # type: ignore[return-value]


def _end(dataset: "Dataset", feed: ChangeFeedOptions) -> int | None:
    if feed.ending_timestamp is not None:
        return dataset.log.snapshot(timestamp=feed.ending_timestamp).version
    return feed.ending_version


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

    def __init__(self, where: "Location", feed: ChangeFeedOptions, schema: StructType, max_partition_bytes: int):
        self.where = where
        self.feed = feed
        self.schema = schema
        self.max_partition_bytes = max_partition_bytes

    def partitions(self) -> Sequence[InputPartition]:
        from cdkds.catalog.changes import plan_changes
        from cdkds.connector.source import open_dataset

        dataset = open_dataset(self.where)
        columns = [f.name for f in self.schema.fields][:-3]
        plan = plan_changes(dataset.log, _start(dataset, self.feed), _end(dataset, self.feed), columns)
        return change_groups(plan, self.max_partition_bytes) or [ChangeGroup((), plan.descriptor, plan.columns)]

    def read(self, partition: InputPartition) -> Iterator["pa.RecordBatch"]:
        assert isinstance(partition, ChangeGroup)
        yield from read_group(self.where, self.schema, partition)


class ChangeFeedStreamReader(DataSourceStreamReader):
    """``spark.readStream.format("cdkds").option("readChangeFeed", "true")``: offsets are
    ``{"revision": r}``, the next revision to read; a micro-batch reads whole commits, as
    many as keep it under ``maxFilesPerTrigger`` files (at least one commit)."""

    def __init__(self, where: "Location", feed: ChangeFeedOptions, schema: StructType, max_partition_bytes: int):
        self.where = where
        self.feed = feed
        self.schema = schema
        self.max_partition_bytes = max_partition_bytes

    def _dataset(self) -> "Dataset":
        from cdkds.connector.source import open_dataset

        return open_dataset(self.where)

    def initialOffset(self) -> dict:  # noqa: N802 - Spark's name
        return {"revision": _start(self._dataset(), self.feed)}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:  # noqa: N802 - Spark's name
        from pyspark.sql.streaming.datasource import ReadAllAvailable

        dataset = self._dataset()
        latest = dataset.log.snapshot().version
        first = int((start or self.initialOffset())["revision"])
        if first > latest:
            return {"revision": first}
        if isinstance(limit, ReadAllAvailable):
            return {"revision": latest + 1}
        from cdkds.catalog.changes import plan_changes

        files, revision = 0, first
        for changes in plan_changes(dataset.log, first, latest, [f.name for f in self.schema.fields][:-3]).commits:
            n = len(changes.removed) + len(changes.added)
            if files and files + n > self.feed.max_files_per_trigger:
                return {"revision": changes.revision}
            files += n
            revision = changes.revision + 1
        return {"revision": max(revision, latest + 1)}

    def getDefaultReadLimit(self) -> Any:  # noqa: N802 - Spark's name
        from pyspark.sql.streaming.datasource import ReadMaxFiles

        return ReadMaxFiles(self.feed.max_files_per_trigger)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        from cdkds.catalog.changes import plan_changes

        first, last = int(start["revision"]), int(end["revision"]) - 1
        if last < first:
            return []
        plan = plan_changes(self._dataset().log, first, last, [f.name for f in self.schema.fields][:-3])
        return change_groups(plan, self.max_partition_bytes)

    def read(self, partition: InputPartition) -> Iterator["pa.RecordBatch"]:
        assert isinstance(partition, ChangeGroup)
        yield from read_group(self.where, self.schema, partition)

    def commit(self, end: dict) -> None:
        pass
