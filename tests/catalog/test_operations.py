"""Overwrite, partition overwrite, delete, compaction, and how they race other commits."""

import datetime as dt

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor
from cdkds.catalog.errors import CommitConflictError, CdkdsError

SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "g", "type": "string"},
    {"name": "v", "type": ["null", "long"], "default": None}]}


def rows(ids, g=None):
    return pa.table({"id": list(ids), "g": [g or "abc"[i % 3] for i in ids], "v": [i if i % 4 else None for i in ids]})


def write(ds, table, mode="append", **options):
    with ds.writer(mode=mode, **options) as w:
        w.write_batch(table)
    return ds.version


def ids(ds, where=None):
    return sorted(r["id"] for r in ds.reader(where))


@pytest.fixture
def ds(repo):
    return repo.create("t", DatasetDescriptor(SCHEMA, "identity(g)"))


def test_overwrite_replaces_everything_in_one_commit(repo, ds):
    write(ds, rows(range(30)))
    version = write(ds, rows(range(100, 103)), mode="overwrite")
    assert ids(ds) == [100, 101, 102]
    history = ds.history()[-1]
    assert history.operation == "overwrite" and history.removed_files == 3 and history.added_files == 3
    assert ids(repo.load("t", version=version - 1)) == list(range(30))  # never an empty revision between


def test_overwrite_with_no_rows_empties_the_dataset(ds):
    write(ds, rows(range(5)))
    with ds.writer(mode="overwrite"):
        pass
    assert ids(ds) == [] and ds.history()[-1].operation == "overwrite"


def test_partition_overwrite_replaces_only_partitions_written(ds):
    write(ds, rows(range(30)))
    write(ds, rows([100, 101], g="a"), mode="overwrite_partitions")
    assert ids(ds) == [i for i in range(30) if "abc"[i % 3] != "a"] + [100, 101]


def test_delete_removes_whole_files_and_tombstones_the_rest(repo, ds):
    write(ds, rows(range(30)))
    before = ds.version
    ds.delete("g = 'a'")  # whole partition: strict projection
    assert ds.history()[-1].removed_files == 1 and ds.history()[-1].tombstones == 0
    ds.delete("id < 5")  # part of two files: one tombstone
    assert ds.history()[-1].removed_files == 0 and ds.history()[-1].tombstones == 1
    expected = [i for i in range(30) if "abc"[i % 3] != "a" and i >= 5]
    assert ids(ds) == expected and ids(repo.load("t")) == expected
    assert ids(repo.load("t", version=before)) == list(range(30))
    write(ds, rows([1, 2]))  # new rows are not hit by an older tombstone
    assert ids(ds) == sorted(expected + [1, 2])
    assert ds.delete("id > 1000") is None and ds.delete("g = 'zzz'") is None


def test_delete_follows_sql_nulls(ds):
    write(ds, rows(range(12)))
    ds.delete("v != 1")  # rows with a null v are not deleted
    assert ids(ds) == [0, 1, 4, 8]
    ds.delete("v is null")
    assert ids(ds) == [1]


def test_delete_where_everything_removes_all_files(ds):
    write(ds, rows(range(10)))
    ds.delete("id >= 0")
    assert ids(ds) == [] and ds.snapshot.tombstones == () and ds.files == []


def test_compaction_merges_small_files_and_materialises_tombstones(repo, ds):
    for k in range(4):
        write(ds, rows(range(k * 10, k * 10 + 10)))
    ds.delete("id in (0, 11, 22, 33)")
    assert len(ds.files) == 12 and len(ds.snapshot.tombstones) == 1
    before = ids(ds)
    version = ds.compact()
    assert ids(ds) == before and len(ds.files) == 3
    assert ds.snapshot.tombstones == ()  # no file predates it any more
    assert ds.history()[-1].operation == "compact" and ds.compact() is None
    assert ids(repo.load("t", version=version - 1)) == before


def test_appends_rebase_over_compaction_and_compaction_over_appends(repo, ds):
    for k in range(3):
        write(ds, rows(range(k * 10, k * 10 + 10)))
    stale = repo.load("t")
    write(ds, rows(range(50, 55)))
    stale.compact()  # planned before the append: still commits
    assert ids(repo.load("t")) == list(range(30)) + list(range(50, 55))


def test_compaction_conflicts_with_a_concurrent_delete_of_its_rows(repo, ds):
    for k in range(3):
        write(ds, rows(range(k * 10, k * 10 + 10)))
    stale = repo.load("t")
    ds.delete("id = 4")
    with pytest.raises(CommitConflictError, match="its delete .* may match .* which this commit rewrites"):
        stale.compact()
    assert 4 not in ids(repo.load("t")) and repo.load("t").history()[-1].operation == "delete"


def test_overwrite_conflicts_with_a_concurrent_append(repo, ds):
    write(ds, rows(range(10)))
    stale = repo.load("t")
    write(ds, rows([77]))
    with pytest.raises(CommitConflictError, match="it added .* where this commit overwrites or deletes"):
        write(stale, rows([1]), mode="overwrite")
    assert ids(repo.load("t")) == list(range(10)) + [77]


def test_delete_conflicts_only_with_appends_it_could_have_deleted(repo, ds):
    write(ds, rows(range(10)))
    stale = repo.load("t")
    write(ds, rows([30], g="c"))
    stale.delete("g = 'a'")  # the append went to another partition: no conflict
    stale = repo.load("t")
    write(ds.refresh(), rows([40], g="b"))
    with pytest.raises(CommitConflictError, match="it added"):
        stale.delete("g = 'b'")


def test_partition_overwrite_conflicts_with_appends_to_its_partitions(repo, ds):
    write(ds, rows(range(10)))
    stale = repo.load("t")
    write(ds, rows([31], g="b"))
    write(stale, rows([100], g="a"), mode="overwrite_partitions")  # partition a: no conflict
    stale = repo.load("t")
    write(ds.refresh(), rows([32], g="b"))
    with pytest.raises(CommitConflictError, match="to a partition this commit replaces"):
        write(stale, rows([101], g="b"), mode="overwrite_partitions")


def test_two_compactions_of_the_same_files_conflict(repo, ds):
    for k in range(3):
        write(ds, rows(range(k * 10, k * 10 + 10)))
    a, b = repo.load("t"), repo.load("t")
    a.compact()
    with pytest.raises(CommitConflictError, match="which this commit removes too"):
        b.compact()
    assert ids(repo.load("t")) == list(range(30))


def test_bad_operation_arguments(ds):
    with pytest.raises(CdkdsError, match="unknown write mode 'upsert'"):
        ds.writer(mode="upsert")
    with pytest.raises(CdkdsError, match="below the safe minimum"):
        ds.vacuum(retention=dt.timedelta(minutes=5))
    with pytest.raises(CdkdsError, match="must be a datetime.timedelta"):
        ds.vacuum(retention=7)


def test_compaction_of_fully_deleted_files_removes_them_and_spends_the_tombstone(repo, ds):
    write(ds, rows(range(0, 3), g="a"))
    write(ds, rows(range(3, 6), g="a"))
    ds.delete("id in (0, 1, 2, 3, 4, 5)")  # every row of both files; statistics cannot prove it
    write(ds, rows(range(6, 9), g="b"))  # newer than the tombstone
    assert len(ds.snapshot.tombstones) == 1 and len(ds.files) == 3
    before = ds.version
    version = ds.compact()
    assert version == before + 1 and ds.history()[-1].operation == "compact"
    assert ids(ds) == [6, 7, 8] and [f.partition for f in ds.files] == [{"g_copy": "b"}]
    assert ds.snapshot.tombstones == ()  # no file predates it any more
    assert ids(repo.load("t")) == [6, 7, 8] and repo.load("t").compact() is None


def test_a_removing_compaction_conflicts_with_a_concurrent_delete_of_its_files(repo, ds):
    write(ds, rows(range(0, 3), g="a"))
    write(ds, rows(range(3, 6), g="b"))
    ds.delete("id in (0, 1, 2)")
    stale = repo.load("t")
    ds.delete("g = 'a'")  # removes the whole file the stale compaction would remove
    with pytest.raises(CommitConflictError):
        stale.compact()
    assert ids(repo.load("t")) == [3, 4, 5]
