"""The object store's audited operations (issue 10 item 9): S3 conflicts are told by the
error code, never by text, and local commits survive a crash once acknowledged."""

import os
import stat

import pytest
from botocore.exceptions import ClientError
from s3fs.errors import translate_boto_error

from cdkds.catalog.errors import StorageError
from cdkds.catalog.storage import ObjectStore, _s3_put_if_absent


class RaisingS3:
    protocol = ("s3", "s3a")

    def __init__(self, error):
        self.error = error

    def pipe_file(self, path, data, mode="overwrite"):
        raise self.error


def s3_error(code, status, message):
    """The exception s3fs raises for an S3 error response."""
    return translate_boto_error(ClientError({"Error": {"Code": code, "Message": message},
                                             "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject"))


@pytest.mark.parametrize("code, status", [("ConditionalRequestConflict", 409), ("PreconditionFailed", 412)])
def test_a_lost_conditional_create_is_an_existing_object(code, status):
    with pytest.raises(FileExistsError):
        _s3_put_if_absent(RaisingS3(s3_error(code, status, "At least one of the pre-conditions you specified did "
                                                           "not hold")), "lake/t/_log/1.json", b"{}")


def test_an_error_naming_a_key_with_409_is_not_a_conflict():
    key = "lake/t409/_log/00000000000000000409.json"
    for error in (s3_error("SlowDown", 503, f"Please reduce your request rate for {key}"),
                  OSError(f"[Errno 5] Internal error writing {key}")):
        with pytest.raises(OSError) as info:
            _s3_put_if_absent(RaisingS3(error), key, b"{}")
        assert not isinstance(info.value, FileExistsError)


def test_local_commits_sync_the_folder_after_linking(tmp_path, monkeypatch):
    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append((stat.S_ISDIR(os.fstat(fd).st_mode), sorted(os.listdir(tmp_path / "t" / "_log"))
                       if (tmp_path / "t" / "_log").exists() else None))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    store = ObjectStore.open(str(tmp_path))
    store.put_if_absent("t/_log/00000000000000000000.json", b"{}")
    folders = [names for is_dir, names in synced if is_dir]
    assert folders, "no directory was synced"
    assert "00000000000000000000.json" in folders[-1]  # the folder holding the new name, after the link
    store.put("t/_log/_last_checkpoint", b"{}")
    assert synced[-1][0] and "_last_checkpoint" in synced[-1][1]
    assert store.read("t/_log/_last_checkpoint") == b"{}" and not [n for n in os.listdir(tmp_path / "t" / "_log")
                                                                  if n.endswith(".tmp")]


def test_put_all_returns_only_when_every_file_and_its_folder_is_synced(tmp_path, monkeypatch):
    """Index files are written together before the commit that references them: each one's
    bytes and its name in its folder must be on disk by then (issue 29)."""
    synced_files, synced_folders = set(), set()
    real = os.fsync

    def fsync(fd):
        info = os.fstat(fd)
        (synced_folders if stat.S_ISDIR(info.st_mode) else synced_files).add(info.st_ino)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    store = ObjectStore.open(str(tmp_path))
    objects = {f"t/_index/{b}/{i}.parquet": bytes([b, i]) * 100 for b in range(5) for i in range(3)}
    store.put_all(objects)
    for key, data in objects.items():
        path = tmp_path / key
        assert path.read_bytes() == data
        assert path.stat().st_ino in synced_files  # the data (renamed, so the same inode)
        assert path.parent.stat().st_ino in synced_folders  # its name
    assert not [p for p in tmp_path.rglob("*.tmp")]
    # the folders it created: each one's name is in its parent, which must be synced too
    # (the first index files of a dataset create _index/ and _index/<bucket>/ at once)
    for folder in (tmp_path / "t" / "_index", tmp_path / "t", tmp_path):
        assert folder.stat().st_ino in synced_folders, folder


def test_put_all_that_fails_leaves_no_temporary_files(tmp_path, monkeypatch):
    from cdkds.catalog import storage

    real = storage._local_temporary

    def failing(path, data):
        if path.endswith("2.parquet"):
            raise OSError(28, "No space left on device")
        return real(path, data)

    monkeypatch.setattr(storage, "_local_temporary", failing)
    store = ObjectStore.open(str(tmp_path))
    with pytest.raises(StorageError):
        store.put_all({f"t/_index/0/{i}.parquet": b"x" * 10 for i in range(5)})
    assert not [p for p in tmp_path.rglob("*.tmp")]
    assert not [p for p in tmp_path.rglob("*.parquet")]


# ---------------------------------------------------------------- store failures (issue 25 item 10)

def _botocore(name, **kwargs):
    from botocore import exceptions
    return getattr(exceptions, name)(**kwargs)


@pytest.mark.parametrize("error, kind", [
    (lambda: _botocore("EndpointConnectionError", endpoint_url="http://s3"), "StorageUnreachableError"),
    (lambda: ConnectionRefusedError(111, "refused"), "StorageUnreachableError"),
    (lambda: _botocore("ConnectionClosedError", endpoint_url="http://s3"), "StorageConnectionError"),
    (lambda: ConnectionResetError(104, "reset"), "StorageConnectionError"),
    (lambda: _botocore("ReadTimeoutError", endpoint_url="http://s3"), "StorageTimeoutError"),
    (lambda: _botocore("ConnectTimeoutError", endpoint_url="http://s3"), "StorageTimeoutError"),
    (lambda: TimeoutError("slow"), "StorageTimeoutError"),
    (lambda: _botocore("NoCredentialsError"), "StorageAccessError"),
    (lambda: PermissionError(13, "denied"), "StorageAccessError"),
    (lambda: s3_error("AccessDenied", 403, "Access Denied"), "StorageAccessError"),
    (lambda: s3_error("SlowDown", 503, "Please reduce your request rate"), "StorageError"),
    (lambda: OSError(28, "No space left on device"), "StorageError"),
])
def test_every_store_failure_leaves_the_store_as_a_storage_error_kind(error, kind):
    from cdkds.catalog import errors

    class Failing:
        protocol = "file"

        def exists(self, path):
            raise error()

    with pytest.raises(errors.StorageError) as info:
        ObjectStore(Failing(), "/lake", "file:///lake").exists("t/_log/00000000000000000000.json")
    assert type(info.value) is getattr(errors, kind)
    assert str(info.value).startswith("looking up file:///lake/t/_log/00000000000000000000.json: ")


def test_a_reset_botocore_calls_could_not_connect_is_a_broken_connection():
    """aiobotocore raises EndpointConnectionError for a reset while sending: its cause tells."""
    from cdkds.catalog.errors import StorageConnectionError
    from cdkds.catalog.storage import store_failure

    try:
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except ConnectionResetError as reset:
            raise _botocore("EndpointConnectionError", endpoint_url="http://s3") from reset
    except Exception as e:  # noqa: BLE001
        assert isinstance(store_failure(e, "creating x"), StorageConnectionError)


def test_absence_and_bugs_pass_unchanged():
    from cdkds.catalog.storage import store_failure

    assert store_failure(FileNotFoundError("x"), "reading x") is None
    assert store_failure(FileExistsError("x"), "creating x") is None
    assert store_failure(KeyError("x"), "reading x") is None
    try:
        try:
            raise OSError("503 Slow Down")
        except OSError:
            raise KeyError("a bug in a handler")
    except KeyError as bug:
        assert store_failure(bug, "reading x") is None
    assert store_failure(OSError("damaged footer"), "reading x", unclassified=False) is None


def test_a_file_url_names_this_machine(tmp_path, monkeypatch):
    """fsspec reads ``file://host/p`` as the folder ``host/p`` under the working directory."""
    monkeypatch.chdir(tmp_path)
    store = ObjectStore.open(f"file://localhost{tmp_path}/lake")
    assert store.root == f"{tmp_path}/lake" and store.url == f"file://{tmp_path}/lake"
    with pytest.raises(StorageError, match="not host 'elsewhere'"):
        ObjectStore.open(f"file://elsewhere{tmp_path}/lake")
    assert not (tmp_path / "localhost").exists() and not (tmp_path / "elsewhere").exists()


def test_put_all_that_fails_on_an_object_store_leaves_none_of_its_objects(monkeypatch):
    """Uploaded concurrently, some objects land before another fails: they are removed, so a
    failed write of index files leaves nothing behind (not even for vacuum)."""
    import uuid

    store = ObjectStore.open(f"memory://putall-{uuid.uuid4().hex}")
    real = store.fs.pipe_file

    def pipe(objects, **kwargs):
        for i, (path, data) in enumerate(objects.items()):
            if i == 2:
                raise OSError(28, "No space left on device")
            real(path, data)

    monkeypatch.setattr(store.fs, "pipe", pipe)
    keys = [f"t/_index/0/{i}.parquet" for i in range(5)]
    with pytest.raises(StorageError):
        store.put_all({k: b"x" for k in keys})
    assert not [k for k in keys if store.fs.exists(store.path(k))]
