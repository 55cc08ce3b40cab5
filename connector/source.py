"""The ``cdkds`` Spark data source (PySpark's Python Data Source API).

Reading: the driver opens the snapshot, prunes partitions and files with the predicate
(``where`` option, Kite view URI constraints, and opt-in pushed filters), and packs the
remaining files into input partitions of about ``maxPartitionBytes``; executors stream
Arrow batches of those files, with tombstones applied, cast to the types Spark expects.

Writing: :mod:`cdkds.connector.writer`.

Streaming (``readStream``/``writeStream``): :mod:`cdkds.connector.streaming`.

This module imports only pyspark at import time (Spark imports every ``pyspark_*``
module to discover sources, and one failing import hides them all); cdkds itself is
imported when a method runs.
"""

from __future__ import annotations

import functools
import json
import os
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from pyspark.sql.datasource import (
    DataSource, DataSourceArrowWriter, DataSourceReader, DataSourceStreamArrowWriter, DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

if TYPE_CHECKING:
    import pyarrow as pa

    from cdkds.catalog import Dataset, DatasetDescriptor
    from cdkds.catalog.expressions import Expression
    from cdkds.catalog.read.scan import FileScanTask, ScanPlan
    from cdkds.connector.options import FallbackFiles, Location

class CdkdsDataSource(DataSource):
    """``spark.read.format("cdkds").load(url)`` and ``df.write.format("cdkds").save(url)``."""

    # Spark's default parallelism, when register() could ask the session for it: a Python
    # source's planner sees only its options, never the session's configuration.
    default_parallelism: int | None = None
    # The revision schema() described: Spark keeps this instance (pickled after schema())
    # for planning the DataFrame's reads, so every action reads the revision its schema is of.
    pinned_version: int | None = None

    @classmethod
    def name(cls) -> str:
        return "cdkds"

    def _options(self, schema: StructType | None = None) -> dict[str, str]:
        """A read's options, plus those kept in the schema of a catalog table (Spark drops a
        catalog table's OPTIONS, LOCATION and TBLPROPERTIES, but keeps its schema). Reads
        only: a write's rows carry the schema of wherever they were read from."""
        from cdkds.connector.options import OPTIONS_METADATA_KEY

        merged: dict[str, str] = {}
        for f in (schema.fields[:1] if schema is not None and schema.fields else []):
            carried = f.metadata.get(OPTIONS_METADATA_KEY)
            if carried:
                merged.update(json.loads(carried))
        merged.update({k: v for k, v in self.options.items() if v is not None})
        return merged

    def schema(self) -> StructType:
        from cdkds.connector.options import location, read_options, reads_change_feed

        options = self._options()
        where = location(options)
        if reads_change_feed(options, where.name):
            from cdkds.connector.changefeed import change_feed_schema, open_end
            from cdkds.connector.options import change_feed_end, columns_option

            end = open_end(where, *change_feed_end(options, where.name))  # the rows come in its schema
            return change_feed_schema(end, columns_option(options, where.name))
        read = read_options(options, where.view, where.name)
        dataset = open_dataset(where, read.version, read.timestamp, read.tag)
        self.pinned_version = dataset.version
        return read_schema(dataset, read.columns, options)

    def reader(self, schema: StructType) -> DataSourceReader:
        from cdkds.connector.options import fallback_files, location, read_options, reads_change_feed

        options = self._options(schema)
        where = location(options)
        if reads_change_feed(options, where.name):
            from cdkds.connector.changefeed import ChangeFeedReader
            from cdkds.connector.options import change_feed_options

            return ChangeFeedReader(where, change_feed_options(options, where.name, False), schema)
        read = read_options(options, where.view, where.name)
        version, timestamp = (read.version, read.timestamp) if self.pinned_version is None else \
            (self.pinned_version, None)
        if read.tag is not None and self.pinned_version is None:  # the tag's revision, read once
            version = open_dataset(where, tag=read.tag).version
        cls = CdkdsFilteringReader if read.push_filters else CdkdsReader
        reader = cls(where, version, timestamp, read.where, schema, read.max_partition_bytes, read.batch_rows,
                     read.min_partitions or self.default_parallelism or os.cpu_count() or 1)
        reader.only = fallback_files(options, where.name)
        return reader

    def _write_options(self) -> dict[str, str]:
        """A write's options: only its own (the schema's carried options name the dataset the
        rows were read from, never the one they go to; see :data:`NO_WRITE_TARGET`)."""
        return {k: v for k, v in self.options.items() if v is not None}

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        from cdkds.connector.writer import plan_write

        return plan_write(self._write_options(), schema, overwrite)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 - Spark's name
        from cdkds.connector.options import location, reads_change_feed
        from cdkds.connector.streaming import plan_stream_read

        options = self._options(schema)
        where = location(options)
        if reads_change_feed(options, where.name):
            from cdkds.connector.changefeed import ChangeFeedStreamReader
            from cdkds.connector.options import change_feed_options

            return ChangeFeedStreamReader(where, change_feed_options(options, where.name, True), schema)
        return plan_stream_read(options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:  # noqa: N802
        from cdkds.connector.streaming import plan_stream_write

        return plan_stream_write(self._write_options(), schema, overwrite)


def read_schema(dataset: "Dataset", columns: Sequence[str] | None, options: dict[str, str]) -> StructType:
    """The Spark schema a read of ``columns`` (``None``: all) of ``dataset`` has, its first
    field carrying the read's options for catalog tables (see :func:`carried_options`)."""
    from cdkds.connector.options import OPTIONS_METADATA_KEY, output_columns

    struct = dataset.descriptor.spark_schema_json()
    if columns is not None:
        by_name = {f["name"]: f for f in struct["fields"]}
        struct = {**struct, "fields": [by_name[c] for c in output_columns(dataset.name, dataset.descriptor, columns)]}
    if struct["fields"]:
        struct["fields"][0]["metadata"] = {OPTIONS_METADATA_KEY: json.dumps(carried_options(options), sort_keys=True)}
    return StructType.fromJson(struct)


# Never storageOptions: a schema is shown by df.schema and DESCRIBE, kept in the metastore and
# written into the files Spark writes from the DataFrame, and storage options hold credentials.
_CARRIED = {"path", "branch", "where", "columns", "versionasof", "timestampasof", "maxpartitionbytes", "minpartitions",
            "batchrows", "pushfilters", "partitionby", "format", "compression", "recordkey", "orderingfield",
            "partitionoverwrite", "targetfilesize", "checknulls", "sortby"}


def carried_options(options: dict[str, str]) -> dict[str, str]:
    """The options a catalog table keeps in its schema (Spark gives its source no others):
    those that find and shape the dataset, never storage options or a URL with a password."""
    from urllib.parse import urlsplit

    def secret(value: str) -> bool:
        try:
            return urlsplit(value).password is not None
        except ValueError:
            return False

    return {k: v for k, v in options.items() if k.lower() in _CARRIED and not secret(v)}


def open_dataset(where: "Location", version: int | None = None, timestamp: str | int | None = None,
                 tag: str | None = None) -> "Dataset":
    """The dataset at a location (on its branch, if it names one), at a revision, a time or the
    revision of a tag if given."""
    from cdkds.catalog import DatasetRepository
    from cdkds.catalog.repository import split_dataset_url

    parent, name = split_dataset_url(where.url)
    return DatasetRepository(parent, dict(where.storage_options)).load(name, version=version, timestamp=timestamp,
                                                                      tag=tag, branch=where.branch)


# ---------------------------------------------------------------- reading

class FileGroup(InputPartition):
    """The files one Spark task reads, with what it needs to read them: tasks known
    column-wise (:class:`~cdkds.catalog.read.scan.FileScanTasks`) travel as their files'
    rows and become task objects on the executor."""

    def __init__(self, tasks: "Sequence[FileScanTask]", descriptor: "DatasetDescriptor", predicate: "Expression",
                 version: int):
        from cdkds.catalog.read.scan import FileScanTasks

        super().__init__(len(tasks))
        self.tasks = tasks if isinstance(tasks, FileScanTasks) else tuple(tasks)
        self.descriptor = descriptor
        self.predicate = predicate
        self.version = version


class CdkdsReader(DataSourceReader):
    only: "FallbackFiles | None" = None  # the files (and plan time) a native read left to this source

    def __init__(self, where: "Location", version: int | None, timestamp: str | None, predicate: "Expression",
                 schema: StructType, max_partition_bytes: int, batch_rows: int, parallelism: int):
        self.where = where
        self.version = version
        self.timestamp = timestamp
        self.predicate = predicate
        self.schema = schema
        self.max_partition_bytes = max_partition_bytes
        self.batch_rows = batch_rows
        self.parallelism = parallelism

    def partitions(self) -> Sequence[InputPartition]:
        from cdkds.catalog.read.splits import input_partitions
        from cdkds.formats.files import file_format

        dataset = open_dataset(self.where, self.version, self.timestamp)
        check_planned_schema(dataset, self.schema)
        plan = planned(dataset, self.predicate, [f.name for f in self.schema.fields], self.only)
        descriptor = plan.snapshot.descriptor
        groups = input_partitions(plan.tasks, self.max_partition_bytes, self.parallelism,
                                  file_format(descriptor.format).splittable)
        return [FileGroup(g, descriptor, plan.predicate, dataset.version) for g in groups] or \
            [FileGroup((), descriptor, plan.predicate, dataset.version)]

    def read(self, partition: InputPartition) -> Iterator["pa.RecordBatch"]:
        assert isinstance(partition, FileGroup)
        return read_group(self.where, self.schema, self.batch_rows, partition)


def planned(dataset: "Dataset", predicate: "Expression", columns: list[str], only: "FallbackFiles | None"
            ) -> "ScanPlan":
    """The scan of ``dataset``; restricted to the files ``only`` names, planned at its moment."""
    if only is None:
        return dataset.plan(predicate, columns)
    import dataclasses

    from cdkds.catalog.errors import CdkdsError
    from cdkds.catalog.read.scan import FileScanTasks, plan_scan

    plan = plan_scan(dataset.name, dataset.snapshot, predicate, columns, only.now)
    tasks = plan.tasks.restricted(only.paths) if isinstance(plan.tasks, FileScanTasks) else \
        tuple(t for t in plan.tasks if t.file.path in only.paths)
    if dataset.version != only.version or len(tasks) != len(only.paths):
        raise CdkdsError(f"dataset {dataset.name!r}: the files a native read left to the source are not those of "
                         f"revision {only.version} at {only.now} ms")
    return dataclasses.replace(plan, tasks=tasks)


def check_planned_schema(dataset: "Dataset", schema: StructType) -> None:
    """Refuse to read a revision whose columns no longer fit the schema Spark planned the
    query with: a catalog table (or a reader given a schema) reads the latest revision, but
    Spark keeps the schema of the revision the table was created on."""
    from cdkds.catalog import SchemaMismatchError

    current = {f.name: f.dataType for f in StructType.fromJson(dataset.descriptor.spark_schema_json()).fields}
    problems = []
    for f in schema.fields:
        if f.name not in current:
            problems.append(f"column {f.name!r} is not in it (its columns are {list(current)})")
        elif current[f.name].simpleString() != f.dataType.simpleString():
            problems.append(f"column {f.name!r} is {current[f.name].simpleString()}, planned as "
                            f"{f.dataType.simpleString()}")
    if problems:
        raise SchemaMismatchError(f"dataset {dataset.name!r}: revision {dataset.version} no longer fits the schema "
                                  f"the query was planned with: {'; '.join(problems)}; re-create the table (DROP "
                                  f"TABLE, CREATE TABLE ... USING cdkds) or load the dataset again")


def read_group(where: "Location", schema: StructType, batch_rows: int, group: FileGroup) -> Iterator["pa.RecordBatch"]:
    """The rows of a group's files, in batches cast to the Spark schema's types (on an executor)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from cdkds.catalog.read.readahead import read_ahead
    from cdkds.catalog.read.scan import read_task
    from cdkds.catalog.storage import ObjectStore

    target = to_arrow_schema(schema, timezone="UTC")
    store = ObjectStore.open(where.url, dict(where.storage_options))
    columns = [f.name for f in schema.fields]
    readers = (functools.partial(read_task, store, group.descriptor, group.predicate, columns, task, batch_rows)
               for task in group.tasks)
    for batch in read_ahead(readers):
        yield batch.cast(target)


class CdkdsFilteringReader(CdkdsReader):
    """A reader that also prunes with the filters Spark pushes (option ``pushFilters``).

    Every pushed filter is returned to Spark too, so Spark still evaluates it: cdkds uses
    them only to skip partitions and files, never to decide rows.
    """

    def pushFilters(self, filters: list) -> Iterator:  # noqa: N802 - Spark's name
        from cdkds.catalog.expressions import all_of

        found = [e for e in (spark_filter_to_expression(f) for f in filters) if e is not None]
        self.predicate = all_of([self.predicate, *found])
        yield from filters


def spark_filter_to_expression(f: Any) -> "Expression | None":
    """Our expression for one of Spark's pushed filters on a top-level column, if it has one."""
    from pyspark.sql import datasource as ds

    from cdkds.catalog.expressions import Predicate, not_

    simple = {ds.EqualTo: "eq", ds.GreaterThan: "gt", ds.GreaterThanOrEqual: "ge", ds.LessThan: "lt",
              ds.LessThanOrEqual: "le"}
    if isinstance(f, ds.Not):
        negations = 0
        while isinstance(f, ds.Not):  # a chain of any length, without recursing along it
            f, negations = f.child, negations + 1
        inner = spark_filter_to_expression(f)
        if inner is None:
            return None
        return not_(inner) if negations % 2 else inner
    attribute = getattr(f, "attribute", ())
    if len(attribute) != 1:
        return None
    name = attribute[0]
    if type(f) in simple and f.value is not None:
        return Predicate(simple[type(f)], name, f.value)
    if isinstance(f, ds.In):
        return Predicate("in", name, values=tuple(v for v in f.value if v is not None))
    if isinstance(f, ds.IsNull):
        return Predicate("is_null", name)
    if isinstance(f, ds.IsNotNull):
        return Predicate("not_null", name)
    if isinstance(f, ds.StringStartsWith):
        return Predicate("starts_with", name, f.value)
    return None
