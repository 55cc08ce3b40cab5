"""Spark's sinks append without reading the file list (issue 32), counted as in
tests/catalog/write/test_append_reads.py. No Spark session: the tasks' ``write`` and the
driver's ``commit`` are called here as Spark calls them."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from cdkds.connector.streaming import plan_stream_write
from cdkds.connector.writer import plan_write
from tests.catalog.write.test_append_reads import assert_read_nothing_of_the_file_list, build, value
from tests.catalog.write.test_append_reads import reads  # noqa: F401 - the fixture

SPARK_SCHEMA = StructType([StructField("id", LongType(), False), StructField("p", StringType(), False),
                           StructField("v", DoubleType(), False)])


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> str:
    url = f"file://{tmp_path_factory.mktemp('sink-reads')}/lake"
    build(url, files=5_000)
    return url


def one_row(i: int) -> pa.Table:
    return pa.table({"id": pa.array([i], pa.int64()), "p": [value(i)], "v": [0.5]})


def test_a_micro_batch_commits_from_the_latest_revision_alone(lake, reads, monkeypatch):
    """The driver's commit of a micro-batch loads the latest revision once (it planned on the
    same one), then commits and runs the inline pass without reading the file list."""
    from cdkds.catalog import DatasetRepository

    monkeypatch.delenv("CDKDS_INLINE_SERVICES", raising=False)
    options = {"path": f"{lake}/events", "checkpointLocation": "/tmp/ck"}
    writer = plan_stream_write(options, SPARK_SCHEMA, False)
    messages = [writer.write_batch(iter(one_row(7).to_batches()), "query", 0)]
    committer = plan_stream_write(options, SPARK_SCHEMA, False)
    reads.counting = True
    committer.commit(messages, 0)
    reads.counting = False
    ds = DatasetRepository(lake).load("events")
    assert ds.transaction_version("query") == 0
    assert len(reads.checkpoints()) <= 1, reads.checkpoints()  # the latest revision's load, where it starts
    reads.keys = [k for k in reads.keys if not k.endswith(".checkpoint.parquet")]
    assert_read_nothing_of_the_file_list(reads, ds, value(7))


def test_a_batch_job_commits_without_reading_the_file_list(lake, reads, monkeypatch):
    monkeypatch.delenv("CDKDS_INLINE_SERVICES", raising=False)
    job = plan_write({"path": f"{lake}/events"}, SPARK_SCHEMA, overwrite=False)
    messages = [job.write(iter(one_row(8).to_batches()))]
    reads.counting = True
    job.commit(messages)
    reads.counting = False
    from cdkds.catalog import DatasetRepository

    ds = DatasetRepository(lake).load("events")
    assert len(reads.checkpoints()) <= 1, reads.checkpoints()
    reads.keys = [k for k in reads.keys if not k.endswith(".checkpoint.parquet")]
    assert_read_nothing_of_the_file_list(reads, ds, value(8))
