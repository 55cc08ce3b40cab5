"""Adversarial review of reads through pyarrow's scanner: each test a way the native path
could have given other rows than cdkds's per-file reader."""

import math

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from tests.catalog.read.test_arrow_scan import agree, append, bag, per_file

SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "x", "type": ["null", "long"], "default": None}]}


def test_a_writer_flushing_across_a_concurrent_rename_reads_its_values(tmp_path):
    """A long-lived writer keeps writing with the schema it began with after its first
    commit rebased over a concurrent rename: those files are not laid out as the current
    descriptor says, whatever revision they were stamped with."""
    repo = DatasetRepository(f"file://{tmp_path}")
    ds = repo.create("d", DatasetDescriptor(SCHEMA))
    with ds.writer() as w:
        w.write({"id": 1, "x": 10})
        repo.load("d").alter().rename("x", "y").commit()
        w.flush()  # rebased over the rename
        w.write({"id": 2, "x": 20})
    ds = repo.load("d")
    table = agree(ds)
    assert sorted(table.column("y").to_pylist()) == [10, 20]


FLOATS = {"type": "record", "name": "F", "fields": [
    {"name": "id", "type": "long"}, {"name": "f", "type": ["null", "float"], "default": None}]}


def test_nan_rows_of_a_file_whose_statistics_leave_nan_out_are_kept(tmp_path):
    """Parquet's min/max leave NaN out: a file of NaN and -0.0 has min = max = -0.0, yet its
    NaN row is not deleted by 'f = 0.0' (NaN = 0.0 is false) nor left out by 'not (f = 0.0)'."""
    ds = DatasetRepository(f"file://{tmp_path}").create("d", DatasetDescriptor(FLOATS))
    for values in ([math.nan, -0.0], [1.5, math.nan], [math.nan]):
        append(ds, [{"id": i, "f": v} for i, v in enumerate(values)])
    ds.delete("f = 0.0")
    assert agree(ds).num_rows == 4
    for where in ("not (f = 0.0)", "f != 1.5", "not (f <= 1.5)", "f is not null", "id >= 0"):
        agree(ds, where)
    assert agree(ds, columns=[]).num_rows == 4 and agree(ds, "id < 1", columns=["id"]).num_rows == 3
    ds.alter().widen("f", "double").commit()
    for where in (None, "not (f = 0.0)", "f != 1.5", "not (f < 2.0)"):
        agree(ds, where)


def test_a_lazy_dataset_keeps_nan_rows_its_rules_do_not_delete(tmp_path):
    ds = DatasetRepository(f"file://{tmp_path}").create("d", DatasetDescriptor(FLOATS))
    append(ds, [{"id": i, "f": v} for i, v in enumerate([math.nan, -0.0])])
    ds.delete("f = 0.0")
    assert ds.to_arrow_dataset().to_table().to_pylist()[0]["id"] == 0
    for where in ("not (f = 0.0)", "f is not null", "not (f <= 0.0)"):
        assert bag(ds.to_arrow_dataset(where).to_table()) == bag(per_file(ds, where))
