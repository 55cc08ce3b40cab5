"""Values Spark can hold but the files cannot are refused clearly before a file is written (issue 27.6),
by the one input boundary every write goes through (formats/conversion.py)."""

from __future__ import annotations

import datetime as dt

import pytest

from cdkds.catalog import DatasetRepository


OUTSIDE = r"field 'ts' \(row 0\): value '253402315200000000 us since the epoch' is not a timestamp in the years 1 to 9999"


@pytest.mark.slow
def test_spark_writes_refuse_them_and_commit_nothing(spark, tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    url = f"{repo.url}/t"
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        late = spark.sql("SELECT 1L AS id, timestamp'9999-12-31 20:00:00' AS ts")
        with pytest.raises(Exception, match=OUTSIDE):
            late.write.format("cdkds").mode("append").save(url)
        assert not repo.exists("t")
        spark.sql("SELECT 1L AS id, timestamp'9999-12-31 15:00:00' AS ts").write.format("cdkds") \
            .mode("append").save(url)  # 23:00 UTC: stored
        assert repo.load("t").to_table().column("ts").to_pylist() == [dt.datetime(9999, 12, 31, 23, 0,
                                                                                  tzinfo=dt.timezone.utc)]
        with pytest.raises(Exception, match=OUTSIDE):
            late.write.format("cdkds").mode("append").option("checkNulls", "values").save(url)
        keyed = f"{repo.url}/k"
        with pytest.raises(Exception, match=OUTSIDE):
            late.write.format("cdkds").mode("append").option("recordKey", "id").save(keyed)
        assert not repo.exists("k") and repo.load("t").version == 1
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    with pytest.raises(Exception, match="dataset 'e': .*field 'e': record .* has no fields"):
        spark.range(1).selectExpr("id", "struct() AS e").write.format("cdkds").mode("append").save(f"{repo.url}/e")
    assert not repo.exists("e")
