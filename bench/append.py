"""Load + append one row at N files, with the inline table services off and on (issue 32's
"appends that do not read the file list"). Not part of the test suite.

    python bench/append.py [--files 20000,100000] [--rounds 8] [--root DIR]

The dataset (partitioned by ``identity(p)``, 1,000 values) is N Add actions of 512 MB files
committed in one commit, then a checkpoint; the files are never written, since neither a load
nor an append opens them, and none is small, so the services find no work in them (only in
the appended partition's files: what an inline pass after an append looks at). Each round
loads the dataset anew and appends one row to another partition; the medians of the load and
of the append (its commit, and with the services on, their pass) are printed apart.
bench/scale.py builds real (hard-linked) files and runs with the services off.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

PARTITIONS = 1000
SCHEMA = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"}, {"name": "p", "type": "string"}, {"name": "v", "type": "double"}]}


def build(url: str, n: int) -> float:
    """The dataset of ``n`` generated Add actions and its checkpoint; the seconds it took."""
    from cdkds.catalog import DatasetDescriptor, DatasetRepository
    from cdkds.catalog.log.actions import AddFile
    from cdkds.catalog.log.conflicts import BlindAppend
    from cdkds.formats.statistics import ColumnStatistics

    start = time.perf_counter()
    ds = DatasetRepository(url).create("events", DatasetDescriptor(SCHEMA, partition_strategy="identity(p)"))
    adds = [AddFile(f"data/p_copy=p{i % PARTITIONS:04d}/gen-{i:07d}.parquet", {"p_copy": f"p{i % PARTITIONS:04d}"},
                    512 << 20, 1000, {"id": ColumnStatistics(0, i * 1000, i * 1000 + 999),
                                      "v": ColumnStatistics(0, 0.0, 1.0)}, 0) for i in range(n)]
    ds._commit("append", adds, rule=BlindAppend())
    ds.checkpoint()
    return time.perf_counter() - start


def measure(url: str, rounds: int, services: str) -> dict:
    from cdkds.catalog import DatasetRepository

    os.environ["CDKDS_INLINE_SERVICES"] = services
    loads, appends = [], []
    for i in range(rounds):
        start = time.perf_counter()
        ds = DatasetRepository(url).load("events")
        loaded = time.perf_counter()
        with ds.writer() as w:
            w.write({"id": -i, "p": f"p{(i * 37) % PARTITIONS:04d}", "v": 0.5})
        loads.append(loaded - start)
        appends.append(time.perf_counter() - loaded)
    return {"load_ms": round(statistics.median(loads) * 1000, 1),
            "append_ms": round(statistics.median(appends) * 1000, 1),
            "appends_ms": [round(a * 1000, 1) for a in appends]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", default="20000,100000")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--root", default=None)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="cdkds-append-", dir=args.root))
    try:
        for n in (int(x) for x in args.files.split(",")):
            url = f"file://{base}/n{n}"
            built = build(url, n)
            result = {"files": n, "build_s": round(built, 2)}
            for services in ("off", "on"):
                result[f"services_{services}"] = measure(url, args.rounds, services)
            print(json.dumps(result), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
