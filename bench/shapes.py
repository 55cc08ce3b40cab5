"""Read performance for the dataset shapes users hit, each read natively by cdkds
(``cdkds.connector.load``: cdkds plans, Spark's Parquet source reads), through the Python
source (``spark.read.format("cdkds")``) and against Spark's own Parquet source (or pyarrow)
reading THE SAME data files, in one run.

    python bench/shapes.py                          # all shapes at full size (generating ~1.7 GB)
    python bench/shapes.py --scale 0.02             # a quick try
    python bench/shapes.py --shapes 2,5 --keep      # a subset; --keep reuses generated data

Shapes (Spark on local[2], driver memory 4g; every Spark query is the same text on every
way of reading: ``count(*)`` and ``bit_xor(xxhash64(*))``, which reads every column, unless
stated):

1. ``small-files``: 2M rows x 5 columns written by ``df.repartition(4).write.format("cdkds")``
   (four files, ~57 MB): full-scan aggregation; plain Python ``to_table()`` against
   ``pq.read_table(files)``.
2. ``one-big-file``: 10M rows in ONE ~1 GB Parquet file (three random strings a row):
   full-scan aggregation; plain Python as in 1.
3. ``many-tiny-files``: the quick start's 50k + 1k rows partitioned by
   ``hash(userId, 16), year(ts), month(ts), day(ts)`` over 20 days (~629 files): full-scan
   aggregation; plain Python as in 1.
4. ``one-of-20-columns``: 2M rows x 20 columns (four files), ``sum(c7)`` with no option
   (the native path and Spark's Parquet source prune columns; the Python source cannot);
   the Python source with ``columns=c7`` for reference.
5. ``selective-sorted``: 10M rows in one file, ``k`` ascending, ``k between X and X+10000``:
   as the ``where`` option and as a Spark filter.
6. ``s3``: 2M rows (as 1) on moto's S3 server on 127.0.0.1: the full scan in Spark and
   ``to_table()`` in plain Python, against ``pq.read_table`` over s3fs of the same files
   (Spark's Parquet source cannot read s3:// here: pyspark ships no hadoop-aws, so the
   native path falls back to the Python source), with S3 requests counted at the server.
7. ``hash-point``: 2M rows x 5 columns partitioned by ``hash(userId, 16)`` (16 files),
   ``userId = X``: cdkds prunes to one bucket's file, Spark's Parquet source reads every file.
8. ``predicate-delete``: 2M rows as 1, then ``delete("amount < 10")`` (1% of the rows, a
   tombstone on every file): full scan, against Spark's Parquet source reading the same files
   in full (the rows it returns include the deleted ones; the rows of the cdkds ways are
   checked against the Parquet files filtered by the delete's negation).
9. ``keyed-delete``: as 8 on a keyed dataset (record key ``id``): deletion vectors.

Each comparison runs every way once as a warm-up, then ``--repeat`` rounds of every way in
turn (see bench/measure.py); the ratio (way / anchor: below 1 is faster) is the median of the
rounds' paired ratios. Prints each goal of issue 28 and whether it is met, with the input
partitions and what each Spark plan reads with, and writes bench/results-shapes.json. Not
part of the test suite.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cdkds.catalog import DatasetDescriptor, DatasetRepository

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import (FULL_SCAN, HASH_POINT, ONE_OF_20, PLAIN_PYTHON, PREDICATE_DELETE, RESULTS,  # noqa: E402
                     SELECTIVE, Goal, Way, compare, goals_json, print_table, requests_text)
from s3_counting import RequestCounter, hadoop_aws_available, start_moto  # noqa: E402

AGG = ("count(*) AS n", "bit_xor(xxhash64(*)) AS h")  # every column, exact and order-independent
ALPHABET = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+-", dtype=np.uint8)
T0_MICROS = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
KEYED_DELETE = Goal("after a 1% keyed delete (deletion vectors), native path (the issue sets none: 1.3 as for "
                    "tombstones)", 1.3)
DELETED = "amount < 10"  # 1% of spark_events' rows


# ---------------------------------------------------------------- data

def random_strings(rng: np.random.Generator, rows: int, length: int) -> pa.Array:
    data = ALPHABET[rng.integers(0, len(ALPHABET), rows * length, dtype=np.uint8)]
    offsets = np.arange(0, rows * length + 1, length, dtype=np.int32)
    return pa.StringArray.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(data.tobytes()))


class Data:
    """Generated datasets under one folder; with ``keep``, reused when already complete."""

    def __init__(self, root: Path, scale: float, keep: bool):
        self.root = root / f"scale-{scale:g}"
        self.keep = keep
        self.url = f"file://{self.root}"

    def get(self, name: str, make: Callable[[str], None]) -> Any:
        done = self.root / f"{name}.done"
        if not (self.keep and done.exists()):
            shutil.rmtree(self.root / name, ignore_errors=True)
            done.unlink(missing_ok=True)
            self.root.mkdir(parents=True, exist_ok=True)
            start = time.perf_counter()
            make(name)
            print(f"  generated {name} in {time.perf_counter() - start:.1f} s", flush=True)
            done.write_text("ok")
        ds = DatasetRepository(self.url).load(name)
        print(f"  {name}: {ds.snapshot.row_count:,} rows in {len(ds.files)} files, "
              f"{sum(f.size for f in ds.files) / 1e6:.1f} MB", flush=True)
        return ds


def live_files(ds: Any) -> list[str]:
    """The absolute paths of the files a full scan of ``ds`` reads (from its plan)."""
    return [ds.store.path(f.path) for f in ds.plan().files]


def spark_events(spark: Any, rows: int) -> Any:
    """2M rows of run.py's five columns (int64, double, string, timestamp, int32), seeded."""
    return spark.range(0, rows, 1, 4).selectExpr(
        "id", "rand(1) * 1000 AS amount", "concat('user-', CAST(floor(rand(2) * 100000) AS INT)) AS name",
        f"timestamp_micros({T0_MICROS} + CAST(floor(rand(3) * 2592000000000) AS BIGINT)) AS ts",
        "CAST(floor(rand(4) * 1000000) AS INT) AS userId")


def write_python(url: str, name: str, schema: dict, chunks: Any, strategy: str | None = None,
                 target_file_size: int | None = None) -> None:
    repo = DatasetRepository(url)
    ds = repo.create(name, DatasetDescriptor(schema, strategy))
    options = {"target_file_size": target_file_size} if target_file_size else {}
    with ds.writer(**options) as w:
        for chunk in chunks:
            w.write_batch(chunk)


# ---------------------------------------------------------------- Spark

def spark_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from cdkds.connector import register

    spark = (SparkSession.builder.master("local[2]").appName("cdkds-bench-shapes")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "4g").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.python.filterPushdown.enabled", "true")  # for pushFilters (shape 5)
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


class Spark:
    def __init__(self) -> None:
        self._session = None

    @property
    def session(self) -> Any:
        if self._session is None:
            self._session = spark_session()
        return self._session

    def stop(self) -> None:
        if self._session is not None:
            self._session.stop()


def native_load() -> Callable[..., Any] | None:
    """``cdkds.connector.load`` where this checkout has it."""
    import cdkds.connector

    return getattr(cdkds.connector, "load", None)


def reads_with(df: Any) -> str:
    """What the executed plan of ``df`` reads with: Spark's Parquet FileScan, the Python source, or both."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    kinds = [name for name, mark in (("Parquet FileScan", "FileScan parquet"), ("Python source", "BatchScan cdkds"))
             if mark in plan]
    return " + ".join(kinds) or "?"


def spark_way(label: str, df: Callable[[], Any], query: Callable[[Any], Any], goal: Goal | None = None) -> Way:
    """``query`` over ``df()`` (a new DataFrame each run: planning is part of every run)."""
    sample = df()
    return Way(label, lambda: query(df()).collect(), goal, sample.rdd.getNumPartitions(), reads_with(query(sample)))


def same_rows(a: Any, b: Any) -> bool:
    return [tuple(r) for r in a] == [tuple(r) for r in b]


def compare_spark(shape: str, what: str, ways: list[Way], parquet: Callable[[], Any], query: Callable[[Any], Any],
                  repeat: int, **extra: Any) -> None:
    """``ways`` against Spark's Parquet source over the same files, the same query."""
    compare(shape, what, ways, spark_way("Spark Parquet, same files", parquet, query), repeat, same_rows, **extra)


def cdkds_ways(s: Any, url: str, query: Callable[[Any], Any], goal: Goal, native_where: Callable[[Any], Any] | None
               = None, **options: str) -> list[Way]:
    """The native path (with ``goal``) and the Python source (for reference), the same options."""
    ways = []
    load = native_load()
    if load is not None:
        ways.append(spark_way("native load()", lambda: load(s, url, **options), query, goal))
    ways.append(spark_way("format('cdkds')", lambda: s.read.format("cdkds").options(**options).load(url), query))
    return ways


def compare_python(shape: str, repo_url: str, name: str, files: list[str], repeat: int, goal: Goal | None = PLAIN_PYTHON,
                   storage_options: dict | None = None, filesystem: Any = None, anchor_name: str = "pq.read_table",
                   counter: RequestCounter | None = None) -> None:
    """``to_table()`` (opening and planning included) against ``pq.read_table`` of the same files."""
    way = Way("to_table()", lambda: DatasetRepository(repo_url, storage_options).load(name).to_table(), goal)
    anchor = Way(anchor_name, lambda: pq.read_table(files, filesystem=filesystem, partitioning=None))
    compare(shape, f"plain Python, {len(files)} files, vs {anchor_name}", [way], anchor, repeat,
            lambda a, b: (a.num_rows, sorted(a.column_names)) == (b.num_rows, sorted(b.column_names)), counter)


# ---------------------------------------------------------------- shapes

def full_scan(data: Data, spark: Spark, shape: str, what: str, ds: Any, name: str, repeat: int) -> None:
    files, url, s = live_files(ds), f"{data.url}/{name}", spark.session
    query = lambda df: df.selectExpr(*AGG)  # noqa: E731
    compare_spark(shape, what, cdkds_ways(s, url, query, FULL_SCAN), lambda: s.read.parquet(*files), query, repeat,
                  files=len(files))
    compare_python(shape, data.url, name, files, repeat)


def shape_small_files(data: Data, spark: Spark, scale: float, repeat: int) -> None:
    rows = int(2_000_000 * scale)
    ds = data.get("small_files", lambda name: spark_events(spark.session, rows).repartition(4).write
                  .format("cdkds").mode("append").save(f"{data.url}/{name}"))
    full_scan(data, spark, "1 small-files", f"full scan, {rows:,} rows x 5 cols", ds, "small_files", repeat)


WIDE_SCHEMA = {"type": "record", "name": "Wide", "fields": [
    {"name": "k", "type": "long"}, {"name": "x", "type": "double"}, {"name": "u", "type": "int"},
    {"name": "s1", "type": "string"}, {"name": "s2", "type": "string"}, {"name": "s3", "type": "string"}]}


def wide_chunks(rows: int, string_length: int, seed: int, chunk: int = 500_000) -> Any:
    """Rows ``k`` = 0, 1, ... (ascending) with a double, an int and three random strings."""
    rng = np.random.default_rng(seed)
    for first in range(0, rows, chunk):
        n = min(chunk, rows - first)
        yield pa.table({"k": np.arange(first, first + n, dtype=np.int64), "x": rng.random(n),
                        "u": rng.integers(0, 1_000_000, n).astype(np.int32),
                        **{f"s{i}": random_strings(rng, n, string_length) for i in (1, 2, 3)}})


def shape_one_big_file(data: Data, spark: Spark, scale: float, repeat: int) -> None:
    rows = int(10_000_000 * scale)
    ds = data.get("one_big_file", lambda name: write_python(
        data.url, name, WIDE_SCHEMA, wide_chunks(rows, 26, seed=2), target_file_size=1 << 40))
    full_scan(data, spark, "2 one-big-file", f"full scan, {rows:,} rows, 1 file", ds, "one_big_file", repeat)


def _quickstart() -> Any:
    """examples/quickstart.py, for its rows and schema (its main runs only as a script)."""
    spec = importlib.util.spec_from_file_location("quickstart", Path(__file__).resolve().parent.parent / "examples"
                                                  / "quickstart.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


QUICKSTART = _quickstart()
QUICKSTART_STRATEGY = "hash(userId, 16), year(ts), month(ts), day(ts)"


def shape_many_tiny_files(data: Data, spark: Spark, scale: float, repeat: int) -> None:
    first, second = int(50_000 * scale), int(1_000 * scale)

    def make(name: str) -> None:  # the quick start's two commits
        write_python(data.url, name, QUICKSTART.SCHEMA, [QUICKSTART.make_events(first, 0)], QUICKSTART_STRATEGY)
        ds = DatasetRepository(data.url).load(name)
        with ds.writer() as w:
            w.write_batch(QUICKSTART.make_events(second, first))

    ds = data.get("many_tiny_files", make)
    full_scan(data, spark, "3 many-tiny-files", f"full scan, {first + second:,} rows, {len(ds.files)} files", ds,
              "many_tiny_files", repeat)


def twenty_columns() -> list[str]:
    kinds = ("rand({i}) AS c{i}", "concat('v', CAST(floor(rand({i}) * 1000) AS INT)) AS c{i}",
             "CAST(floor(rand({i}) * 1000) AS INT) AS c{i}", "CAST(floor(rand({i}) * 1000000) AS BIGINT) AS c{i}")
    return [kinds[i % 4].format(i=i) for i in range(20)]  # c7: bigint


def shape_one_of_20_columns(data: Data, spark: Spark, scale: float, repeat: int) -> None:
    rows = int(2_000_000 * scale)

    def make(name: str) -> None:
        spark.session.range(0, rows, 1, 4).selectExpr(*twenty_columns()).repartition(4) \
            .write.format("cdkds").mode("append").save(f"{data.url}/{name}")

    ds = data.get("one_of_20_columns", make)
    files, url, s = live_files(ds), f"{data.url}/one_of_20_columns", spark.session
    query = lambda df: df.selectExpr("sum(c7)")  # noqa: E731
    ways = [*cdkds_ways(s, url, query, ONE_OF_20),
            spark_way("format('cdkds'), columns=c7", lambda: s.read.format("cdkds").option("columns", "c7").load(url),
                      query)]
    compare_spark("4 one-of-20-columns", "sum(c7), no option", ways, lambda: s.read.parquet(*files), query, repeat,
                  files=len(files))


SORTED_SCHEMA = {"type": "record", "name": "Sorted", "fields": [
    {"name": "k", "type": "long"}, {"name": "x", "type": "double"}, {"name": "u", "type": "int"},
    {"name": "s1", "type": "string"}]}


def sorted_chunks(rows: int, chunk: int = 1_000_000) -> Any:
    rng = np.random.default_rng(5)
    for first in range(0, rows, chunk):
        n = min(chunk, rows - first)
        yield pa.table({"k": np.arange(first, first + n, dtype=np.int64), "x": rng.random(n),
                        "u": rng.integers(0, 1_000_000, n).astype(np.int32), "s1": random_strings(rng, n, 16)})


def shape_selective_sorted(data: Data, spark: Spark, scale: float, repeat: int) -> None:
    rows = int(10_000_000 * scale)
    ds = data.get("selective_sorted", lambda name: write_python(
        data.url, name, SORTED_SCHEMA, sorted_chunks(rows), target_file_size=1 << 40))
    files, url, s = live_files(ds), f"{data.url}/selective_sorted", spark.session
    low = rows // 2 + 12_345
    high = low + 10_000
    spark_filter, cdkds_where = f"k BETWEEN {low} AND {high}", f"k >= {low} and k <= {high}"
    parquet = lambda: s.read.parquet(*files).where(spark_filter)  # noqa: E731
    query = lambda df: df.selectExpr(*AGG)  # noqa: E731
    filtered = lambda df: df.where(spark_filter).selectExpr(*AGG)  # noqa: E731
    extra = {"files": len(files), "row_groups": pq.ParquetFile(files[0]).metadata.num_row_groups,
             "rows_selected": high - low + 1}
    load = native_load()
    ways = cdkds_ways(s, url, query, SELECTIVE, where=cdkds_where)
    if load is not None:
        ways.append(spark_way("native load(), Spark filter", lambda: load(s, url), filtered, SELECTIVE))
    ways.append(spark_way("format('cdkds'), pushFilters", lambda: s.read.format("cdkds").option("pushFilters", "true")
                          .load(url), filtered))
    compare_spark("5 selective-sorted", "k between X and X+10000", ways, parquet, query, repeat, **extra)


EVENTS_SCHEMA = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": "double"}, {"name": "name", "type": "string"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}}, {"name": "userId", "type": "int"}]}


def events_chunks(rows: int, chunk: int = 500_000) -> Any:
    """spark_events' columns, drawn by numpy (seeded)."""
    rng = np.random.default_rng(7)
    for first in range(0, rows, chunk):
        n = min(chunk, rows - first)
        names = pa.array(np.char.add("user-", rng.integers(0, 100_000, n).astype(str)))
        ts = pa.array(T0_MICROS + rng.integers(0, 2_592_000_000_000, n), pa.timestamp("us", tz="UTC"))
        yield pa.table({"id": np.arange(first, first + n, dtype=np.int64), "amount": rng.random(n) * 1000,
                        "name": names, "ts": ts, "userId": rng.integers(0, 1_000_000, n).astype(np.int32)})


def shape_hash_point(data: Data, spark: Spark, scale: float, repeat: int) -> None:
    rows = int(2_000_000 * scale)
    ds = data.get("hash_point", lambda name: write_python(data.url, name, EVENTS_SCHEMA, events_chunks(rows),
                                                          "hash(userId, 16)"))
    files, url, s = live_files(ds), f"{data.url}/hash_point", spark.session
    user = next(events_chunks(rows))["userId"][min(rows, 500_000) // 3].as_py()
    where = f"userId = {user}"
    query = lambda df: df.selectExpr(*AGG)  # noqa: E731
    filtered = lambda df: df.where(where).selectExpr(*AGG)  # noqa: E731
    load = native_load()
    ways = cdkds_ways(s, url, query, HASH_POINT, where=where)
    if load is not None:
        ways.append(spark_way("native load(), Spark filter", lambda: load(s, url), filtered))
    ways.append(spark_way("format('cdkds'), pushFilters", lambda: s.read.format("cdkds").option("pushFilters", "true")
                          .load(url), filtered))
    compare_spark("7 hash-point", f"{where} of {rows:,} rows, hash(userId, 16)", ways,
                  lambda: s.read.parquet(*files).where(where), query, repeat, files=len(files),
                  files_read=len(ds.plan(where).files))


def deleted_dataset(data: Data, spark: Spark, name: str, rows: int, **write_options: str) -> Any:
    def make(name: str) -> None:
        spark_events(spark.session, rows).repartition(4).write.format("cdkds").options(**write_options) \
            .mode("append").save(f"{data.url}/{name}")
        DatasetRepository(data.url).load(name).delete(DELETED)

    ds = data.get(name, make)
    print(f"  {name}: {ds.history()[-1]}", flush=True)
    return ds


def compare_after_delete(data: Data, spark: Spark, shape: str, ds: Any, name: str, goal: Goal, repeat: int) -> None:
    """The full scan of a dataset after a delete against Spark's Parquet source reading the same
    files in full; the rows are checked against those files less the rows the delete matched."""
    files, url, s = live_files(ds), f"{data.url}/{name}", spark.session
    query = lambda df: df.selectExpr(*AGG)  # noqa: E731
    kept = f"NOT coalesce({DELETED}, false)"
    expected = [tuple(r) for r in s.read.parquet(*files).where(kept).selectExpr(*AGG).collect()]
    ways = [*cdkds_ways(s, url, query, goal),
            spark_way(f"Parquet, WHERE {kept}", lambda: s.read.parquet(*files).where(kept), query)]
    anchor = spark_way("Spark Parquet, same files", lambda: s.read.parquet(*files), query)
    compare(shape, f"full scan after delete({DELETED!r})", ways, anchor, repeat,
            lambda a, _: [tuple(r) for r in a] == expected, files=len(files), rows_kept=expected[0][0])
    table = Way("to_table()", lambda: DatasetRepository(data.url).load(name).to_table())
    compare(shape, "plain Python (reference)", [table], Way("pq.read_table", lambda: pq.read_table(files)), repeat,
            lambda a, _: a.num_rows == expected[0][0])


def shape_predicate_delete(data: Data, spark: Spark, scale: float, repeat: int) -> None:
    ds = deleted_dataset(data, spark, "predicate_delete", int(2_000_000 * scale))
    compare_after_delete(data, spark, "8 predicate-delete", ds, "predicate_delete", PREDICATE_DELETE, repeat)


def shape_keyed_delete(data: Data, spark: Spark, scale: float, repeat: int) -> None:
    ds = deleted_dataset(data, spark, "keyed_delete", int(2_000_000 * scale), recordKey="id")
    compare_after_delete(data, spark, "9 keyed-delete", ds, "keyed_delete", KEYED_DELETE, repeat)


# ---------------------------------------------------------------- S3 (moto)

def shape_s3(data: Data, spark: Spark, scale: float, repeat: int) -> None:
    import boto3
    import s3fs

    rows = int(2_000_000 * scale)
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    why = "hadoop-aws is in pyspark/jars but not set up" if hadoop_aws_available() else "no hadoop-aws in pyspark/jars"
    print(f"  Spark's Parquet source does not read s3:// here ({why}): the anchor is pyarrow's pq.read_table over "
          "s3fs of the same files", flush=True)
    server, endpoint = start_moto()
    try:
        counter = RequestCounter(endpoint)
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")
        options = {"client_kwargs": {"endpoint_url": endpoint}, "key": "testing", "secret": "testing"}
        repo_url, url = "s3://bench/lake", "s3://bench/lake/events"
        s = spark.session
        counter.reset()
        start = time.perf_counter()
        spark_events(s, rows).repartition(4).write.format("cdkds").mode("append") \
            .option("storageOptions", json.dumps(options)).save(url)
        written = counter.read()
        ds = DatasetRepository(repo_url, options).load("events")
        files = live_files(ds)  # bucket/key: s3fs paths
        print(f"  wrote {rows:,} rows to {url} in {time.perf_counter() - start:.1f} s: {len(ds.files)} files, "
              f"{sum(f.size for f in ds.files) / 1e6:.1f} MB; S3 requests {requests_text(written)}", flush=True)
        fs = s3fs.S3FileSystem(**options)
        query = lambda df: df.selectExpr(*AGG)  # noqa: E731
        ways = cdkds_ways(s, url, query, None, storageOptions=json.dumps(options))
        anchor = Way("pq.read_table over s3fs", lambda: pq.read_table(files, filesystem=fs, partitioning=None))
        compare("6 s3", f"Spark full scan, {rows:,} rows (anchor not Spark)", ways, anchor, repeat,
                lambda a, b: a[0][0] == b.num_rows, counter, files=len(files),
                note="the anchor is not Spark: pyspark has no hadoop-aws")
        compare_python("6 s3", repo_url, "events", files, repeat, None, options, fs, "pq.read_table over s3fs", counter)
        from pyarrow.fs import S3FileSystem  # pyarrow's own S3 client, for reference

        native = S3FileSystem(access_key="testing", secret_key="testing", region="us-east-1",
                              endpoint_override=endpoint.removeprefix("http://"), scheme="http")
        compare_python("6 s3", repo_url, "events", files, repeat, None, options, native, "pq.read_table, pyarrow S3",
                       counter)
    finally:
        server.kill()
        server.wait(10)


SHAPES: dict[str, Callable[[Data, Spark, float, int], None]] = {
    "1": shape_small_files, "2": shape_one_big_file, "3": shape_many_tiny_files,
    "4": shape_one_of_20_columns, "5": shape_selective_sorted, "6": shape_s3, "7": shape_hash_point,
    "8": shape_predicate_delete, "9": shape_keyed_delete}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default=",".join(SHAPES), help="a comma-separated subset of 1-9")
    parser.add_argument("--scale", type=float, default=1.0, help="scales every row count (0.02 for a quick try)")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds after the warm-up")
    parser.add_argument("--data", default="/tmp/cdkds-bench-shapes", help="where generated datasets go")
    parser.add_argument("--keep", action="store_true", help="keep generated data and reuse it in later runs")
    parser.add_argument("--output", default=str(Path(__file__).with_name("results-shapes.json")))
    args = parser.parse_args()
    chosen = [s.strip() for s in args.shapes.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SHAPES]
    if unknown:
        parser.error(f"unknown shapes {unknown}; choose from {', '.join(SHAPES)}")
    data = Data(Path(args.data), args.scale, args.keep)
    spark = Spark()
    started, load_before = dt.datetime.now(dt.timezone.utc), os.getloadavg()
    if native_load() is None:
        print("cdkds.connector.load is not in this checkout: the native Spark path is left out", flush=True)
    try:
        for key in chosen:
            print(f"-- shape {key}: {SHAPES[key].__name__[len('shape_'):].replace('_', '-')}", flush=True)
            SHAPES[key](data, spark, args.scale, args.repeat)
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(data.root, ignore_errors=True)
        print_table()
        Path(args.output).write_text(json.dumps({
            "when": started.isoformat(), "scale": args.scale, "repeat": args.repeat, "shapes": chosen,
            "finished": dt.datetime.now(dt.timezone.utc).isoformat(), "cores": os.cpu_count(),
            "load_average": {"before": load_before, "after": os.getloadavg()}, "spark_master": "local[2]",
            "timing": "one warm-up of every way, then `repeat` interleaved rounds; ratio = median of paired ratios",
            "s3_anchor": "pq.read_table over s3fs (pyspark has no hadoop-aws: Spark's Parquet source cannot read s3)",
            "goals": goals_json(), "results": RESULTS}, indent=2))
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
