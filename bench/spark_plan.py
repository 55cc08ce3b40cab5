"""The driver's planning of a Spark read (``CdkdsReader.partitions()``) over many files, phase
by phase, without a Spark job: open, plan, input partitions (split size, splits, packing), the
partition objects, and pickling them as Spark does before sending them to executors. Not part
of the test suite.

    python bench/spark_plan.py ROOT [--files 100000] [--max-size 50000000] [--where "p = 'p0500'"]

Building (once per ROOT): one dataset partitioned by ``identity(p)`` (1,000 values) of N files
committed as Add actions for generated paths, then a checkpoint; no data file is written
(planning never opens one). File sizes run from 1 KB to ``--max-size`` bytes.
"""

from __future__ import annotations

import argparse
import os
import pickle
import time
from pathlib import Path

os.environ.setdefault("CDKDS_INLINE_SERVICES", "off")

SCHEMA = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"}, {"name": "p", "type": "string"}, {"name": "v", "type": "double"}]}


def build(root: Path, n: int, max_size: int) -> None:
    from cdkds.catalog import DatasetDescriptor, DatasetRepository
    from cdkds.catalog.log.actions import AddFile
    from cdkds.catalog.log.conflicts import BlindAppend
    from cdkds.formats.statistics import ColumnStatistics

    ds = DatasetRepository(f"file://{root}").create("events", DatasetDescriptor(SCHEMA, partition_strategy="identity(p)"))
    adds = []
    for i in range(n):
        p = f"p{i % 1000:04d}"
        adds.append(AddFile(f"data/p_copy={p}/gen-{i:07d}.parquet", {"p_copy": p}, 1000 + (i * 7919) % max_size, 10,
                            {"id": ColumnStatistics(0, i, i + 9), "p": ColumnStatistics(0, p, p),
                             "v": ColumnStatistics(0, 0.5, 9.5)}, 0))
    ds._commit("append", adds, rule=BlindAppend())
    ds.checkpoint()


def measure(root: Path, where: str | None) -> str:
    from cdkds.catalog.expressions import as_expression
    from cdkds.catalog.read.splits import input_partitions
    from cdkds.connector.options import location
    from cdkds.connector.source import CdkdsReader, FileGroup, open_dataset, planned, read_schema

    loc = location({"path": f"file://{root}/events"})
    schema = read_schema(open_dataset(loc), None, {})
    reader = CdkdsReader(loc, None, None, as_expression(where, "events"), schema, 128 * 1024 * 1024, 10_000, 2)
    t0 = time.perf_counter()
    ds = open_dataset(loc)
    t1 = time.perf_counter()
    plan = planned(ds, reader.predicate, schema.names, None)
    t2 = time.perf_counter()
    groups = input_partitions(plan.tasks, reader.max_partition_bytes, reader.parallelism, True)
    t3 = time.perf_counter()
    partitions = [FileGroup(g, plan.snapshot.descriptor, plan.predicate, ds.version) for g in groups]
    t4 = time.perf_counter()
    pickled = [pickle.dumps(p) for p in partitions]
    t5 = time.perf_counter()
    ms = lambda a, b: f"{(b - a) * 1000:.0f} ms"  # noqa: E731
    return (f"where={where}: open {ms(t0, t1)} | plan {ms(t1, t2)} | input partitions {ms(t2, t3)} | "
            f"partition objects {ms(t3, t4)} | pickling {ms(t4, t5)} ({sum(map(len, pickled)) / 1e6:.1f} MB) | "
            f"{len(partitions)} partitions")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--max-size", type=int, default=50_000_000)
    parser.add_argument("--where")
    args = parser.parse_args()
    if not (args.root / "events").exists():
        build(args.root, args.files, args.max_size)
    print(measure(args.root, args.where))


if __name__ == "__main__":
    main()
