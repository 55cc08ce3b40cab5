"""``cdkds.connector.load`` (Spark's own Parquet reader on cdkds's plan) agrees with the
cdkds source (``spark.read.format("cdkds")``), schema and rows: for random datasets
(tests/datasets.py: every kind of field, partition function, format, key, TTL, operation
and schema change), random ``where`` and ``columns``, at the latest and at an earlier
revision (``versionAsOf``)."""

from __future__ import annotations

import shutil
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdkds.connector import load
from tests.datasets import FOCUSES, SPARK_LESS, build, difference, multiset, rare_rules_dataset, reads

pytestmark = pytest.mark.slow


def spark_rows(df) -> list[dict]:
    return [r.asDict(recursive=True) for r in df.collect()]


def check_agreement(spark, url: str, options: dict) -> None:
    """load(...) has the schema and the rows (as multisets) of the cdkds source."""
    native = load(spark, url, **options)
    python = spark.read.format("cdkds").options(**options).load(url)
    # the same columns, types and metadata; columns read natively are nullable (see load)
    assert [(f.name, f.dataType.simpleString(), f.metadata) for f in native.schema.fields] == \
        [(f.name, f.dataType.simpleString(), f.metadata) for f in python.schema.fields], \
        f"{options}: schema {native.schema} != {python.schema}"
    got, want = multiset(spark_rows(native)), multiset(spark_rows(python))
    assert got == want, f"{url} {options}: {difference(got, want)}"


def read_options(data, ds) -> dict:
    """versionAsOf, and a random where and columns, for a read of ``ds``'s revision."""
    where, columns = data.draw(reads(ds.descriptor), label=f"read at revision {ds.version}")
    options = {"versionAsOf": str(ds.version)}
    if where is not None:
        options["where"] = where
    if columns is not None:
        options["columns"] = ",".join(columns)
    return options


# Spark queries are slow: few examples (ci: 14), each one dataset read at two revisions
@settings(max_examples=max(8, settings.default.max_examples // 7))
@given(data=st.data())
def test_load_agrees_with_the_cdkds_source(spark, data):
    root = tempfile.mkdtemp(prefix="agree-spark-")
    try:
        # the rules first: hypothesis leans towards the first choices
        focus = FOCUSES[data.draw(st.sampled_from(["tombstones", "schema changes", "deletion vectors", "ttl",
                                                   "everything"]), label="focus")]
        built = build(data, f"file://{root}/lake", focus=focus, max_operations=6, without=SPARK_LESS)
        url = f"file://{root}/lake/{built.name}"
        latest, earlier = built.revisions(data)
        options = read_options(data, latest)
        if data.draw(st.booleans(), label="latest without versionAsOf"):
            del options["versionAsOf"]
        check_agreement(spark, url, options)
        check_agreement(spark, url, read_options(data, earlier))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_load_agrees_on_null_tombstones_and_nested_renames(spark, tmp_path):
    """Rules the random datasets reach rarely in a few examples: a tombstone null on some
    rows (those are kept) and a renamed and an added field inside a record."""
    rare_rules_dataset(f"file://{tmp_path}/lake")
    url = f"file://{tmp_path}/lake/rare"
    for options in ({}, {"versionAsOf": "1"}, {"where": "i is null or i > 1", "columns": "r,id"}):
        check_agreement(spark, url, options)
