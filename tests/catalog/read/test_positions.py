"""Deletion vectors applied inside pyarrow's scan (catalog/read/positions.py): the files
with deletion vectors are read by pyarrow, not by cdkds, and the rows of ``to_table`` and
``scan`` are those of cdkds's own per-file reader (``read_task``), whatever the files,
row groups, deletion vectors, predicate and columns: one meaning of "deleted"."""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import DataFileError
from cdkds.catalog.keyed.deletion import DeletionVector
from cdkds.catalog.log.commit import _checksum
from cdkds.catalog.read.arrow_scan import native_plan, scan_batches, scan_table
from cdkds.catalog.read.positions import kept_rows
from cdkds.catalog.read.scan import read_plan
from tests.datasets import assert_same_rows

SCHEMA = {"type": "record", "name": "P", "fields": [
    {"name": "k", "type": "long"}, {"name": "v", "type": ["null", "string"], "default": None},
    {"name": "f", "type": ["null", "double"], "default": None}, {"name": "o", "type": "long"}]}
ROW_GROUP = 5  # rows: every file has several row groups, some of them deleted whole

PREDICATES = [None, "k > 20", "k < 7 or k > 40", "v = 'a'", "v is null", "f > 1.5", "f = 0.0", "not (f < 2.0)",
              "k in (1, 2, 3, 30, 31)", "o = 2", "k > 1000"]
COLUMNS = [None, ["k"], ["v", "k"], ["f"], [], ["o", "f", "v"]]


def reference(ds, where, columns) -> pa.Table:
    plan = ds.plan(where, columns)
    return pa.Table.from_batches(list(read_plan(ds.store, plan)), schema=plan.output_schema)


def value(i: int, round_: int) -> dict:
    f = [None, math.nan, -0.0, 0.0, 1.5, 2.5][(i + round_) % 6]
    return {"k": i, "v": [None, "a", "b"][(i * 7 + round_) % 3], "f": f, "o": round_}


writes = st.lists(st.one_of(
    st.tuples(st.just("upsert"), st.lists(st.integers(0, 50), min_size=1, max_size=30, unique=True)),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 50), min_size=1, max_size=20, unique=True))),
    min_size=1, max_size=5)


@settings(max_examples=max(10, settings.default.max_examples // 4))  # each example writes a dataset
@given(first=st.integers(1, 50), writes=writes, where=st.sampled_from(PREDICATES), columns=st.sampled_from(COLUMNS),
       batch_rows=st.integers(1, 40))
def test_pyarrow_reads_deletion_vectors_as_read_task_does(first, writes, where, columns, batch_rows):
    root = tempfile.mkdtemp(prefix="positions-")
    try:
        with mock.patch("cdkds.formats.parquet.KEYED_ROW_GROUP_ROWS", ROW_GROUP):
            ds = DatasetRepository(f"file://{root}").create("p", DatasetDescriptor(
                SCHEMA, record_key=["k"], ordering_field="o"))
            ds.upsert([value(i, 0) for i in range(first)])
            for round_, (kind, keys) in enumerate(writes, start=1):
                if kind == "upsert":
                    ds.upsert([value(i, round_) for i in keys])
                else:
                    ds.delete_keys(keys)
        plan = ds.plan(where, columns)
        native = native_plan(ds.store, plan)
        assert not native.fallback, native.reasons  # deletion vectors included: every file read by pyarrow
        want = reference(ds, where, columns)
        assert_same_rows(scan_table(ds.store, plan), want, f"to_table where={where!r} columns={columns!r}")
        batches = list(scan_batches(ds.store, plan, batch_rows))
        assert all(0 < b.num_rows <= batch_rows for b in batches)
        assert_same_rows(pa.Table.from_batches(batches, schema=want.schema), want,
                         f"scan where={where!r} columns={columns!r} batch_rows={batch_rows}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_files_with_deletion_vectors_are_read_by_pyarrow(tmp_path):
    ds = DatasetRepository(f"file://{tmp_path}").create("p", DatasetDescriptor(SCHEMA, record_key=["k"],
                                                                                ordering_field="o"))
    ds.upsert([value(i, 0) for i in range(10)])
    ds.upsert([value(i, 1) for i in range(3)])
    assert any(f.deletes for f in ds.files)
    native = native_plan(ds.store, ds.plan())
    assert not native.fallback and native.native_files == 2
    assert sorted(ds.to_table().column("o").to_pylist()) == [0] * 7 + [1] * 3


def test_kept_rows_is_the_keep_mask_and_the_keep_column_where_null_is_not_kept():
    table = pa.Table.from_batches([pa.record_batch({"x": [0, 1, 2]}), pa.record_batch({"x": [3, 4]})])
    mask = DeletionVector.of([1, 4]).keep_mask(0, 5)
    assert kept_rows(table, mask).column("x").to_pylist() == [0, 2, 3]
    keep = pa.chunked_array([[True, True, None], [False, True]])
    with_keep = table.append_column("cdkds keep", keep)
    assert kept_rows(with_keep, np.ones(5, bool)).column("x").to_pylist() == [0, 1, 4]
    assert kept_rows(with_keep, mask).schema.names == ["x"]
    batch = with_keep.to_batches()[0]
    assert kept_rows(batch, mask[:3]).column("x").to_pylist() == [0]


def test_a_file_shorter_than_the_log_says_is_an_error_naming_it(tmp_path):
    ds = DatasetRepository(f"file://{tmp_path}").create("p", DatasetDescriptor(SCHEMA, record_key=["k"],
                                                                                ordering_field="o"))
    ds.upsert([value(i, 0) for i in range(10)])
    ds.delete_keys([3])
    [f] = ds.files
    import pyarrow.parquet as pq
    path = ds.store.path(f.path)
    pq.write_table(pq.read_table(path).slice(0, 4), path)  # the log still says 10 rows
    plan = ds.plan()
    with pytest.raises(DataFileError, match=f.path.rsplit("/", 1)[-1]):
        scan_table(ds.store, plan)


def test_rows_the_log_miscounts_between_two_files_are_an_error_not_rows_of_the_other_file(tmp_path):
    # the log says the first file read has a row more, the second a row less, than they
    # hold: counting alone, the second file's first row would be taken for the first's last
    ds = DatasetRepository(f"file://{tmp_path}").create("p", DatasetDescriptor(
        SCHEMA, record_key=["k"], ordering_field="o", properties={"services.inline": "false"}))
    ds.upsert([value(i, 0) for i in range(5)])
    ds.upsert([value(i, 0) for i in range(5, 10)])
    ds.delete_keys([1, 6])
    first, second = (t.file.path for t in ds.plan().tasks)
    change = {first: 1, second: -1}
    for commit in (tmp_path / "p" / "_log").glob("*.json"):  # as a writer that miscounted would have written it
        body = json.loads(commit.read_text())
        del body["checksum"]
        for action in body["actions"]:
            if "add" in action:
                action["add"]["rows"] += change.get(action["add"]["path"], 0)
        commit.write_text(json.dumps({**body, "checksum": _checksum(body)}, separators=(",", ":")))
    ds = DatasetRepository(f"file://{tmp_path}").load("p")
    assert [t.file.row_count for t in ds.plan().tasks] == [6, 4]
    for read in (lambda: scan_table(ds.store, ds.plan()),
                 lambda: pa.Table.from_batches(list(scan_batches(ds.store, ds.plan(), 1)))):
        with pytest.raises(DataFileError, match=first.rsplit("/", 1)[-1]):
            read()
