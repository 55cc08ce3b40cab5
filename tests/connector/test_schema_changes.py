"""Spark reads and writes across schema changes: files are read by field id."""

from __future__ import annotations

import pytest

from cdkds.catalog import DatasetRepository

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("fmt", ["parquet", "avro"])
def test_spark_reads_after_each_kind_of_change_and_refuses_old_names(spark, tmp_path, fmt):
    url = f"file://{tmp_path}/lake/events"
    spark.range(0, 6).selectExpr("id", "cast(id AS int) AS amount", "concat('c', id % 2) AS country",
                                 "named_struct('city', concat('x', id), 'zip', cast(id AS int)) AS address") \
        .write.format("cdkds").mode("append").option("partitionBy", "identity(country)").option("format", fmt).save(url)
    ds = DatasetRepository(f"file://{tmp_path}/lake").load("events")
    read = lambda: spark.read.format("cdkds").load(url)  # noqa: E731

    def agrees():  # Spark reads exactly what Python reads
        rows = sorted((r.asDict(recursive=True) for r in read().collect()), key=lambda r: r["id"])
        assert rows == sorted(ds.refresh().to_table().to_pylist(), key=lambda r: r["id"])

    ds.alter().rename("country", "region").rename("address.city", "town").commit()
    df = read()
    assert df.columns == ["id", "amount", "region", "address"]
    assert df.schema["address"].dataType.names == ["town", "zip"]
    assert sorted(r.town for r in df.select("address.town").collect()) == [f"x{i}" for i in range(6)]
    assert df.where("region = 'c1'").count() == 3
    agrees()

    ds.alter().drop("address").add("note", "string").add("score", "long", default=7).commit()
    assert read().columns == ["id", "amount", "region", "note", "score"]
    assert {(r.note, r.score) for r in read().collect()} == {(None, 7)}
    agrees()

    ds.alter().widen("amount", "double").move("amount", first=True).commit()
    df = read()
    assert df.columns[0] == "amount" and dict(df.dtypes)["amount"] == "double"
    assert sorted(r.amount for r in df.collect()) == [float(i) for i in range(6)]
    agrees()

    old_names = spark.createDataFrame([(9, 9, "c1")], "id long, amount int, country string")
    with pytest.raises(Exception, match="'country' was renamed to 'region'"):
        old_names.write.format("cdkds").mode("append").save(url)
    spark.createDataFrame([(9.5, 9, "c1", "n")], "amount double not null, id long not null, region string, note string") \
        .write.format("cdkds").mode("append").save(url)
    assert read().count() == 7
    agrees()
    assert read().where("note = 'n'").select("score").first().score == 7  # the default fills an omitted column
    assert DatasetRepository(f"file://{tmp_path}/lake").load("events").descriptor.partition_strategy.names == \
        ["country_copy"]  # the partition keeps its name, so paths do not move


def test_a_dataframe_reads_the_revision_its_schema_was_decided_on(spark, tmp_path):
    """Issue 27.2: a DataFrame built before a schema change and run after it reads the
    revision it describes; a catalog table, whose schema Spark keeps, is refused clearly
    once the latest revision no longer fits it."""
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    url = f"{repo.url}/t"
    spark.createDataFrame([(1, 1, "a")], "id long, q int, note string").write.format("cdkds").mode("append") \
        .option("checkNulls", "values").save(url)
    ds = repo.load("t")
    spark.sql("DROP TABLE IF EXISTS t_table")
    spark.sql(f"CREATE TABLE t_table USING cdkds OPTIONS (path '{url}')")
    load = lambda: spark.read.format("cdkds").load(url)  # noqa: E731
    rows = lambda df: sorted(tuple(r) for r in df.collect())  # noqa: E731

    def append(record):
        with ds.refresh().writer() as w:
            w.write(record)
    try:
        before_widen = load()
        ds.alter().widen("q", "long").commit()
        append({"id": 2, "q": 2 ** 40, "note": "b"})
        assert rows(before_widen) == [(1, 1, "a")]  # the revision it describes, twice
        assert rows(before_widen.where("q > 0")) == [(1, 1, "a")]
        assert rows(load()) == [(1, 1, "a"), (2, 2 ** 40, "b")]
        with pytest.raises(Exception, match="dataset 't': revision 3 no longer fits the schema the query was "
                                            "planned with: column 'q' is bigint, planned as int; re-create"):
            spark.table("t_table").collect()

        before_rename = load()
        ds.refresh().alter().rename("note", "text").commit()
        assert rows(before_rename) == [(1, 1, "a"), (2, 2 ** 40, "b")]
        with pytest.raises(Exception, match="revision 4 no longer fits .* column 'note' is not in it \\(its "
                                            "columns are \\['id', 'q', 'text'\\]\\)"):
            spark.table("t_table").collect()

        before_readd = load()
        ds.refresh().alter().drop("text").commit()
        ds.refresh().alter().add("text", "string").commit()
        append({"id": 3, "q": 3, "text": "c"})
        assert rows(before_readd) == [(1, 1, "a"), (2, 2 ** 40, "b")]  # not nulls
        assert rows(load()) == [(1, 1, None), (2, 2 ** 40, None), (3, 3, "c")]
    finally:
        spark.sql("DROP TABLE IF EXISTS t_table")
