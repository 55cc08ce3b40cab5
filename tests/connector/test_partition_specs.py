"""Spark writes across a change of partition strategy: a write uses the current strategy
(partitionBy naming an older one is refused, saying so), a job planned before the change
that commits after it rebases (an append) or fails naming it, and Spark reads every file
through its own spec."""

from __future__ import annotations

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import CommitConflictError
from cdkds.connector.options import Location
from cdkds.connector.writer import CdkdsWriter

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "g", "type": "string"}]}


def job(ds, mode: str) -> CdkdsWriter:
    """A Spark write job planned on ``ds``'s revision (its tasks run through ``write``)."""
    return CdkdsWriter(Location(ds.url), ds.descriptor, ds.descriptor_version, ds.version, "c0ffee" * 5 + mode[:2],
                       mode, 1 << 20)


@pytest.mark.parametrize("mode", ["append", "overwrite_partitions"])
def test_a_job_planned_before_a_partition_change_rebases_or_fails_naming_it(tmp_path, mode):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("t", DatasetDescriptor(SCHEMA, "identity(g)"))
    with ds.writer() as w:
        w.write_batch(pa.table({"id": [0, 1], "g": ["a", "b"]}))
    writer = job(ds, mode)
    message = writer.write(iter([pa.record_batch({"id": [10, 11], "g": ["a", "c"]})]))
    repo.load("t").alter().partition_by("hash(id, 4)").commit()
    if mode == "append":
        writer.commit([message])
        after = repo.load("t")
        assert after.version == 3 and {f.spec_id for f in after.files} == {0}
        assert sorted(after.to_table(where="g = 'a'").column("id").to_pylist()) == [0, 10]
    else:
        with pytest.raises(CommitConflictError, match=r"changed the partition strategy to hash\(id, 4\)"):
            writer.commit([message])
        writer.abort([message])
        assert repo.load("t").version == 2


@pytest.mark.slow
def test_spark_writes_and_reads_across_a_partition_change(spark, tmp_path):
    url = f"file://{tmp_path}/lake/events"
    frame = lambda first, n: spark.range(first, first + n).selectExpr("id", "concat('g', id % 3) AS g")  # noqa: E731
    frame(0, 30).write.format("cdkds").mode("append").option("partitionBy", "identity(g)").save(url)
    ds = DatasetRepository(f"file://{tmp_path}/lake").load("events")
    ds.alter().partition_by("identity(g), hash(id, 2)").commit()
    frame(30, 30).write.format("cdkds").mode("append").save(url)  # the current strategy
    with pytest.raises(Exception, match=r"partitionBy='identity\(g\)' but the dataset has .*partition spec 0"):
        frame(60, 3).write.format("cdkds").mode("append").option("partitionBy", "identity(g)").save(url)
    ds.refresh()
    assert {f.spec_id for f in ds.files} == {0, 1}
    read = spark.read.format("cdkds").load(url)
    assert read.count() == 60
    assert sorted(r.id for r in read.where("g = 'g1'").collect()) == [i for i in range(60) if i % 3 == 1]
    # a dynamic partition overwrite of g2 (both buckets): the old file of g2 lies wholly inside them
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        frame(100, 30).where("g = 'g2'").write.format("cdkds").mode("overwrite") \
            .option("partitionOverwrite", "dynamic").save(url)
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
    rows = sorted((r.id, r.g) for r in spark.read.format("cdkds").load(url).collect())
    assert [i for i, g in rows if g == "g2"] == [i for i in range(100, 130) if i % 3 == 2]
    assert [i for i, g in rows if g != "g2"] == [i for i in range(60) if i % 3 != 2]
