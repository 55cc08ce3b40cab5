"""Spark's filter pushdown to Python sources is opt-in, because of how pyspark 4.1-4.3 reuse plans."""

import pytest

from tests.connector.test_source import lake, events  # noqa: F401 - fixtures and data

pytestmark = pytest.mark.slow


def test_pushed_filters_prune_but_spark_still_filters(spark, lake):  # noqa: F811
    _, url = lake
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        df = spark.read.format("cdkds").option("pushFilters", "true").load(url)
        assert sorted(r.id for r in df.filter("userId = 7 and id < 200").collect()) == [7, 60, 113, 166]
        assert df.filter("country IS NULL and id < 8").count() == 2
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")


def test_installed_spark_reuses_pushed_filters_across_queries(spark, lake):  # noqa: F811
    """Documents why pushdown is opt-in: on this Spark, a DataFrame first collected with a
    filter and then without returns only the filtered rows when the source prunes with
    pushed filters. When this test fails, the installed Spark fixed it: make pushdown the default."""
    _, url = lake
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        df = spark.read.format("cdkds").option("pushFilters", "true").load(url)
        assert df.filter("userId = 7").count() == 6
        unfiltered = df.count()
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")
    assert unfiltered < 300, f"Spark {spark.version} no longer reuses pushed filters; pushdown can be the default"
    assert spark.read.format("cdkds").load(url).count() == 300  # without pushdown every query is right
