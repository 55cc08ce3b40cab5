"""Spark reads a tagged revision (issue 33 §2: option ``tagAsOf``), through the cdkds source
and through cdkds.connector.load, after expiry and vacuum removed everything else of it."""

import datetime as dt

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import RefNotFoundError

pytestmark = pytest.mark.slow

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}


def test_spark_reads_a_tag(spark, tmp_path):
    from cdkds.connector import load

    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("t", DatasetDescriptor.builder().schema(SCHEMA).property("checkpoint.interval", "3").build())
    for i in range(3):
        with ds.writer() as w:
            w.write_batch(pa.table({"id": [i]}))
    ds.tag("q3")
    for i in range(3, 8):
        with ds.writer() as w:
            w.write_batch(pa.table({"id": [i]}))
        ds.delete(f"id = {i - 3}")
    ds.expire_log(dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1), force=True)
    ds.vacuum(dt.timedelta(0), dry_run=False, force=True)
    url = f"file://{tmp_path}/lake/t"
    rows = spark.read.format("cdkds").option("tagAsOf", "q3").load(url).collect()
    assert sorted(r.id for r in rows) == [0, 1, 2]
    assert sorted(r.id for r in load(spark, url, tagAsOf="q3").collect()) == [0, 1, 2]
    assert sorted(r.id for r in spark.read.format("cdkds").load(url).collect()) == [5, 6, 7]
    with pytest.raises(Exception, match="has no tag 'q4'"):
        spark.read.format("cdkds").option("tagAsOf", "q4").load(url).collect()
    with pytest.raises(RefNotFoundError):
        repo.load("t", tag="q4")
