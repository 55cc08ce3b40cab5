"""Deletion vectors and index files in the log: replay, checkpoints, protocol, conflicts."""

from __future__ import annotations

import numpy as np
import pytest

from cdkds.catalog import CommitConflictError, CorruptIndexError, DatasetDescriptor
from cdkds.catalog.keyed.deletion import INLINE_LIMIT, DeletionVector, DeletionVectorRef, load_deletes
from cdkds.catalog.log.actions import KEYED_PROTOCOL, PARTED_CHECKPOINT_PROTOCOL, AddIndex, DeleteRows, RemoveFile, RemoveIndex
from cdkds.catalog.log.conflicts import BlindAppend, Rewrite

SCHEMA = {"type": "record", "name": "r", "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "string"}]}


def keyed(repo, name="k"):
    ds = repo.create(name, DatasetDescriptor(SCHEMA, record_key="id"))
    with ds.writer() as w:
        for i in range(10):
            w.write({"id": i, "v": str(i)})
    return ds


def index_file(path, bucket=0, base=False):
    return AddIndex(path, bucket, base, rows=1, size=10, sha256="0" * 64, min_hash=1, max_hash=2)


def made_up(files):
    """The index files these tests made up (the writer's inserts also wrote real ones)."""
    return [f.path for f in files if len(f.path.rsplit("/", 1)[-1]) < 12]


def test_datasets_keyed_or_not_are_created_with_the_newest_protocol(repo):
    ds = keyed(repo)
    assert ds.snapshot.protocol.reader_version == PARTED_CHECKPOINT_PROTOCOL > KEYED_PROTOCOL
    plain = repo.create("p", DatasetDescriptor(SCHEMA))
    assert plain.snapshot.protocol.reader_version == PARTED_CHECKPOINT_PROTOCOL


def test_deletes_and_index_files_replay_and_checkpoint(repo):
    ds = keyed(repo)
    (path,) = ds.snapshot.files
    small = DeletionVectorRef.store(ds.store, DeletionVector.of([1, 3]))
    big = DeletionVectorRef.store(ds.store, DeletionVector.of(np.arange(0, 2_000_000, 7)))
    assert small.inline is not None and big.path is not None and big.size > INLINE_LIMIT
    ds._commit("upsert", [DeleteRows(path, small), index_file("_index/0/a.parquet")])
    ds._commit("upsert", [DeleteRows(path, big), index_file("_index/0/b.parquet"),
                          index_file("_index/1/c.parquet", bucket=1, base=True)])
    ds._commit("upsert", [RemoveIndex("_index/0/a.parquet"), index_file("_index/0/d.parquet", base=True)])
    for snapshot in (repo.load("k").snapshot, ds.log.snapshot()):
        add = snapshot.files[path]
        assert add.deletes == (small, big) and add.live_rows == 10 - 2 - add.deletes[1].cardinality
        assert made_up(snapshot.index_files(0)) == ["_index/0/d.parquet", "_index/0/b.parquet"]
        assert made_up(snapshot.index_files(1)) == ["_index/1/c.parquet"]
    ds.checkpoint()
    again = repo.load("k").snapshot
    assert again.files[path].deletes == (small, big)
    assert again.index == ds.snapshot.index
    deleted = load_deletes(ds.store, again.files[path].deletes)
    assert 1 in deleted and 3 in deleted and 7 in deleted and 2 not in deleted


def test_a_damaged_sidecar_is_reported(repo):
    ds = keyed(repo)
    ref = DeletionVectorRef.store(ds.store, DeletionVector.of(np.arange(0, 1_000_000, 3)))
    ds.store.put(ref.path, ref.load(ds.store).serialize()[:-1] + b"\x01")
    with pytest.raises(CorruptIndexError, match="checksum"):
        ref.load(ds.store)
    ds.store.delete(ref.path)
    with pytest.raises(CorruptIndexError, match="is missing"):
        ref.load(ds.store)


def test_deleting_rows_of_a_file_removed_concurrently_conflicts(repo):
    ds = keyed(repo)
    (path,) = ds.snapshot.files
    stale = repo.load("k")
    ds._commit("compact", [RemoveFile(path)])
    with pytest.raises(CommitConflictError, match="whose rows this commit deletes"):
        stale._commit("upsert", [DeleteRows(path, DeletionVectorRef.store(ds.store, DeletionVector.of([0])))],
                      rule=BlindAppend())


def test_compaction_conflicts_with_rows_deleted_from_what_it_rewrites(repo):
    ds = keyed(repo)
    (path,) = ds.snapshot.files
    stale = repo.load("k")
    ds._commit("upsert", [DeleteRows(path, DeletionVectorRef.store(ds.store, DeletionVector.of([0])))])
    with pytest.raises(CommitConflictError, match="deleted rows of"):
        stale._commit("compact", [RemoveFile(path)], rule=Rewrite(tuple(stale.snapshot.files.values())))


def test_two_commits_replacing_the_same_index_file_conflict(repo):
    ds = keyed(repo)
    ds._commit("upsert", [index_file("_index/0/a.parquet")])
    stale = repo.load("k")
    ds._commit("upsert", [RemoveIndex("_index/0/a.parquet"), index_file("_index/0/b.parquet", base=True)])
    with pytest.raises(CommitConflictError, match="removed the index file _index/0/a.parquet"):
        stale._commit("upsert", [RemoveIndex("_index/0/a.parquet"), index_file("_index/0/c.parquet", base=True)],
                      rule=BlindAppend())


def test_deletion_vector_masks():
    v = DeletionVector.of([0, 5, 9, 10, 20])
    assert v.keep_mask(100, 5) is None and v.keep_mask(11, 9) is None
    assert list(np.flatnonzero(~v.keep_mask(5, 6))) == [0, 4, 5]
    assert len(DeletionVector.union_of([v, DeletionVector.of([5, 6])])) == 6
