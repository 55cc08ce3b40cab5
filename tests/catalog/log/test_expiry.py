"""Expiry and damage at the start of the log (issue 10 items 2, 3 and 4): a damaged or
missing start fails reads, vacuum and writers instead of reading as empty; a stale writer
cannot commit into an expired gap; a damaged checkpoint never blocks time travel or expiry."""

import datetime as dt
import json
import warnings

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import (
    CdkdsError, CommitConflictError, CorruptLogError, CorruptLogWarning, InvalidTimeTravelError,
)
from cdkds.catalog.log import checkpoint_key, commit_key
from cdkds.catalog.log import commit as commits
from cdkds.catalog.log.expiry import MINIMUM_LOG_AGE
from cdkds.catalog.log.listing import EXPIRED_KEY

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}
HOURS = 3600 * 1000


def soon() -> dt.datetime:
    """A cut-off past every commit so far: commits made within a few milliseconds get
    timestamps a few milliseconds ahead of the clock (they grow strictly), and a cut-off of
    now would find no checkpoint at or before it."""
    return dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)


@pytest.fixture
def repo(tmp_path):
    return DatasetRepository(f"file://{tmp_path}/lake")


def appends(ds, n, start=0):
    for i in range(start, start + n):
        with ds.writer() as w:
            w.write_batch(pa.table({"id": [i]}))
    return ds


def ids(ds):
    return sorted(r["id"] for r in ds.reader())


@pytest.fixture
def later(monkeypatch):
    """Move the log's clock forward by some hours (as if the process had waited)."""
    real = commits.clock

    def move(hours):
        monkeypatch.setattr(commits, "clock", lambda: real() + int(hours * HOURS))
    return move


# ---------------------------------------------------------------- item 2


def test_a_damaged_checkpoint_after_expiry_fails_reads_vacuum_and_writers(repo):
    ds = appends(repo.create("t", DatasetDescriptor(SCHEMA)), 12)
    ds.expire_log(soon(), force=True)
    assert sorted(n for n in ds.store.list("_log") if n != "_parts") == ["00000000000000000000.json", "00000000000000000010.checkpoint.parquet",
                                             "00000000000000000010.json", "00000000000000000011.json",
                                             "00000000000000000012.json", "_expired", "_last_checkpoint"]
    ds.store.put(checkpoint_key(10), ds.store.read(checkpoint_key(10))[:200])
    damaged = "the latest revision cannot be read: checkpoint 10 is damaged and the commits before it have been expired"
    with pytest.warns(CorruptLogWarning), pytest.raises(CorruptLogError, match=damaged):
        repo.load("t")
    with pytest.warns(CorruptLogWarning), pytest.raises(CorruptLogError):
        repo.load("t", version=11)
    with pytest.warns(CorruptLogWarning), pytest.raises(CorruptLogError, match="checkpoint 10, the oldest retained "
                                                                               "state, is damaged"):
        ds.vacuum(retention=dt.timedelta(0), force=True)
    with pytest.warns(CorruptLogWarning), pytest.raises(CorruptLogError):
        appends(repo.load("t"), 1)
    assert not ds.store.exists(commit_key(1))  # no writer forked the log


def test_a_hole_is_an_error_whenever_anything_later_exists(repo):
    ds = appends(repo.create("t", DatasetDescriptor(SCHEMA, properties={"checkpoint.interval": "3"})), 15)
    for revision in range(4, 9):  # longer than any fixed probe
        ds.store.delete(commit_key(revision))
    with pytest.raises(CorruptLogError, match="00000000000000000004.json is missing but commit 9 exists"):
        repo.load("t", version=5)
    with pytest.raises(CorruptLogError, match="is missing but commit 9 exists"):
        ds.log.retained_files()
    assert ids(repo.load("t")) == list(range(15))  # the latest state starts after the hole, at checkpoint 15


def test_a_missing_commit_below_a_later_checkpoint_is_a_hole(repo):
    ds = appends(repo.create("t", DatasetDescriptor(SCHEMA, properties={"checkpoint.interval": "3"})), 6)
    ds.store.delete(commit_key(6))
    ds.store.delete(commit_key(5))
    ds.store.delete(checkpoint_key(6))
    ds.store.put(checkpoint_key(6), b"")  # a checkpoint at 6 exists, so commits 5 and 6 did
    with pytest.warns(CorruptLogWarning), pytest.raises(CorruptLogError, match="missing but checkpoint 6 exists"):
        repo.load("t")


# ---------------------------------------------------------------- item 3


def test_expiring_closer_to_now_than_the_minimum_age_needs_force(repo, later):
    ds = appends(repo.create("t", DatasetDescriptor(SCHEMA, properties={"checkpoint.interval": "3"})), 7)
    with pytest.raises(CdkdsError, match="closer to now than the safe minimum of 1:00:00.*force=True"):
        ds.expire_log(dt.datetime.now(dt.timezone.utc))
    with pytest.raises(CdkdsError, match="safe minimum"):
        ds.expire_log(MINIMUM_LOG_AGE - dt.timedelta(minutes=1))
    assert ds.store.exists(commit_key(1))
    later(2)
    assert commit_key(1) in ds.expire_log(MINIMUM_LOG_AGE)  # now every commit is two hours old
    assert ids(repo.load("t")) == list(range(7))


def test_a_stale_writer_cannot_commit_into_an_expired_gap(repo, later):
    ds = appends(repo.create("t", DatasetDescriptor(SCHEMA)), 12)
    stale = repo.load("t")
    writer = stale.writer()
    writer.write_batch(pa.table({"id": [1000]}))
    appends(ds, 13, 12)  # revisions 13..25, checkpoint 20
    later(2)  # the stale writer takes two hours; then the log is expired, no force needed
    ds.expire_log(MINIMUM_LOG_AGE)
    assert not ds.store.exists(commit_key(13)) and ds.store.exists(checkpoint_key(20))
    with pytest.raises(CommitConflictError, match="written as revision 13, but the log had been expired past it"):
        writer.close()
    assert not ds.store.exists(commit_key(13))  # its commit was taken back...
    assert sorted(k for k, _ in ds.store.walk_files("data")) == sorted(f.path for f in repo.load("t").files)  # ...and its file
    assert ids(repo.load("t")) == list(range(25))
    appends(repo.load("t"), 1, 25)  # a writer on the current log commits as usual after the check
    assert repo.load("t").version == 26


def test_an_old_base_with_a_following_commit_is_not_taken_for_a_gap(repo, later):
    ds = appends(repo.create("t", DatasetDescriptor(SCHEMA)), 2)
    other = repo.load("t")
    later(1)  # the base is an hour old: every commit checks it is reachable
    snapshot = ds.log.commit(ds.snapshot, "append", [])
    appends(other, 1, 2)  # rebased after it: revision 4 follows 3
    assert ds.log.committer._reachable(ds.log.listing.commit(3, snapshot.descriptor))
    assert repo.load("t").version == 4 and ids(repo.load("t")) == [0, 1, 2]


# ---------------------------------------------------------------- item 4


def _damage_checkpoint_6(repo):
    ds = appends(repo.create("t", DatasetDescriptor(SCHEMA, properties={"checkpoint.interval": "3"})), 8)
    ds.store.put(checkpoint_key(6), ds.store.read(checkpoint_key(6))[:100])
    return ds


def test_a_damaged_checkpoint_falls_back_for_time_travel_by_timestamp(repo):
    ds = _damage_checkpoint_6(repo)
    stamps = {h.revision: h.timestamp for h in ds.history()}
    with pytest.warns(CorruptLogWarning, match="00000000000000000006.checkpoint.parquet.* corrupt"):
        assert ids(repo.load("t", timestamp=stamps[7])) == list(range(7))
    assert ids(repo.load("t", timestamp=stamps[2])) == [0, 1]


def test_a_damaged_checkpoint_does_not_break_expiry(repo):
    ds = _damage_checkpoint_6(repo)
    cutoff = ds.history()[-1].timestamp
    with pytest.warns(CorruptLogWarning):
        removed = ds.expire_log(cutoff, force=True)  # keeps checkpoint 3, the newest readable one
    assert checkpoint_key(6) not in removed and commit_key(2) in removed and commit_key(3) not in removed
    with pytest.warns(CorruptLogWarning):
        assert ids(repo.load("t")) == list(range(8))
        assert ids(repo.load("t", version=6)) == list(range(6))


def test_rewriting_a_damaged_checkpoint_repairs_it(repo):
    ds = _damage_checkpoint_6(repo)
    with pytest.warns(CorruptLogWarning):
        at6 = repo.load("t", version=6)
        at6.checkpoint()  # the explicit repair: checkpoints are derived data
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorruptLogWarning)
        assert ds.log.listing.checkpoint(6) == at6.snapshot
        assert ids(repo.load("t")) == list(range(8))
        ds.expire_log(ds.history()[-1].timestamp, force=True)
    assert json.loads(ds.store.read("_log/_last_checkpoint")) == {"revision": 6}
    assert ids(repo.load("t", version=6)) == list(range(6))


# ---------------------------------------------------------------- issue 25 item 12


def test_time_travel_to_revision_0_after_expiry(repo):
    ds = appends(repo.create("t", DatasetDescriptor(SCHEMA)), 12)
    times = {h.revision: h.timestamp for h in ds.history()}
    ds.expire_log(soon(), force=True)  # keeps 0 and 10..12
    assert repo.load("t", version=0).version == 0
    assert repo.load("t", timestamp=times[0]).version == 0  # its own timestamp
    assert repo.load("t", timestamp=times[1] - 1).version == 0  # any time before commit 1 (the marker keeps it)
    with pytest.raises(InvalidTimeTravelError, match="has been expired"):
        repo.load("t", timestamp=times[1])
    assert repo.load("t", timestamp=times[10]).version == 10
    ds.store.delete(EXPIRED_KEY)  # a log expired by an older cdkds: commit 0's own timestamp is still revision 0
    assert repo.load("t", timestamp=times[0]).version == 0
    with pytest.raises(InvalidTimeTravelError, match="has been expired"):
        repo.load("t", timestamp=times[0] + 1)  # revision 0 or an expired one: cannot be told
    assert repo.load("t").check(read_data=True).ok


def test_a_damaged_commit_1_below_the_kept_checkpoint_does_not_stop_expiry(repo):
    """Readers never need it (checkpoint 10 holds its state); expiry deletes it as before,
    and time travel answers revision 0 for commit 0's own timestamp only (commit 1's is lost)."""
    ds = appends(repo.create("t", DatasetDescriptor(SCHEMA)), 12)
    times = {h.revision: h.timestamp for h in ds.history()}
    ds.store.put(commit_key(1), b'{"revision": ')
    assert commit_key(1) in repo.load("t").expire_log(soon(), force=True)
    assert repo.load("t", timestamp=times[0]).version == 0 and ids(repo.load("t")) == list(range(12))
    with pytest.raises(InvalidTimeTravelError, match="has been expired"):
        repo.load("t", timestamp=times[0] + 1)
    assert repo.load("t").check(read_data=True).ok
