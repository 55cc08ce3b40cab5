"""Adversarial review of reads through pyarrow's scanner: each test a way the native path
could have given other rows than cdkds's per-file reader."""

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from tests.catalog.read.test_arrow_scan import agree, bag, per_file

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
