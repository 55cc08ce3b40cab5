"""Faults injected into real S3 calls (moto on loopback) during data writes, commits,
checkpoints, log expiry and vacuum: no committed data lost, no duplicate commit, and a
retried commit whose first attempt landed is recognised as ours."""

import datetime as dt
import json
import os

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import CdkdsError, CommitStateUnknownError, CorruptLogWarning, StorageError
from tests.conftest import new_bucket, s3_options
from tests.faults import Fault, FaultInjector, is_checkpoint, is_commit, is_data_file

pytestmark = pytest.mark.slow
SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "g", "type": "string"}]}
TRIALS = int(os.environ.get("CDKDS_FAULT_TRIALS", "40"))


@pytest.fixture
def faulty(s3_endpoint):
    """A dataset on S3 whose object store fails the calls a test chooses."""
    repo = DatasetRepository(f"s3://{new_bucket(s3_endpoint)}/lake", s3_options(s3_endpoint))
    ds = repo.create("t", DatasetDescriptor(SCHEMA, "identity(g)", properties={"checkpoint.interval": "5"}))
    injector = FaultInjector()
    injector.install(ds.store.fs)
    return repo, ds, injector


def append(ds, ids):
    with ds.writer() as w:
        w.write_batch(pa.table({"id": list(ids), "g": ["ab"[i % 2] for i in ids]}))


def rows(repo, version=None):
    return sorted(r["id"] for r in repo.load("t", version=version).reader())


def test_lost_acknowledgement_of_a_commit_is_recognised_as_ours(faulty):
    repo, ds, injector = faulty
    injector.faults.append(Fault("put_object", when="after", match=is_commit))
    append(ds, range(3))
    assert injector.injected == 1
    assert ds.version == 1 and repo.load("t").version == 1 and rows(repo) == [0, 1, 2]
    assert [h.revision for h in ds.history()] == [0, 1]  # written once, not twice


def is_log_read(kwargs: dict) -> bool:
    return "/_log/" in kwargs.get("Key", "")


def data_keys(ds):
    return sorted(k for k, _ in ds.store.walk_files("data"))


def test_a_lost_acknowledgement_then_a_failed_log_read_keeps_the_commit_and_its_files(faulty):
    repo, ds, injector = faulty
    injector.faults.append(Fault("put_object", when="after", match=is_commit, error=lambda: TimeoutError("injected")))
    injector.faults.append(Fault("get_object", match=is_log_read))
    append(ds, range(3))
    assert injector.injected == 2 and ds.version == 1 and rows(repo) == [0, 1, 2]
    assert data_keys(ds) == sorted(f.path for f in repo.load("t").files)


def test_a_commit_whose_outcome_cannot_be_read_is_unknown_and_keeps_its_files(faulty):
    repo, ds, injector = faulty
    injector.faults.append(Fault("put_object", when="after", match=is_commit, error=lambda: TimeoutError("injected")))
    injector.faults.append(Fault("get_object", match=is_log_read, times=100))
    with pytest.raises(CommitStateUnknownError, match="tried at revision 1 may or may not have landed"):
        append(ds, range(3))
    injector.faults.clear()
    assert rows(repo) == [0, 1, 2] and len(data_keys(ds)) == 2


def test_a_key_containing_409_is_not_taken_for_a_conflict(s3_endpoint):
    repo = DatasetRepository(f"s3://{new_bucket(s3_endpoint)}/lake409", s3_options(s3_endpoint))
    ds = repo.create("t409", DatasetDescriptor(SCHEMA))
    injector = FaultInjector()
    injector.install(ds.store.fs)
    injector.faults.append(Fault("put_object", match=is_commit, times=100,
                                 error=lambda: OSError(5, "We encountered an internal error writing lake409/t409/_log")))
    with pytest.raises(CdkdsError, match="failed 6 times on the object store"):
        with ds.writer() as w:
            w.write_batch(pa.table({"id": [1], "g": ["a"]}))
    assert repo.load("t409").version == 0 and data_keys(ds) == []


def test_a_commit_that_timed_out_before_landing_is_retried(faulty):
    repo, ds, injector = faulty
    injector.faults.append(Fault("put_object", when="before", match=is_commit, error=lambda: TimeoutError("injected"),
                                 times=2))
    append(ds, range(3))
    assert injector.injected == 2 and repo.load("t").version == 1 and rows(repo) == [0, 1, 2]


def test_a_store_that_keeps_failing_commits_nothing(faulty):
    repo, ds, injector = faulty
    injector.faults.append(Fault("put_object", match=is_commit, times=100))
    with pytest.raises(CdkdsError, match="failed 6 times on the object store"):
        append(ds, range(3))
    assert repo.load("t").version == 0
    assert [k for k, _ in ds.store.walk_files("data")] == []  # the writer removed its files


def test_a_failed_data_file_upload_commits_nothing(faulty):
    repo, ds, injector = faulty
    injector.faults.append(Fault("put_object", match=is_data_file))
    with pytest.raises(StorageError, match="writing data files of dataset 't'.*503"):
        append(ds, range(10))
    assert repo.load("t").version == 0 and rows(repo) == []


def test_a_failed_checkpoint_leaves_the_commit_standing(faulty):
    repo, ds, injector = faulty
    injector.faults.append(Fault("put_object", match=is_checkpoint))
    for k in range(4):
        append(ds, [k])
    with pytest.warns(CorruptLogWarning, match="checkpoint at revision 5 failed"):
        append(ds, [4])
    assert repo.load("t").version == 5 and rows(repo) == [0, 1, 2, 3, 4]
    append(ds, range(5, 10))
    assert rows(repo) == list(range(10))


def test_failures_during_expiry_and_vacuum_lose_nothing(faulty):
    repo, ds, injector = faulty
    for k in range(12):
        append(ds, [k])
    ds.delete("id < 3")
    ds.compact()
    ds.checkpoint()
    expected = rows(repo)
    injector.faults.append(Fault("delete_object", times=3))
    injector.faults.append(Fault("delete_objects", times=3))
    cutoff = dt.datetime.now(dt.timezone.utc)
    for attempt in range(5):
        try:
            ds.expire_log(cutoff, force=True)
            break
        except StorageError:  # the injected 503, as the store reports it
            assert rows(repo) == expected  # every step leaves a readable log
    for attempt in range(5):
        try:
            ds.vacuum(retention=dt.timedelta(0), force=True, dry_run=False)
            break
        except StorageError:
            assert rows(repo) == expected
    assert injector.injected >= 1
    assert rows(repo) == expected and ds.vacuum(retention=dt.timedelta(0), force=True) == []
    assert sorted(k for k, _ in ds.store.walk_files("data")) == sorted(f.path for f in repo.load("t").files)


def test_random_faults_on_every_write_lose_no_committed_row(faulty):
    repo, ds, injector = faulty
    injector.faults += [
        Fault("put_object", when="after", match=is_commit, times=10**6, probability=0.15),
        Fault("put_object", when="before", match=is_commit, times=10**6, probability=0.1),
        Fault("put_object", when="before", match=is_data_file, times=10**6, probability=0.1),
    ]
    acknowledged, unknown = [], []
    for trial in range(TRIALS):
        ids = list(range(trial * 10, trial * 10 + 5))
        try:
            append(ds.refresh(), ids)
            acknowledged.append(ids)
        except Exception:  # noqa: BLE001 - the outcome of a failed write is checked below
            unknown.append(ids)
    present = rows(repo)
    lost = sum(len(set(ids) - set(present)) for ids in acknowledged)
    assert lost == 0
    assert len(present) == len(set(present))  # no batch written twice
    for ids in acknowledged:
        assert set(ids) <= set(present)  # no acknowledged row lost
    for ids in unknown:
        assert set(ids) <= set(present) or not set(ids) & set(present)  # all or nothing
    history = repo.load("t").history()
    assert [h.revision for h in history] == list(range(len(history)))
    report = {"trials": TRIALS, "faults_injected": injector.injected, "s3_calls": injector.calls,
              "acknowledged": len(acknowledged), "failed": len(unknown), "commits": len(history) - 1,
              "rows_lost": lost}
    print("FAULTS", json.dumps(report))
