"""Values Spark can hold but the files cannot are refused clearly before a file is written (issue 27.6)."""

from __future__ import annotations

import datetime as dt
import re

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetRepository
from cdkds.catalog.errors import InvalidRecordError
from cdkds.connector.storable import check_storable_batch, check_storable_schema
from cdkds.formats.errors import SchemaMismatchError

LAST_MICROS = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z


def test_timestamps_outside_years_1_to_9999_in_utc_are_refused_naming_column_and_value():
    utc = pa.timestamp("us", tz="UTC")
    fine = pa.record_batch({"ts": pa.array([LAST_MICROS, -62_135_596_800_000_000, None], utc)})
    check_storable_batch("d", fine)
    late = pa.array([0, LAST_MICROS + 1], utc)
    with pytest.raises(InvalidRecordError, match="dataset 'd': column 'ts' holds a timestamp outside years 1-9999 "
                                                 "in UTC \\(253402300800 s from 1970"):
        check_storable_batch("d", pa.record_batch({"ts": late}))
    nested = pa.StructArray.from_arrays([pa.array([[-62_135_596_800_000_001]], pa.list_(utc))], ["times"])
    with pytest.raises(InvalidRecordError, match="column 'n.times\\[\\]' holds a timestamp outside"):
        check_storable_batch("d", pa.record_batch({"n": nested}))
    check_storable_batch("d", pa.record_batch({"ts": pa.array([None], utc)}))


def test_struct_columns_without_fields_are_refused_naming_them():
    from pyspark.sql.types import ArrayType, LongType, StructField, StructType

    check_storable_schema("d", StructType([StructField("id", LongType())]))
    for schema, column in [(StructType([StructField("e", StructType([]))]), "e"),
                           (StructType([StructField("a", ArrayType(StructType([StructField("e", StructType([]))])))]),
                            "a[].e")]:
        with pytest.raises(SchemaMismatchError, match=f"dataset 'd': column {re.escape(repr(column))} is a struct "
                                                      f"with no fields"):
            check_storable_schema("d", schema)


@pytest.mark.slow
def test_spark_writes_refuse_them_and_commit_nothing(spark, tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    url = f"{repo.url}/t"
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        late = spark.sql("SELECT 1L AS id, timestamp'9999-12-31 20:00:00' AS ts")
        with pytest.raises(Exception, match="column 'ts' holds a timestamp outside years 1-9999 in UTC"):
            late.write.format("cdkds").mode("append").save(url)
        assert not repo.exists("t")
        spark.sql("SELECT 1L AS id, timestamp'9999-12-31 15:00:00' AS ts").write.format("cdkds") \
            .mode("append").save(url)  # 23:00 UTC: stored
        assert repo.load("t").to_table().column("ts").to_pylist() == [dt.datetime(9999, 12, 31, 23, 0,
                                                                                  tzinfo=dt.timezone.utc)]
        with pytest.raises(Exception, match="column 'ts' holds a timestamp outside"):
            late.write.format("cdkds").mode("append").option("checkNulls", "values").save(url)
        keyed = f"{repo.url}/k"
        with pytest.raises(Exception, match="column 'ts' holds a timestamp outside"):
            late.write.format("cdkds").mode("append").option("recordKey", "id").save(keyed)
        assert not repo.exists("k") and repo.load("t").version == 1
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    with pytest.raises(Exception, match="column 'e' is a struct with no fields"):
        spark.range(1).selectExpr("id", "struct() AS e").write.format("cdkds").mode("append").save(f"{repo.url}/e")
    assert not repo.exists("e")
