"""Spark reading and writing a dataset on S3 (moto on loopback) through s3fs."""

import json

import pytest

from cdkds.catalog import DatasetRepository
from tests.conftest import new_bucket, s3_options

pytestmark = pytest.mark.slow


def test_spark_round_trip_on_s3(spark, s3_endpoint):
    bucket = new_bucket(s3_endpoint)
    options = {**s3_options(s3_endpoint), "key": "testing", "secret": "testing"}  # executors get no AWS env
    url = f"s3://{bucket}/lake/events"
    df = spark.range(0, 2000).selectExpr("id", "id % 13 AS userId", "CAST(id % 7 AS STRING) AS g")
    (df.write.format("cdkds").mode("append").option("partitionBy", "hash(userId, 4), identity(g)")
     .option("storageOptions", json.dumps(options)).save(url))
    def reader():  # DataFrameReader.option changes the reader in place: start afresh each time
        return spark.read.format("cdkds").option("storageOptions", json.dumps(options))

    assert reader().load(url).count() == 2000
    assert reader().option("where", "userId = 3").load(url).count() == len([i for i in range(2000) if i % 13 == 3])
    df.filter("id < 10").write.format("cdkds").mode("overwrite").option("storageOptions", json.dumps(options)).save(url)
    assert sorted(r.id for r in reader().load(url).collect()) == list(range(10))
    repo = DatasetRepository(f"s3://{bucket}/lake", s3_options(s3_endpoint))
    assert [h.operation for h in repo.load("events").history()] == ["create", "append", "overwrite"]
