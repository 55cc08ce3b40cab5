"""A vacuum never lets a commit acknowledge rows whose files it deleted (issue 25 item 11): a
vacuum that deletes commits a ``vacuum`` trace first; a commit planned before it checks that
its own files survive it, and fails when they may not. Writers it cannot touch pay nothing."""

import datetime as dt
import os
import time
import types
import uuid

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import CommitConflictError
import importlib

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}
KEYED = {"type": "record", "name": "K", "fields": [{"name": "k", "type": "long"}, {"name": "v", "type": "string"}]}


@pytest.fixture
def local(tmp_path):
    return DatasetRepository(f"file://{tmp_path}/lake")


def data_files(ds):
    return sorted(k for k, _ in ds.store.walk_files("data"))


def orphan(ds, hours_old=0.0):
    """A data file no commit references (as a crashed writer leaves), ``hours_old`` old."""
    key = f"data/part-{uuid.uuid4().hex}.parquet"
    ds.store.put(key, b"not committed")
    if hours_old:
        then = time.time() - hours_old * 3600
        os.utime(ds.store.path(key), (then, then))
    return key


def assert_clean(repo, name="t"):
    report = repo.load(name).check(read_data=True)
    assert report.ok, report.problems


def test_a_forced_vacuum_that_deleted_an_open_writers_files_fails_its_commit(repo):
    ds = repo.create("t", DatasetDescriptor(SCHEMA))
    with ds.writer() as w:
        w.write_batch(pa.table({"id": [0]}))
    writer = repo.load("t").writer(target_file_size=1)
    for i in range(5):
        writer.write_batch(pa.table({"id": list(range(1000 * i + 1, 1000 * i + 1001))}))  # a file each
    assert len(data_files(ds)) == 6
    deleted = repo.load("t").vacuum(retention=dt.timedelta(0), dry_run=False, force=True)
    assert len(deleted) == 5 and len(data_files(ds)) == 1
    with pytest.raises(CommitConflictError, match="'vacuum'.*it deleted data/part-"):
        writer.close()
    latest = repo.load("t")
    assert sorted(r["id"] for r in latest.reader()) == [0]
    assert [h.operation for h in latest.history()] == ["create", "append", "vacuum"]
    assert_clean(repo)


def test_a_keyed_upsert_whose_files_a_vacuum_deleted_fails(repo):
    """Its data, index and deletion-vector files are written, a vacuum deletes them, then it commits."""
    ds = repo.create("t", DatasetDescriptor(KEYED, record_key=["k"]))
    ds.upsert([{"k": 1, "v": "a"}, {"k": 2, "v": "b"}])
    upserting = repo.load("t")
    real = upserting.log.commit

    def vacuum_first(*args, **kwargs):
        deleted = repo.load("t").vacuum(retention=dt.timedelta(0), dry_run=False, force=True)
        assert any(k.startswith("data/") for k in deleted) and any(k.startswith("_index/") for k in deleted)
        return real(*args, **kwargs)

    upserting.log.commit = vacuum_first
    with pytest.raises(CommitConflictError, match="'vacuum'.*it deleted"):
        upserting.upsert([{"k": 2, "v": "B"}, {"k": 3, "v": "c"}])
    assert sorted((r["k"], r["v"]) for r in repo.load("t").reader()) == [(1, "a"), (2, "b")]
    assert_clean(repo)


def test_a_writer_whose_files_are_newer_than_the_vacuums_cutoff_rebases_over_it(local):
    repo = local
    ds = repo.create("t", DatasetDescriptor(SCHEMA))
    writer = repo.load("t").writer()
    writer.write_batch(pa.table({"id": [1]}))
    old = orphan(ds, hours_old=2)  # so the vacuum deletes, and leaves its trace
    assert ds.vacuum(retention=dt.timedelta(hours=1), dry_run=False) == [old]
    writer.close()  # its file is younger than the cutoff: the vacuum could not touch it
    latest = repo.load("t")
    assert [h.operation for h in latest.history()] == ["create", "vacuum", "append"]
    assert sorted(r["id"] for r in latest.reader()) == [1]
    assert_clean(repo)


def test_a_vacuum_racing_a_commit_never_deletes_what_it_acknowledged(repo):
    """The commit lands while the vacuum is between its listing and its deletes: the vacuum,
    reading the log after its trace, keeps the files; a commit after the trace fails."""
    ds = repo.create("t", DatasetDescriptor(SCHEMA))
    early = repo.load("t").writer(target_file_size=1)  # each batch written at once
    early.write_batch(pa.table({"id": [1]}))
    late = repo.load("t").writer(target_file_size=1)
    late.write_batch(pa.table({"id": [2]}))
    orphan(ds)
    vacuuming = repo.load("t")
    real = vacuuming.log.commit

    def commit_while_vacuuming(base, operation, *args, **kwargs):
        early.close()  # lands before the trace: the vacuum must see it and keep its file
        snapshot = real(base, operation, *args, **kwargs)
        with pytest.raises(CommitConflictError, match="vacuum"):
            late.close()  # planned before the trace, its file listed: refused
        return snapshot

    vacuuming.log.commit = commit_while_vacuuming
    vacuuming.vacuum(retention=dt.timedelta(0), dry_run=False, force=True)
    assert sorted(r["id"] for r in repo.load("t").reader()) == [1]
    assert_clean(repo)


def test_a_dry_run_commits_nothing(repo):
    ds = repo.create("t", DatasetDescriptor(SCHEMA))
    orphan(ds)
    assert len(ds.vacuum(retention=dt.timedelta(0), force=True)) == 1
    assert repo.load("t").version == 0


def test_the_same_dataset_vacuuming_under_its_own_open_writer(repo):
    """The writer commits from its dataset's snapshot, which the vacuum moved past the trace:
    the commits between the revision its files were written on and its base are checked too."""
    ds = repo.create("t", DatasetDescriptor(SCHEMA))
    with ds.writer() as w:
        w.write_batch(pa.table({"id": [0]}))
    writer = ds.writer(target_file_size=1)
    for i in range(5):
        writer.write_batch(pa.table({"id": list(range(1000 * i + 1, 1000 * i + 1001))}))
    assert len(ds.vacuum(retention=dt.timedelta(0), dry_run=False, force=True)) == 5
    ds.delete("id = -1")  # the dataset moves on again: still checked
    with pytest.raises(CommitConflictError, match="written on revision 1, conflicts with revision 2 .'vacuum'"):
        writer.close()
    assert sorted(r["id"] for r in repo.load("t").reader()) == [0]
    assert_clean(repo)
    later = ds.writer()  # planned after the trace: nothing to check, nothing paid
    later.write_batch(pa.table({"id": [7]}))
    later.close()
    assert sorted(r["id"] for r in repo.load("t").reader()) == [0, 7]
    assert_clean(repo)


def test_a_file_modified_in_the_cutoffs_own_millisecond_is_checked_as_the_vacuum_deletes(local, monkeypatch):
    """The vacuum and a commit's check compare modification times with one cut-off: a file
    the vacuum is about to delete as older than its cut-off is never taken as younger by a
    commit landing between the trace and the deletes."""
    repo = local
    ds = repo.create("t", DatasetDescriptor(SCHEMA))
    writer = repo.load("t").writer(target_file_size=1)
    writer.write_batch(pa.table({"id": [1]}))
    (written,) = data_files(ds)
    cutoff = int(time.time()) + 0.0008  # 0.8 ms into a millisecond
    os.utime(ds.store.path(written), ns=(int(cutoff * 1e9) - 300_000,) * 2)  # 0.3 ms before it
    monkeypatch.setattr(importlib.import_module("cdkds.catalog.maintenance.vacuum"), "time",
                        types.SimpleNamespace(time=lambda: cutoff))
    vacuuming = repo.load("t")
    real = vacuuming.log.commit

    def commit_after_the_trace(*args, **kwargs):
        snapshot = real(*args, **kwargs)
        with pytest.raises(CommitConflictError, match="'vacuum'.*it may delete data/part-"):
            writer.close()
        return snapshot

    vacuuming.log.commit = commit_after_the_trace
    assert vacuuming.vacuum(retention=dt.timedelta(0), dry_run=False, force=True) == [written]
    assert repo.load("t").version == 1
    assert_clean(repo)
