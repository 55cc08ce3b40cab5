"""Storage options (credentials) never reach a schema, a plan, the catalog or written files."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository

pytestmark = pytest.mark.slow

SECRET = "hunter2-not-a-real-credential"
# LocalFileSystem accepts and ignores unknown options, so file:// stands in for S3 here
STORAGE = json.dumps({"auto_mkdir": True, "key": SECRET, "client_kwargs": {"aws_session_token": SECRET}})


@pytest.fixture
def lake(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("ev", DatasetDescriptor({"type": "record", "name": "E", "fields": [{"name": "id", "type": "long"}]}))
    with ds.writer() as w:
        w.write_batch(pa.table({"id": [1, 2]}))
    return f"file://{tmp_path}/lake/ev"


def shown(spark, statement):
    return "\n".join(str(r) for r in spark.sql(statement).collect())


def test_storage_options_stay_out_of_the_schema_plans_and_written_files(spark, lake, tmp_path):
    df = spark.read.format("cdkds").option("storageOptions", STORAGE).load(lake)
    assert SECRET not in df.schema.json()
    assert sorted(r.id for r in df.collect()) == [1, 2]  # the options still reach the reader
    df.createOrReplaceTempView("ev_view")
    assert SECRET not in shown(spark, "EXPLAIN EXTENDED SELECT * FROM ev_view")
    df.write.parquet(str(tmp_path / "copy"))
    for part in (tmp_path / "copy").glob("*.parquet"):
        metadata = pq.read_metadata(part).metadata or {}
        assert not any(SECRET.encode() in v for v in metadata.values())


def test_a_catalog_table_keeps_no_storage_options(spark, lake):
    spark.sql("DROP TABLE IF EXISTS ev_secret")
    spark.sql(f"CREATE TABLE ev_secret USING cdkds OPTIONS (path '{lake}', storageOptions '{STORAGE}')")
    try:
        assert SECRET not in spark.table("ev_secret").schema.json()
        for statement in ("DESCRIBE TABLE EXTENDED ev_secret", "SHOW CREATE TABLE ev_secret",
                          "EXPLAIN EXTENDED SELECT * FROM ev_secret"):
            assert SECRET not in shown(spark, statement), statement
        spark.sql(f"INSERT INTO ev_secret WITH ('path' = '{lake}') VALUES (3)")  # reads and writes find the dataset
        assert sorted(r.id for r in spark.table("ev_secret").collect()) == [1, 2, 3]
    finally:
        spark.sql("DROP TABLE ev_secret")


def test_registering_catalog_tables_with_storage_options_is_refused(spark, lake):
    from cdkds.connector import register
    from cdkds.connector.options import InvalidOptionError

    root = lake.rsplit("/", 1)[0]
    with pytest.raises(InvalidOptionError, match="catalog tables .* cannot keep storage options"):
        register(spark, root, database="secret_lake", storage_options=json.loads(STORAGE))
    assert register(spark, root, storage_options=json.loads(STORAGE)) == ["ev"]  # temporary views keep them
    assert SECRET not in spark.table("ev").schema.json()
