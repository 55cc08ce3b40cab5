"""The inline table services after a Spark write's commit on the driver (issue 29 section 1):
batch writes, keyed writes (planned on the driver, or clustered by ``cdkds.connector.upsert``)
and streaming micro-batches run a pass after their commit, and a pass that fails never fails
the job. No Spark session is needed: the writers are plain Python objects, their tasks'
``write`` and the driver's ``commit`` called here as Spark would call them."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import ServiceWarning
from cdkds.catalog.keyed.keys import RecordKey
from cdkds.connector.options import Location
from cdkds.connector.streaming import plan_stream_write
from cdkds.connector.writer import plan_write, take_result

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "string"}]}
SPARK_SCHEMA = StructType([StructField("id", LongType(), False), StructField("v", StringType(), False)])
SMALL = {"services.small.files": "2", "services.file.size": "1m"}


def dataset(tmp_path, **keyed):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    repo.create("t", DatasetDescriptor(SCHEMA, properties=SMALL, **keyed))
    return repo, f"file://{tmp_path}/lake/t"


def rows(lo: int, hi: int, v: str = "a") -> pa.Table:
    return pa.table({"id": pa.array(range(lo, hi), pa.int64()), "v": [v] * (hi - lo)})


def batch_write(url: str, table: pa.Table, **options: str) -> None:
    """One batch job of two tasks, committed on the driver; a clustered job's tasks split the
    rows by index bucket (even and odd), as cdkds.connector.upsert does."""
    job = plan_write({"path": url, **options}, SPARK_SCHEMA, overwrite=False)
    if options.get("cdkds.clustered") == "true":
        descriptor = DatasetRepository(url.rsplit("/", 1)[0]).load("t").descriptor
        key = RecordKey.of(descriptor, "t")
        odd = key.buckets(key.hashes(key.keys(table.select(list(key.names)))), descriptor.keyed.buckets) % 2 == 1
        parts = (table.filter(pa.array(~odd)), table.filter(pa.array(odd)))
    else:
        half = table.num_rows // 2
        parts = (table.slice(0, half), table.slice(half))
    job.commit([job.write(iter(part.to_batches())) for part in parts])


def operations(repo: DatasetRepository) -> list[tuple[str, str | None]]:
    return [(e.operation, e.info.get("service")) for e in repo.load("t").history()]


def ids(repo: DatasetRepository) -> list[int]:
    return sorted(r["id"] for r in repo.load("t").reader())


def test_a_batch_write_runs_the_services_after_its_commit(tmp_path, inline_services):
    repo, url = dataset(tmp_path)
    batch_write(url, rows(0, 10))  # two files: enough small ones to bin-pack
    assert operations(repo) == [("create", None), ("append", None), ("compact", "inline")]
    assert ids(repo) == list(range(10)) and len(repo.load("t").files) == 1


def test_without_inline_services_a_batch_write_commits_alone(tmp_path):
    repo, url = dataset(tmp_path)  # the test suite turns inline services off (tests/conftest.py)
    batch_write(url, rows(0, 10))
    assert operations(repo) == [("create", None), ("append", None)]


def test_a_dataset_property_turns_them_off_for_spark_writes_too(tmp_path, inline_services):
    repo, url = dataset(tmp_path)
    repo.load("t").update_descriptor(DatasetDescriptor(SCHEMA, properties={**SMALL, "services.inline": "false"}))
    batch_write(url, rows(0, 10))
    assert [op for op, _ in operations(repo)] == ["create", "update_descriptor", "append"]


def test_keyed_writes_planned_on_the_driver_run_them(tmp_path, inline_services):
    repo, url = dataset(tmp_path, record_key="id")
    batch_write(url, rows(0, 10), operation="upsert")
    batch_write(url, rows(0, 6, "b"), operation="upsert")  # deletion vectors mark 6 of 10 rows: rewritten
    history = repo.load("t").history()
    assert [(e.operation, e.info.get("service")) for e in history][-1] == ("compact", "inline")
    assert "deleted" in history[-1].info["reasons"]
    ds = repo.load("t")
    assert sorted((r["id"], r["v"]) for r in ds.reader()) == [(i, "b" if i < 6 else "a") for i in range(10)]
    assert ds.get(3)["v"] == "b" and ds.check(read_data=True).ok


def test_a_clustered_upsert_reports_what_the_services_did(tmp_path, inline_services):
    repo, url = dataset(tmp_path, record_key="id")
    results = []
    for table in (rows(0, 10), rows(0, 6, "b")):
        job = uuid.uuid4().hex
        batch_write(url, table, operation="upsert", **{"cdkds.clustered": "true", "cdkds.job": job})
        results.append(take_result(Location(url), job))
    assert results[1].updated == 6 and results[1].services is not None
    assert results[1].services.revisions == (repo.load("t").version,) and results[1].services.rewritten_files >= 1
    assert operations(repo)[-1] == ("compact", "inline")


def test_streaming_micro_batches_run_them(tmp_path, inline_services):
    repo, url = dataset(tmp_path)
    for batch in range(2):
        writer = plan_stream_write({"path": url, "checkpointLocation": "/tmp/ck"}, SPARK_SCHEMA, False)
        messages = [writer.write_batch(iter(rows(10 * batch, 10 * batch + 10).to_batches()), "q", batch)]
        plan_stream_write({"path": url, "checkpointLocation": "/tmp/ck"}, SPARK_SCHEMA, False).commit(messages, batch)
    assert operations(repo) == [("create", None), ("append", None), ("append", None), ("compact", "inline")]
    ds = repo.load("t")
    assert ids(repo) == list(range(20)) and ds.transaction_version("q") == 1


def test_a_failing_pass_never_fails_the_job(tmp_path, inline_services, monkeypatch):
    from cdkds.catalog.services import runner

    def broken(*args, **kwargs):
        raise OSError("503 Slow Down (injected)")

    monkeypatch.setattr(runner, "maintain", broken)
    repo, url = dataset(tmp_path)
    with pytest.warns(ServiceWarning, match="the table services after revision 1 failed.*503 Slow Down"):
        batch_write(url, rows(0, 10))
    assert operations(repo) == [("create", None), ("append", None)] and ids(repo) == list(range(10))


def test_a_spark_overwrite_that_loses_to_a_compaction_is_planned_again(tmp_path, monkeypatch):
    from cdkds.catalog.dataset import Dataset

    repo, url = dataset(tmp_path)
    batch_write(url, rows(0, 10))  # two small files (the suite's inline services are off)
    commit = Dataset._commit
    raced = []

    def compaction_first(self, operation, *args, **kwargs):
        if operation == "overwrite" and not raced:  # a service's compaction lands between plan and commit
            raced.append(repo.load("t").maintain().revisions)
        return commit(self, operation, *args, **kwargs)

    monkeypatch.setattr(Dataset, "_commit", compaction_first)
    job = plan_write({"path": url}, SPARK_SCHEMA, overwrite=True)
    job.commit([job.write(iter(rows(100, 103).to_batches()))])
    assert raced == [(2,)] and ids(repo) == [100, 101, 102]
    assert [e.operation for e in repo.load("t").history()][-2:] == ["compact", "overwrite"]
