"""Spark's zero-configuration hook: Spark imports every top-level ``pyspark_*`` module and
registers its ``DefaultSource``, so ``spark.read.format("cdkds")`` works without
``spark.dataSource.register``. Kept import-light: it loads only pyspark until used."""

from cdkds.connector.source import CdkdsDataSource as DefaultSource

__all__ = ["DefaultSource"]
