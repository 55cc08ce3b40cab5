"""A commit is acknowledged only when it extends the chain readers replay (issue 25 item 7):
a forced expiry frees the names of the commits it deletes, and a stale writer's commit that
takes one of them must fail, not vanish — whatever the age of its base, in this process or
in another. A plain append pays one small read for the check, and no LIST."""

import json
import multiprocessing
import os

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import CommitConflictError
from cdkds.catalog.log import LOG_FOLDER, checkpoint_key, commit_key
from cdkds.catalog.log.listing import ExpiryMarker
from tests.catalog.log.test_expiry import appends, ids, soon

EXPIRED_KEY = f"{LOG_FOLDER}/_expired"  # the expiry marker (FORMAT.md §4)

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}


@pytest.fixture
def local(tmp_path):
    return DatasetRepository(f"file://{tmp_path}/lake")


def data_files(ds):
    return sorted(k for k, _ in ds.store.walk_files("data"))


def assert_clean(repo):
    report = repo.load("t").check(read_data=True)
    assert report.ok, report.problems


def test_a_stale_writer_after_a_forced_expiry_is_refused_not_lost(repo):
    ds = appends(repo.create("t", DatasetDescriptor(SCHEMA)), 12)
    stale = repo.load("t")  # revision 12, seconds old: no age makes it suspect
    appends(ds, 13, 12)  # revisions 13..25, checkpoint 20
    ds.expire_log(soon(), force=True)
    assert not ds.store.exists(commit_key(13)) and ds.store.exists(checkpoint_key(20))
    with pytest.raises(CommitConflictError, match="written as revision 13, but the log had been expired past it"):
        appends(stale, 1, 1000)
    assert not ds.store.exists(commit_key(13))  # taken back
    latest = repo.load("t")
    assert ids(latest) == list(range(25)) and latest.version == 25
    assert data_files(ds) == sorted(f.path for f in latest.files)  # its data file deleted too
    assert_clean(repo)
    appends(repo.load("t"), 1, 25)  # a fresh writer commits as usual
    assert ids(repo.load("t")) == list(range(26))
    assert_clean(repo)


def test_a_stale_writer_on_revision_0_after_a_forced_expiry_is_refused(repo):
    ds = repo.create("t", DatasetDescriptor(SCHEMA))
    stale = repo.load("t")
    appends(ds, 11)
    ds.expire_log(soon(), force=True)  # keeps checkpoint 10, frees 1..9
    with pytest.raises(CommitConflictError, match="expired past it"):
        appends(stale, 1, 1000)
    assert ids(repo.load("t")) == list(range(11))
    assert_clean(repo)


def test_a_commit_that_a_concurrent_expiry_deletes_after_it_landed_is_acknowledged(repo):
    """The legitimate case: our commit landed on the latest revision; others built on it and a
    forced expiry ran before our check. Readers see it (checkpoint 20 holds it): it stands."""
    ds = appends(repo.create("t", DatasetDescriptor(SCHEMA)), 12)
    committer = ds.log.committer
    real = committer.accept

    def others_build_on_it_and_expire(commit, before):
        appends(repo.load("t"), 9, 100)  # revisions 14..22, checkpoint 20
        repo.load("t").expire_log(soon(), force=True)
        return real(commit, before)

    committer.accept = others_build_on_it_and_expire
    appends(ds, 1, 12)  # revision 13
    committer.accept = real
    assert ds.version == 13 and 12 in ids(repo.load("t")) and len(ids(repo.load("t"))) == 22
    assert_clean(repo)


def test_the_expiry_marker_is_written_before_any_commit_is_deleted_and_never_lowered(local):
    repo = local
    ds = appends(repo.create("t", DatasetDescriptor(SCHEMA, properties={"checkpoint.interval": "5"})), 12)
    deleted = []
    real = ds.store.delete

    def delete(key):
        deleted.append((key, json.loads(ds.store.read(EXPIRED_KEY))["expiredBefore"]))
        real(key)

    ds.store.delete = delete
    ds.expire_log(soon(), force=True)
    assert deleted and all(marker == 10 for _, marker in deleted)
    ds.store.delete = real
    ds.store.put(EXPIRED_KEY, json.dumps({"expiredBefore": 30}).encode())  # a later expiry's, say
    ds.expire_log(soon(), force=True)
    assert json.loads(ds.store.read(EXPIRED_KEY))["expiredBefore"] == 30


def test_a_slower_concurrent_expiry_never_leaves_the_marker_lowered(local):
    """Two forced expiries: the one that read the log (and the marker) first writes its lower
    marker after the other finished. The marker must still say what was expired, or a stale
    writer in the freed names would be acknowledged and lost."""
    repo = local
    ds = appends(repo.create("t", DatasetDescriptor(SCHEMA)), 22)  # checkpoints 10, 20
    stale = repo.load("t")  # revision 22
    slow = repo.load("t")
    expiry = slow.log.expiry
    real_mark = expiry._mark
    marked = []

    def mark_after_the_other_expiry(ours):
        if not marked:  # it read the empty marker, then stalled while the other expiry ran
            appends(repo.load("t"), 10, 100)  # revisions 23..32, checkpoint 30
            repo.load("t").expire_log(soon(), force=True)  # frees 1..29
            real_get = expiry.listing.expiry_marker
            expiry.listing.expiry_marker = ExpiryMarker  # what it read before the other expiry wrote
            try:
                real_mark(ours)
            finally:
                expiry.listing.expiry_marker = real_get
        else:
            real_mark(ours)
        marked.append(ours)

    expiry._mark = mark_after_the_other_expiry
    slow.expire_log(soon(), force=True)  # keeps 20 by its listing
    assert json.loads(ds.store.read(EXPIRED_KEY))["expiredBefore"] >= 30
    with pytest.raises(CommitConflictError, match="expired past it"):
        appends(stale, 1, 1000)  # revision 23 is a freed name
    assert ids(repo.load("t")) == list(range(22)) + list(range(100, 110))
    assert_clean(repo)


class CountingStore:
    """Counts the requests an :class:`ObjectStore` makes under ``_log/``."""

    def __init__(self, store):
        self.calls = []
        for method in ("read", "exists", "list", "put_if_absent", "put", "delete", "walk_files"):
            setattr(store, method, self._counted(method, getattr(store, method)))

    def _counted(self, method, original):
        def call(key, *args, **kwargs):
            if key.startswith(LOG_FOLDER):
                self.calls.append((method, key))
            return original(key, *args, **kwargs)
        return call


@pytest.mark.parametrize("expired", [False, True])
def test_a_plain_append_pays_one_small_read_for_the_check(repo, expired):
    ds = appends(repo.create("t", DatasetDescriptor(SCHEMA)), 12)
    if expired:
        ds.expire_log(soon(), force=True)
    ds = repo.load("t")
    counter = CountingStore(ds.store)
    appends(ds, 1, 12)
    assert counter.calls == [("put_if_absent", commit_key(13)), ("read", EXPIRED_KEY)]


def _stale_append(root, ready, go, result):
    os.environ.pop("PYTEST_CURRENT_TEST", None)
    stale = DatasetRepository(root).load("t")
    writer = stale.writer()
    writer.write_batch(pa.table({"id": [1000]}))
    ready.set()
    go.wait(60)
    try:
        writer.close()
        result.put("acknowledged")
    except CommitConflictError as e:
        result.put(f"conflict: {e}")


@pytest.mark.slow
def test_a_stale_writer_in_another_process_is_refused_after_a_forced_expiry(local, tmp_path):
    repo = local
    ds = appends(repo.create("t", DatasetDescriptor(SCHEMA)), 12)
    context = multiprocessing.get_context("spawn")
    ready, go, result = context.Event(), context.Event(), context.Queue()
    process = context.Process(target=_stale_append, args=(f"file://{tmp_path}/lake", ready, go, result))
    process.start()
    try:
        assert ready.wait(120)
        appends(ds, 13, 12)
        ds.expire_log(soon(), force=True)
        go.set()
        outcome = result.get(timeout=120)
    finally:
        process.join(60)
    assert outcome.startswith("conflict: ") and "expired past it" in outcome
    assert process.exitcode == 0
    latest = repo.load("t")
    assert ids(latest) == list(range(25)) and data_files(ds) == sorted(f.path for f in latest.files)
    assert_clean(repo)
