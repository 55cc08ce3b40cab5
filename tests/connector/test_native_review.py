"""cdkds.connector.load on shapes an adversarial review found: each must agree with the
cdkds source (rows as a multiset, column names and types)."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from tests.connector.test_native import agrees, create, split

pytestmark = pytest.mark.slow


def record(*fields) -> dict:
    return {"type": "record", "name": "R", "fields": list(fields)}


def optional(name: str, typ) -> dict:
    return {"name": name, "type": ["null", typ], "default": None}


@pytest.fixture
def lake(tmp_path):
    return f"file://{tmp_path}/lake"


def test_a_column_named_like_sparks_metadata_column_keeps_deletion_vectors_by_position(spark, lake):
    """A field `_metadata` (or one named like load's own join columns) hides Spark's
    `_metadata` column by name: the deleted rows are found through the hidden column."""
    ds = DatasetRepository(lake).create("meta", DatasetDescriptor(
        record({"name": "k", "type": "long"}, optional("_metadata", "string"), optional("__cdkds_row", "long"),
               optional("__cdkds_file", "string")), record_key=["k"]))
    ds.upsert([{"k": i, "_metadata": f"m{i}", "__cdkds_row": i, "__cdkds_file": "f"} for i in range(10)])
    ds.refresh().upsert([{"k": i, "_metadata": "new", "__cdkds_row": -1, "__cdkds_file": "g"} for i in range(0, 10, 3)])
    assert any(f.deletes for f in ds.refresh().files)
    df = agrees(spark, f"{lake}/meta")
    assert df.count() == 10 and df.where("_metadata = 'new'").count() == 4


def test_names_differing_only_in_case_fall_back_where_spark_matches_parquet_columns_by_case(spark, lake, caplog):
    caplog.set_level(logging.INFO, "cdkds.connector")
    url = create(lake, "case", DatasetDescriptor(record({"name": "id", "type": "long"}, optional("a", "long"),
                                                        optional("A", "string"))),
                 [[{"id": i, "a": i, "A": f"x{i}"} for i in range(4)]])
    agrees(spark, url)
    assert split(caplog) == (0, 1)
    agrees(spark, url, columns="a, id")  # Spark's reader finds two columns 'a' in the file
    assert split(caplog) == (0, 1)
    ds = DatasetRepository(lake).load("case")
    ds.alter().rename("A", "b").add("c", "long").commit()  # the old file still clashes
    with ds.refresh().writer() as w:
        w.write_batch(pa.Table.from_pylist([{"id": 9, "a": 1, "b": "y", "c": None}], schema=ds.descriptor.arrow_schema))
    agrees(spark, url, where="a >= 1")
    assert split(caplog) == (1, 1)
