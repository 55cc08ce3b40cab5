"""The native read path agrees with cdkds's per-file reader, row for row: for random
datasets (tests/datasets.py: every kind of field, partition function, format, key, TTL,
operation and schema change), random ``where`` and ``columns``, at every revision,
``Dataset.to_table()``, ``to_batch_reader()`` and ``scan()`` (pyarrow's dataset scanner for
the files :func:`~cdkds.catalog.read.native.plan_native` gives it) and ``to_arrow_dataset()``
give the rows of :func:`~cdkds.catalog.read.scan.read_plan`, as multisets."""

from __future__ import annotations

import shutil
import tempfile

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.read.scan import read_plan
from tests.datasets import FOCUSES, assert_same_rows, build, rare_rules_dataset, reads


def reference(ds, where, columns) -> pa.Table:
    """The rows of cdkds's per-file path (the meaning every native path must keep)."""
    plan = ds.plan(where, columns)
    return pa.Table.from_batches(list(read_plan(ds.store, plan)), schema=plan.output_schema)


def check_agreement(ds, where, columns) -> None:
    what = f"revision {ds.version}, where={where!r}, columns={columns!r}"
    want = reference(ds, where, columns)
    assert_same_rows(ds.to_table(where, columns), want, f"to_table at {what}")
    assert_same_rows(ds.to_batch_reader(where, columns).read_all(), want, f"to_batch_reader at {what}")
    scanned = pa.Table.from_batches(list(ds.scan(where, columns)), schema=want.schema)
    assert_same_rows(scanned, want, f"scan at {what}")
    assert_same_rows(ds.to_arrow_dataset(where, columns).to_table(), want, f"to_arrow_dataset at {what}")


@pytest.mark.parametrize("focus", list(FOCUSES))
@settings(max_examples=max(10, settings.default.max_examples // 8))  # each example writes a dataset
@given(data=st.data())
def test_native_reads_agree_with_the_per_file_reader(focus, data):
    root = tempfile.mkdtemp(prefix="agree-")
    try:
        built = build(data, f"file://{root}/lake", focus=FOCUSES[focus])
        for ds in built.all_revisions():  # the latest first, then every earlier one
            check_agreement(ds, None, None)
            check_agreement(ds, *data.draw(reads(ds.descriptor), label=f"read at revision {ds.version}"))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_native_reads_agree_on_null_tombstones_and_nested_renames(tmp_path):
    """Rules the random datasets reach rarely in a few examples (see rare_rules_dataset)."""
    repo = rare_rules_dataset(f"file://{tmp_path}/lake")
    for version in (1, 2, 3):
        ds = repo.load("rare", version=version)
        for where, columns in ((None, None), ("i is null or i > 1", ["r", "id"])):
            check_agreement(ds, where, columns)
    assert sorted(repo.load("rare").to_table().column("id").to_pylist()) == [0, 2, 3, 4]  # the nulls kept


def test_a_tombstone_negating_a_comparison_keeps_nan_rows(tmp_path):
    schema = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "rd", "type": "double"}]}
    ds = DatasetRepository(f"file://{tmp_path}/lake").create("d", DatasetDescriptor(schema))
    with ds.writer() as w:
        for i, v in enumerate([0.0, 0.0, float("nan")]):
            w.write({"id": i, "rd": v})
    ds.delete("not rd < 0.0")  # true for 0.0, unknown for NaN: a tombstone, the NaN row kept
    check_agreement(ds, None, None)


@pytest.mark.parametrize("fmt", ["parquet", "avro"])
def test_a_long_beyond_2_53_widened_to_double_reads(tmp_path, fmt):
    schema = {"type": "record", "name": "R", "fields": [{"name": "l", "type": ["null", "long"], "default": None}]}
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("d", DatasetDescriptor(schema, format=fmt))
    with ds.writer() as w:
        w.write({"l": -2 ** 63})  # exactly -2.0 ** 63 as a double
        w.write({"l": 2 ** 53 + 1})  # rounds to the nearest double, as Java and Spark widen
    ds.alter().widen("l", "double").commit()
    assert repo.load("d").to_table().column("l").to_pylist() == [-2.0 ** 63, 2.0 ** 53]
    ds = repo.load("d")
    assert ds.to_table(where="l >= 9007199254740992").num_rows == 1  # the statistics widen as the values do
