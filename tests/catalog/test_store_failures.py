"""An unreachable or failing S3 endpoint (issue 25 item 10): every kind of connection
failure — refused, reset, closed before the answer, stalled — at each step of a commit
leaves as cdkds's own StorageError kind, and a commit's outcome is still one of three:
acknowledged (and in the log once), CommitFailedError (not in the log, its files gone) or
CommitStateUnknownError (its files kept; the log tells later). The failures come from a
loopback proxy in front of moto (tests/proxy.py)."""

import pyarrow as pa
import pytest
import s3fs

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import (
    CommitFailedError, CommitStateUnknownError, CorruptLogWarning, StorageConnectionError, StorageTimeoutError,
    StorageUnreachableError,
)
from cdkds.catalog.log import committer
from cdkds.catalog.tables import TableAdmin
from tests.cli.running import run
from tests.conftest import new_bucket
from tests.proxy import Proxy

pytestmark = pytest.mark.slow
SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}
KINDS = {"refuse": StorageUnreachableError, "reset": StorageConnectionError, "close": StorageConnectionError,
         "stall": StorageTimeoutError}


def options(endpoint, read_timeout):
    """S3 options with no client retries: one failure is one error. A stalled request costs
    ``read_timeout``; a healthy one on a busy machine must never take that long."""
    return {"client_kwargs": {"endpoint_url": endpoint}, "use_listings_cache": False, "skip_instance_cache": True,
            "config_kwargs": {"retries": {"total_max_attempts": 1}, "connect_timeout": 5, "read_timeout": read_timeout}}


@pytest.fixture
def lake(s3_endpoint, monkeypatch, request):
    """(url, proxy, options): an empty repository on S3 reached through a proxy that can fail,
    and the storage options to reach it with (a short read timeout for the stall tests only)."""
    monkeypatch.setattr(committer, "MAX_STORE_FAILURES", 1)  # two failed PUTs, not six, before the read-back
    monkeypatch.setattr(committer, "SETTLE_ATTEMPTS", 1)  # one read-back, not three
    monkeypatch.setattr(s3fs.S3FileSystem, "retries", 1)  # s3fs's own retries of a request
    host, port = s3_endpoint.rsplit("/", 1)[1].split(":")
    proxy = Proxy((host, int(port)))
    kind = getattr(request.node, "callspec", None) and request.node.callspec.params.get("kind")
    yield f"s3://{new_bucket(s3_endpoint)}/lake", proxy, options(proxy.endpoint, 1.5 if kind == "stall" else 10)
    proxy.close()


def open_repo(url, opts):
    return DatasetRepository(url, opts)


def break_store(proxy, kind, match=lambda method, path: True, times=1_000_000):
    """From now on, the matching requests fail with ``kind`` (``refuse``: every connection)."""
    if kind == "refuse":
        proxy.refuse()
    else:
        proxy.fail(kind, match, times)


def commit_put(method, path):
    return method == "PUT" and "/_log/" in path and path.endswith(".json")


def before(store, method, key_test, action, after=lambda: None, times=1_000_000):
    """Run ``action`` before the first ``times`` calls of ``store.method`` on a key ``key_test``
    accepts, ``after`` after them."""
    original = getattr(store, method)
    left = [times]

    def call(key, *args, **kwargs):
        if not key_test(key) or left[0] == 0:
            return original(key, *args, **kwargs)
        left[0] -= 1
        action()
        try:
            return original(key, *args, **kwargs)
        finally:
            after()
    setattr(store, method, call)


def is_commit(key):
    return key.startswith("_log/") and key.endswith(".json")


def append(ds, ids):
    with ds.writer() as w:
        w.write_batch(pa.table({"id": list(ids)}))


def settled(url, proxy, opts):
    """After healing the store: (revision, ids) of the latest revision and the stored data files."""
    proxy.heal()
    ds = open_repo(url, opts).load("t")
    return ds.version, sorted(r["id"] for r in ds.reader()), [k for k, _ in ds.store.walk_files("data")]


@pytest.mark.parametrize("kind", KINDS)
def test_every_entry_point_raises_the_kind_of_storage_error(lake, kind):
    url, proxy, opts = lake
    ds = open_repo(url, opts).create("t", DatasetDescriptor(SCHEMA))
    break_store(proxy, kind)
    with pytest.raises(KINDS[kind]):
        open_repo(url, opts).create("u", DatasetDescriptor(SCHEMA))
    with pytest.raises(KINDS[kind]):
        open_repo(url, opts).load("t")
    with pytest.raises(KINDS[kind]):
        TableAdmin.open(f"{url}/tables", opts)
    with pytest.raises(KINDS[kind], match="writing data files of dataset 't'"):
        append(ds, [1])  # the data file's upload fails: no commit was tried
    assert settled(url, proxy, opts)[:2] == (0, [])


@pytest.mark.parametrize("kind", KINDS)
def test_a_commit_put_that_fails_once_is_retried_and_lands_once(lake, kind):
    url, proxy, opts = lake
    ds = open_repo(url, opts).create("t", DatasetDescriptor(SCHEMA))
    heal = proxy.serve if kind == "refuse" else (lambda: None)
    before(ds.store, "put_if_absent", is_commit, lambda: break_store(proxy, kind, commit_put, times=1), heal, times=1)
    append(ds, [1, 2])  # "close": the first PUT landed, its answer lost; the retry finds it as its own
    assert ds.version == 1 and [h.revision for h in ds.history()] == [0, 1]
    assert settled(url, proxy, opts)[:2] == (1, [1, 2])


@pytest.mark.parametrize("kind", KINDS)
def test_a_commit_whose_put_and_read_back_fail_is_unknown_and_keeps_its_files(lake, kind):
    url, proxy, opts = lake
    ds = open_repo(url, opts).create("t", DatasetDescriptor(SCHEMA))
    before(ds.store, "put_if_absent", is_commit, lambda: break_store(proxy, kind))  # down from the PUT on
    with pytest.raises(CommitStateUnknownError, match="may or may not have landed"):
        append(ds, [1, 2])
    version, ids, files = settled(url, proxy, opts)
    assert len(files) == 1  # kept, whatever the outcome
    assert (version, ids) == ((1, [1, 2]) if kind == "close" else (0, []))  # only "close" delivered the PUT


@pytest.mark.parametrize("kind", KINDS)
def test_a_commit_whose_puts_keep_failing_is_settled_by_reading_the_log_back(lake, kind):
    url, proxy, opts = lake
    ds = open_repo(url, opts).create("t", DatasetDescriptor(SCHEMA))
    if kind == "refuse":
        before(ds.store, "put_if_absent", is_commit, proxy.refuse, proxy.serve)
    else:
        break_store(proxy, kind, commit_put)
    if kind == "close":  # every PUT is carried out: the first landed, and the read-back finds it
        append(ds, [1, 2])
        assert ds.version == 1
        version, ids, files = settled(url, proxy, opts)
        assert (version, ids, len(files)) == (1, [1, 2], 1)
    else:
        with pytest.raises(CommitFailedError, match="does not hold it"):
            append(ds, [1, 2])
        assert settled(url, proxy, opts) == (0, [], [])  # known not landed: its data file was deleted


@pytest.mark.parametrize("kind", KINDS)
def test_a_failed_checkpoint_after_a_commit_leaves_the_commit_standing(lake, kind):
    url, proxy, opts = lake
    ds = open_repo(url, opts).create("t", DatasetDescriptor(SCHEMA, properties={"checkpoint.interval": "1"}))
    before(ds.store, "put_if_absent", lambda key: key.endswith(".checkpoint.parquet"),
           lambda: break_store(proxy, kind), proxy.heal, times=1)
    with pytest.warns(CorruptLogWarning, match="checkpoint at revision 1 failed"):
        append(ds, [1, 2])  # acknowledged: the checkpoint is an optimisation
    assert ds.version == 1 and settled(url, proxy, opts)[:2] == (1, [1, 2])


def test_the_cli_reports_an_unreachable_store_in_one_line(lake):
    url, proxy, opts = lake
    open_repo(url, opts).create("t", DatasetDescriptor(SCHEMA))
    proxy.refuse()
    done = run("show", f"{url}/t", "--storage-option", f"client_kwargs.endpoint_url={proxy.endpoint}",
               "--storage-option", "config_kwargs.retries.total_max_attempts=1", code=1)
    assert done.stderr.startswith("error: ") and "the object store cannot be reached" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
