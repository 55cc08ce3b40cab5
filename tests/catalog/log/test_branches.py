"""Branches (docs/FORMAT.md §12): a line of commits readers of main do not see, published
onto main in one commit (fast-forward or replayed, refused on conflict), kept by expiry and
vacuum while live."""

import datetime as dt
import json
import multiprocessing

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import (
    CommitConflictError, InvalidTimeTravelError, RefError, RefExistsError, RefNotFoundError, UnsupportedLogVersionError,
)
from cdkds.catalog.log import TransactionLog, commit_key
from cdkds.catalog.log.actions import SetProtocol
from cdkds.catalog.log.branches import branch_folder
from cdkds.catalog.log.listing import checkpoint_key
from tests.conftest import USER_SCHEMA, new_bucket, s3_options


def append(ds, ids):
    with ds.writer() as w:
        w.write_batch(pa.table({"userId": list(ids), "username": [f"u{i}" for i in ids]}))


def ids(ds):
    return sorted(r["userId"] for r in ds.reader())


@pytest.fixture
def users(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("users", DatasetDescriptor(USER_SCHEMA))
    append(ds, [1, 2, 3])
    return ds


def test_a_branch_is_a_line_of_commits_main_does_not_see(users):
    repo = users.repository
    audit = users.branch("audit")
    base = users.version
    assert audit.branch_name == "audit" and audit.version == base and users.branches()["audit"].base == base
    raw = json.loads(users.store.read(commit_key(base)))
    assert raw["operation"] == "branch" and raw["actions"][0] == {"protocol": {"reader": 5, "writer": 5}}
    assert users.store.exists(checkpoint_key(base))  # the base stays readable after expiry
    append(audit, [10])
    audit.delete("userId = 2")
    ref = users.branches()["audit"]
    assert users.store.exists(f"{branch_folder(ref)}/{base + 1:020d}.json")
    assert ids(audit) == [1, 3, 10]
    assert ids(repo.load("users")) == [1, 2, 3] and repo.load("users").version == base
    again = repo.load("users", branch="audit")
    assert again.version == base + 2 and ids(again) == [1, 3, 10]
    assert ids(repo.load("users", branch="audit", version=base + 1)) == [1, 2, 3, 10]
    assert [h.operation for h in again.history()][-3:] == ["branch", "append", "delete"]
    main = repo.load("users", branch="main")  # the line every dataset has
    assert main.branch_name is None and ids(main) == [1, 2, 3]
    # the branch survives a checkpoint of main (its ref is a checkpoint row)
    users.checkpoint()
    assert TransactionLog(users.store, "users").snapshot().branches == {"audit": ref}


def test_publish_fast_forwards_a_main_that_has_not_moved(users):
    audit = users.branch("audit")
    base = users.version
    append(audit, [10, 11])
    audit.delete("userId = 1")
    audit.alter().add("email", "string", default="none").commit()
    with audit.writer() as w:
        w.write_batch(pa.table({"userId": [12], "username": ["u12"], "email": ["e12"]}))
    revision = users.publish("audit")
    assert revision == base + 1  # one commit, right after the base
    raw = json.loads(users.store.read(commit_key(revision)))
    assert raw["operation"] == "publish" and raw["info"]["branch"] == "audit"
    assert raw["info"]["head"] == base + 5  # its four commits and the seal
    assert raw["actions"][-1] == {"dropBranch": {"name": "audit"}}
    main = users.repository.load("users")
    assert ids(main) == [2, 3, 10, 11, 12] and main.branches() == {}
    assert sorted((r["userId"], r["email"]) for r in main.reader()) == [
        (2, "none"), (3, "none"), (10, "none"), (11, "none"), (12, "e12")]  # the branch's schema change, published
    with pytest.raises(RefNotFoundError, match="'audit'"):
        users.publish("audit")  # a dropped branch, nothing committed
    assert users.repository.load("users").version == revision


def test_publish_replays_onto_a_main_that_moved(users):
    audit = users.branch("audit")
    append(audit, [10])
    append(users, [20])
    users.publish("audit")
    assert ids(users.repository.load("users")) == [1, 2, 3, 10, 20]


def test_a_conflicting_publish_is_refused_and_commits_nothing(users):
    audit = users.branch("audit")
    audit.delete("userId >= 2")  # a tombstone over main's file: it reads every file that may hold userId >= 2
    append(users, [5])  # main adds where the branch deletes
    before = users.repository.load("users").version
    with pytest.raises(CommitConflictError, match=rf"revision {before} \('append'\).*branch 'audit'"):
        users.publish("audit")
    main = users.repository.load("users")
    assert main.version == before and ids(main) == [1, 2, 3, 5] and "audit" in main.branches()
    assert ids(audit) == [1]
    append(audit, [7])  # the branch goes on after a refused publish (its seal lifted)
    assert ids(users.repository.load("users", branch="audit")) == [1, 7]
    users.drop_branch("audit")
    assert users.branches() == {}


def test_a_branch_delete_that_removed_whole_files_replays_over_main_appends_it_cannot_match(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("users", DatasetDescriptor(USER_SCHEMA, partition_strategy="identity(userId)"))
    append(ds, [1, 2, 3])
    audit = ds.branch("audit")
    audit.delete("userId = 2")  # the file of partition userId=2 is removed whole, as a delete's usual rule reads it
    append(ds, [5])  # main appends where the delete cannot match: as for two writers on main, no conflict
    ds.publish("audit")
    assert ids(repo.load("users")) == [1, 3, 5]
    audit = ds.branch("audit-2")
    audit.delete("userId = 3")
    append(ds, [3])  # ...but where it matches, the publish is refused
    with pytest.raises(CommitConflictError, match="where this commit overwrites or deletes"):
        ds.publish("audit-2")


def test_a_branch_delete_replays_over_a_compaction_of_main(users):
    audit = users.branch("audit")
    audit.delete("userId = 2")  # a tombstone over main's file
    append(users, [5])
    users.compact()  # rewrites the rows the tombstone hides (as main's inline services do after appends): no row added
    users.publish("audit")  # refused for ever before: a publish cannot be planned again as a delete on main is
    main = users.repository.load("users")
    assert ids(main) == [1, 3, 5] and main.check().ok


def test_a_branch_schema_change_replays_over_a_compaction_of_main(users):
    audit = users.branch("audit")
    audit.alter().add("email", "string", default="none").commit()
    append(users, [5])
    users.compact()  # moves rows into files of main's descriptor, as main's files before it: nothing to re-check
    users.publish("audit")
    main = users.repository.load("users")
    assert sorted((r["userId"], r["email"]) for r in main.reader()) == [(i, "none") for i in (1, 2, 3, 5)]
    assert main.check().ok


def test_a_branch_delete_over_files_the_branch_added_is_published_as_their_deletion_vectors(users):
    audit = users.branch("audit")
    append(audit, [30, 31])
    audit.delete("userId = 30 or userId = 1")  # a tombstone over main's file and the file the branch added
    append(audit, [30])  # added after the delete: not hidden by it
    revision = users.publish("audit")
    main = users.repository.load("users")
    assert ids(main) == [2, 3, 30, 31]
    raw = json.loads(users.store.read(commit_key(revision)))
    adds = [a["add"] for a in raw["actions"] if "add" in a]
    assert [len(a.get("deletes", ())) for a in adds] == [1, 0]  # the first file carries the delete as a vector
    assert [a for a in raw["actions"] if "tombstone" in a]  # main's file still needs the tombstone
    assert main.check().ok


def test_keyed_writes_and_the_change_feed_across_a_publish(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("users", DatasetDescriptor(USER_SCHEMA, record_key="userId"))
    ds.upsert([{"userId": i, "username": f"u{i}"} for i in range(5)])
    audit = ds.branch("audit")
    audit.upsert([{"userId": 1, "username": "b1"}, {"userId": 7, "username": "b7"}])
    audit.upsert([{"userId": 1, "username": "b1x"}])
    audit.delete_keys([3])
    ds.upsert([{"userId": 4, "username": "m4"}])  # another key on main meanwhile: no conflict
    assert ds.get(1)["username"] == "u1"
    revision = ds.publish("audit")
    main = repo.load("users")
    assert sorted((r["userId"], r["username"]) for r in main.reader()) == [
        (0, "u0"), (1, "b1x"), (2, "u2"), (4, "m4"), (7, "b7")]
    assert main.get(3) is None and main.get(7)["username"] == "b7"
    changes = main.changes(revision).read_all().to_pylist()
    assert sorted((c["userId"], c["_change_type"]) for c in changes) == [
        (1, "update_postimage"), (1, "update_preimage"), (3, "delete"), (7, "insert")]
    assert {c["_commit_version"] for c in changes} == {revision}
    assert main.check().ok


def test_published_rows_keep_the_commit_time_their_ttl_counts_from(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("users", DatasetDescriptor(USER_SCHEMA, record_key="userId", properties={"ttl": "1h"}))
    ds.upsert([{"userId": 1, "username": "u1"}])
    audit = ds.branch("audit")
    audit.upsert([{"userId": 2, "username": "b2"}])
    written = {f.path: f.timestamp for f in audit.files if f.revision > ds.version}
    append(ds, [3])
    ds.publish("audit")  # later: were the files to take the publish's time, their rows would outlive their ttl
    for main in (repo.load("users"), repo.load("users").refresh()):
        assert {f.path: f.timestamp for f in main.files if f.path in written} == written
    main = repo.load("users")
    main.checkpoint()
    assert {f.path: f.timestamp for f in TransactionLog(main.store, "users").snapshot().files.values()
            if f.path in written} == written
    assert main.check().ok


def test_a_publish_conflicts_on_a_key_main_also_wrote(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("users", DatasetDescriptor(USER_SCHEMA, record_key="userId"))
    ds.upsert([{"userId": 4, "username": "u4"}])
    audit = ds.branch("audit")
    audit.upsert([{"userId": 4, "username": "b4"}])
    ds.upsert([{"userId": 4, "username": "m4"}])
    with pytest.raises(CommitConflictError, match="a key of index bucket"):
        ds.publish("audit")
    assert repo.load("users").get(4)["username"] == "m4"


@pytest.mark.parametrize("call, error, match", [
    (lambda ds: ds.branch("a/b"), RefError, "'a/b' is not a valid branch name"),
    (lambda ds: ds.branch("main"), RefError, "'main' is not a valid branch name"),
    (lambda ds: ds.branch("audit"), RefExistsError, "already has a branch 'audit'"),
    (lambda ds: ds.publish("nope"), RefNotFoundError, "no branch 'nope'"),
    (lambda ds: ds.drop_branch("nope"), RefNotFoundError, "no branch 'nope'"),
    (lambda ds: ds.repository.load("users", branch="nope"), RefNotFoundError, "no branch 'nope'"),
    (lambda ds: ds.repository.load("users", branch="audit").publish("audit"), RefError, "done on main"),
    (lambda ds: ds.repository.load("users", branch="audit").branch("x"), RefError, "done on main"),
    (lambda ds: ds.repository.load("users", branch="audit").tag("x"), RefError, "done on main"),
    (lambda ds: ds.repository.load("users", branch="audit").expire_log(dt.timedelta(0), force=True), RefError,
     "on main"),
    (lambda ds: ds.repository.load("users", branch="audit", version=1), InvalidTimeTravelError, "starts at revision"),
    (lambda ds: ds.repository.load("users", branch="audit", tag="t"), InvalidTimeTravelError, "not both"),
])
def test_bad_refs_are_refused_naming_them_and_commit_nothing(users, call, error, match):
    users.branch("audit")
    before = users.repository.load("users").version
    with pytest.raises(error, match=match):
        call(users)
    assert users.repository.load("users").version == before


def test_the_change_feed_of_a_branch_starts_after_its_base_and_says_so(users):
    audit = users.branch("audit")
    base = users.version
    append(audit, [10])
    assert [c["userId"] for c in audit.changes(base + 1).read_all().to_pylist()] == [10]
    with pytest.raises(InvalidTimeTravelError, match=rf"branch 'audit' starts at revision {base}.*main"):
        audit.changes(base)  # not "expired": main's feed has those revisions


def test_a_write_to_a_branch_that_ended_is_refused(users):
    audit = users.branch("audit")
    users.drop_branch("audit")
    with pytest.raises(RefNotFoundError, match="was published or dropped"):
        append(audit, [9])


def test_a_log_below_version_4_must_be_upgraded_first(users):
    users._commit("downgrade", [SetProtocol(3, 3)])  # as a log of an older version reads
    with pytest.raises(RefError, match="cdkds upgrade"):
        users.branch("audit")
    users.upgrade_log()
    users.branch("audit")
    assert users.repository.load("users").snapshot.protocol == SetProtocol(5, 5)


def test_a_reader_of_version_4_refuses_a_log_with_a_branch(users, monkeypatch):
    users.branch("audit")
    from cdkds.catalog.log import actions
    monkeypatch.setattr(actions, "READER_VERSION", 4)
    with pytest.raises(UnsupportedLogVersionError, match="needs log reader version 5"):
        TransactionLog(users.store, "users").snapshot()


def test_expiry_and_vacuum_keep_a_live_branch_readable(users):
    users.branch("audit")
    audit = users.repository.load("users", branch="audit")
    append(audit, [10])
    for i in range(4):
        append(users, [100 + i])
    users.delete("userId = 1")  # main's file of 1, 2, 3 stays (a tombstone); the branch reads it untouched
    users.compact()  # ...until a compaction rewrites it: then only the base state references it
    users.checkpoint()
    expired = users.expire_log(dt.timedelta(0), force=True)
    assert any("branch 'audit'" in k for k in expired.kept)
    removed = users.vacuum(dt.timedelta(0), dry_run=False, force=True)
    assert any("branch 'audit'" in k for k in removed.kept)
    reread = users.repository.load("users", branch="audit")
    assert ids(reread) == [1, 2, 3, 10]
    users.publish("audit")
    assert ids(users.repository.load("users")) == [2, 3, 10, 100, 101, 102, 103]


def test_vacuum_and_expiry_collect_what_a_dropped_branch_left(users):
    audit = users.branch("audit")
    append(audit, [10])
    added = [f.path for f in audit.files if f.revision > users.version]
    ref = users.branches()["audit"]
    folder = branch_folder(ref)
    assert users.vacuum(dt.timedelta(0), dry_run=True, force=True) == []
    users.branch("other")
    assert not any(folder in k for k in users.expire_log(dt.timedelta(0), force=True))  # live: kept
    users.drop_branch("audit")
    assert users.vacuum(dt.timedelta(0), dry_run=True, force=True) == added
    expired = users.expire_log(dt.timedelta(0), force=True)
    assert [k for k in expired if folder in k] == [f"{folder}/{ref.base + 1:020d}.json",  # its append
                                                    f"{folder}/{ref.base + 2:020d}.json"]  # the drop's seal
    assert users.store.list(folder) == [] and "other" in users.branches()


def test_a_branch_write_whose_files_a_vacuum_on_main_may_have_deleted_is_refused(users, monkeypatch):
    from cdkds.catalog.log import branches
    audit = users.branch("audit")
    monkeypatch.setattr(branches, "files_at_risk", lambda store, actions, cutoff: "it may delete data/x")
    users.store.put("data/orphan.parquet", b"left by a crashed writer")
    assert users.vacuum(dt.timedelta(0), dry_run=False, force=True) == ["data/orphan.parquet"]  # a trace on main
    with pytest.raises(CommitConflictError, match=r"main's revision \d+ \('vacuum'\).*it may delete data/x"):
        append(audit, [9])
    assert ids(users.repository.load("users", branch="audit")) == [1, 2, 3]


def test_a_vacuum_on_main_that_kept_a_branch_s_files_does_not_refuse_its_publish(users):
    import time
    audit = users.branch("audit")
    append(audit, [10])
    time.sleep(0.01)
    users.store.put("data/orphan.parquet", b"left by a crashed writer")
    time.sleep(0.01)
    removed = users.vacuum(dt.timedelta(0), dry_run=False, force=True)  # a trace on main, later than the branch's file
    assert removed == ["data/orphan.parquet"] and any("branch 'audit'" in k for k in removed.kept)
    users.publish("audit")  # the vacuum kept the file because the branch referenced it: refused for ever before
    assert ids(users.repository.load("users")) == [1, 2, 3, 10]


def test_a_publish_whose_branch_file_a_vacuum_deleted_is_refused(users):
    audit = users.branch("audit")
    append(audit, [10])
    lost = [f.path for f in audit.files if f.revision > users.version]
    users.store.put("data/orphan.parquet", b"left by a crashed writer")
    users.vacuum(dt.timedelta(0), dry_run=False, force=True)
    users.store.delete(lost[0])  # as a vacuum racing the branch's writer could (docs/guide/branches.md)
    with pytest.raises(CommitConflictError, match=rf"it deleted {lost[0]}"):
        users.publish("audit")
    assert ids(users.repository.load("users")) == [1, 2, 3]


def test_writers_on_one_branch_race_under_put_if_absent(users):
    import threading
    users.branch("audit")
    errors = []

    def write(k):
        try:
            append(users.repository.load("users", branch="audit"), range(100 * k, 100 * k + 3))
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=write, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    audit = users.repository.load("users", branch="audit")
    assert audit.version == users.version + 4 and len(ids(audit)) == 3 + 12


# ---------------------------------------------------------------- processes


def _writer(url, options, branch, start, commits):
    ds = DatasetRepository(url, options).load("users", branch=branch)
    for k in range(commits):
        append(ds, [start + k])


def _main_and_branch_writers(url, options):
    repo = DatasetRepository(url, options)
    ds = repo.create("users", DatasetDescriptor(USER_SCHEMA))
    append(ds, [0])
    ds.branch("audit")
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_writer, args=(url, options, branch, start, 5))
                 for branch, start in ((None, 1000), (None, 2000), ("audit", 3000), ("audit", 4000))]
    for p in processes:
        p.start()
    for p in processes:
        p.join(300)
    assert [p.exitcode for p in processes] == [0] * 4
    main, audit = repo.load("users"), repo.load("users", branch="audit")
    assert ids(main) == [0, *range(1000, 1005), *range(2000, 2005)]
    assert ids(audit) == [0, *range(3000, 3005), *range(4000, 4005)]
    ds.publish("audit")
    assert ids(repo.load("users")) == sorted([0, *range(1000, 1005), *range(2000, 2005), *range(3000, 3005),
                                              *range(4000, 4005)])


@pytest.mark.slow
def test_writers_on_main_and_on_a_branch_in_processes_on_local_files(tmp_path):
    _main_and_branch_writers(f"file://{tmp_path}/lake", {})


@pytest.mark.slow
def test_writers_on_main_and_on_a_branch_in_processes_on_s3(s3_endpoint):
    _main_and_branch_writers(f"s3://{new_bucket(s3_endpoint)}/lake", s3_options(s3_endpoint))


def test_a_seal_left_by_a_publish_that_stopped_holds_off_branch_writers_until_published(users):
    from cdkds.catalog.log.branches import BranchLog
    audit = users.branch("audit")
    append(audit, [10])
    stale = users.repository.load("users", branch="audit")  # planned before the seal
    branch = BranchLog(users.log.replay, users.branches()["audit"])
    assert branch.seal(branch.snapshot()) is not None  # as a publish that stopped before main's commit leaves it
    with pytest.raises(CommitConflictError, match="a publish or a drop of branch 'audit' began"):
        append(stale, [11])
    with pytest.raises(CommitConflictError, match="'audit' is sealed at its revision"):
        append(users.repository.load("users", branch="audit"), [12])  # planned on the seal
    users.publish("audit")  # publishing again goes over the seal
    assert ids(users.repository.load("users")) == [1, 2, 3, 10]


def test_a_publish_racing_main_writers_lands_once_with_every_row(users):
    import threading
    audit = users.branch("audit")
    append(audit, [10, 11])
    stop = threading.Event()
    written = []

    def main_writer():
        ds = users.repository.load("users")
        k = 100
        while not stop.is_set() and k < 130:
            append(ds, [k])
            written.append(k)
            k += 1
    thread = threading.Thread(target=main_writer)
    thread.start()
    try:
        users.publish("audit")
    finally:
        stop.set()
        thread.join()
    main = users.repository.load("users")
    assert ids(main) == sorted([1, 2, 3, 10, 11, *written])
    assert [h.operation for h in main.history()].count("publish") == 1


# ---------------------------------------------------------------- publish is serialisable

from hypothesis import given, settings, strategies as st  # noqa: E402

X_SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "x", "type": "long"}]}
VALUES = st.lists(st.integers(0, 9), min_size=1, max_size=4)
OPERATIONS = st.one_of(st.tuples(st.just("append"), VALUES),
                       st.tuples(st.sampled_from(["=", "<"]), st.integers(0, 9)),
                       st.tuples(st.just("compact"), st.just(0)))  # as main's inline services do after appends


def _apply(rows, operation):
    kind, value = operation
    if kind == "append":
        return rows + value
    if kind == "compact":
        return rows
    return [x for x in rows if not (x == value if kind == "=" else x < value)]


def _applied(rows, operations):
    for operation in operations:
        rows = _apply(rows, operation)
    return rows


def _run(ds, operation):
    """Whether ``operation`` committed (a delete no file can match commits nothing, and
    assumes nothing: it is no operation in either serial order)."""
    kind, value = operation
    if kind == "append":
        with ds.writer() as w:
            w.write_batch(pa.table({"x": value}))
        return True
    if kind == "compact":
        return ds.compact() is not None
    return ds.delete(f"x {kind} {value}") is not None


@settings(max_examples=20)
@given(first=VALUES, on_branch=st.lists(OPERATIONS, max_size=4), on_main=st.lists(OPERATIONS, max_size=3))
def test_a_publish_is_the_branch_after_main_or_refused_with_nothing_committed(tmp_path_factory, first, on_branch,
                                                                                 on_main):
    repo = DatasetRepository(tmp_path_factory.mktemp("lake").as_uri())
    ds = repo.create("t", DatasetDescriptor(X_SCHEMA))
    _run(ds, ("append", first))
    audit = ds.branch("audit")
    on_branch = [operation for operation in on_branch if _run(audit, operation)]
    on_main = [operation for operation in on_main if _run(repo.load("t"), operation)]
    main_rows = _applied(first, on_main)
    # one of the two serial orders (a delete that matched nothing committed nothing, so it may come first)
    serial = [sorted(_applied(main_rows, on_branch)), sorted(_applied(_applied(first, on_branch), on_main))]
    before = repo.load("t").version
    try:
        ds.publish("audit")
    except CommitConflictError:
        assert on_main, "a publish onto a main that has not moved is a fast-forward"
        assert repo.load("t").version == before and sorted(xs(repo.load("t"))) == sorted(main_rows)
        return
    assert sorted(xs(repo.load("t"))) in serial


def xs(ds):
    return [r["x"] for r in ds.reader()]


KEYED_ROWS = st.dictionaries(st.integers(0, 30), st.sampled_from("abc"), min_size=1, max_size=4)
KEYED_OPERATIONS = st.one_of(st.tuples(st.just("upsert"), KEYED_ROWS),
                             st.tuples(st.just("delete"), st.lists(st.integers(0, 30), min_size=1, max_size=3)))


def _keyed(state, operations):
    state = dict(state)
    for kind, value in operations:
        if kind == "upsert":
            state.update(value)
        else:
            for key in value:
                state.pop(key, None)
    return state


def _run_keyed(ds, operation):
    kind, value = operation
    if kind == "upsert":
        ds.upsert([{"userId": k, "username": v} for k, v in value.items()])
    else:
        ds.delete_keys(value)


@settings(max_examples=15)
@given(first=KEYED_ROWS, on_branch=st.lists(KEYED_OPERATIONS, max_size=3),
       on_main=st.lists(KEYED_OPERATIONS, max_size=2))
def test_a_keyed_publish_keeps_one_live_row_per_key_and_the_index_right(tmp_path_factory, first, on_branch, on_main):
    repo = DatasetRepository(tmp_path_factory.mktemp("lake").as_uri())
    ds = repo.create("t", DatasetDescriptor(USER_SCHEMA, record_key="userId", properties={"index.buckets": "4"}))
    _run_keyed(ds, ("upsert", first))
    audit = ds.branch("audit")
    for operation in on_branch:
        _run_keyed(audit, operation)
    for operation in on_main:
        _run_keyed(repo.load("t"), operation)
    main_state = _keyed(first, on_main)
    try:
        ds.publish("audit")
    except CommitConflictError:
        assert {r["userId"]: r["username"] for r in repo.load("t").reader()} == main_state
        return
    main = repo.load("t")
    rows = list(main.reader())
    got = {r["userId"]: r["username"] for r in rows}
    assert len(rows) == len(got)
    assert got in [_keyed(main_state, on_branch), _keyed(_keyed(first, on_branch), on_main)]
    assert all(main.get(k)["username"] == v for k, v in got.items())
