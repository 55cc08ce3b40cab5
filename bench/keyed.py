"""Keyed datasets, side by side in one run: upserts against delta-rs ``merge`` and pyiceberg
``upsert``, record-index lookups, ``get`` against SQLite's primary-key lookup and its GET
requests on S3 (moto), the Spark upsert helper against delta-rs, scans after upserts, and
the memory of an upsert, and DuckDB over ``to_arrow_dataset`` after keyed deletes.

    python bench/keyed.py                  # the issue's sizes: 1M rows into 10M, Spark 2M into 20M (long)
    python bench/keyed.py --scale 0.1      # 100k into 1M
    python bench/keyed.py --only upsert,lookup

Prints each measurement with its anchor and the ratio (cdkds / anchor: below 1 is
faster) and writes bench/results-keyed.json. Not part of the test suite.
pip install '.[bench]' brings delta-rs and pyiceberg; a missing anchor is reported, not faked.
"""

from __future__ import annotations

import argparse
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
SCHEMA = {"type": "record", "name": "User", "fields": [
    {"name": "tenant", "type": "string"}, {"name": "userId", "type": "long"},
    {"name": "email", "type": "string"}, {"name": "score", "type": "long"},
    {"name": "updatedAt", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
TENANTS = np.array(["nz", "au", "us", "de", "fr", "jp", "br", "in"])
START_MS = 1_767_225_600_000  # 2026-01-01


def users(ids: np.ndarray, version: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = len(ids)
    return pa.table({
        "tenant": pa.array(TENANTS[ids % len(TENANTS)]),
        "userId": pa.array(ids.astype(np.int64)),
        "email": pa.array(np.char.add(np.char.add("u", ids.astype(str)), f"@v{version}.example")),
        "score": pa.array(rng.integers(0, 1_000_000, n)),
        "updatedAt": pa.array(np.full(n, START_MS + version * 1000), pa.timestamp("ms", tz="UTC")),
    })


def record(what: str, cdkds: float | None, anchor: float | None, anchor_name: str, unit: str = "s", **extra: Any):
    ratio = cdkds / anchor if cdkds is not None and anchor else None
    RESULTS.append({"what": what, "cdkds": cdkds, "anchor": anchor, "anchor_name": anchor_name, "unit": unit,
                    "ratio": ratio, **extra})
    c = f"{cdkds:.4g} {unit}" if cdkds is not None else "-"
    a = f"{anchor:.4g} {unit}" if anchor is not None else "-"
    r = f"{ratio:.2f}x" if ratio is not None else "-"
    print(f"{what:58} cdkds {c:12} | {anchor_name:22} {a:12} | {r}", flush=True)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def keyed_dataset(root: str, name: str, buckets: int) -> Any:
    repo = DatasetRepository(f"file://{root}")
    return repo.create(name, DatasetDescriptor(SCHEMA, record_key=["tenant", "userId"], ordering_field="updatedAt",
                                               partition_strategy="identity(tenant)",
                                               properties={"index.buckets": str(buckets)}))


def load(ds: Any, rows: int, chunk: int = 2_000_000) -> None:
    for start in range(0, rows, chunk):
        ds.insert(users(np.arange(start, min(rows, start + chunk)), 0, start))


def changes(base: int, n: int, seed: int = 1) -> pa.Table:
    """Half updates of existing keys, half new keys."""
    rng = np.random.default_rng(seed)
    updates = rng.choice(base, n // 2, replace=False)
    inserts = np.arange(base, base + n - n // 2)
    return users(np.concatenate([updates, inserts]), 1, seed)


# ---------------------------------------------------------------- upserts

ROUNDS = 3
ICEBERG_TIMEOUT = 300  # seconds


def round_changes(base: int, n: int, r: int) -> pa.Table:
    """Round ``r`` of upserts: half updates of random loaded keys (a newer ordering value),
    half new keys after those of earlier rounds."""
    rng = np.random.default_rng(r + 1)
    updates = rng.choice(base, n // 2, replace=False)
    inserts = np.arange(base + r * n, base + r * n + n - n // 2)
    return users(np.concatenate([updates, inserts]), r + 1, r + 1)


def bench_upsert(root: str, base: int, n: int, buckets: int) -> None:
    """``ROUNDS`` upserts into cdkds and merges into delta-rs, interleaved (a machine shared
    with other work slows both alike), compared by their medians."""
    ds = keyed_dataset(root, "users", buckets)
    seconds, _ = timed(lambda: load(ds, base))
    print(f"(setup: inserted {base:,} rows into cdkds in {seconds:.1f} s)")
    path = delta_table(root, base)
    ours, theirs, services = [], [], []
    for r in range(ROUNDS):
        source = round_changes(base, n, r)
        t, result = timed(lambda: ds.upsert(source))
        assert (result.inserted, result.updated) == (n - n // 2, n // 2), result
        ours.append(t)
        services.append(result.services.seconds if result.services else 0.0)
        theirs.append(delta_merge_into(path, source) if path else None)
    delta = statistics.median(theirs) if path else None
    record(f"upsert {n:,} rows (half updates) into {base:,}, median of {ROUNDS}", statistics.median(ours), delta,
           "delta-rs merge", rounds=ours, anchor_rounds=theirs, services_rounds=services,
           note=f"of which inline services: {', '.join(f'{s:.2f}' for s in services)} s")
    commits = [t - s for t, s in zip(ours, services)]
    record(f"the same, the upsert's commit alone (inline services excluded), median of {ROUNDS}",
           statistics.median(commits), delta, "delta-rs merge", rounds=commits)
    iceberg = iceberg_upsert(root, base, round_changes(base, n, 0)) if ICEBERG_TIMEOUT > 0 else None
    record(f"upsert {n:,} rows into {base:,} (first round)", ours[0], iceberg, "pyiceberg upsert",
           note=None if iceberg is not None else f"pyiceberg missing, failed, or did not finish within {ICEBERG_TIMEOUT} s")


def delta_table(root: str, base: int, name: str = "delta-users") -> str | None:
    """A delta-rs table of the loaded rows (``None`` without deltalake)."""
    try:
        from deltalake import write_deltalake
    except ImportError:
        return None
    path = f"{root}/{name}"
    for start in range(0, base, 2_000_000):
        write_deltalake(path, users(np.arange(start, min(base, start + 2_000_000)), 0, start), mode="append",
                        partition_by=["tenant"])
    return path


def delta_merge_into(path: str, source: pa.Table) -> float:
    """Seconds of a delta-rs upsert (merge) of ``source`` into the table at ``path``."""
    from deltalake import DeltaTable

    seconds, _ = timed(lambda: DeltaTable(path).merge(
        source, predicate="t.tenant = s.tenant AND t.userId = s.userId", source_alias="s", target_alias="t")
        .when_matched_update_all().when_not_matched_insert_all().execute())
    return seconds


def delta_merge(root: str, base: int, source: pa.Table, name: str = "delta-users") -> float | None:
    path = delta_table(root, base, name)
    return delta_merge_into(path, source) if path else None


ICEBERG = """
import sys, time, numpy as np, pyarrow as pa, pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
root, source = sys.argv[1], pq.read_table(sys.argv[2])
catalog = SqlCatalog("bench", uri=f"sqlite:///{root}/iceberg.db", warehouse=f"file://{root}/iceberg")
catalog.create_namespace("b")
base = pq.read_table(sys.argv[3])
from pyiceberg.schema import Schema
table = catalog.create_table("b.users", schema=base.schema)
table.append(base)
table = catalog.load_table("b.users")
start = time.perf_counter()
table.upsert(source, join_cols=["tenant", "userId"])
print("SECONDS", time.perf_counter() - start)
"""


def iceberg_upsert(root: str, base: int, source: pa.Table) -> float | None:
    try:
        import pyiceberg  # noqa: F401
    except ImportError:
        return None
    import pyarrow.parquet as pq

    folder = Path(root) / "iceberg-run"
    folder.mkdir()
    pq.write_table(source, folder / "source.parquet")
    pq.write_table(users(np.arange(base), 0, 0), folder / "base.parquet")
    script = folder / "upsert.py"
    script.write_text(ICEBERG)
    try:
        done = subprocess.run([sys.executable, str(script), str(folder), str(folder / "source.parquet"),
                               str(folder / "base.parquet")], capture_output=True, text=True, timeout=ICEBERG_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None
    line = next((l for l in done.stdout.splitlines() if l.startswith("SECONDS")), None)
    if line is None:
        print(f"(pyiceberg failed, exit code {done.returncode}: {done.stderr[-500:]})")
        return None
    return float(line.split()[1])


# ---------------------------------------------------------------- lookups

def bench_lookup(root: str, base: int, lookups: int, buckets: int) -> None:
    ds = keyed_dataset(root, "lookups", buckets)
    load(ds, base)
    ds.upsert(changes(base, max(1, base // 10)))  # a delta per bucket on top of the bases
    rng = np.random.default_rng(7)
    ids = rng.choice(base, lookups, replace=False)
    keys = pa.table({"tenant": TENANTS[ids % len(TENANTS)], "userId": ids.astype(np.int64)})
    from cdkds.catalog.keyed.index import RecordIndex
    from cdkds.catalog.keyed.keys import RecordKey

    key = RecordKey.of(ds.descriptor, ds.name)
    typed = key.keys(keys)
    seconds, entries = timed(lambda: RecordIndex(ds.store, ds.snapshot, ds.name).lookup(typed, key.hashes(typed)))
    assert entries.num_rows == lookups
    record(f"index lookup of {lookups:,} random keys of {base:,}", seconds, 1.0, "target",
           note="target <= 1 s (Hudi: 600 ms for 100k keys against 1M)")
    seconds, found = timed(lambda: ds.get_many(keys))
    assert found.num_rows == lookups
    record(f"get_many {lookups:,} random keys of {base:,} (lookup + reading the rows)", seconds, None, "-")
    times = []
    for i in ids[:100]:
        t, row = timed(lambda: ds.get((TENANTS[i % len(TENANTS)], int(i))))
        assert row is not None
        times.append(t * 1000)
    record("get(key), median of 100, file://", statistics.median(times), 20.0, "target", unit="ms",
           note="target <= 20 ms")
    record("get(key), median of 100, file://", statistics.median(times), sqlite_get(root, base, ids[:100]),
           "SQLite primary key", unit="ms", note="the same rows in a WITHOUT ROWID table keyed (tenant, userId)")
    size = sum(f.size for f in ds.snapshot.index.values())
    record(f"index bytes per key ({len(ds.snapshot.index)} files)", size / ds.snapshot.row_count, 48.0, "target",
           unit="B", note="Hudi's record index: 48 bytes per key")


def sqlite_get(root: str, base: int, ids: np.ndarray) -> float:
    """Median milliseconds of a primary-key lookup of ``ids`` in SQLite holding the same rows."""
    import sqlite3

    db = sqlite3.connect(f"{root}/anchor.db")
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("CREATE TABLE users (tenant TEXT, userId INTEGER, email TEXT, score INTEGER, updatedAt INTEGER, "
               "PRIMARY KEY (tenant, userId)) WITHOUT ROWID")
    for start in range(0, base, 1_000_000):
        t = users(np.arange(start, min(base, start + 1_000_000)), 0, start)
        t = t.set_column(4, "updatedAt", t.column("updatedAt").cast(pa.int64()))
        db.executemany("INSERT INTO users VALUES (?, ?, ?, ?, ?)", zip(*(c.to_pylist() for c in t.columns)))
    db.commit()
    times = []
    for i in ids:
        t, row = timed(lambda: db.execute("SELECT * FROM users WHERE tenant = ? AND userId = ?",
                                          (str(TENANTS[i % len(TENANTS)]), int(i))).fetchone())
        assert row is not None
        times.append(t * 1000)
    db.close()
    return statistics.median(times)


def bench_get_s3(root: str, rows: int, buckets: int) -> None:
    """GET requests of a get on S3 (moto on 127.0.0.1, every request counted at the server):
    the first get of a process (it reads the footers it needs) and the next ones."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import boto3
    from s3_counting import RequestCounter, start_moto

    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    server, endpoint = start_moto()
    try:
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")
        options = {"client_kwargs": {"endpoint_url": endpoint}, "key": "testing", "secret": "testing"}
        repo = DatasetRepository("s3://bench/lake", options)
        ds = repo.create("users", DatasetDescriptor(SCHEMA, record_key=["tenant", "userId"], ordering_field="updatedAt",
                                                    partition_strategy="identity(tenant)",
                                                    properties={"index.buckets": str(buckets)}))
        load(ds, rows, chunk=max(1, rows // 5))  # five deltas per index bucket, as bench_lookup's 10M rows have
        ds.upsert(changes(rows, max(1, rows // 10)))
        ds = DatasetRepository("s3://bench/lake", options).load("users")  # caches as a new process has them
        from cdkds.catalog.keyed import index as index_module
        from cdkds.formats import parquet as parquet_module
        index_module.FOOTERS.__init__()
        parquet_module.FOOTERS.__init__()
        counter = RequestCounter(endpoint)
        ids = np.random.default_rng(11).choice(rows, 21, replace=False)

        def requests(i: int) -> dict:
            counter.reset()
            assert ds.get((TENANTS[i % len(TENANTS)], int(i))) is not None
            return {k: v for k, v in counter.read().items() if not k.startswith("bytes")}

        def gets(seen: dict) -> int:
            return seen.get("GET", 0) + seen.get("GET range", 0)

        first = requests(ids[0])  # a fresh process: the footers of the bucket's index files are read
        warm = np.random.default_rng(12).choice(rows, 5000, replace=False)
        ds.get_many(pa.table({"tenant": TENANTS[warm % len(TENANTS)], "userId": warm.astype(np.int64)}))
        later = [requests(i) for i in ids[1:]]  # footers (and their Bloom filters) cached, as in a serving process
        record(f"GET requests of a get on S3, {rows:,} rows, median of 20, footers cached",
               statistics.median(gets(r) for r in later), 3, "target", unit="GETs", first=first, requests=later[:3],
               note=f"the first get of a fresh process: {gets(first)} GETs and {first.get('HEAD', 0)} HEADs "
                    f"(the footers of its bucket's index files and of the data file)")
    finally:
        server.kill()


# ---------------------------------------------------------------- Spark

def bench_spark_upsert(root: str, base: int, n: int, buckets: int) -> None:
    """cdkds.connector.keyed.upsert of ``n`` rows into ``base`` on local[2], against delta-rs
    merge of the same rows into the same table."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from cdkds.connector import register
    from cdkds.connector.keyed import upsert

    ds = keyed_dataset(root, "spark_users", buckets)
    load(ds, base)
    # untimed: the load's ten inserts leave the services a backlog (small files, index deltas)
    # that its later writes' inline passes work off; the upsert is timed on the caught-up dataset
    ds.maintain()
    source = changes(base, n, seed=3)
    import pyarrow.parquet as pq

    pq.write_table(source, f"{root}/spark-source.parquet")
    spark = (SparkSession.builder.master("local[2]").appName("cdkds-bench-keyed")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "4g").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    try:
        # untimed: a first upsert into another dataset starts the Python workers and the data source
        warm = keyed_dataset(root, "spark_warm", buckets)
        warm.insert(users(np.arange(1000), 0, 0))
        upsert(spark.createDataFrame(users(np.arange(500, 1500), 1, 0).to_pandas()), f"file://{root}/spark_warm",
               checkNulls="values")
        df = spark.read.parquet(f"{root}/spark-source.parquet").cache()
        df.count()
        seconds, result = timed(lambda: upsert(df, f"file://{root}/spark_users", checkNulls="values"))
        assert (result.inserted, result.updated) == (n - n // 2, n // 2), result
    finally:
        spark.stop()
    delta = delta_merge(root, base, source, "delta-spark-users")
    services = result.services.seconds if result.services else 0.0
    record(f"Spark upsert (connector.keyed.upsert, local[2]) {n:,} rows into {base:,}", seconds, delta,
           "delta-rs merge", services=services,
           note=f"target <= 0.7x; {services:.2f} s of it in inline services; after an untimed upsert into another "
                f"dataset (Python workers started) and an untimed maintain() of the loaded one")


# ---------------------------------------------------------------- scans

SCANS = 7  # interleaved scans of each state: medians of wall and CPU time (one machine shared with others)


def bench_scan(root: str, rows: int, buckets: int) -> None:
    """A full scan after ten 10% upserts of random keys, and after nine (the services rewrite a
    partition every few upserts, so the two show both ends of their cycle), against the same
    rows compacted: copies of the dataset at those points and the compacted one are scanned
    in turn, by readers opened after the writes; the upserts' time and bytes in their inline
    passes."""
    ds = keyed_dataset(root, "scan", buckets)
    load(ds, rows)
    services = commits = 0.0
    rewritten = 0
    for round_ in range(10):
        rng = np.random.default_rng(100 + round_)
        took, result = timed(lambda: ds.upsert(users(rng.choice(rows, rows // 10, replace=False), round_ + 1, round_)))
        spent = result.services.seconds if result.services else 0.0
        services, commits = services + spent, commits + took - spent
        rewritten += result.services.bytes_read + result.services.bytes_written if result.services else 0
        if round_ >= 8:
            shutil.copytree(Path(root) / "scan", Path(root) / f"scan_{round_ + 1}")
    ds.compact(where=None)
    ds.maintain()
    repo = DatasetRepository(f"file://{root}")
    readers = {"compacted": repo.load("scan"), **{n: repo.load(f"scan_{n}") for n in (10, 9)}}
    wall: dict[Any, list[float]] = {k: [] for k in readers}
    cpu: dict[Any, list[float]] = {k: [] for k in readers}
    for i in range(SCANS):
        for name in (list(readers) if i % 2 == 0 else list(readers)[::-1]):
            start, started = time.perf_counter(), time.process_time()
            readers[name].to_table()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - started)
    median = statistics.median
    for upserts in (10, 9):
        record(f"full scan of {rows:,} rows after {upserts} 10% upserts (default services)", median(wall[upserts]),
               median(wall["compacted"]), "same rows compacted",
               cpu_ratio=median(cpu[upserts]) / median(cpu["compacted"]),
               note=f"target <= 1.3x; median of {SCANS} interleaved scans; CPU "
                    f"{median(cpu[upserts]) / median(cpu['compacted']):.2f}x; {len(readers[upserts].files)} files, "
                    f"{len(readers['compacted'].files)} compacted")
    record("ten 10% upserts: time in their commits / in inline services", commits, services, "inline services",
           note=f"the services' share of the writes' time; they read and wrote {rewritten / 2 ** 20:,.0f} MiB")


DUCKDB_QUERIES = 9
DUCKDB_SQL = "select userId % 10 as g, count(*), sum(score) from t group by g order by g"


def bench_duckdb(root: str, rows: int, buckets: int) -> None:
    """DuckDB's aggregation over ``to_arrow_dataset()`` after ``delete_keys`` of 1% of the keys
    (deletion vectors on every file, below the services' threshold: no pass rewrites them)
    against the same dataset before the delete; each query makes its dataset
    (``to_arrow_dataset()``) and registers it, interleaved, by readers opened after the writes.
    The first query after the delete checks the deleted keys (it reads the key columns);
    the later ones find that answer kept."""
    import duckdb

    def query(source: Any) -> list:
        con = duckdb.connect()
        con.register("t", source)
        return con.sql(DUCKDB_SQL).fetchall()

    ds = keyed_dataset(root, "duck", buckets)
    load(ds, rows)
    ds.compact(where=None)
    ds.maintain()
    shutil.copytree(Path(root) / "duck", Path(root) / "duck_deleted")
    repo = DatasetRepository(f"file://{root}")
    deleted = repo.load("duck_deleted")
    ids = np.random.default_rng(11).choice(rows, rows // 100, replace=False)
    took, result = timed(lambda: deleted.delete_keys(pa.table({"tenant": TENANTS[ids % len(TENANTS)],
                                                                "userId": ids.astype(np.int64)})))
    readers = {"before": repo.load("duck"), "after": repo.load("duck_deleted")}
    assert readers["after"].files and all(f.deletes for f in readers["after"].files), "a pass rewrote the files"
    query(readers["before"].to_arrow_dataset())  # DuckDB's first query in a process is slower
    first, _ = timed(lambda: query(readers["after"].to_arrow_dataset()))
    wall: dict[str, list[float]] = {k: [] for k in readers}
    for i in range(DUCKDB_QUERIES):
        for name in (list(readers) if i % 2 == 0 else list(readers)[::-1]):
            wall[name].append(timed(lambda: query(readers[name].to_arrow_dataset()))[0])
    median = statistics.median
    note = (f"median of {DUCKDB_QUERIES} interleaved queries, each making its to_arrow_dataset(); "
            f"{len(readers['after'].files)} files with deletion vectors; the delete took {took * 1000:.0f} ms")
    record(f"DuckDB aggregation over to_arrow_dataset, {rows:,} keyed rows, 1% delete_keys", median(wall["after"]),
           median(wall["before"]), "same before the delete", note=f"target <= 1.5x; {note}")
    record("the same, the first query after the delete", first, median(wall["before"]), "same before the delete",
           note="its to_arrow_dataset() reads the key columns to check the deleted keys")


# ---------------------------------------------------------------- memory

MEMORY = """
import os, sys
sys.path.insert(0, sys.argv[4])
from keyed import changes, keyed_dataset, load
from cdkds.catalog import DatasetRepository
root, base, step = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if step == "load":
    load(keyed_dataset(root, "memory", 64), base)
else:
    ds = DatasetRepository(f"file://{root}").load("memory")
    source = changes(base, 100_000)
    before = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    ds.upsert(source)
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    print("RSS", before, int(status["VmHWM"].split()[0]))  # this process's peak (ru_maxrss can be the parent's)
"""


def bench_memory(root: str, sizes: list[int]) -> None:
    """Peak RSS of a 100k-row upsert in a fresh process, over what it held before upserting."""
    script = Path(root) / "memory.py"
    script.write_text(MEMORY)
    for size in sizes:
        folder = tempfile.mkdtemp(dir=root)
        for step in ("load", "upsert"):
            done = subprocess.run([sys.executable, str(script), folder, str(size), step, str(Path(__file__).parent)],
                                  capture_output=True, text=True, timeout=3600)
            assert done.returncode == 0, done.stderr[-2000:]
        line = next(l for l in done.stdout.splitlines() if l.startswith("RSS"))
        before, peak = (int(x) / 1024 for x in line.split()[1:])
        record(f"RSS growth of a 100k-row upsert into {size:,} rows", peak - before, before, "RSS before the upsert",
               unit="MiB", note="the growth should not depend on the dataset's size")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--only", default="upsert,lookup,get_s3,spark,scan,duckdb,memory")
    parser.add_argument("--out", default=str(Path(__file__).with_name("results-keyed.json")))
    parser.add_argument("--iceberg-timeout", type=float, default=ICEBERG_TIMEOUT, help="seconds; 0 skips pyiceberg")
    args = parser.parse_args()
    globals()["ICEBERG_TIMEOUT"] = args.iceberg_timeout
    only = set(args.only.split(","))
    base, n, lookups = int(10_000_000 * args.scale), int(1_000_000 * args.scale), int(100_000 * min(1.0, args.scale * 10))
    with tempfile.TemporaryDirectory(prefix="cdkds-bench-keyed-") as root:
        print(f"scale {args.scale}: {base:,} rows, upserts of {n:,}, {lookups:,} lookups; {os.cpu_count()} cores")
        if "upsert" in only:
            bench_upsert(root, base, n, args.buckets)
        if "lookup" in only:
            bench_lookup(root, base, lookups, args.buckets)
        if "get_s3" in only:
            bench_get_s3(root, max(100_000, base // 10), args.buckets)
        if "spark" in only:
            bench_spark_upsert(root, 2 * base, 2 * n, args.buckets)
        if "scan" in only:
            bench_scan(root, max(100_000, base // 10), args.buckets)
        if "duckdb" in only:
            bench_duckdb(root, max(100_000, base // 10), args.buckets)
        if "memory" in only:
            bench_memory(root, [max(100_000, base // 10), max(400_000, base // 2)])
    out = Path(args.out)
    out.write_text(json.dumps({"scale": args.scale, "results": RESULTS}, indent=1, default=str))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
