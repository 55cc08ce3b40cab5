"""What keeping a mirror costs a commit: the latency of small appends (one commit each) to a
dataset without mirrors, with ``mirror.delta``, with ``mirror.iceberg`` and with both, on
file:// and on S3 (moto's server on 127.0.0.1), interleaved round by round, as medians; and
an upsert into a keyed dataset with deletion vectors each way. Prints the ratios against the
dataset without mirrors (goal: at most 1.2x). Writes bench/results-mirror.json.

    python bench/mirror.py [--commits 60] [--only file,s3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("CDKDS_INLINE_SERVICES", "off")  # the mirrors' cost alone, not the services'

from cdkds.catalog import DatasetDescriptor, DatasetRepository  # noqa: E402

SCHEMA = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"}, {"name": "tenant", "type": "string"}, {"name": "amount", "type": "double"}]}
KINDS = {"none": {}, "delta": {"mirror.delta": "true"}, "iceberg": {"mirror.iceberg": "true"},
         "both": {"mirror.delta": "true", "mirror.iceberg": "true"}}
RESULTS = []


def record(name: str, ms: float, base: float | None) -> None:
    ratio = None if base is None else ms / base
    RESULTS.append({"name": name, "ms": round(ms, 2), "ratio": None if ratio is None else round(ratio, 3)})
    print(f"{name:<58} {ms:9.1f} ms" + ("" if ratio is None else f"   {ratio:5.2f}x"), flush=True)


def appends(repo: DatasetRepository, label: str, commits: int) -> None:
    datasets = {k: repo.create(f"events_{k}", DatasetDescriptor(SCHEMA, partition_strategy="identity(tenant)",
                                                                  properties=p)) for k, p in KINDS.items()}
    times = {k: [] for k in KINDS}
    for i in range(commits):
        for kind, ds in datasets.items():  # interleaved, so a busy moment costs each kind alike
            rows = [{"id": i * 10 + j, "tenant": f"t{j % 3}", "amount": j / 2} for j in range(10)]
            start = time.perf_counter()
            with ds.writer() as w:
                for r in rows:
                    w.write(r)
            times[kind].append((time.perf_counter() - start) * 1000)
    base = statistics.median(times["none"])
    for kind in KINDS:
        record(f"{label}: append of 10 rows, median of {commits}, mirror {kind}", statistics.median(times[kind]),
               None if kind == "none" else base)


def upserts(repo: DatasetRepository, label: str, commits: int) -> None:
    schema = {"type": "record", "name": "User", "fields": [
        {"name": "userId", "type": "long"}, {"name": "name", "type": "string"}, {"name": "updatedAt", "type": "long"}]}
    datasets = {k: repo.create(f"users_{k}", DatasetDescriptor(schema, record_key=["userId"],
                                                                        ordering_field="updatedAt", properties=p))
                for k, p in KINDS.items()}
    for ds in datasets.values():
        ds.upsert([{"userId": i, "name": "x", "updatedAt": 0} for i in range(10_000)])
    times = {k: [] for k in KINDS}
    for i in range(commits):
        rows = [{"userId": (i * 97 + j * 13) % 10_000, "name": f"n{i}", "updatedAt": i + 1} for j in range(100)]
        for kind, ds in datasets.items():
            start = time.perf_counter()
            ds.upsert(rows)
            times[kind].append((time.perf_counter() - start) * 1000)
    base = statistics.median(times["none"])
    for kind in KINDS:
        record(f"{label}: upsert of 100 rows into 10k, median of {commits}, mirror {kind}",
               statistics.median(times[kind]), None if kind == "none" else base)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=60)
    parser.add_argument("--only", default="file,s3")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if "file" in only:
        with tempfile.TemporaryDirectory() as tmp:
            repo = DatasetRepository(Path(tmp).as_uri())
            appends(repo, "file://", args.commits)
            upserts(repo, "file://", args.commits // 2)
    if "s3" in only:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import boto3
        from s3_counting import start_moto
        os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
        server, endpoint = start_moto()
        try:
            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")
            options = {"client_kwargs": {"endpoint_url": endpoint}, "key": "testing", "secret": "testing"}
            repo = DatasetRepository("s3://bench/lake", options)
            appends(repo, "s3 (moto)", args.commits)
            upserts(repo, "s3 (moto)", args.commits // 2)
        finally:
            server.kill()
    out = Path(__file__).resolve().parent / "results-mirror.json"
    out.write_text(json.dumps(RESULTS, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
