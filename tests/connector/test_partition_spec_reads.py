"""Spark reads a dataset across partition-spec changes (issue 33): every row, each file
pruned by its own spec — through the cdkds source (option ``where``, pushed filters, time
travel) and natively."""

from __future__ import annotations

import logging

import pytest

from cdkds.catalog import DatasetRepository
from cdkds.connector.native import load
from tests.connector.test_planning import _holds, changed_lake  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow


def test_spark_reads_every_row_across_partition_changes(spark, changed_lake, caplog):
    caplog.set_level(logging.INFO, "cdkds.connector")
    url = changed_lake
    ds = DatasetRepository(url.rsplit("/", 1)[0]).load("t")
    everything = sorted(tuple(r.values()) for r in ds.to_table().to_pylist())

    def rows(df):
        return sorted((r.id, r.p, r.v) for r in df.collect())

    assert rows(spark.read.format("cdkds").load(url)) == everything == rows(load(spark, url))
    for where in ("p = 1", "v = '2' or id = 107", "p in (0, 3) and id > 15"):
        expected = [r for r in everything if _holds(where, dict(zip(("id", "p", "v"), r)))]
        assert rows(spark.read.format("cdkds").option("where", where).load(url)) == expected, where
        assert rows(load(spark, url).where(where)) == expected
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")  # opt-in (tests/connector/test_pushdown.py)
        try:
            pushed = spark.read.format("cdkds").option("pushFilters", "true").load(url).where(where)
            assert rows(pushed) == expected
        finally:
            spark.conf.unset("spark.sql.python.filterPushdown.enabled")
    pruned = len(ds.plan("p = 1").files)
    assert 0 < pruned < len(ds.files)  # files of each spec left out by their own strategy
    first = spark.read.format("cdkds").option("versionAsOf", 1).load(url)  # before any change
    at_first = DatasetRepository(url.rsplit("/", 1)[0]).load("t", version=1)
    assert not at_first.descriptor.has_past_specs
    assert rows(first) == sorted(tuple(r.values()) for r in at_first.to_table().to_pylist())
    assert rows(first.where("p = 3")) == sorted((i, 3, str(i % 4)) for i in range(3, 30, 5))
