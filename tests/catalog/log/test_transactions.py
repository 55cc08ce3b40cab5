"""Application transactions (SetTransaction): recorded per commit, kept by replay and
checkpoints, and conflicting between two commits of the same application."""

import json

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor
from cdkds.catalog.errors import CommitConflictError, CorruptLogError
from cdkds.catalog.log import commit_key
from cdkds.catalog.log.actions import SetTransaction
from cdkds.catalog.write.writer import PartitionedWriter

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}


def files(ds, ids):
    w = PartitionedWriter(ds.store, ds.name, ds.descriptor, ds.descriptor_version, ds.version, "t" * 32)
    w.write_batch(pa.table({"id": pa.array(ids, pa.int64())}))
    return w.close()


def test_recorded_versions_survive_replay_and_checkpoints(repo):
    ds = repo.create("t", DatasetDescriptor(SCHEMA, properties={"checkpoint.interval": "2"}))
    assert ds.transaction_version("q1") is None
    for batch in range(5):
        ds._commit("append", [*files(ds, [batch]), SetTransaction("q1", batch, 1)])
    ds._commit("append", [*files(ds, [9]), SetTransaction("q2", 7, 1)])
    assert [r for r in ds.store.list("_log") if r.endswith(".parquet")]  # replay starts at a checkpoint
    fresh = repo.load("t")
    assert fresh.transaction_version("q1") == 4 and fresh.transaction_version("q2") == 7
    assert repo.load("t", version=3).transaction_version("q1") == 2  # time travel sees the version of its revision
    assert sorted(r["id"] for r in fresh.reader()) == [0, 1, 2, 3, 4, 9]
    raw = json.loads(ds.store.read(commit_key(6)))
    assert {"txn": {"appId": "q2", "version": 7, "lastUpdated": 1}} in raw["actions"]


def test_two_commits_of_one_application_conflict_and_others_rebase(repo):
    ds = repo.create("t", DatasetDescriptor(SCHEMA))
    other = repo.load("t")
    ds._commit("append", [*files(ds, [1]), SetTransaction("q", 0)])
    with pytest.raises(CommitConflictError, match="batch 0 of application 'q'"):
        other._commit("append", [*files(other, [2]), SetTransaction("q", 0)])
    third = repo.load("t", version=0)
    third._commit("append", [*files(third, [3]), SetTransaction("other", 0)])  # another application rebases
    assert sorted(r["id"] for r in repo.load("t").reader()) == [1, 3]


def test_malformed_transaction_fails_loudly(repo):
    ds = repo.create("t", DatasetDescriptor(SCHEMA))
    ds._commit("append", [SetTransaction("q", 0)])
    raw = json.loads(ds.store.read(commit_key(1)))
    raw["actions"] = [{"txn": {"appId": "q"}}]
    raw.pop("checksum")
    from cdkds.catalog.log.commit import _checksum
    raw["checksum"] = _checksum(raw)
    ds.store.fs.pipe_file(ds.store.path(commit_key(1)), json.dumps(raw).encode())
    with pytest.raises(CorruptLogError, match="version"):
        repo.load("t")
