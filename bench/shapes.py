"""Read performance for the dataset shapes users hit, each against Spark's own Parquet source
(or pyarrow) reading THE SAME data files, in one run.

    python bench/shapes.py                          # all shapes at full size (generating ~1.5 GB)
    python bench/shapes.py --scale 0.02             # a quick try
    python bench/shapes.py --shapes 2,5 --keep      # a subset; --keep reuses generated data

Shapes (Spark on local[2], driver memory 4g; every Spark query is the same text on both
sources: ``count(*)`` and ``bit_xor(xxhash64(*))``, which reads every column, unless stated):

1. ``small-files``: 2M rows x 5 columns written by ``df.repartition(4).write.format("cdkds")``
   (four files, ~57 MB): full-scan aggregation; plain Python ``to_table()`` against
   ``pq.read_table(files)``.
2. ``one-big-file``: 10M rows in ONE ~1 GB Parquet file (three random strings a row):
   full-scan aggregation; plain Python as in 1.
3. ``many-tiny-files``: the quick start's 50k + 1k rows partitioned by
   ``hash(userId, 16), year(ts), month(ts), day(ts)`` over 20 days (~629 files): full-scan
   aggregation; plain Python as in 1.
4. ``one-of-20-columns``: 2M rows x 20 columns (four files), ``sum(c7)``: Spark's Parquet
   source prunes columns; cdkds without options (reads all 20) and with ``columns=c7``.
5. ``selective-sorted``: 10M rows in one file, ``k`` ascending, ``k between X and X+10000``:
   cdkds with the predicate as the ``where`` option and as a Spark filter with
   ``pushFilters=true``, against Spark's Parquet source with the filter (goal: <= 0.5x).
6. ``s3``: 2M rows (as 1) on moto's S3 server on 127.0.0.1: the full scan through cdkds in
   Spark and ``to_table()`` in plain Python, against ``pq.read_table`` over s3fs of the same
   files (Spark's Parquet source cannot read s3:// here: pyspark ships no hadoop-aws), with
   S3 requests counted at the server (a WSGI middleware in front of moto, in its own process,
   so requests from Spark's Python workers are counted too).

Each timing: one warm-up, then best of ``--repeat`` (default 3; the median is kept too).
Prints a table (ratio = cdkds / anchor: below 1 is faster; goals <= 1.1 for full scans,
<= 0.5 for the selective query) with the input partitions Spark used for each source, and
writes bench/results-shapes.json. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cdkds.catalog import DatasetDescriptor, DatasetRepository

RESULTS: list[dict[str, Any]] = []
FULL_GOAL, SELECTIVE_GOAL = 1.1, 0.5
AGG = ("count(*) AS n", "bit_xor(xxhash64(*)) AS h")  # every column, exact and order-independent
ALPHABET = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+-", dtype=np.uint8)
T0_MICROS = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z


# ---------------------------------------------------------------- timing and reporting

class Timing:
    def __init__(self, runs: list[float], result: Any, requests: dict | None):
        self.runs, self.result, self.requests = runs, result, requests

    @property
    def best(self) -> float:
        return min(self.runs)

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    def as_json(self) -> dict:
        return {"best_s": self.best, "median_s": self.median, "runs_s": self.runs, "requests": self.requests}


def timed(fn: Callable[[], Any], repeat: int, counter: "RequestCounter | None" = None) -> Timing:
    """One warm-up, then ``repeat`` timed runs; with a counter, the S3 requests of the last run."""
    fn()
    runs, result, requests = [], None, None
    for _ in range(repeat):
        if counter:
            counter.reset()
        start = time.perf_counter()
        result = fn()
        runs.append(time.perf_counter() - start)
        if counter:
            requests = counter.read()
    return Timing(runs, result, requests)


def record(shape: str, what: str, cdkds: Timing, anchor: Timing, anchor_name: str, goal: float,
           partitions: tuple[int | None, int | None] = (None, None), **extra: Any) -> None:
    ratio = cdkds.best / anchor.best
    RESULTS.append({"shape": shape, "what": what, "cdkds": cdkds.as_json(), "anchor_name": anchor_name,
                    "anchor": anchor.as_json(), "ratio": ratio, "goal": goal, "met": ratio <= goal,
                    "partitions_cdkds": partitions[0], "partitions_anchor": partitions[1], **extra})
    parts = _partitions_text(partitions[0], partitions[1])
    print(f"  {what:44} cdkds {cdkds.best:8.3f} s | {anchor_name:24} {anchor.best:8.3f} s | {ratio:6.2f}x "
          f"(goal <= {goal}) {'met' if ratio <= goal else 'NOT met':7} | partitions {parts}", flush=True)
    for name, t in (("cdkds", cdkds), (anchor_name, anchor)):
        if t.requests is not None:
            print(f"      S3 requests, {name}: {_requests_text(t.requests)}", flush=True)


def _partitions_text(cdkds: int | None, anchor: int | None) -> str:
    return "-" if cdkds is None and anchor is None else f"{cdkds if cdkds is not None else '-'}/" \
        f"{anchor if anchor is not None else '-'}"


def _requests_text(counts: dict) -> str:
    kinds = {k: v for k, v in counts.items() if not k.startswith("bytes")}
    return f"{sum(kinds.values())} ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}; " \
           f"{counts.get('bytes_out', 0) / 1e6:.1f} MB down, {counts.get('bytes_in', 0) / 1e6:.1f} MB up)"


def print_table() -> None:
    print("\nshape                 query                                         cdkds s   anchor s   ratio  goal  met"
          "  partitions cdkds/anchor")
    for r in RESULTS:
        parts = _partitions_text(r["partitions_cdkds"], r["partitions_anchor"])
        print(f"{r['shape']:21} {r['what']:44} {r['cdkds']['best_s']:8.3f} {r['anchor']['best_s']:10.3f} "
              f"{r['ratio']:6.2f}x {r['goal']:5} {'yes' if r['met'] else 'no ':4} {parts}")
        print(f"{'':21}   anchor: {r['anchor_name']}")


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
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self._session = None

    @property
    def session(self) -> Any:
        if self._session is None:
            self._session = spark_session()
        return self._session

    def stop(self) -> None:
        if self._session is not None:
            self._session.stop()


def compare_spark(shape: str, what: str, cdkds_df: Callable[[], Any], parquet_df: Callable[[], Any],
                  query: Callable[[Any], Any], repeat: int, goal: float = FULL_GOAL,
                  counter: "RequestCounter | None" = None, **extra: Any) -> None:
    """``query`` over ``cdkds_df()`` and ``parquet_df()`` (new DataFrames each run), best of ``repeat``."""
    partitions = (cdkds_df().rdd.getNumPartitions(), parquet_df().rdd.getNumPartitions())
    a = timed(lambda: query(cdkds_df()).collect(), repeat, counter)
    b = timed(lambda: query(parquet_df()).collect(), repeat)
    if [tuple(r) for r in a.result] != [tuple(r) for r in b.result]:
        raise AssertionError(f"{shape} {what}: cdkds {a.result} != Spark Parquet {b.result}")
    record(shape, what, a, b, "Spark Parquet, same files", goal, partitions, **extra)


def compare_python(shape: str, repo_url: str, name: str, files: list[str], repeat: int,
                   storage_options: dict | None = None, filesystem: Any = None, anchor_name: str = "pq.read_table",
                   counter: "RequestCounter | None" = None) -> None:
    """``to_table()`` (opening and planning included) against ``pq.read_table`` of the same files."""
    a = timed(lambda: DatasetRepository(repo_url, storage_options).load(name).to_table(), repeat, counter)
    b = timed(lambda: pq.read_table(files, filesystem=filesystem, partitioning=None), repeat, counter)
    if (a.result.num_rows, sorted(a.result.column_names)) != (b.result.num_rows, sorted(b.result.column_names)):
        raise AssertionError(f"{shape}: to_table {a.result.shape} != read_table {b.result.shape}")
    record(shape, "plain Python: to_table()", a, b, anchor_name, FULL_GOAL)


# ---------------------------------------------------------------- shapes

def shape_small_files(data: Data, spark: Spark, scale: float, repeat: int) -> None:
    rows = int(2_000_000 * scale)

    def make(name: str) -> None:
        spark_events(spark.session, rows).repartition(4).write.format("cdkds").mode("append") \
            .save(f"{data.url}/{name}")

    ds = data.get("small_files", make)
    files, url = live_files(ds), f"{data.url}/small_files"
    s = spark.session
    compare_spark("1 small-files", f"full scan, {rows:,} rows x 5 cols", lambda: s.read.format("cdkds").load(url),
                  lambda: s.read.parquet(*files), lambda df: df.selectExpr(*AGG), repeat, files=len(files))
    compare_python("1 small-files", data.url, "small_files", files, repeat)


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
    files, url = live_files(ds), f"{data.url}/one_big_file"
    s = spark.session
    compare_spark("2 one-big-file", f"full scan, {rows:,} rows, 1 file", lambda: s.read.format("cdkds").load(url),
                  lambda: s.read.parquet(*files), lambda df: df.selectExpr(*AGG), repeat, files=len(files))
    compare_python("2 one-big-file", data.url, "one_big_file", files, repeat)


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
    files, url = live_files(ds), f"{data.url}/many_tiny_files"
    s = spark.session
    compare_spark("3 many-tiny-files", f"full scan, {first + second:,} rows, {len(files)} files",
                  lambda: s.read.format("cdkds").load(url), lambda: s.read.parquet(*files),
                  lambda df: df.selectExpr(*AGG), repeat, files=len(files))
    compare_python("3 many-tiny-files", data.url, "many_tiny_files", files, repeat)


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
    files, url = live_files(ds), f"{data.url}/one_of_20_columns"
    s = spark.session
    query = lambda df: df.selectExpr("sum(c7)")  # noqa: E731
    parquet = lambda: s.read.parquet(*files)  # noqa: E731
    compare_spark("4 one-of-20-columns", "sum(c7), no options (reads 20 cols)",
                  lambda: s.read.format("cdkds").load(url), parquet, query, repeat, files=len(files))
    compare_spark("4 one-of-20-columns", "sum(c7), option columns=c7",
                  lambda: s.read.format("cdkds").option("columns", "c7").load(url), parquet, query, repeat)


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
    files, url = live_files(ds), f"{data.url}/selective_sorted"
    low = rows // 2 + 12_345
    high = low + 10_000
    spark_filter, cdkds_where = f"k BETWEEN {low} AND {high}", f"k >= {low} and k <= {high}"
    s = spark.session
    parquet = lambda: s.read.parquet(*files).where(spark_filter)  # noqa: E731
    query = lambda df: df.selectExpr(*AGG)  # noqa: E731
    extra = {"files": len(files), "row_groups": pq.ParquetFile(files[0]).metadata.num_row_groups,
             "rows_selected": high - low + 1}
    compare_spark("5 selective-sorted", "k between X and X+10000, where option",
                  lambda: s.read.format("cdkds").option("where", cdkds_where).load(url), parquet, query, repeat,
                  SELECTIVE_GOAL, **extra)
    compare_spark("5 selective-sorted", "the same as a Spark filter, pushFilters",
                  lambda: s.read.format("cdkds").option("pushFilters", "true").load(url).where(spark_filter),
                  parquet, query, repeat, SELECTIVE_GOAL, **extra)
    # Spark's Parquet source skips row groups by their statistics too: the same anchor without
    # that (spark.sql.parquet.filterPushdown=false) shows what the skipping is worth
    s.conf.set("spark.sql.parquet.filterPushdown", "false")
    try:
        compare_spark("5 selective-sorted", "where option; anchor without row-group skipping",
                      lambda: s.read.format("cdkds").option("where", cdkds_where).load(url), parquet, query, repeat,
                      SELECTIVE_GOAL, **extra)
    finally:
        s.conf.unset("spark.sql.parquet.filterPushdown")


# ---------------------------------------------------------------- S3 (moto)

# moto's server behind a WSGI middleware counting requests by kind (and response bytes), in its
# own process: Spark's Python workers are processes of their own, so counting at the server is
# the one place every request is seen. GET /_requests returns the counts (?reset clears them).
MOTO_SERVER = r"""
import json, sys, threading
from collections import Counter
from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

app = DomainDispatcherApplication(create_backend_app)
counts, lock = Counter(), threading.Lock()

def kind(environ):
    method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "/")
    bucket, _, key = path.lstrip("/").partition("/")
    if not key:
        return "LIST" if method == "GET" else method + " bucket"
    if method == "GET":
        return "GET range" if environ.get("HTTP_RANGE") else "GET"
    return method

def counting(environ, start_response):
    if environ.get("PATH_INFO") == "/_requests":
        with lock:
            body = json.dumps(dict(counts)).encode()
            if environ.get("QUERY_STRING") == "reset":
                counts.clear()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]
    with lock:
        counts[kind(environ)] += 1
        counts["bytes_in"] += int(environ.get("CONTENT_LENGTH") or 0)

    def start(status, headers, *rest):
        size = next((int(v) for k, v in headers if k.lower() == "content-length"), 0)
        with lock:
            counts["bytes_out"] += size
        return start_response(status, headers, *rest)
    return app(environ, start)

server = make_server("127.0.0.1", int(sys.argv[1]), counting, threaded=True, request_handler=MotoRequestHandler)
server.serve_forever()
"""


class RequestCounter:
    def __init__(self, endpoint: str):
        self.endpoint = endpoint

    def _get(self, query: str = "") -> dict:
        with urllib.request.urlopen(f"{self.endpoint}/_requests{query}", timeout=10) as r:
            return json.loads(r.read())

    def reset(self) -> None:
        self._get("?reset")

    def read(self) -> dict:
        return self._get()


def start_moto() -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-c", MOTO_SERVER, str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            RequestCounter(endpoint).read()
            return server, endpoint
        except OSError:
            if time.time() > deadline or server.poll() is not None:
                server.kill()
                raise RuntimeError("moto's S3 server did not start")
            time.sleep(0.2)


def hadoop_aws_available() -> bool:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    return any("hadoop-aws" in p.name for p in jars.glob("*.jar"))


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
              f"{sum(f.size for f in ds.files) / 1e6:.1f} MB; S3 requests {_requests_text(written)}", flush=True)
        fs = s3fs.S3FileSystem(**options)

        def cdkds_query() -> Any:
            return s.read.format("cdkds").option("storageOptions", json.dumps(options)).load(url).selectExpr(*AGG) \
                .collect()

        partitions = s.read.format("cdkds").option("storageOptions", json.dumps(options)).load(url) \
            .rdd.getNumPartitions()
        a = timed(cdkds_query, repeat, counter)
        b = timed(lambda: pq.read_table(files, filesystem=fs, partitioning=None), repeat, counter)
        if a.result[0][0] != b.result.num_rows:
            raise AssertionError(f"s3: Spark counted {a.result[0][0]} rows, pq.read_table {b.result.num_rows}")
        record("6 s3", f"Spark cdkds full scan, {rows:,} rows", a, b, "pq.read_table over s3fs", FULL_GOAL,
               (partitions, None), files=len(files), note="the anchor is not Spark: pyspark has no hadoop-aws")
        compare_python("6 s3", repo_url, "events", files, repeat, options, fs, "pq.read_table over s3fs", counter)
        from pyarrow.fs import S3FileSystem  # pyarrow's own S3 client, for reference

        native = S3FileSystem(access_key="testing", secret_key="testing", region="us-east-1",
                              endpoint_override=endpoint.removeprefix("http://"), scheme="http")
        compare_python("6 s3", repo_url, "events", files, repeat, options, native, "pq.read_table, pyarrow S3", counter)
    finally:
        server.kill()
        server.wait(10)


SHAPES: dict[str, Callable[[Data, Spark, float, int], None]] = {
    "1": shape_small_files, "2": shape_one_big_file, "3": shape_many_tiny_files,
    "4": shape_one_of_20_columns, "5": shape_selective_sorted, "6": shape_s3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="1,2,3,4,5,6", help="a comma-separated subset of 1-6")
    parser.add_argument("--scale", type=float, default=1.0, help="scales every row count (0.02 for a quick try)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", default="/tmp/cdkds-bench-shapes", help="where generated datasets go")
    parser.add_argument("--keep", action="store_true", help="keep generated data and reuse it in later runs")
    parser.add_argument("--output", default=str(Path(__file__).with_name("results-shapes.json")))
    args = parser.parse_args()
    chosen = [s.strip() for s in args.shapes.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SHAPES]
    if unknown:
        parser.error(f"unknown shapes {unknown}; choose from {', '.join(SHAPES)}")
    data = Data(Path(args.data), args.scale, args.keep)
    spark = Spark(args)
    started = dt.datetime.now(dt.timezone.utc)
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
            "cores": os.cpu_count(), "spark_master": "local[2]", "timing": "best of repeat after one warm-up",
            "s3_anchor": "pq.read_table over s3fs (pyspark has no hadoop-aws: Spark's Parquet source cannot read s3)",
            "results": RESULTS}, indent=2))
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
