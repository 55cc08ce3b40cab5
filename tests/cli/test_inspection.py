"""``cdkds describe`` counts the live files from their columns (FileTable), as it did file by file."""

from __future__ import annotations

import json

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.cli.inspection import files_summary
from tests.cli.running import run

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "p", "type": "long"}]}


def test_describe_counts_files_bytes_small_files_and_deletion_vectors_from_columns(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("u", DatasetDescriptor(SCHEMA, "hash(id, 2)", record_key=["id"]))
    ds.upsert([{"id": i, "p": i} for i in range(20)])
    ds.upsert([{"id": i, "p": -i} for i in range(5)])  # deletion vectors mark the 5 replaced rows
    ds.upsert([{"id": i, "p": i} for i in range(5, 8)])  # more rows of the first files
    files = repo.load("u").files
    assert any(len(f.deletes) > 1 for f in files)  # a file with two vectors
    info = json.loads(run("describe", f"file://{tmp_path}/lake/u", "--json").stdout)
    assert list(info)[11:19] == ["files", "rows", "bytes", "small_files", "tombstones", "deletion_vectors",
                                 "deleted_rows", "schema"]
    assert {k: info[k] for k in ("files", "rows", "bytes", "small_files", "deletion_vectors", "deleted_rows")} == {
        "files": len(files), "rows": 20, "bytes": sum(f.size for f in files), "small_files": len(files),
        "deletion_vectors": sum(len(f.deletes) for f in files), "deleted_rows": sum(f.deleted_rows for f in files)}
    table = repo.load("u").snapshot.files.table()
    small = sorted(f.size for f in files)[1]
    assert files_summary(table, small)["small_files"] == sum(f.size < small for f in files)
    assert files_summary(table.filter([False] * len(table)), small) == dict.fromkeys(
        ["files", "rows", "bytes", "small_files", "deletion_vectors", "deleted_rows"], 0)


def test_describe_lists_the_partition_specs_and_their_files(tmp_path):
    from tests.catalog.read.test_partition_specs import _changed
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    _changed(repo)
    info = json.loads(run("describe", f"file://{tmp_path}/lake/e", "--json").stdout)
    assert info["partition_strategy"] == "hash(s, 5) as day"
    files = repo.load("e").files
    assert info["partition_specs"] == [
        {"spec_id": 0, "strategy": "day(ts)", "files": sum(f.spec_id == 0 for f in files), "current": False},
        {"spec_id": 1, "strategy": "hash(id, 3)", "files": sum(f.spec_id == 1 for f in files), "current": False},
        {"spec_id": 2, "strategy": "hash(s, 5) as day", "files": sum(f.spec_id == 2 for f in files), "current": True}]
    text = run("describe", f"file://{tmp_path}/lake/e").stdout
    assert "spec 0: day(ts), " in text and "spec 2: hash(s, 5) as day (current)" in text
    assert run("check", f"file://{tmp_path}/lake/e", "--read-data").returncode == 0


def test_describe_of_a_dataset_never_changed_lists_its_one_spec(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("u", DatasetDescriptor(SCHEMA, "hash(id, 2)"))
    with ds.writer() as w:
        w.write({"id": 1, "p": 1})
    info = json.loads(run("describe", f"file://{tmp_path}/lake/u", "--json").stdout)
    assert info["partition_specs"] == [{"spec_id": 0, "strategy": "hash(id, 2)", "files": 1, "current": True}]
