"""The Spark connector reads a converted folder's files that lack their identity partition
columns as their partition values (docs/FORMAT.md §8), natively and through the cdkds source."""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from cdkds.catalog import DatasetRepository
from cdkds.connector.native import load
from tests.catalog.convert.folders import sales

pytestmark = pytest.mark.slow

EXPECTED = [(1, "NZ", dt.date(2026, 1, 1)), (2, "NZ", dt.date(2026, 1, 1)), (3, "NZ", dt.date(2026, 1, 1)),
            (4, "NZ", dt.date(2026, 1, 2)), (5, "AU", dt.date(2026, 1, 1)), (6, "AU", dt.date(2026, 1, 1))]


def test_spark_reads_partition_values_of_files_that_lack_the_columns(spark, tmp_path, caplog):
    caplog.set_level(logging.INFO, "cdkds.connector")
    sales(tmp_path)
    url = DatasetRepository(f"file://{tmp_path}").convert("sales").url
    for df in (spark.read.format("cdkds").load(url), load(spark, url)):
        assert sorted((r.id, r.country, r.day) for r in df.collect()) == EXPECTED
    assert "3 files read by Spark's Parquet source, 0 by the cdkds source" in caplog.text
    au = spark.read.format("cdkds").option("where", "country = 'AU'").load(url)
    assert sorted(r.id for r in au.collect()) == [5, 6]
    assert sorted(r.id for r in load(spark, url).where("day = DATE'2026-01-02'").collect()) == [4]
