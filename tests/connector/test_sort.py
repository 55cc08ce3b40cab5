"""Spark write option sortBy: each data file of the write sorted by the fields it names."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from cdkds.catalog import DatasetRepository
from cdkds.connector.options import InvalidOptionError, write_options


def test_sort_by_is_parsed_and_checked_against_the_dataset():
    from cdkds.catalog import DatasetDescriptor
    from cdkds.connector.writer import sort_option

    descriptor = DatasetDescriptor({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "long"}, {"name": "tags", "type": {"type": "array", "items": "string"}}]})
    assert write_options({}, "d").sort_by is None
    assert sort_option("d", descriptor, write_options({}, "d")) is None
    assert sort_option("d", descriptor, write_options({"sortBy": " a "}, "d")) == ("a",)
    assert sort_option("d", descriptor, write_options({"sortby": "none"}, "d")) == ()
    for value, message in (("b", "field 'b' is not in the schema"), ("tags", "field 'tags' is a array"),
                           ("", "names no field")):
        with pytest.raises(InvalidOptionError, match=f"dataset 'd': option sortBy = {value!r}.*{message}"):
            sort_option("d", descriptor, write_options({"sortBy": value}, "d"))


@pytest.mark.slow
def test_spark_write_with_sort_by_sorts_each_file(spark, tmp_path):
    url = f"file://{tmp_path}/lake/events"
    rows = spark.range(0, 2000).selectExpr("id", "(id * 7919) % 101 AS score", "concat('c', id % 2) AS country")
    rows.repartition(3).write.format("cdkds").mode("append").option("partitionBy", "identity(country)") \
        .option("sortBy", "score, id").save(url)
    ds = DatasetRepository(f"file://{tmp_path}/lake").load("events")
    assert ds.descriptor.sort_by == ()  # the option sorts this write; the dataset keeps no sort.by
    assert len(ds.files) >= 2
    for f in ds.files:
        table = pq.read_table(ds.store.fs.open(ds.store.path(f.path), "rb"))
        keys = list(zip(table.column("score").to_pylist(), table.column("id").to_pylist()))
        assert keys == sorted(keys)
        assert f.statistics["score"].min == min(k[0] for k in keys)
    assert spark.read.format("cdkds").load(url).count() == 2000
    with pytest.raises(Exception, match="option sortBy = 'nope'"):
        rows.write.format("cdkds").mode("append").option("sortBy", "nope").save(url)
    assert DatasetRepository(f"file://{tmp_path}/lake").load("events").version == ds.version
