"""Keyed writes through Spark: option("operation", ...) and cdkds.connector.upsert."""

from __future__ import annotations

import pytest

from cdkds.catalog import CdkdsError, DatasetRepository
from cdkds.connector import upsert

pytestmark = pytest.mark.slow

ROWS = "id AS userId, concat('t', id % 3) AS tenant, 'v1' AS email, timestamp_millis(1770000000000) AS updatedAt"


def users(spark, start, end, email="v1", millis=1770000000000):
    return spark.range(start, end).selectExpr(
        "id AS userId", "concat('t', id % 3) AS tenant", f"'{email}' AS email",
        f"timestamp_millis({millis}) AS updatedAt")


def create(spark, url, rows):
    rows.write.format("cdkds").mode("append").option("recordKey", "userId").option("orderingField", "updatedAt") \
        .option("partitionBy", "identity(tenant)").option("property.index.buckets", "8").save(url)


def test_each_operation_through_the_plain_path(spark, tmp_path):
    url = f"file://{tmp_path}/lake/users"
    create(spark, url, users(spark, 0, 100))
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    assert repo.load("users").get_many(list(range(100))).num_rows == 100
    # rows of one key in several tasks: the newest wins, once
    changes = users(spark, 50, 150, "v2", 1770000000001).union(users(spark, 50, 60, "stale", 1769000000000))
    changes.repartition(4).write.format("cdkds").mode("append").option("operation", "upsert").save(url)
    back = spark.read.format("cdkds").load(url)
    assert back.count() == 150 and back.filter("email = 'v2'").count() == 100
    assert back.groupBy("userId").count().filter("count > 1").count() == 0
    spark.createDataFrame([(1, "patched")], "userId long, email string").write.format("cdkds").mode("append") \
        .option("operation", "update").save(url)
    assert repo.load("users").get(1)["email"] == "patched"
    spark.range(0, 10).selectExpr("id AS userId", "'ignored' AS other").write.format("cdkds").mode("append") \
        .option("operation", "delete").save(url)
    assert spark.read.format("cdkds").load(url).count() == 140
    with pytest.raises(Exception, match="KeyExistsError|already exists"):
        users(spark, 100, 101).write.format("cdkds").mode("append").save(url)  # appends insert
    ds = repo.load("users")
    assert ds.vacuum(dry_run=True) == [] and not list(ds.store.walk_files("_staging"))


def test_the_clustered_helper(spark, tmp_path):
    url = f"file://{tmp_path}/lake/users"
    first = upsert(users(spark, 0, 200), url, recordKey="userId", orderingField="updatedAt",
                   **{"property.index.buckets": "4"})
    assert (first.inserted, first.updated) == (200, 0)
    second = upsert(users(spark, 100, 300, "v2", 1770000000001), url)
    assert (second.inserted, second.updated, second.revision) == (100, 100, 2)
    back = spark.read.format("cdkds").load(url)
    assert back.count() == 300 and back.filter("email = 'v2'").count() == 200
    gone = upsert(spark.range(0, 50).selectExpr("id AS userId"), url, operation="delete")
    assert gone.deleted == 50 and spark.read.format("cdkds").load(url).count() == 250


def test_bad_options_fail_before_any_task(spark, tmp_path):
    url = f"file://{tmp_path}/lake/plain"
    users(spark, 0, 10).write.format("cdkds").mode("append").save(url)
    with pytest.raises(Exception, match="has no record key"):
        users(spark, 0, 10).write.format("cdkds").mode("append").option("operation", "upsert").save(url)
    with pytest.raises(Exception, match="option operation must be one of"):
        users(spark, 0, 10).write.format("cdkds").mode("append").option("operation", "merge").save(url)
    keyed = f"file://{tmp_path}/lake/keyed"
    create(spark, keyed, users(spark, 0, 10))
    with pytest.raises(Exception, match="no record key column 'userId'"):
        spark.range(3).selectExpr("id AS other").write.format("cdkds").mode("append") \
            .option("operation", "delete").save(keyed)
    with pytest.raises(CdkdsError, match="operation must be one of"):
        upsert(users(spark, 0, 1), keyed, operation="merge")


def test_uuid_keys_in_any_spelling_through_both_paths(spark, tmp_path):
    from cdkds.catalog import DatasetDescriptor

    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("docs", DatasetDescriptor({"type": "record", "name": "doc", "fields": [
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}}, {"name": "t", "type": "long"},
        {"name": "v", "type": ["null", "string"], "default": None}]}, record_key="id", ordering_field="t",
        properties={"index.buckets": "4"}))
    ids = [f"abcdef{i:02d}-1234-5678-9abc-def012345678" for i in range(20)]
    ds.upsert([{"id": i, "t": 1, "v": "python"} for i in ids])
    url, rows, keys = ds.url, "id string not null, t long not null, v string", "id string not null"
    clustered = upsert(spark.createDataFrame([(i.upper(), 2, "clustered") for i in ids[:10]], rows), url)
    assert (clustered.inserted, clustered.updated) == (0, 10)
    spark.createDataFrame([(i.upper(), 3, "plain") for i in ids[10:]], rows).write \
        .format("cdkds").mode("append").option("operation", "upsert").save(url)
    spark.createDataFrame([(i.upper(),) for i in ids[:5]], keys).write.format("cdkds").mode("append") \
        .option("operation", "delete").save(url)
    gone = upsert(spark.createDataFrame([(i.upper(),) for i in ids[5:8]], keys), url, operation="delete")
    assert gone.deleted == 3
    ds.refresh()
    assert sorted(ds.to_table().column("id").to_pylist()) == ids[8:]
    assert {r["v"] for r in ds.to_table().to_pylist()} == {"clustered", "plain"}
    report = ds.check(read_data=True)
    assert report.ok, report.to_json()
