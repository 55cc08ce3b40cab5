"""cdkds benchmarks, side by side in one run with Spark's Parquet source and delta-rs.

    python bench/run.py                 # everything, 10M rows (about 15 minutes on 2 cores)
    python bench/run.py --rows 1000000  # smaller
    python bench/run.py --only commit,python

Prints a table of timings and ratios (cdkds / the other tool: below 1 is faster) and
writes bench/results.json. Not part of the test suite: machines here are shared, so each
timing is the best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from cdkds.catalog import DatasetDescriptor, DatasetRepository

RESULTS: list[dict[str, Any]] = []
EVENT_SCHEMA = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": "double"}, {"name": "name", "type": "string"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}}, {"name": "userId", "type": "int"}]}


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def record(group: str, what: str, cdkds: float, other: float | None, other_name: str, unit: str = "s",
           **extra: Any) -> None:
    row = {"group": group, "what": what, "cdkds": cdkds, "other": other, "other_name": other_name, "unit": unit,
           "ratio": (cdkds / other) if other else None, **extra}
    RESULTS.append(row)
    ratio = f"{row['ratio']:.2f}x" if row["ratio"] is not None else "-"
    other_text = f"{other:.4g} {unit}" if other is not None else "-"
    print(f"{group:8} {what:52} cdkds {cdkds:.4g} {unit:3} | {other_name:16} {other_text:12} | {ratio}", flush=True)


def events(rows: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    start = np.datetime64("2026-01-01T00:00:00", "us").astype(np.int64)
    return pa.table({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "amount": pa.array(rng.random(rows) * 1000),
        "name": pa.array(np.char.add("user-", (rng.integers(0, 100_000, rows)).astype(str))),
        "ts": pa.array(start + rng.integers(0, 30 * 86_400_000_000, rows), pa.timestamp("us", tz="UTC")),
        "userId": pa.array(rng.integers(0, 1_000_000, rows).astype(np.int32)),
    })


def write_dataset(root: str, name: str, table: pa.Table, strategy: str | None) -> Any:
    repo = DatasetRepository(f"file://{root}")
    ds = repo.create(name, DatasetDescriptor(EVENT_SCHEMA, strategy))
    with ds.writer() as w:
        w.write_batch(table)  # one call: each partition's rows go to one file
    return ds


# ---------------------------------------------------------------- Spark

def spark_session():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("cdkds-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "6g").config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def bench_spark(root: str, rows: int, repeat: int) -> None:
    spark = spark_session()
    table = events(rows)
    plain = write_dataset(root, "plain", table, None)
    data = f"{root}/plain/data"

    def scan_cdkds():
        return spark.read.format("cdkds").load(f"file://{root}/plain").selectExpr(
            "sum(id)", "round(sum(amount))", "max(name)", "max(ts)", "sum(userId)").collect()

    def scan_parquet():  # the same aggregate (a float sum depends on order, so it is rounded)
        return spark.read.parquet(data).selectExpr(
            "sum(id)", "round(sum(amount))", "max(name)", "max(ts)", "sum(userId)").collect()

    scan_cdkds()  # warm the JVM and the Python workers
    a, ra = best(scan_cdkds, repeat)
    b, rb = best(scan_parquet, repeat)
    assert ra == rb, (ra, rb)
    record("spark", f"full scan, {rows:,} rows x 5 columns", a, b, "spark parquet", files=len(plain.files))

    # selective queries: cdkds hash(userId, 53) + day(ts) vs Hive-style partitions Spark can prune
    bucketed = write_dataset(root, "bucketed", table, "hash(userId, 53), day(ts)")
    hive = f"{root}/hive"
    df = spark.read.format("cdkds").load(f"file://{root}/plain")
    df.selectExpr("*", "pmod(hash(userId), 53) AS userId_bucket", "to_date(ts) AS day") \
        .write.partitionBy("userId_bucket", "day").parquet(hive)
    probe = int(table.column("userId")[12345].as_py())
    where_user = f"userId = {probe}"
    where_time = "ts >= '2026-01-28' AND ts < '2026-01-29'"
    for label, where in (("userId = X (hash bucket)", where_user), ("one day of ts (day partitions)", where_time)):
        plan = bucketed.plan(where.replace("AND", "and"))

        def selective_cdkds():
            return spark.read.format("cdkds").option("where", where.replace("AND", "and")) \
                .load(f"file://{root}/bucketed").count()

        def selective_parquet():
            return spark.read.parquet(hive).filter(where).count()

        selective_cdkds()
        a, ca = best(selective_cdkds, repeat)
        b, cb = best(selective_parquet, repeat)
        assert ca == cb, (label, ca, cb)
        hive_files = sum(1 for _ in Path(hive).rglob("*.parquet"))
        read_by_spark = hive_files if "userId" in label else sum(1 for _ in Path(hive).rglob("day=2026-01-28/*.parquet"))
        record("spark", f"selective: {label}", a, b, "spark parquet", files_cdkds=len(plan.files),
               files_total=plan.total_files, files_spark=read_by_spark, files_spark_total=hive_files, rows=ca)

    # writes with partitioning, commit included
    source = spark.read.parquet(data).cache()
    source.count()

    def write_cdkds():
        target = f"file://{root}/w_{time.monotonic_ns()}"
        source.write.format("cdkds").mode("append").option("partitionBy", "hash(userId, 16), day(ts)").save(target)

    def write_parquet():
        target = f"{root}/p_{time.monotonic_ns()}"
        source.selectExpr("*", "pmod(hash(userId), 16) AS userId_bucket", "to_date(ts) AS day") \
            .write.partitionBy("userId_bucket", "day").parquet(target)

    a, _ = best(write_cdkds, repeat)
    b, _ = best(write_parquet, repeat)
    record("spark", f"write {rows:,} rows, hash(userId, 16) + day(ts)", a, b, "spark parquet")
    spark.stop()


# ---------------------------------------------------------------- commits and opening

def bench_commits(root: str, repeat: int, s3_endpoint: str | None) -> None:
    targets = [("file", f"file://{root}/commits", {})]
    if s3_endpoint:
        import boto3

        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            os.environ.setdefault(name, "testing")  # moto accepts any credentials
        os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

        bucket = f"bench-{time.time_ns()}"
        boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=bucket)
        targets.append(("s3 (moto)", f"s3://{bucket}/lake", {"client_kwargs": {"endpoint_url": s3_endpoint},
                                                          "use_listings_cache": False}))
    for label, url, options in targets:
        repo = DatasetRepository(url, options)
        ds = repo.create("c", DatasetDescriptor(EVENT_SCHEMA))
        latencies = []
        for _ in range(200 if label == "file" else 50):
            start = time.perf_counter()
            ds.snapshot = ds.log.commit(ds.snapshot, "append", [])
            latencies.append(time.perf_counter() - start)
        record("log", f"median commit latency, no data, {label}", statistics.median(latencies) * 1000, None, "-",
               unit="ms")
    import deltalake

    for commits in (1_000, 10_000):
        repo = DatasetRepository(f"file://{root}/open{commits}")
        ds = repo.create("t", DatasetDescriptor(EVENT_SCHEMA))
        small = events(10)
        for k in range(commits):
            if k % 50 == 0:
                with ds.writer() as w:
                    w.write_batch(small)
            else:
                ds.snapshot = ds.log.commit(ds.snapshot, "append", [])
        a, opened = best(lambda: repo.load("t"), repeat)
        assert opened.version == commits
        other = None
        if commits == 1_000:
            path = f"{root}/delta-open{commits}"
            for k in range(commits):
                deltalake.write_deltalake(path, small, mode="append")
            other, _ = best(lambda: deltalake.DeltaTable(path), repeat)
        record("log", f"open after {commits:,} commits (checkpoints every 10)", a, other, "delta-rs")


# ---------------------------------------------------------------- plain Python vs delta-rs

def bench_python(root: str, rows: int, repeat: int) -> None:
    import deltalake

    table = events(rows)

    def append_cdkds():
        repo = DatasetRepository(f"file://{root}/py-{time.monotonic_ns()}")
        ds = repo.create("t", DatasetDescriptor(EVENT_SCHEMA))
        with ds.writer() as w:
            w.write_batch(table)
        return repo

    def append_delta():
        path = f"{root}/delta-{time.monotonic_ns()}"
        deltalake.write_deltalake(path, table)
        return path

    a, repo = best(append_cdkds, repeat)
    b, path = best(append_delta, repeat)
    record("python", f"append a {rows:,}-row Arrow table", a, b, "delta-rs")
    a, got = best(lambda: repo.load("t").to_table(), repeat)
    b, expected = best(lambda: deltalake.DeltaTable(path).to_pyarrow_table(), repeat)
    assert got.num_rows == expected.num_rows == rows
    record("python", f"read {rows:,} rows back in full", a, b, "delta-rs")


def bench_memory(root: str, rows: int) -> None:
    write_dataset(root, "mem", events(rows), None)
    script = (  # VmHWM: this process's own peak (ru_maxrss would carry the parent's over exec)
        "import re\n"
        "from cdkds.catalog import DatasetRepository\n"
        "def kib(field): return int(re.search(field + r':\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
        f"ds = DatasetRepository('file://{root}').load('mem')\n"
        "base = kib('VmHWM')\n"
        "rows = sum(b.num_rows for b in ds.scan(batch_rows=65536))\n"
        "print(rows, base, kib('VmHWM'))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    scanned, base, peak = int(out[0]), int(out[1]), int(out[2])
    table_mb = events(1000).nbytes * rows / 1000 / 2**20
    record("memory", f"peak RSS scanning {scanned:,} rows (~{table_mb:.0f} MiB in Arrow)", peak / 1024, base / 1024,
           "RSS before scan", unit="MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--python-rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="spark,commit,python,memory")
    parser.add_argument("--s3-endpoint", default=None, help="an S3 endpoint (e.g. moto_server) for commit latency")
    parser.add_argument("--output", default=str(Path(__file__).with_name("results.json")))
    args = parser.parse_args()
    only = set(args.only.split(","))
    root = tempfile.mkdtemp(prefix="cdkds-bench-")
    try:
        run_all(args, only, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        Path(args.output).write_text(json.dumps({"when": dt.datetime.now(dt.timezone.utc).isoformat(),
                                                 "rows": args.rows, "results": RESULTS}, indent=2))
        print(f"wrote {args.output}")


def run_all(args: argparse.Namespace, only: set[str], root: str) -> None:
    if "commit" in only:
        bench_commits(root, args.repeat, args.s3_endpoint)
    if "python" in only:
        bench_python(root, args.python_rows, args.repeat)
    if "memory" in only:
        bench_memory(root, args.python_rows * 2)
    if "spark" in only:
        bench_spark(root, args.rows, args.repeat)


if __name__ == "__main__":
    main()
