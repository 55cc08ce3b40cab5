"""DuckDB and Polars over a cdkds dataset, side by side in one run with the same engines
reading the same Parquet files directly.

    python bench/ecosystem.py               # 5M rows in 20 files
    python bench/ecosystem.py --scale 0.2

Measures (best of 3, after a warm-up):
- a full-scan aggregation in DuckDB over ``dataset.to_arrow_dataset()`` against DuckDB's
  ``read_parquet`` of the same files;
- a selective query (1 of 50 user buckets) in DuckDB: over ``to_arrow_dataset(where=...)``
  (cdkds prunes partitions) and over the dataset without ``where`` (DuckDB's filter pushed
  into pyarrow) against ``read_parquet`` with the filter;
- the same full aggregation in Polars (``scan_pyarrow_dataset``) against ``pl.scan_parquet``;
- after deleting 1% of the rows (tombstones: those files are read by cdkds and held), the
  full aggregation again, and after ``compact()``;
- ``to_batch_reader`` in DuckDB (one pass, bounded memory).

Prints each time with its anchor and the ratio (cdkds / anchor: below 1 is faster) and writes
bench/results-ecosystem.json. Not part of the test suite; needs ``duckdb`` and ``polars``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

from cdkds.catalog import DatasetDescriptor, DatasetRepository

RESULTS: list[dict[str, Any]] = []
SCHEMA = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"}, {"name": "userId", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "amount", "type": "double"}]}


def best(fn: Callable[[], Any], runs: int = 3) -> float:
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def record(what: str, cdkds: float, anchor: float, anchor_name: str) -> None:
    ratio = cdkds / anchor
    RESULTS.append({"what": what, "cdkds_s": cdkds, "anchor_s": anchor, "anchor": anchor_name, "ratio": ratio})
    print(f"{what:48} cdkds {cdkds * 1000:9.1f} ms | {anchor_name:30} {anchor * 1000:9.1f} ms | {ratio:.2f}x",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    rows, files = int(5_000_000 * args.scale), 20
    root = Path(tempfile.mkdtemp(prefix="cdkds-eco-"))
    repo = DatasetRepository(f"file://{root}")
    ds = repo.create("events", DatasetDescriptor(SCHEMA, "hash(userId, 50)"))
    rng = np.random.default_rng(7)
    per = rows // files
    with ds.writer() as w:
        for i in range(files):
            ids = np.arange(i * per, (i + 1) * per, dtype=np.int64)
            w.write_batch(pa.table({"id": ids, "userId": rng.integers(0, 100_000, per),
                                    "name": pa.array(np.char.add("user-", (ids % 1000).astype(str))),
                                    "amount": rng.random(per) * 100}))
    paths = [ds.store.path(f.path) for f in ds.files]
    glob = f"{root}/events/data/**/*.parquet"
    print(f"{rows:,} rows in {len(paths)} files ({sum(f.size for f in ds.files) / 1e6:.0f} MB) at {root}")
    full = "select userId % 10 as g, count(*), sum(amount) from t group by g order by g"
    one_user = int(ds.to_table(columns=["userId"]).column("userId")[0].as_py())

    made = best(lambda: ds.to_arrow_dataset())
    print(f"{'to_arrow_dataset() itself (plan + footers)':48} cdkds {made * 1000:9.1f} ms", flush=True)
    RESULTS.append({"what": "to_arrow_dataset() itself", "cdkds_s": made})
    record("DuckDB full aggregation", best(lambda: _duck(ds.to_arrow_dataset(), full)),
           best(lambda: _duck_parquet(glob, full)), "DuckDB read_parquet")
    selective = f"select count(*), sum(amount) from t where userId = {one_user}"
    record("DuckDB userId = v, where= (cdkds prunes)",
           best(lambda: _duck(ds.to_arrow_dataset(where=f"userId = {one_user}"), selective)),
           best(lambda: _duck_parquet(glob, selective)), "DuckDB read_parquet")
    record("DuckDB userId = v, DuckDB's filter",
           best(lambda: _duck(ds.to_arrow_dataset(), selective)),
           best(lambda: _duck_parquet(glob, selective)), "DuckDB read_parquet")
    record("Polars full aggregation", best(lambda: _polars(pl.scan_pyarrow_dataset(ds.to_arrow_dataset()))),
           best(lambda: _polars(pl.scan_parquet(paths))), "pl.scan_parquet")
    record("DuckDB over to_batch_reader (one pass)", best(lambda: _duck(ds.to_batch_reader(), full)),
           best(lambda: _duck_parquet(glob, full)), "DuckDB read_parquet")
    started = time.perf_counter()
    ds.delete("amount < 1")  # ~1% of the rows of every file: a tombstone, which the inline services rewrite away
    took = time.perf_counter() - started
    services = ds.last_services
    print(f"delete of 1%: {took * 1000:.0f} ms, of which inline services "
          f"{services.seconds * 1000 if services else 0:.0f} ms ({services.summary() if services else 'off'})")
    ds.refresh()
    record("DuckDB full aggregation, 1% deleted", best(lambda: _duck(ds.to_arrow_dataset(), full)),
           best(lambda: _duck_parquet(glob, full)), "DuckDB read_parquet (no deletes)")
    ds.compact()
    paths = [ds.store.path(f.path) for f in ds.files]
    record("DuckDB full aggregation, compacted", best(lambda: _duck(ds.to_arrow_dataset(), full)),
           best(lambda: _duck_parquet(paths, full)), "DuckDB read_parquet (same files)")
    out = Path(__file__).with_name("results-ecosystem.json")
    out.write_text(json.dumps({"rows": rows, "files": len(paths), "results": RESULTS}, indent=2))
    print(f"written {out}", file=sys.stderr)


def _duck(source: Any, sql: str) -> list:
    con = duckdb.connect()
    con.register("t", source)
    return con.sql(sql).fetchall()


def _duck_parquet(paths: Any, sql: str) -> list:
    con = duckdb.connect()
    return con.sql(sql.replace(" from t", f" from read_parquet({paths!r}, hive_partitioning=false)")).fetchall()


def _polars(frame: pl.LazyFrame) -> Any:
    return (frame.group_by(pl.col("userId") % 10).agg(pl.len(), pl.col("amount").sum())).collect()


if __name__ == "__main__":
    main()
