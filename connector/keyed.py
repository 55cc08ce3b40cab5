"""Keyed writes from Spark: :func:`upsert` clusters a DataFrame by index bucket so each task
owns whole buckets and plans its part of the write; the driver commits all of it at once.

Spark gives Python data sources no MERGE, UPDATE or DELETE (their tables offer only
BATCH_READ, BATCH_WRITE and TRUNCATE), so ``option("operation", ...)`` on an append and this
function are the Spark interface to keyed datasets.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from cdkds.catalog.keyed.operations import UpsertResult

BUCKET_COLUMN = "_cdkds_bucket"


def upsert(df: "DataFrame", url: str, operation: str = "upsert", storage_options: dict | None = None,
           **options: str) -> "UpsertResult":
    """Write ``df`` into the keyed dataset at ``url`` with ``operation`` (upsert, insert,
    update or delete), in one commit; returns the counts and the revision. A dataset that
    does not exist is created from the DataFrame's schema and ``options`` (``recordKey``,
    ``orderingField``, ``partitionBy``, ``property.index.buckets``...). A concurrent commit
    that wrote one of the same keys fails the job with :class:`CommitConflictError`
    naming the key."""
    import pyarrow as pa

    from cdkds.catalog import CdkdsError, DatasetNotFoundError, DatasetRepository
    from cdkds.catalog.keyed.keys import RecordKey
    from cdkds.catalog.repository import split_dataset_url
    from cdkds.connector.options import InvalidOptionError, KEYED_OPERATIONS, Location, check_known_options, write_options
    from cdkds.connector.writer import new_descriptor, take_result

    if operation not in KEYED_OPERATIONS:
        raise InvalidOptionError(f"dataset at {url}: operation must be one of {list(KEYED_OPERATIONS)}, got {operation!r}")
    parent, name = split_dataset_url(url)
    check_known_options(options, name)
    try:
        descriptor = DatasetRepository(parent, storage_options).load(name).descriptor
    except DatasetNotFoundError:  # the job creates it as it commits: a failed job creates nothing
        descriptor = new_descriptor(name, df.schema, write_options(options, name))
    key = RecordKey.of(descriptor, name)
    buckets = descriptor.keyed.buckets
    missing = [k for k in key.names if k not in df.columns]
    if missing:
        raise InvalidOptionError(f"dataset {name!r}: the DataFrame has no record key column {missing[0]!r}")

    def with_bucket(batches):
        for batch in batches:
            typed = key.keys(pa.Table.from_batches([batch]).select(list(key.names)))
            bucket = pa.array(key.buckets(key.hashes(typed), buckets), pa.int32())
            yield pa.RecordBatch.from_arrays([*batch.columns, bucket], names=[*batch.schema.names, BUCKET_COLUMN])

    from pyspark.sql.types import IntegerType, StructField, StructType

    schema = StructType([*df.schema.fields, StructField(BUCKET_COLUMN, IntegerType(), False)])
    # each task plans whole buckets (any number of them): one task per core, not per bucket,
    # so a job writes a few large files, not buckets x partitions small ones, and its tasks
    # do not each pay a Python worker's start and a snapshot's load
    clustered = df.mapInArrow(with_bucket, schema).repartition(_tasks(df, buckets), BUCKET_COLUMN).drop(BUCKET_COLUMN)
    job = uuid.uuid4().hex
    writer = clustered.write.format("cdkds").mode("append").option("operation", operation) \
        .option("cdkds.clustered", "true").option("cdkds.job", job)
    if storage_options:
        writer = writer.option("storageOptions", json.dumps(storage_options))
    for k, v in options.items():
        writer = writer.option(k, v)
    writer.save(url)
    result = take_result(Location(url, storage_options or {}), job)
    if result is None:  # the job's commit records it whatever it committed
        raise CdkdsError(f"dataset {name!r}: the upsert job {job} left no result; see the Spark job's log")
    return result


def _tasks(df: "DataFrame", buckets: int) -> int:
    """How many tasks plan a keyed write: the cluster's default parallelism, at most one per bucket."""
    try:
        parallelism = int(df.sparkSession.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: a task per bucket, as before
        return buckets
    return max(1, min(buckets, parallelism))
