"""Every Spark write lands in the dataset the statement names, or is refused saying how to
write instead; never in the dataset the rows were read from (issue 27)."""

from __future__ import annotations

import pytest

from cdkds.catalog import DatasetRepository

pytestmark = pytest.mark.slow

REFUSED = "Spark does not tell the cdkds source which dataset this write goes to"


@pytest.fixture
def two_tables(spark, tmp_path):
    """Datasets ``a`` (ids 1-3) and ``b`` (id 100), as catalog tables a_t, b_t and temporary views a_v, b_v."""
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    urls = {n: f"{repo.url}/{n}" for n in ("a", "b", "c", "d", "e")}
    spark.createDataFrame([(1,), (2,), (3,)], "id long").write.format("cdkds").mode("append").save(urls["a"])
    spark.createDataFrame([(100,)], "id long").write.format("cdkds").mode("append").save(urls["b"])
    for n in ("a", "b"):
        spark.sql(f"DROP TABLE IF EXISTS {n}_t")
        spark.sql(f"CREATE TABLE {n}_t USING cdkds OPTIONS (path '{urls[n]}')")
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {n}_v USING cdkds OPTIONS (path '{urls[n]}')")
    yield repo, urls
    for t in ("a_t", "b_t", "c_t", "d_t"):
        spark.sql(f"DROP TABLE IF EXISTS {t}")


def rows(repo, name):
    return sorted(r["id"] for r in repo.load(name).to_table().to_pylist())


def test_each_write_path_lands_in_its_target_or_is_refused(spark, two_tables):
    repo, urls = two_tables

    def unchanged():
        assert (rows(repo, "a"), rows(repo, "b")) == ([1, 2, 3], [100])
        assert (repo.load("a").version, repo.load("b").version) == (1, 1)
        assert not repo.exists("c") and not repo.exists("d")

    refused = {  # Spark gives the source only the rows, whose metadata names where they came from
        "INSERT INTO": lambda: spark.sql("INSERT INTO b_t SELECT * FROM a_t"),
        "INSERT OVERWRITE": lambda: spark.sql("INSERT OVERWRITE b_t SELECT * FROM a_t"),
        "INSERT from a view": lambda: spark.sql("INSERT INTO b_t SELECT * FROM a_v"),
        "INSERT a computed SELECT": lambda: spark.sql("INSERT INTO b_t SELECT id + 10 AS id FROM a_t"),
        "INSERT VALUES": lambda: spark.sql("INSERT INTO b_t VALUES (7)"),
        "CTAS": lambda: spark.sql(f"CREATE TABLE c_t USING cdkds OPTIONS (path '{urls['c']}') AS SELECT * FROM a_t"),
        "CTAS from a view": lambda: spark.sql(
            f"CREATE TABLE c_t USING cdkds OPTIONS (path '{urls['c']}') AS SELECT * FROM a_v"),
        "insertInto": lambda: spark.table("a_t").write.insertInto("b_t"),
        "insertInto overwrite": lambda: spark.table("a_t").write.insertInto("b_t", overwrite=True),
        "saveAsTable existing": lambda: spark.table("a_t").write.format("cdkds").mode("append").saveAsTable("b_t"),
        "saveAsTable new, no path": lambda: spark.table("a_t").write.format("cdkds").saveAsTable("d_t"),
        "writeTo": lambda: spark.table("a_t").writeTo("b_t").append(),
        "save without a path": lambda: spark.table("a_t").write.format("cdkds").mode("append").save(),
        "overwrite without a path": lambda: spark.read.format("cdkds").load(urls["a"]).write.format("cdkds")
        .mode("overwrite").save(),
    }
    for what, write in refused.items():
        with pytest.raises(Exception, match=REFUSED):
            write()
        unchanged()
    assert not any(t.name in ("c_t", "d_t") for t in spark.catalog.listTables())  # Spark drops a failed CTAS's table

    # the ways that name the target
    spark.table("a_t").write.format("cdkds").mode("append").save(urls["b"])
    assert (rows(repo, "a"), rows(repo, "b")) == ([1, 2, 3], [1, 2, 3, 100])
    spark.sql(f"INSERT INTO b_t WITH ('path' = '{urls['b']}') SELECT id + 10 AS id FROM a_t")
    assert (rows(repo, "a"), rows(repo, "b")) == ([1, 2, 3], [1, 2, 3, 11, 12, 13, 100])
    spark.sql("INSERT INTO b_v SELECT * FROM a_t")  # a temporary view keeps its OPTIONS, path included
    assert rows(repo, "b") == [1, 1, 2, 2, 3, 3, 11, 12, 13, 100]
    spark.sql("INSERT OVERWRITE b_v SELECT * FROM a_v")
    assert (rows(repo, "a"), rows(repo, "b")) == ([1, 2, 3], [1, 2, 3])
    spark.table("a_v").write.format("cdkds").mode("overwrite").option("path", urls["e"]).save()
    spark.table("a_t").writeTo("b_t").option("path", urls["b"]).append()
    assert (rows(repo, "a"), rows(repo, "b"), rows(repo, "e")) == ([1, 2, 3], [1, 1, 2, 2, 3, 3], [1, 2, 3])
    spark.table("a_t").write.format("cdkds").option("path", urls["d"]).saveAsTable("d_t")
    assert (rows(repo, "a"), rows(repo, "d")) == ([1, 2, 3], [1, 2, 3])
    assert repo.load("a").version == 1


def test_a_write_through_a_filtered_or_time_travelled_view_is_refused(spark, two_tables):
    """A view whose OPTIONS filter its rows (where) or pick a revision shows part of the
    dataset: an INSERT OVERWRITE through it would replace rows outside it, an INSERT would
    land in the latest revision it does not show. Refused, like a view URI."""
    repo, urls = two_tables
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW a_big USING cdkds OPTIONS (path '{urls['a']}', where 'id > 2')")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW a_old USING cdkds OPTIONS (path '{urls['a']}', versionAsOf '1')")
    assert [r.id for r in spark.table("a_big").collect()] == [3]
    for statement in ("INSERT OVERWRITE a_big SELECT 30 AS id", "INSERT INTO a_big SELECT 30 AS id",
                      "INSERT INTO a_old SELECT 30 AS id"):
        with pytest.raises(Exception, match="dataset 'a': cannot write through a view"):
            spark.sql(statement)
        assert rows(repo, "a") == [1, 2, 3] and repo.load("a").version == 1
