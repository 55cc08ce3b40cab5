"""``cdkds.connector.maintain``: the table services as a Spark job on ``local[2]`` — groups of
files rewritten in tasks, one commit on the driver — keeping every row at every revision,
the record index of a keyed dataset right, and a user's concurrent commit whole."""

from __future__ import annotations

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetNotFoundError, DatasetRepository
from cdkds.connector import maintain
from cdkds.connector import services as spark_services
from cdkds.connector.options import InvalidOptionError

SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "p", "type": "long"}, {"name": "v", "type": "string"}]}
SMALL = {"services.small.files": "3", "services.file.size": "1m"}


def rows(lo: int, hi: int, v: str = "a") -> pa.Table:
    ids = range(lo, hi)
    return pa.table({"id": pa.array(ids, pa.int64()), "p": pa.array([i % 2 for i in ids], pa.int64()),
                     "v": [v] * (hi - lo)})


def snapshot_rows(repo: DatasetRepository, name: str, version: int | None = None) -> list[tuple]:
    return sorted((r["id"], r["p"], r["v"]) for r in repo.load(name, version=version).reader())


@pytest.fixture
def fragmented(tmp_path):
    """Two partitions of four small files each, and a tombstone on one file."""
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("t", DatasetDescriptor(SCHEMA, "identity(p)", properties=SMALL))
    for i in range(4):
        with ds.writer() as w:
            w.write_batch(rows(10 * i, 10 * i + 10))
    ds.delete("id = 3")
    return repo, f"file://{tmp_path}/lake/t"


@pytest.mark.slow
def test_the_spark_job_rewrites_groups_in_tasks_and_commits_once(spark, fragmented):
    repo, url = fragmented
    before = repo.load("t")
    report = maintain(spark, url)
    ds = repo.load("t")
    assert report.trigger == "spark" and report.revisions == (before.version + 1,) == (ds.version,)
    assert (report.rewritten_files, report.written_files) == (8, 2) and not report.gave_up
    entry = ds.history()[-1]
    assert entry.operation == "compact" and entry.info["service"] == "spark"
    assert entry.info["reasons"] == ["tombstones"]  # each partition has a file the tombstone may apply to
    assert (entry.removed_files, entry.added_files, entry.info["bytes_read"]) == (8, 2, report.bytes_read)
    assert len(ds.snapshot.files) == 2 and not ds.snapshot.tombstones
    assert snapshot_rows(repo, "t") == snapshot_rows(repo, "t", before.version) == \
        sorted((i, i % 2, "a") for i in range(40) if i != 3)
    assert ds.check(read_data=True).ok
    assert maintain(spark, url).revisions == ()  # nothing left to do


@pytest.mark.slow
def test_a_keyed_dataset_keeps_its_index_right(spark, tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("u", DatasetDescriptor(SCHEMA, "hash(id, 2)", record_key="id",
                                            properties={**SMALL, "index.buckets": "2"}))
    ds.upsert(rows(0, 40))
    ds.upsert(rows(0, 20, "b"))  # deletion vectors mark half of the first write's rows
    ds.delete_keys([5, 6])
    before = ds.version
    report = maintain(spark, f"file://{tmp_path}/lake/u")
    ds = repo.load("u")
    assert report.revisions == (before + 1,) and ds.history()[-1].info["service"] == "spark"
    assert "deleted" in ds.history()[-1].info["reasons"]
    assert not any(f.deletes for f in ds.snapshot.files.values())  # the deleted rows are gone from the files
    expected = sorted((i, i % 2, "b" if i < 20 else "a") for i in range(40) if i not in (5, 6))
    assert snapshot_rows(repo, "u") == snapshot_rows(repo, "u", before) == expected
    assert ds.get(3)["v"] == "b" and ds.get(30)["v"] == "a" and ds.get(5) is None
    ds.upsert(rows(30, 32, "c"))  # the index points at the rewritten files: an update finds them
    assert ds.get(31)["v"] == "c" and len(list(ds.reader("id = 31"))) == 1
    assert ds.check(read_data=True).ok


@pytest.mark.slow
def test_a_budget_bounds_the_work_and_a_lost_race_gives_it_up(spark, fragmented, monkeypatch):
    repo, url = fragmented
    assert maintain(spark, url, budget=0).revisions == () and repo.load("t").version == 5
    written = []
    rewrite = spark_services.rewrite_in_tasks

    def racing(*args, **kwargs):  # a user deletes rows of a file being rewritten meanwhile
        written.extend(rewrite(*args, **kwargs))
        repo.load("t").delete("id = 12")
        return written

    monkeypatch.setattr(spark_services, "rewrite_in_tasks", racing)
    report = maintain(spark, url, budget="1m")
    ds = repo.load("t")
    assert report.revisions == () and report.gave_up and "concurrent commit" in report.gave_up[0]
    assert ds.history()[-1].operation == "delete"  # the user's commit stands
    assert snapshot_rows(repo, "t") == sorted((i, i % 2, "a") for i in range(40) if i not in (3, 12))
    paths = [a.path for w in written for a in w.adds]
    assert paths and not any(ds.store.exists(p) for p in paths)  # the job's files are gone


def test_bad_input_is_refused_before_any_work(tmp_path, fragmented):
    repo, url = fragmented
    with pytest.raises(DatasetNotFoundError):
        maintain(None, f"file://{tmp_path}/lake/nope")
    with pytest.raises(InvalidOptionError, match="dataset 't': the services' budget must be .*got 'lots'"):
        maintain(None, url, budget="lots")
    with pytest.raises(InvalidOptionError, match="dataset 't': the services' budget must be .*got -1"):
        maintain(None, url, budget=-1)
    with pytest.raises(InvalidOptionError, match="dataset 't': maintain takes the option storageOptions only, "
                                                 "got 'where'"):
        maintain(None, url, where="id = 1")
    assert repo.load("t").version == 5
