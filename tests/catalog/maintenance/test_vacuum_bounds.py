"""Vacuum and drop delete only inside their dataset's folder (issue 25 item 9): a
neighbour whose name extends theirs, a namespace's sibling and files beside the
repository stay, whatever the log of the dataset says."""

import datetime as dt

import pyarrow as pa

from cdkds.catalog import DatasetDescriptor, DatasetRepository

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}


def test_vacuum_and_drop_never_delete_outside_the_dataset(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    names = ["a", "ab", "ns/a", "ns/b"]  # "ab" shares a's prefix; ns/a and ns/b are siblings
    datasets = {n: repo.create(n, DatasetDescriptor(SCHEMA)) for n in names}
    for i, ds in enumerate(datasets.values()):
        with ds.writer() as w:
            w.write_batch(pa.table({"id": [i]}))
        ds.store.put("data/part-orphan.parquet", b"an uncommitted writer's")  # vacuum's to delete
    beside = tmp_path / "lake" / "a.parquet"
    beside.write_bytes(b"not a dataset's")  # a file beside the folder, named like it
    outside = tmp_path / "elsewhere" / "data" / "part-0.parquet"
    outside.parent.mkdir(parents=True)
    outside.write_bytes(b"not in the repository")

    def stored():
        return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())

    before = stored()
    deleted = datasets["a"].vacuum(retention=dt.timedelta(0), force=True, dry_run=False)
    assert deleted == ["data/part-orphan.parquet"]
    assert sorted(set(before) - set(stored())) == ["lake/a/data/part-orphan.parquet"]
    assert datasets["ns/a"].vacuum(retention=dt.timedelta(0), force=True, dry_run=False) == deleted
    assert sorted(set(before) - set(stored())) == ["lake/a/data/part-orphan.parquet",
                                                   "lake/ns/a/data/part-orphan.parquet"]

    kept = stored()
    assert repo.drop("a") and repo.drop("ns/a")
    gone = set(kept) - set(stored())
    assert gone and all(p.startswith(("lake/a/", "lake/ns/a/")) for p in gone)
    assert beside.exists() and outside.exists()
    for n in ("ab", "ns/b"):
        assert sorted(r["id"] for r in repo.load(n).reader()) == [names.index(n)]
        assert repo.load(n).check().problems == ()
