"""A commit's outcome is landed, known not landed, or unknown — and files are deleted only
in the second case (issue 10 item 1). Faults are injected into the dataset's object store."""

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import CommitFailedError, CommitStateUnknownError
from cdkds.catalog.log import LOG_FOLDER, commit_key

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}


class FaultyStore:
    """Makes chosen calls of an :class:`ObjectStore` fail, before or after they run."""

    def __init__(self, store):
        self.store = store
        self.faults = []  # [method, when, error, key predicate, times left]

    def fail(self, method, when, error, match=lambda key: True, times=1):
        original = getattr(self.store, method)

        def call(key, *args):
            for fault in self.faults:
                if fault[0] == method and fault[4] > 0 and fault[3](key):
                    fault[4] -= 1
                    if fault[1] == "before":
                        raise fault[2]
                    original(key, *args)
                    raise fault[2]
            return original(key, *args)

        if not any(f[0] == method for f in self.faults):
            setattr(self.store, method, call)
        self.faults.append([method, when, error, match, times])
        return self


def is_commit(key):
    return key.startswith(f"{LOG_FOLDER}/") and key.endswith(".json")


def in_log(key):
    return key.startswith(f"{LOG_FOLDER}/")


@pytest.fixture
def dataset(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    return repo, repo.create("t", DatasetDescriptor(SCHEMA))


def append(ds, ids):
    with ds.writer() as w:
        w.write_batch(pa.table({"id": list(ids)}))


def data_files(ds):
    return sorted(k for k, _ in ds.store.walk_files("data"))


def ids(repo):
    return sorted(r["id"] for r in repo.load("t").reader())


def test_a_lost_acknowledgement_then_a_failed_read_keeps_the_landed_commit_and_its_files(dataset):
    repo, ds = dataset
    faults = FaultyStore(ds.store)
    faults.fail("put_if_absent", "after", TimeoutError("acknowledgement lost (injected)"), is_commit)
    faults.fail("read", "before", OSError("503 Slow Down (injected)"), in_log)
    append(ds, [1, 2, 3])  # the commit landed: acknowledged, once
    assert ds.version == 1 and [h.revision for h in ds.history()] == [0, 1]
    assert data_files(ds) == sorted(f.path for f in repo.load("t").files) and len(data_files(ds)) == 1
    assert ids(repo) == [1, 2, 3]


def test_a_commit_whose_outcome_cannot_be_read_back_is_reported_unknown_and_keeps_its_files(dataset):
    repo, ds = dataset
    faults = FaultyStore(ds.store)
    faults.fail("put_if_absent", "after", TimeoutError("acknowledgement lost (injected)"), is_commit)
    faults.fail("read", "before", OSError("503 Slow Down (injected)"), in_log, times=100)
    writer = ds.writer()
    writer.write_batch(pa.table({"id": [1, 2, 3]}))
    with pytest.raises(CommitStateUnknownError, match=r"dataset 't': the commit [0-9a-f]{32} tried at revision 1 "
                                                      r"may or may not have landed") as info:
        writer.close()
    assert info.value.revision == 1 and info.value.commit_uuid == writer._files.transaction
    faults.faults.clear()
    assert len(data_files(ds)) == 1 and ids(repo) == [1, 2, 3]  # it had landed: nothing lost


def test_a_commit_known_not_to_have_landed_deletes_its_files(dataset):
    repo, ds = dataset
    FaultyStore(ds.store).fail("put_if_absent", "before", OSError("503 Slow Down (injected)"), is_commit, times=100)
    with pytest.raises(CommitFailedError, match="failed 6 times on the object store.*does not hold it"):
        append(ds, [1, 2, 3])
    assert data_files(ds) == [] and repo.load("t").version == 0


def test_a_failed_put_that_landed_late_is_found_when_read_back(dataset):
    repo, ds = dataset
    faults = FaultyStore(ds.store)
    faults.fail("put_if_absent", "after", OSError("connection reset (injected)"), is_commit, times=6)
    append(ds, [7])  # the first PUT landed; the retries see their own commit
    assert ds.version == 1 and ids(repo) == [7] and ds.store.exists(commit_key(1)) and not ds.store.exists(commit_key(2))
