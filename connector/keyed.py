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

import pyarrow as pa  # at module level: Spark reads the Arrow UDF's type hints from its globals

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from cdkds.catalog.keyed.operations import UpsertResult

TASK_COLUMN = "_cdkds_task"  # a value Spark's hash partitioning sends to the task of the row's bucket


def upsert(df: "DataFrame", url: str, operation: str = "upsert", storage_options: dict | None = None,
           **options: str) -> "UpsertResult":
    """Write ``df`` into the keyed dataset at ``url`` with ``operation`` (upsert, insert,
    update or delete), in one commit; returns the counts and the revision. A dataset that
    does not exist is created from the DataFrame's schema and ``options`` (``recordKey``,
    ``orderingField``, ``partitionBy``, ``property.index.buckets``...). A concurrent commit
    that wrote one of the same keys fails the job with :class:`CommitConflictError`
    naming the key."""
    import numpy as np

    from cdkds.catalog import CdkdsError, DatasetNotFoundError, DatasetRepository
    from cdkds.catalog.keyed.keys import RecordKey
    from cdkds.catalog.repository import split_dataset_url
    from cdkds.connector.native import unused_names
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
    exact = df.sparkSession.conf.get("spark.sql.caseSensitive", "false").lower() == "true"
    columns, seen = df.columns, {}
    for i, c in enumerate(columns):  # Spark could not tell these apart when it resolves the key columns
        first = seen.setdefault(c if exact else c.lower(), i)
        if first != i:
            raise InvalidOptionError(f"dataset {name!r}: the DataFrame has columns {columns[first]!r} and {c!r}, "
                                     f"which Spark cannot tell apart; rename or drop one")
    missing = [k for k in key.names if k not in df.columns]
    if missing:
        raise InvalidOptionError(f"dataset {name!r}: the DataFrame has no record key column {missing[0]!r}")

    # each task plans whole buckets (any number of them): one task per core, not per bucket,
    # so a job writes a few large files, not buckets x partitions small ones, and its tasks
    # do not each pay a Python worker's start and a snapshot's load
    tasks = _tasks(df, buckets)
    spread = np.array(task_values(tasks), dtype=np.int32)
    (column,) = unused_names(df.columns, TASK_COLUMN)  # a DataFrame may have a column of that name

    # a scalar Arrow UDF of the key columns alone: the rest of each row stays in the JVM
    # (a mapInArrow sent every column to Python and back, most of the time before the shuffle)
    from pyspark.sql import functions as F

    def task_of(*columns: pa.Array) -> pa.Array:
        typed = key.keys(pa.Table.from_arrays(list(columns), names=list(key.names)))
        return pa.array(spread[key.buckets(key.hashes(typed), buckets) % tasks], pa.int32())

    task = F.arrow_udf(task_of, "int")
    clustered = df.withColumn(column, task(*(F.col(k) for k in key.names))) \
        .repartition(tasks, column).drop(column)
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


def task_values(tasks: int) -> list[int]:
    """For each task ``t`` of a job of ``tasks``, the least int that Spark's hash partitioning
    into ``tasks`` partitions sends to partition ``t``: a row of bucket ``b`` carries the
    value of task ``b mod tasks``, so each task gets whole buckets and as many as the others
    (hashing the bucket numbers themselves gave one task of two 37 buckets of 64)."""
    values: list[int | None] = [None] * tasks
    missing, v = tasks, 0
    while missing:
        t = spark_hash_int(v) % tasks  # Spark's pmod: Python's % of a positive divisor is never negative
        if values[t] is None:
            values[t], missing = v, missing - 1
        v += 1
    return values  # type: ignore[return-value]


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark SQL's ``hash`` of an int (Murmur3 x86 32-bit, seed 42), as ``HashPartitioning``
    computes it: a signed 32-bit int."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    k1 = rotl((value & mask) * 0xCC9E2D51 & mask, 15) * 0x1B873593 & mask
    h1 = (rotl(seed ^ k1, 13) * 5 + 0xE6546B64) & mask
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & mask
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1
