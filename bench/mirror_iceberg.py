"""What keeping the Iceberg mirror adds to a commit: appends of a few rows and of 100,000
rows, each followed by ``IcebergMirror.update`` (what the commit hook runs), on file:// and,
given ``--s3-endpoint``, on S3 (moto's server, say: ``python -m moto.server -p 5000``).

    python bench/mirror_iceberg.py
    python bench/mirror_iceberg.py --s3-endpoint http://127.0.0.1:5000

Prints the median commit time, the median update time and their ratio per case, and writes
bench/results-mirror-iceberg.json. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow as pa

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.mirror.iceberg import IcebergMirror

SCHEMA = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"}, {"name": "country", "type": ["null", "string"], "default": None},
    {"name": "amount", "type": ["null", "double"], "default": None}]}


def measure(url: str, options: dict, rows: int, commits: int) -> dict:
    """Median commit and update times of ``commits`` appends of ``rows`` rows."""
    ds = DatasetRepository(url, options).create("events", DatasetDescriptor(SCHEMA, partition_strategy="identity(country)"))
    mirror = IcebergMirror(ds.store, ds.name)
    mirror.update(ds.log, ds.snapshot)
    commit, update = [], []
    for k in range(commits):
        table = pa.table({"id": pa.array(range(k * rows, (k + 1) * rows), pa.int64()),
                          "country": ["NZ", "AU"] * (rows // 2), "amount": [1.5] * rows})
        start = time.perf_counter()
        with ds.writer() as w:
            w.write_batch(table)
        middle = time.perf_counter()
        mirror.update(ds.log, ds.snapshot)
        commit.append(middle - start)
        update.append(time.perf_counter() - middle)
    c, u = statistics.median(commit), statistics.median(update)
    return {"store": url.split(":")[0], "rows": rows, "commits": commits, "commit_ms": round(c * 1000, 1),
            "update_ms": round(u * 1000, 1), "ratio": round(u / c, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--s3-endpoint")
    args = parser.parse_args()
    cases = [(10, 100), (100_000, 20)]
    stores = [lambda: (f"file://{tempfile.mkdtemp()}/lake", {})]
    if args.s3_endpoint:
        import boto3

        def s3() -> tuple[str, dict]:
            bucket = f"mirror{uuid.uuid4().hex[:12]}"
            boto3.client("s3", endpoint_url=args.s3_endpoint).create_bucket(Bucket=bucket)
            return f"s3://{bucket}/lake", {"client_kwargs": {"endpoint_url": args.s3_endpoint},
                                           "use_listings_cache": False, "skip_instance_cache": True}
        stores.append(s3)
    results = []
    for store in stores:
        for rows, commits in cases:
            result = measure(*store(), rows, commits)
            results.append(result)
            print(f"{result['store']:5} {rows:>7} rows x {commits}: commit {result['commit_ms']} ms, "
                  f"update {result['update_ms']} ms ({result['ratio']:.0%} of the commit)")
    Path(__file__).with_name("results-mirror-iceberg.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
