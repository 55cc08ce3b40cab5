import json
import multiprocessing
import threading

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import CommitConflictError, CorruptLogError, DatasetExistsError, StorageError
from cdkds.catalog.log.actions import AddFile, SetMetadata
from cdkds.catalog.log.conflicts import Exclusive
from cdkds.catalog.log.commit import _checksum, commit_key
from cdkds.catalog.storage import ObjectStore
from tests.conftest import USER_SCHEMA


def append(ds, n, start=0):
    with ds.writer() as w:
        w.write_batch(pa.table({"userId": list(range(start, start + n)), "username": ["u"] * n}))


def test_commits_form_a_chain(repo):
    ds = repo.create("users", DatasetDescriptor(USER_SCHEMA))
    append(ds, 3)
    append(ds, 2)
    raw = [json.loads(ds.store.read(commit_key(r))) for r in range(3)]
    assert [c["revision"] for c in raw] == [0, 1, 2]
    assert raw[0]["previous"] is None and raw[1]["previous"] == raw[0]["uuid"] and raw[2]["previous"] == raw[1]["uuid"]
    assert raw[0]["timestamp"] < raw[1]["timestamp"] < raw[2]["timestamp"]
    assert raw[0]["actions"][0] == {"protocol": {"reader": 4, "writer": 4}}
    assert raw[1]["operation"] == "append" and raw[1]["actions"][0]["add"]["rows"] == 3
    assert raw[1]["actions"][0]["add"]["stats"][str(ds.descriptor.field_ids["userId"])] == {"nulls": 0, "min": 0, "max": 2}


def _rechained(store):
    raw = json.loads(store.read(commit_key(1)))
    del raw["checksum"]
    raw["previous"] = "not-the-previous-uuid"
    store.put(commit_key(1), json.dumps({**raw, "checksum": _checksum(raw)}).encode())


@pytest.mark.parametrize("damage, message", [
    (lambda store: store.put(commit_key(1), b'{"revision": 1, "uu'), "is corrupt or truncated"),
    (lambda store: store.put(commit_key(1), store.read(commit_key(1)).replace(b'"rows":1', b'"rows":7')),
     "checksum mismatch"),
    (lambda store: store.delete(commit_key(1)), "is missing but commit 2 exists"),
    (_rechained, "the log's chain is broken"),
    (lambda store: store.put(commit_key(1), store.read(commit_key(2))), "says it is revision 2"),
])
def test_damaged_logs_are_detected_never_skipped(repo, damage, message):
    ds = repo.create("users", DatasetDescriptor(USER_SCHEMA))
    append(ds, 1)
    append(ds, 1, 1)
    damage(ds.store)
    with pytest.raises(CorruptLogError, match=message):
        repo.load("users")


def _race(repo, n_threads, rows_each):
    ds = repo.create("users", DatasetDescriptor(USER_SCHEMA, "hash(userId, 4)"))
    barrier = threading.Barrier(n_threads)
    errors = []

    def work(i):
        mine = repo.load("users")
        barrier.wait()
        try:
            append(mine, rows_each, i * rows_each)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return ds, errors


def test_concurrent_appends_all_land_in_a_gap_free_chain(repo):
    ds, errors = _race(repo, 6, 50)
    assert errors == []
    latest = repo.load("users")
    assert latest.version == 6 and latest.snapshot.row_count == 300
    assert sorted(r["userId"] for r in latest.reader()) == list(range(300))
    assert [h.revision for h in latest.history()] == list(range(7))


def test_create_race_has_one_winner(repo):
    results = []

    def create():
        try:
            repo.create("users", DatasetDescriptor(USER_SCHEMA))
            results.append("created")
        except DatasetExistsError:
            results.append("exists")

    threads = [threading.Thread(target=create) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["created"] + ["exists"] * 4


def test_append_rebases_over_a_rename_and_an_added_field(repo):
    ds = repo.create("users", DatasetDescriptor(USER_SCHEMA))
    stale = repo.load("users")
    ds.alter().rename("username", "name").add("e", "string").commit()
    append(stale, 2)  # planned with the old names; its statistics follow the fields by id
    fresh = repo.load("users")
    assert fresh.version == 2
    (add,) = fresh.files
    assert set(add.statistics) == {"userId", "name"} and add.statistics["name"].min == "u"
    table = fresh.to_table()
    assert table.column_names == ["userId", "name", "e"] and table.column("name").to_pylist() == ["u", "u"]


def test_append_does_not_rebase_over_a_type_change(repo):
    ds = repo.create("users", DatasetDescriptor(USER_SCHEMA))
    stale = repo.load("users")
    ds.alter().widen("userId", "double").commit()
    with pytest.raises(CommitConflictError, match="conflicts with revision 1 .* changed the descriptor"):
        append(stale, 1)
    assert repo.load("users").version == 1


def test_non_append_commits_conflict_with_a_concurrent_commit(repo):
    ds = repo.create("users", DatasetDescriptor(USER_SCHEMA))
    stale = repo.load("users")
    append(ds, 1)
    append(ds, 1)  # blind appends do not invalidate a descriptor update...
    stale.log.commit(stale.snapshot, "update_descriptor", [SetMetadata(stale.descriptor)], rule=Exclusive())
    stale = repo.load("users")
    ds.refresh().log.commit(ds.snapshot, "update_descriptor", [SetMetadata(ds.descriptor)], rule=Exclusive())
    with pytest.raises(CommitConflictError, match="planned on revision 3 conflicts with revision 4 .* changed the descriptor"):
        stale.log.commit(stale.snapshot, "update_descriptor", [SetMetadata(stale.descriptor)], rule=Exclusive())


def test_a_retried_commit_that_already_landed_is_recognised_as_ours(repo):
    ds = repo.create("users", DatasetDescriptor(USER_SCHEMA))
    base = ds.snapshot
    add = AddFile("data/x.parquet", {}, 10, 1, {})
    first = ds.log.commit(base, "append", [add], commit_uuid="c0ffee")
    again = ds.log.commit(base, "append", [add], commit_uuid="c0ffee")  # the acknowledgement was "lost"
    assert again.version == first.version == 1 and repo.load("users").version == 1


def test_backends_without_create_if_absent_need_single_writer(tmp_path):
    import fsspec
    from fsspec.implementations.dirfs import DirFileSystem

    fs = DirFileSystem(str(tmp_path), fs=fsspec.filesystem("file"))
    store = ObjectStore(fs, "", "dir://lake")
    with pytest.raises(StorageError, match="single_writer=True"):
        store.put_if_absent("a", b"1")
    ObjectStore(fs, "", "dir://lake", single_writer=True).put_if_absent("a", b"1")
    with pytest.raises(FileExistsError):
        ObjectStore(fs, "", "dir://lake", single_writer=True).put_if_absent("a", b"1")


def _append_in_process(url, index, rows):
    ds = DatasetRepository(url).load("users")
    for k in range(3):
        start = (index * 3 + k) * rows
        append(ds, rows, start)


@pytest.mark.slow
def test_writer_processes_append_to_one_dataset(tmp_path):
    url = f"file://{tmp_path}/lake"
    repo = DatasetRepository(url)
    repo.create("users", DatasetDescriptor(USER_SCHEMA, "hash(userId, 8)"))
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_append_in_process, args=(url, i, 20)) for i in range(6)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(120)
    assert [p.exitcode for p in processes] == [0] * 6
    ds = repo.load("users")
    assert ds.version == 18 and [h.revision for h in ds.history()] == list(range(19))
    assert sorted(r["userId"] for r in ds.reader()) == list(range(6 * 3 * 20))
