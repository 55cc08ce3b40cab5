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
    # whole rows delete by their key, as through option("operation", "delete"): other columns are ignored
    gone = upsert(users(spark, 50, 60, millis=1780000000000), url, operation="delete")
    assert gone.deleted == 10 and spark.read.format("cdkds").load(url).count() == 240
    # F2: a user's own write with the internal option, not clustered by bucket: refused on the driver
    with pytest.raises(Exception, match="both planned on index bucket"):
        users(spark, 0, 400, "dup", 1790000000000).repartition(2).write.format("cdkds").mode("append") \
            .option("operation", "upsert").option("cdkds.clustered", "true").save(url)
    back = spark.read.format("cdkds").load(url)
    assert back.count() == 240 and back.filter("email = 'dup'").count() == 0
    assert DatasetRepository(url.rsplit("/", 1)[0]).load("users").check(read_data=True).ok


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
    twice = spark.createDataFrame([(1, 2)], "userId long, USERID long")
    with pytest.raises(CdkdsError, match="columns 'userId' and 'USERID', which Spark cannot tell apart"):
        upsert(twice, keyed)
    with pytest.raises(CdkdsError, match="columns 'userId' and 'userId', which Spark cannot tell apart"):
        upsert(spark.createDataFrame([(1, 2)], "userId long, userId long"), keyed)


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


def test_a_failed_first_write_creates_nothing(spark, tmp_path):
    """Issue 27.3: a job that fails commits nothing, the dataset's creation included."""
    from pyspark.sql.functions import udf

    repo = DatasetRepository(f"file://{tmp_path}/lake")
    twice = spark.createDataFrame([(1, "a"), (1, "b"), (2, "c")], "userId long, email string")
    for name, write in {
        "plain": lambda url: twice.write.format("cdkds").mode("append").option("recordKey", "userId").save(url),
        "upsert": lambda url: upsert(twice, url, recordKey="userId"),
        "overwrite": lambda url: twice.write.format("cdkds").mode("overwrite").option("recordKey", "userId").save(url),
    }.items():
        url = f"{repo.url}/{name}"
        with pytest.raises(Exception, match="duplicate|more than once|twice|ordering"):
            write(url)  # duplicate keys and no ordering field: the driver's plan fails
        left = [key for key, _ in repo.store.child(name).walk_files("")]
        assert not repo.exists(name)
        if name == "upsert":  # the helper aborts the messages of its planning tasks that finished; one
            assert all(k.startswith("data/part-") for k in left)  # Spark cancelled mid-write leaves data files
        else:
            assert not left
        twice.dropDuplicates(["userId"]).write.format("cdkds").mode("append").option("recordKey", "userId") \
            .save(url)  # the corrected retry creates it
        assert repo.load(name).version == 1 and repo.load(name).snapshot.row_count == 2
        assert repo.load(name).check(read_data=True).ok

    @udf("long")
    def fail(value):
        raise ValueError("task failure injected")

    url = f"{repo.url}/failed_task"
    with pytest.raises(Exception, match="task failure injected"):
        upsert(users(spark, 0, 3).withColumn("userId", fail("userId")), url, recordKey="userId",
               orderingField="updatedAt")
    assert not repo.exists("failed_task")


def test_upsert_counts_as_dataset_upsert_does(spark, tmp_path):
    """Issue 27.4: one counting path: a row that loses last-write-wins is unchanged, committed or not."""
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    url = f"{repo.url}/counted"
    first = upsert(users(spark, 0, 2, millis=1770000000000), url, recordKey="userId", orderingField="updatedAt")
    twin = repo.create("twin", repo.load("counted").descriptor)
    twin.upsert(users(spark, 0, 2, millis=1770000000000).toArrow())
    for rows in (users(spark, 0, 1, "stale", 1769000000000),  # loses: nothing to commit
                 users(spark, 0, 1, "stale", 1769000000000).union(users(spark, 5, 6, "new"))):
        spark_result, python_result = upsert(rows, url), twin.upsert(rows.toArrow())
        assert (spark_result.inserted, spark_result.updated, spark_result.unchanged) == \
            (python_result.inserted, python_result.updated, python_result.unchanged)
        assert spark_result.unchanged == 1 and (spark_result.revision is None) == (python_result.revision is None)
    assert first.inserted == 2 and spark.read.format("cdkds").load(url).filter("email = 'stale'").count() == 0


def test_the_clustered_helper_plans_in_one_task_per_core_not_per_bucket(spark, tmp_path):
    """Each task plans whole buckets, as many as fall to it: on local[2] two tasks write a
    file per partition each, not one task per index bucket a file per partition each."""
    url = f"file://{tmp_path}/lake/users"
    result = upsert(users(spark, 0, 300), url, recordKey="userId", orderingField="updatedAt",
                    partitionBy="identity(tenant)", **{"property.index.buckets": "16"})
    assert result.inserted == 300
    ds = DatasetRepository(f"file://{tmp_path}/lake").load("users")
    assert len(ds.files) <= 2 * 3  # two tasks x three tenants (one task per bucket: up to 16 x 3)
    assert ds.get_many(list(range(300))).num_rows == 300
    buckets = [f.bucket for f in ds.snapshot.index.values()]
    assert sorted(buckets) == sorted(set(buckets))  # each bucket's entries written by one task, in one file


def test_the_helper_routes_rows_of_many_partitions_to_whole_buckets_and_leaves_no_staged_rows(spark, tmp_path):
    """Map tasks route their rows to the planning task of each row's bucket through the
    job's staging folder: every bucket is planned by one task (its entries in one index
    file), columns named like the routing's own are rows like any other, and nothing staged
    is left after the commit."""
    from cdkds.catalog.write.writer import STAGING_FOLDER

    odd = spark.range(0, 400, numPartitions=5).selectExpr("id AS userId", "id * 2 AS task", "'p' AS path")
    url = f"file://{tmp_path}/lake/odd"
    assert upsert(odd, url, recordKey="userId", **{"property.index.buckets": "8"}).inserted == 400
    ds = DatasetRepository(f"file://{tmp_path}/lake").load("odd")
    assert sorted(f.bucket for f in ds.snapshot.index.values()) == list(range(8))  # a file per bucket
    again = upsert(odd.selectExpr("userId", "task + 1 AS task", "path").repartition(3), url)
    assert (again.inserted, again.updated) == (0, 400)
    ds.refresh()
    assert ds.get(7)["task"] == 15 and ds.get_many(list(range(400))).num_rows == 400
    assert not list(ds.store.walk_files(f"{STAGING_FOLDER}/"))
    assert ds.check(read_data=True).ok
