import datetime as dt

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository

pytestmark = pytest.mark.slow

UTC = dt.timezone.utc
SCHEMA = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"},
    {"name": "userId", "type": "long"},
    {"name": "country", "type": ["null", "string"], "default": None},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "amount", "type": ["null", "double"], "default": None},
    {"name": "d", "type": {"type": "int", "logicalType": "date"}},
    {"name": "small", "type": "int"},
]}
T0 = dt.datetime(2026, 2, 27, tzinfo=UTC)


def events(n, start=0):
    return pa.table({
        "id": list(range(start, start + n)), "userId": [i % 53 for i in range(start, start + n)],
        "country": [[None, "NZ", "AU", "US"][i % 4] for i in range(start, start + n)],
        "ts": [T0 + dt.timedelta(hours=5 * i) for i in range(start, start + n)],
        "amount": [i / 2 for i in range(start, start + n)],
        "d": [dt.date(2026, 1, 1) + dt.timedelta(days=i % 30) for i in range(start, start + n)],
        "small": pa.array([i % 100 for i in range(start, start + n)], pa.int32()),
    })


@pytest.fixture
def lake(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("events", DatasetDescriptor(SCHEMA, "hash(userId, 53), day(ts)"))
    with ds.writer() as w:
        w.write_batch(events(300))
    return repo, f"file://{tmp_path}/lake/events"


def ids(df):
    return sorted(r["id"] for r in df.select("id").collect())


def test_read_all_types_and_prune(spark, lake):
    repo, url = lake
    df = spark.read.format("cdkds").load(url)
    assert df.schema.simpleString() == ("struct<id:bigint,userId:bigint,country:string,ts:timestamp,amount:double,"
                                        "d:date,small:int>")
    assert df.count() == 300
    row = df.filter("id = 7").collect()[0]
    assert row.ts.replace(tzinfo=UTC) == T0 + dt.timedelta(hours=35) and row.d == dt.date(2026, 1, 8)
    assert ids(spark.read.format("cdkds").option("where", "userId = 7").load(url)) == [7, 60, 113, 166, 219, 272]
    pruned = spark.read.format("cdkds").option("where", "userId = 7").load(url)
    assert pruned.rdd.getNumPartitions() >= 1
    assert ids(spark.read.format("cdkds").option("path", url).option("where", "ts >= '2026-03-30'").load()) == \
        [i for i in range(300) if T0 + dt.timedelta(hours=5 * i) >= dt.datetime(2026, 3, 30, tzinfo=UTC)]


def test_columns_option_and_user_schema_read_only_those_columns(spark, lake):
    _, url = lake
    df = spark.read.format("cdkds").option("columns", "amount,id").load(url)
    assert df.columns == ["amount", "id"] and df.count() == 300
    df = spark.read.format("cdkds").schema("id bigint, country string").load(url)
    assert df.columns == ["id", "country"] and df.filter("country = 'NZ'").count() == 75


def test_view_uri_constraints(spark, lake):
    _, url = lake
    view = "view:" + url.replace("file://", "file:") + "?userId=7&id=[0,200)"
    assert ids(spark.read.format("cdkds").load(view)) == [7, 60, 113, 166]
    assert ids(spark.read.format("cdkds").load("view:" + url + "?country=NZ,AU&id=(,10]")) == [1, 2, 5, 6, 9, 10]


def test_time_travel_and_snapshot_per_load(spark, lake):
    repo, url = lake
    ds = repo.load("events")
    with ds.writer() as w:
        w.write_batch(events(10, 1000))
    assert spark.read.format("cdkds").option("versionAsOf", 1).load(url).count() == 300
    assert spark.read.format("cdkds").load(url).count() == 310
    stamp = ds.history()[1].timestamp
    at = dt.datetime.fromtimestamp(stamp / 1000, tz=UTC).isoformat()
    assert spark.read.format("cdkds").option("timestampAsOf", at).load(url).count() == 300


def test_branch_option_reads_and_writes_a_branch(spark, lake):
    repo, url = lake
    main = repo.load("events")
    main.branch("audit")
    spark.createDataFrame(events(5, 1000).to_pandas()).write.format("cdkds").mode("append") \
        .option("branch", "audit").option("checkNulls", "values").save(url)
    assert spark.read.format("cdkds").option("branch", "audit").load(url).count() == 305
    assert spark.read.format("cdkds").load(url).count() == 300  # main does not see it
    audit = repo.load("events", branch="audit")
    assert audit.version == main.version + 1 and audit.history()[-1].operation == "append"
    assert spark.read.format("cdkds").option("branch", "audit").option("versionAsOf", main.version).load(url) \
        .count() == 300
    main.publish("audit")
    assert spark.read.format("cdkds").load(url).count() == 305
    with pytest.raises(Exception, match="no branch 'audit'"):
        spark.read.format("cdkds").option("branch", "audit").load(url).count()


def test_write_creates_appends_overwrites(spark, tmp_path):
    url = f"file://{tmp_path}/lake/sales"
    df = spark.createDataFrame([(i, f"c{i % 3}", float(i)) for i in range(20)], "id long, customer string, total double")
    df.write.format("cdkds").mode("append").option("partitionBy", "identity(customer)").option("format", "avro").save(url)
    ds = DatasetRepository(f"file://{tmp_path}/lake").load("sales")
    assert ds.descriptor.format == "avro" and ds.descriptor.partition_strategy.to_text() == "identity(customer)"
    assert ds.version == 1 and len(ds.history()) == 2  # create, then one commit for the whole job
    df.filter("id < 5").write.format("cdkds").mode("append").save(url)
    assert spark.read.format("cdkds").load(url).count() == 25
    spark.createDataFrame([(100, "c0", 1.0)], df.schema).write.format("cdkds").mode("overwrite") \
        .option("partitionOverwrite", "dynamic").save(url)
    assert ids(spark.read.format("cdkds").load(url)) == sorted([100] + [i for i in range(20) if i % 3] +
                                                                [i for i in range(5) if i % 3])
    spark.createDataFrame([(7, "c9", 2.0)], df.schema).write.format("cdkds").mode("overwrite").save(url)
    assert ids(spark.read.format("cdkds").load(url)) == [7]
    assert [h.operation for h in ds.history()] == ["create", "append", "append", "overwrite_partitions", "overwrite"]


def test_bad_writes_fail_before_any_file(spark, lake, tmp_path):
    repo, url = lake
    before = repo.load("events").version
    bad = spark.createDataFrame([(1, "x")], "id long, nope string")
    with pytest.raises(Exception, match="unknown columns \\['nope'\\]"):
        bad.write.format("cdkds").mode("append").save(url)
    nullable = spark.read.format("cdkds").load(url).selectExpr("id", "userId", "ts", "small", "CAST(NULL AS DATE) AS d")
    with pytest.raises(Exception, match="columns \\['d'\\] may hold nulls"):
        nullable.write.format("cdkds").mode("append").save(url)
    with pytest.raises(Exception, match="field 'd' \\(row 0\\): null in a required field"):
        nullable.write.format("cdkds").mode("append").option("checkNulls", "values").save(url)
    with pytest.raises(Exception, match="partitionBy='identity\\(country\\)' but the dataset has 'hash\\(userId, 53\\), day\\(ts\\)'"):
        spark.read.format("cdkds").load(url).write.format("cdkds").mode("append").option("partitionBy", "identity(country)").save(url)
    with pytest.raises(Exception, match="cannot be written in the \"ErrorIfExists\" mode"):
        spark.read.format("cdkds").load(url).write.format("cdkds").save(url)
    with pytest.raises(Exception, match="option versionAsOf must be an integer"):
        spark.read.format("cdkds").option("versionAsOf", "x").load(url).count()
    with pytest.raises(Exception, match="cannot parse predicate"):
        spark.read.format("cdkds").option("where", "id = = 1").load(url).count()
    with pytest.raises(Exception, match="does not exist"):
        spark.read.format("cdkds").load(f"file://{tmp_path}/lake/nothing").count()
    assert repo.load("events").version == before
    assert sorted(k for k, _ in repo.load("events").store.walk_files("data")) == \
        sorted(f.path for f in repo.load("events").files)


def test_round_trip_through_spark_keeps_rows(spark, lake, tmp_path):
    repo, url = lake
    copy = f"file://{tmp_path}/lake/copy"
    spark.read.format("cdkds").load(url).write.format("cdkds").mode("append").option("partitionBy", "identity(country)").save(copy)
    a = sorted(map(tuple, spark.read.format("cdkds").load(url).collect()))
    b = sorted(map(tuple, spark.read.format("cdkds").load(copy).collect()))
    assert a == b and len(a) == 300
    assert repo.load("copy").descriptor.fields["small"].kind == "int"


def test_sql_temporary_view_select_insert_overwrite(spark, lake):
    repo, url = lake
    create = f"CREATE OR REPLACE TEMPORARY VIEW ev USING cdkds OPTIONS (path '{url}')"
    spark.sql(create)
    assert spark.sql("SELECT count(*) AS n FROM ev WHERE country = 'NZ'").collect()[0].n == 75
    spark.sql("INSERT INTO ev SELECT id + 1000, userId, country, ts, amount, d, small FROM ev WHERE id < 10")
    assert repo.load("events").snapshot.row_count == 310
    # like a DataFrame, a temporary view keeps the snapshot Spark planned it on: re-create it to see new commits
    assert spark.sql("SELECT count(*) AS n FROM ev").collect()[0].n == 300
    spark.sql(create)
    assert spark.sql("SELECT count(*) AS n FROM ev").collect()[0].n == 310
    spark.sql("INSERT OVERWRITE ev SELECT id, userId, country, ts, amount, d, small FROM ev WHERE id < 3")
    spark.sql(create)
    assert ids(spark.sql("SELECT id FROM ev")) == [0, 1, 2]


def test_a_dataframe_keeps_its_snapshot_and_a_new_load_sees_new_commits(spark, lake):
    repo, url = lake
    df = spark.read.format("cdkds").load(url)
    assert df.count() == 300
    with repo.load("events").writer() as w:
        w.write_batch(events(5, 2000))
    assert df.count() == 300 and spark.read.format("cdkds").load(url).count() == 305


def test_sql_catalog_table_reads_by_the_path_in_its_schema_and_writes_by_a_path_option(spark, lake):
    _, url = lake
    spark.sql("DROP TABLE IF EXISTS ev_table")
    spark.sql(f"CREATE TABLE ev_table USING cdkds OPTIONS (path '{url}')")
    assert spark.sql("SELECT count(*) AS n FROM ev_table").collect()[0].n == 300
    with pytest.raises(Exception, match="does not tell the cdkds source which dataset"):
        spark.sql("INSERT INTO ev_table SELECT id + 5000, userId, country, ts, amount, d, small FROM ev_table")
    spark.sql(f"INSERT INTO ev_table WITH ('path' = '{url}') "
              f"SELECT id + 5000, userId, country, ts, amount, d, small FROM ev_table WHERE id < 2")
    assert spark.sql("SELECT count(*) AS n FROM ev_table").collect()[0].n == 302
    assert spark.sql("SELECT count(*) AS n FROM ev_table WITH ('version' = '1')").collect()[0].n == 300
    spark.sql("DROP TABLE ev_table")


def test_register_a_repository(spark, lake, tmp_path):
    repo, url = lake
    repo.create("shop/orders", DatasetDescriptor({"type": "record", "name": "O", "fields": [{"name": "o", "type": "long"}]}))
    from cdkds.connector import register
    assert register(spark, repo.url) == ["events", "shop_orders"]
    assert spark.sql("SELECT count(*) AS n FROM events").collect()[0].n == 300
    assert spark.sql("SELECT count(*) AS n FROM shop_orders").collect()[0].n == 0


def test_a_failed_job_commits_nothing_and_its_files_stay_invisible(spark, lake):
    repo, url = lake
    from pyspark.sql.functions import udf

    @udf("long")
    def fail_on_seven(value):
        if value == 7:
            raise ValueError("task failure injected")
        return value

    before = repo.load("events")
    df = spark.read.format("cdkds").load(url)
    failing = df.repartition(4).withColumn("id", fail_on_seven(df.id))
    with pytest.raises(Exception, match="task failure injected"):
        failing.write.format("cdkds").mode("append").option("checkNulls", "values").save(url)
    after = repo.load("events")
    assert after.version == before.version and sorted(f.path for f in after.files) == sorted(f.path for f in before.files)
    assert spark.read.format("cdkds").load(url).count() == 300


@pytest.mark.parametrize("statement, message", [
    ("CREATE OR REPLACE TEMPORARY VIEW bad USING cdkds", "needs a dataset URL"),
    ("CREATE OR REPLACE TEMPORARY VIEW bad USING cdkds OPTIONS (path 'file:///nowhere/at/all')", "does not exist"),
    ("CREATE OR REPLACE TEMPORARY VIEW bad USING cdkds OPTIONS (path '{url}', where 'nope = 1')", "unknown field 'nope'"),
    ("CREATE OR REPLACE TEMPORARY VIEW bad USING cdkds OPTIONS (path '{url}', columns 'id,nope')", "unknown column 'nope'"),
    ("CREATE OR REPLACE TEMPORARY VIEW bad USING cdkds OPTIONS (path '{url}', versionAsOf '99')", "has no revision 99"),
])
def test_bad_sql_is_refused_clearly(spark, lake, statement, message):
    repo, url = lake
    with pytest.raises(Exception, match=message):
        spark.sql(statement.format(url=url))
        spark.sql("SELECT count(*) FROM bad").collect()
    assert repo.load("events").version == 1
