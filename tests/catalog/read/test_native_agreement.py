"""The native read path agrees with cdkds's per-file reader, row for row: for random
datasets (tests/datasets.py: every kind of field, partition function, format, key, TTL,
operation and schema change), random ``where`` and ``columns``, at the latest and at an
earlier revision, ``Dataset.to_table()`` (pyarrow's dataset scanner for the files
:func:`~cdkds.catalog.read.native.plan_native` gives it) and ``to_arrow_dataset()`` give
the rows of :func:`~cdkds.catalog.read.scan.read_plan`, as multisets."""

from __future__ import annotations

import shutil
import tempfile

import pyarrow as pa
from hypothesis import given, note, settings
from hypothesis import strategies as st

from cdkds.catalog.read.scan import read_plan
from tests.datasets import assert_same_rows, build, reads


def reference(ds, where, columns) -> pa.Table:
    """The rows of cdkds's per-file path (the meaning every native path must keep)."""
    plan = ds.plan(where, columns)
    return pa.Table.from_batches(list(read_plan(ds.store, plan)), schema=plan.output_schema)


def check_agreement(data, ds) -> None:
    where, columns = data.draw(reads(ds.descriptor), label=f"read at revision {ds.version}")
    note(f"revision {ds.version}: where={where!r} columns={columns!r}")
    want = reference(ds, where, columns)
    assert_same_rows(ds.to_table(where, columns), want, f"to_table at revision {ds.version}")
    assert_same_rows(ds.to_arrow_dataset(where, columns).to_table(), want,
                     f"to_arrow_dataset at revision {ds.version}")


@settings(max_examples=max(25, settings.default.max_examples // 3))  # each example writes a dataset
@given(data=st.data())
def test_native_reads_agree_with_the_per_file_reader(data):
    root = tempfile.mkdtemp(prefix="agree-")
    try:
        built = build(data, f"file://{root}/lake")
        for ds in built.revisions(data):
            check_agreement(data, ds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
