"""Keyed tables (the StructuredTable SPI), the same workload on every implementation in one run,
SQLite as the anchor:

- single-row transactions (an upsert each), one after the other;
- point reads of random keys in a large table, one transaction each;
- range scans of 10,000 rows;
- index scans (about 100 rows each);
- on S3 (moto's server on 127.0.0.1, with --s3): the requests a point read and a commit send.

    python bench/tables.py                  # the issue's sizes: 10k transactions, 1M rows (about 10 min)
    python bench/tables.py --scale 0.1      # 1k transactions, 100k rows
    python bench/tables.py --only file,sqlite --s3

Prints latency percentiles and throughput per implementation with the ratio to SQLite (below 1
is faster) and writes bench/results-tables.json. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cdkds.catalog.tables import Fields, Range, TableAdmin, TableSpecification, TransactionRunner  # noqa: E402

SPEC = TableSpecification.builder("runs").fields(
    Fields.string("ns"), Fields.long("id"), Fields.int("status"), Fields.long("started"), Fields.string("detail"),
).primary_key("ns", "id").indexes("status").build()
LOAD_BATCH = 50_000


def row(i: int, statuses: int) -> dict:
    return {"ns": f"ns{i % 4}", "id": i, "status": i % statuses, "started": 1_700_000_000_000 + i,
            "detail": f"run {i} of the benchmark"}


def timed(fn: Callable[[], Any], times: int) -> list[float]:
    out = []
    for _ in range(times):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def summary(latencies: list[float]) -> dict:
    ordered = sorted(latencies)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"n": len(ordered), "p50_ms": pick(0.5) * 1e3, "p99_ms": pick(0.99) * 1e3,
            "per_second": len(ordered) / sum(ordered)}


def workload(url: str, options: dict | None, transactions: int, rows: int, scans: int) -> dict:
    admin = TableAdmin.open(url, options)
    admin.create(SPEC)
    runner = TransactionRunner(admin)
    results = {}
    counter = iter(range(10**9))
    results["single-row transactions"] = summary(timed(
        lambda: runner.run(lambda ctx: ctx.table("runs").upsert(row(10**8 + next(counter), 100))), transactions))
    start = time.perf_counter()
    for first in range(0, rows, LOAD_BATCH):
        runner.run(lambda ctx: [ctx.table("runs").upsert(row(i, rows // 100 or 1))
                                for i in range(first, min(rows, first + LOAD_BATCH))])
    results["load"] = {"rows": rows, "seconds": time.perf_counter() - start}
    rng = random.Random(7)
    results["point reads"] = summary(timed(lambda: runner.run(lambda ctx: ctx.table("runs").read(
        {"ns": f"ns{(i := rng.randrange(rows)) % 4}", "id": i})), 1000))

    def scan():
        ns, first = f"ns{rng.randrange(4)}", rng.randrange(max(1, rows - 40_000))
        got = runner.run(lambda ctx: sum(1 for _ in ctx.table("runs").scan(
            Range.of({"ns": ns, "id": first}, Range.INCLUSIVE, None, Range.INCLUSIVE), limit=10_000)))
        assert got == min(10_000, got)
    results["range scans of 10k rows"] = summary(timed(scan, scans))
    results["index scans"] = summary(timed(lambda: runner.run(lambda ctx: list(ctx.table("runs").scan_index(
        "status", rng.randrange(rows // 100 or 1)))), scans * 5))
    return results


def s3_requests(url: str, options: dict, rows: int) -> dict:
    """Requests of a warm point read and of a commit, counted on the wire."""
    admin = TableAdmin.open(url, options)
    admin.create(SPEC)
    runner = TransactionRunner(admin)
    for first in range(0, rows, LOAD_BATCH):
        runner.run(lambda ctx: [ctx.table("runs").upsert(row(i, 100)) for i in range(first, min(rows, first + LOAD_BATCH))])
    counts: Counter = Counter()
    admin.store.store.fs.s3.meta.events.register("before-send.s3", lambda request, **kw: counts.update([request.method]))
    read = lambda i: runner.run(lambda ctx: ctx.table("runs").read({"ns": f"ns{i % 4}", "id": i}))  # noqa: E731
    for i in range(50):
        read(i * 97 % rows)  # warm-up
    counts.clear()
    for i in range(200):
        read(random.randrange(rows))
    reads = {k: v / 200 for k, v in counts.items()}
    counts.clear()
    for i in range(20):
        runner.run(lambda ctx: ctx.table("runs").upsert(row(rows + i, 100)))
    commits = {k: v / 20 for k, v in counts.items()}
    return {"point read": reads, "commit": commits}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--only", default="sqlite,memory,file")
    parser.add_argument("--s3", action="store_true", help="also S3 on moto's server (127.0.0.1)")
    args = parser.parse_args()
    transactions, rows, scans = int(10_000 * args.scale), int(1_000_000 * args.scale), 20
    out: dict[str, Any] = {"scale": args.scale, "transactions": transactions, "rows": rows}
    with tempfile.TemporaryDirectory() as tmp:
        urls = {"sqlite": f"sqlite:///{tmp}/bench.sqlite", "memory": "memory://bench-tables", "file": f"file://{tmp}/root"}
        for name in args.only.split(","):
            print(f"-- {name}", flush=True)
            out[name] = workload(urls[name], None, transactions, rows, scans)
        if args.s3:
            out["s3"] = _with_moto(lambda url, options: {
                "workload": workload(url + "/w", options, transactions // 10, rows // 10, scans),
                "requests": s3_requests(url + "/r", options, rows // 10)})
    anchor = out.get("sqlite")
    for name in [n for n in out if isinstance(out[n], dict)]:
        results = out[name].get("workload", out[name])
        for what, r in results.items():
            if "p50_ms" not in r:
                print(f"{name:7} {what:26} {r}")
                continue
            ratio = f"{r['p50_ms'] / anchor[what]['p50_ms']:.2f}x SQLite" if anchor and name != "s3" else ""
            print(f"{name:7} {what:26} p50 {r['p50_ms']:8.3f} ms  p99 {r['p99_ms']:8.3f} ms  "
                  f"{r['per_second']:9.1f}/s  {ratio}")
        if "requests" in out[name]:
            print(f"{name:7} requests per operation {out[name]['requests']}")
    Path(__file__).with_name("results-tables.json").write_text(json.dumps(out, indent=2))


def _with_moto(fn: Callable[[str, dict], Any]) -> Any:
    import socket

    import boto3
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        endpoint = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench-tables")
                break
            except Exception:  # noqa: BLE001 - the server is starting
                time.sleep(0.1)
        return fn("s3://bench-tables", {"client_kwargs": {"endpoint_url": endpoint}, "skip_instance_cache": True})
    finally:
        server.kill()


if __name__ == "__main__":
    main()
