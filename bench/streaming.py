"""Streaming, side by side in one run with Spark's own file streaming source and sink.

    python bench/streaming.py               # 40 commits of 25,000 rows (1M rows), 20 commits for latency
    python bench/streaming.py --scale 0.2

Measures, on local[2]:
- source throughput: a backlog of commits read by `Trigger.AvailableNow` into the `noop`
  sink, from a cdkds dataset and from a folder receiving the same Parquet files
  (`readStream.parquet`), each after an untimed warm-up query (a Python stream source
  starts a runner process, ~3 s, once per query: reported in the note, not the ratio);
- sink throughput: the same stream (from the Parquet folder) written by `writeStream` into a
  cdkds dataset and into a Parquet folder (Spark's file sink);
- end-to-end latency: a Python writer commits a file a second while a query runs with the
  default trigger; each row carries the time it was written, and `foreachBatch` records
  when its batch reached the sink. Both sources receive the same files at the same moment.

Prints each measurement with its anchor and the ratio (cdkds / anchor: below 1 is faster
for times, above 1 is better for rows/s) and writes bench/results-streaming.json. Not part
of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from cdkds.catalog import DatasetDescriptor, DatasetRepository

RESULTS: list[dict[str, Any]] = []
SCHEMA = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"}, {"name": "userId", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "amount", "type": "double"}, {"name": "writtenMs", "type": "long"}]}


def record(what: str, cdkds: float, anchor: float, anchor_name: str, unit: str) -> None:
    ratio = cdkds / anchor if anchor else None
    RESULTS.append({"what": what, "cdkds": cdkds, "anchor": anchor, "anchor_name": anchor_name, "unit": unit,
                    "ratio": ratio})
    r = f"{ratio:.2f}x" if ratio is not None else "-"
    print(f"{what:44} cdkds {cdkds:12.4g} {unit:6} | {anchor_name:24} {anchor:12.4g} {unit:6} | {r}", flush=True)


def events(start: int, rows: int) -> pa.Table:
    rng = np.random.default_rng(start)
    ids = np.arange(start, start + rows, dtype=np.int64)
    return pa.table({"id": ids, "userId": rng.integers(0, 100_000, rows), "name": pa.array(
        np.char.add("user-", (ids % 1000).astype(str))), "amount": rng.random(rows) * 100,
        "writtenMs": np.full(rows, int(time.time() * 1000), np.int64)})


class Feeder:
    """Commits each batch of rows to the cdkds dataset and drops the same Parquet file
    into the folder Spark's file source watches (renamed into place, so it appears whole)."""

    def __init__(self, root: Path):
        self.repo = DatasetRepository(f"file://{root}/lake")
        self.dataset = self.repo.create("events", DatasetDescriptor(SCHEMA))
        self.folder = root / "parquet"
        self.folder.mkdir()
        self.staging = root / "staging"
        self.staging.mkdir()
        self.count = 0

    def commit(self, table: pa.Table) -> None:
        with self.dataset.writer() as w:
            w.write_batch(table)
        added = self.dataset.snapshot.files
        for f in (f for f in added.values() if f.revision == self.dataset.version):
            staged = self.staging / f"part-{self.count:05d}.parquet"
            self.dataset.store.fs.get_file(self.dataset.store.path(f.path), str(staged))
            os.rename(staged, self.folder / staged.name)
            self.count += 1


def spark_session():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("cdkds-bench-streaming")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "4g")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from cdkds.connector import register

    register(spark)  # an editable install hides pyspark_cdkds from Spark's discovery
    return spark


def timed_query(start_query) -> tuple[float, int, float]:
    """Seconds from start until an AvailableNow query has processed everything, its input
    rows, and the seconds its micro-batches took (the query's start-up left out)."""
    began = time.perf_counter()
    query = start_query()
    query.awaitTermination()
    progress = query.recentProgress
    batches = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
    return time.perf_counter() - began, sum(p["numInputRows"] for p in progress), batches


def bench_throughput(spark, root: Path, commits: int, rows: int) -> None:
    feeder = Feeder(root / "backlog")
    for i in range(commits):
        feeder.commit(events(i * rows, rows))
    schema = spark.read.parquet(str(feeder.folder)).schema
    total = commits * rows

    def source(fmt: str, run: str = "timed"):
        def start():
            reader = spark.readStream
            if fmt == "cdkds":
                stream = reader.format("cdkds").option("maxFilesPerTrigger", 10).load(feeder.dataset.url)
            else:
                stream = reader.schema(schema).option("maxFilesPerTrigger", 10).parquet(str(feeder.folder))
            return (stream.writeStream.format("noop").option("checkpointLocation", str(root / f"ck-src-{fmt}-{run}"))
                    .trigger(availableNow=True).start())
        return start

    for fmt in ("cdkds", "parquet"):  # warm up: Spark's Python workers and the stream source's runner process
        timed_query(source(fmt, "warm"))
    cdkds_s, cdkds_rows, cdkds_batches = timed_query(source("cdkds"))
    parquet_s, parquet_rows, parquet_batches = timed_query(source("parquet"))
    assert cdkds_rows == parquet_rows == total, (cdkds_rows, parquet_rows, total)
    record(f"source: {commits} commits x {rows} rows, query", total / cdkds_s, total / parquet_s,
           "readStream.parquet", "rows/s")
    record("source: the same, micro-batches only", total / cdkds_batches, total / parquet_batches,
           "readStream.parquet", "rows/s")

    def sink(fmt: str, run: str = "timed"):
        def start():
            stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 10).parquet(str(feeder.folder))
            writer = stream.writeStream.option("checkpointLocation", str(root / f"ck-sink-{fmt}-{run}")) \
                .trigger(availableNow=True)
            if fmt == "cdkds":
                return writer.format("cdkds").start(f"file://{root}/lake/sunk_{run}")
            return writer.format("parquet").start(str(root / f"sunk-parquet-{run}"))
        return start

    for fmt in ("cdkds", "parquet"):
        timed_query(sink(fmt, "warm"))
    cdkds_s, _, cdkds_batches = timed_query(sink("cdkds"))
    parquet_s, _, parquet_batches = timed_query(sink("parquet"))
    assert DatasetRepository(f"file://{root}/lake").load("sunk_timed").snapshot.row_count == total
    record(f"sink: {commits // 10} batches of {rows * 10} rows, query", total / cdkds_s, total / parquet_s,
           "writeStream.parquet", "rows/s")
    record("sink: the same, micro-batches only", total / cdkds_batches, total / parquet_batches,
           "writeStream.parquet", "rows/s")


def bench_latency(spark, root: Path, commits: int, rows: int) -> None:
    feeder = Feeder(root / "live")
    feeder.commit(events(0, 10))  # so the Parquet source can infer nothing: the schema is given anyway
    schema = spark.read.parquet(str(feeder.folder)).schema
    latencies: dict[str, list[float]] = {"cdkds": [], "parquet": []}

    def observer(name: str):
        def on_batch(df, batch_id):
            stats = df.agg({"writtenMs": "min"}).collect()[0][0]
            if stats is not None:
                latencies[name].append(time.time() * 1000 - stats)
        return on_batch

    queries = [
        spark.readStream.format("cdkds").option("startingVersion", "latest").load(feeder.dataset.url)
        .writeStream.foreachBatch(observer("cdkds")).option("checkpointLocation", str(root / "ck-lat-cdkds")).start(),
        spark.readStream.schema(schema).option("latestFirst", "false").parquet(str(feeder.folder))
        .writeStream.foreachBatch(observer("parquet")).option("checkpointLocation", str(root / "ck-lat-pq")).start(),
    ]
    time.sleep(5)  # both queries running before the first commit
    latencies["parquet"].clear()
    stop = threading.Event()

    def feed():
        for i in range(commits):
            if stop.is_set():
                return
            feeder.commit(events(1_000_000 + i * rows, rows))
            time.sleep(1.0)

    thread = threading.Thread(target=feed)
    thread.start()
    thread.join()
    time.sleep(5)
    for q in queries:
        q.stop()
    for name in latencies:
        if not latencies[name]:
            raise RuntimeError(f"no batch reached the {name} sink")
    p50 = {n: statistics.median(v) for n, v in latencies.items()}
    p95 = {n: float(np.percentile(v, 95)) for n, v in latencies.items()}
    record(f"latency p50, commit to sink ({commits} commits)", p50["cdkds"], p50["parquet"], "readStream.parquet",
           "ms")
    record(f"latency p95, commit to sink ({commits} commits)", p95["cdkds"], p95["parquet"], "readStream.parquet",
           "ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    commits = max(4, int(40 * args.scale))
    rows = max(1000, int(25_000 * args.scale))
    spark = spark_session()
    with tempfile.TemporaryDirectory(prefix="cdkds-bench-streaming-") as tmp:
        root = Path(tmp)
        bench_throughput(spark, root, commits, rows)
        bench_latency(spark, root, max(5, commits // 2), 1000)
    out = Path(__file__).with_name("results-streaming.json")
    out.write_text(json.dumps({"scale": args.scale, "results": RESULTS}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
