"""Upsert, insert, update, delete by key, get and get_many, on every backend."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from cdkds.catalog import (
    CdkdsError, CommitConflictError, CorruptIndexError, DatasetDescriptor, DatasetRepository, InvalidDescriptorError,
    InvalidKeyError, InvalidRecordError, KeyExistsError,
)
from cdkds.catalog.keyed import operations
from tests.catalog.keyed.conftest import at, state, user, users_descriptor


def test_upsert_inserts_then_replaces_by_ordering_value(users):
    r = users.upsert([user("nz", i, 10, f"a{i}") for i in range(6)])
    assert (r.inserted, r.updated, r.unchanged, r.revision) == (6, 0, 0, users.version)
    r = users.upsert([user("nz", 1, 11, "newer"), user("nz", 2, 9, "older"), user("au", 1, 1, "new key")])
    assert (r.inserted, r.updated, r.unchanged) == (1, 1, 1)
    s = state(users)
    assert s[("nz", 1)][0] == "newer" and s[("nz", 2)][0] == "a2" and s[("au", 1)][0] == "new key"
    assert len(s) == 7 and users.snapshot.row_count == 7


def test_equal_ordering_values_the_greater_row_wins(users):
    users.upsert([user("nz", 1, 5, "b")])
    assert users.upsert([user("nz", 1, 5, "a")]).unchanged == 1
    assert users.upsert([user("nz", 1, 5, "c")]).updated == 1
    assert users.upsert([user("nz", 1, 5, "c")]).unchanged == 1  # an equal row changes nothing
    assert users.get(("nz", 1))["email"] == "c"


def test_within_one_write_the_rule_applies_too(users):
    r = users.upsert([user("nz", 1, 5, "first"), user("nz", 1, 7, "last"), user("nz", 1, 6, "middle")])
    assert (r.inserted, r.unchanged) == (1, 0)  # duplicates reduced before counting
    assert users.get(("nz", 1))["email"] == "last"


def test_without_ordering_field_the_later_write_wins_and_duplicates_are_refused(repo):
    ds = repo.create("plain", users_descriptor(ordering=False))
    ds.upsert([user("nz", 1, 5, "a")])
    assert ds.upsert([user("nz", 1, 1, "b")]).updated == 1
    assert ds.get(("nz", 1))["email"] == "b"
    version = ds.version
    with pytest.raises(InvalidKeyError, match=r"dataset 'plain': the upsert gives the key \{'tenant': 'nz', 'userId': 2\} "
                                              r"more than once"):
        ds.upsert([user("nz", 2, 1), user("nz", 2, 2)])
    assert ds.refresh().version == version


def test_insert_refuses_existing_keys_and_commits_nothing(users):
    users.insert([user("nz", 1, 1)])
    version = users.version
    with pytest.raises(KeyExistsError, match=r"dataset 'users': key \{'tenant': 'nz', 'userId': 1\} already exists"):
        users.insert([user("nz", 2, 1), user("nz", 1, 9)])
    assert users.refresh().version == version and len(state(users)) == 1
    assert not [k for k, _ in users.store.walk_files("data") if k not in users.snapshot.files]


def test_update_changes_only_the_given_columns(users):
    users.upsert([user("nz", 1, 5, "a", 10), user("nz", 2, 5, "b", 20)])
    r = users.update([{"tenant": "nz", "userId": 1, "score": 11}, {"tenant": "nz", "userId": 2, "email": "B"},
                      {"tenant": "nz", "userId": 3, "email": "nobody"}])
    assert (r.updated, r.inserted, r.unchanged) == (2, 0, 1)
    s = state(users)
    assert s[("nz", 1)][:2] == ("a", 11) and s[("nz", 2)][:2] == ("B", 20) and ("nz", 3) not in s
    # with an ordering value, an update applies only if newer
    assert users.update([{"tenant": "nz", "userId": 1, "score": 0, "updatedAt": at(1)}]).unchanged == 1
    assert users.update(pa.table({"tenant": ["nz"], "userId": [1], "score": [12], "updatedAt": [at(9)]})).updated == 1
    assert users.get(("nz", 1))["score"] == 12


def test_delete_keys_with_and_without_ordering_values(users):
    users.upsert([user("nz", i, 5) for i in range(4)])
    r = users.delete_keys([("nz", 0), {"tenant": "nz", "userId": 1}])
    assert (r.deleted, r.unchanged) == (2, 0)
    assert users.delete_keys([{"tenant": "nz", "userId": 2, "updatedAt": at(4)}]).unchanged == 1  # older: no effect
    assert users.delete_keys([{"tenant": "nz", "userId": 2, "updatedAt": at(5)}]).deleted == 1  # a tie: delete wins
    assert users.delete_keys(pa.table({"tenant": ["nz", "nz"], "userId": [3, 77]})).deleted == 1
    assert state(users) == {}
    # the tombstone keeps a late, older write from resurrecting the key (within gc.grace)
    assert users.upsert([user("nz", 2, 4.5)]).unchanged == 1
    assert users.upsert([user("nz", 2, 5)]).unchanged == 1
    assert users.upsert([user("nz", 2, 6)]).inserted == 1


def test_a_key_given_several_times_is_one_delete(users):
    users.upsert([user("nz", i, 5) for i in range(4)])
    r = users.delete_keys([("nz", 0), ("nz", 0), {"tenant": "nz", "userId": 0}])  # bare keys: one delete
    assert (r.deleted, r.unchanged) == (1, 0)
    # with ordering values the greatest wins, as in an upsert: the tombstone holds 9
    users.delete_keys([{"tenant": "nz", "userId": 1, "updatedAt": at(t)} for t in (6, 9, 7)])
    assert users.upsert([user("nz", 1, 8.5)]).unchanged == 1 and users.upsert([user("nz", 1, 9.5)]).inserted == 1
    # bare and with a smaller value: the row goes, and the tombstone keeps the stored value
    r = users.delete_keys([{"tenant": "nz", "userId": 2, "updatedAt": at(1)}, ("nz", 2)])
    assert (r.deleted, r.unchanged) == (1, 0)
    assert users.upsert([user("nz", 2, 5)]).unchanged == 1 and users.upsert([user("nz", 2, 5.5)]).inserted == 1
    r = users.delete_keys(pa.table({"tenant": ["nz"] * 3, "userId": [3] * 3, "updatedAt": [at(2), None, at(8)]}))
    assert (r.deleted, r.unchanged) == (1, 0)
    assert users.upsert([user("nz", 3, 7.5)]).unchanged == 1
    assert users.delete_keys([("au", 1), ("au", 1)]).unchanged == 1  # a bare key of no row leaves no tombstone
    assert users.upsert([user("au", 1, 0)]).inserted == 1
    report = users.check(read_data=True)
    assert report.ok, report.to_json()


def test_messages_about_repeated_keys_are_true_of_the_dataset(repo, users):
    users.upsert([user("nz", 1, 5)])
    with pytest.raises(InvalidKeyError) as e:
        users.update([{"tenant": "nz", "userId": 1, "score": 1}, {"tenant": "nz", "userId": 1, "score": 2}])
    assert "without ordering values ('updatedAt') to reconcile them, one update may hold each key once" in str(e.value)
    assert "no ordering field" not in str(e.value) and "without an ordering field" not in str(e.value)
    plain = repo.create("plain", users_descriptor(ordering=False))
    plain.upsert([user("nz", 1, 5)])
    assert plain.delete_keys([("nz", 1), ("nz", 1)]).deleted == 1  # one delete here too
    with pytest.raises(InvalidKeyError, match="without an ordering field one write may hold each key once"):
        plain.upsert([user("nz", 2, 1), user("nz", 2, 2)])
    for ds in (users, plain):
        report = ds.check(read_data=True)
        assert report.ok, report.to_json()


def test_get_and_get_many(users):
    users.upsert([user("nz", i, 5, f"e{i}") for i in range(10)])
    assert users.get({"tenant": "nz", "userId": 3})["email"] == "e3"
    assert users.get(("nz", 3), columns=["email"]) == {"email": "e3"}
    assert users.get(("nz", 99)) is None
    got = users.get_many([("nz", 7), ("au", 1), ("nz", 2)], columns=["userId"])
    assert got.column("userId").to_pylist() == [7, 2]
    with pytest.raises(CdkdsError, match="unknown column 'nope'"):
        users.get(("nz", 1), columns=["nope"])


def test_delete_by_predicate_uses_deletion_vectors_and_the_index_follows(users):
    users.upsert([user("nz", i, 5, score=i) for i in range(10)])
    users.delete("score >= 5")
    assert not users.snapshot.tombstones and all(f.deletes for f in users.snapshot.files.values())
    assert sorted(k[1] for k in state(users)) == list(range(5))
    assert users.get(("nz", 7)) is None
    assert users.insert([user("nz", 7, 1)]).inserted == 1


def test_compaction_materialises_deletes_and_reindexes(users):
    for round_ in range(3):
        users.upsert([user("nz", i, round_, f"r{round_}") for i in range(0, 20, round_ + 1)])
    before = state(users)
    users.compact()
    assert not any(f.deletes for f in users.snapshot.files.values())
    assert state(users) == before
    assert users.get(("nz", 2))["email"] == "r1"
    assert users.upsert([user("nz", 2, 10, "after")]).updated == 1 and len(state(users)) == len(before)


def test_index_compaction_keeps_lookups_right(repo):
    ds = repo.create("users", users_descriptor(**{"index.compaction.deltas": "2"}))
    for t in range(6):
        ds.upsert([user("nz", i, t, f"v{t}") for i in range(t, 12)])
    assert all(len([f for f in ds.snapshot.index_files(b) if not f.base]) < 2 for b in range(4))
    assert ds.get(("nz", 11))["email"] == "v5" and ds.get(("nz", 0))["email"] == "v0"
    assert len(state(ds)) == 12


def test_a_damaged_index_file_is_detected_and_rebuilt(users):
    users.upsert([user("nz", i, 1) for i in range(20)])
    victim = next(iter(users.snapshot.index.values()))
    users.store.put(victim.path, b"garbage")
    from cdkds.catalog.keyed.index import FOOTERS
    FOOTERS.clear()
    with pytest.raises(CorruptIndexError, match=r"run dataset.rebuild_index\(\)"):
        users.get_many([("nz", i) for i in range(20)])
    users.rebuild_index()
    assert users.get_many([("nz", i) for i in range(20)]).num_rows == 20


def test_setting_a_record_key_bootstraps_the_index(repo):
    from cdkds.catalog import DatasetDescriptor
    from tests.catalog.keyed.conftest import USERS
    ds = repo.create("users", DatasetDescriptor(USERS, partition_strategy="identity(tenant)"))
    with ds.writer() as w:
        for i in range(5):
            w.write(user("nz", i, 1))
    keyed = repo.update("users", users_descriptor().evolve(properties={"index.buckets": "4"}) if False else
                        DatasetDescriptor(USERS, partition_strategy="identity(tenant)", record_key=["tenant", "userId"],
                                          ordering_field="updatedAt", properties={"index.buckets": "4"}))
    assert keyed.get(("nz", 3)) is not None and keyed.snapshot.protocol.reader_version >= 2
    assert keyed.upsert([user("nz", 3, 2, "x")]).updated == 1


def test_duplicate_keys_refuse_the_bootstrap(repo):
    from cdkds.catalog import DatasetDescriptor
    from tests.catalog.keyed.conftest import USERS
    ds = repo.create("users", DatasetDescriptor(USERS))
    with ds.writer() as w:
        w.write(user("nz", 1, 1))
        w.write(user("nz", 1, 2))
    with pytest.raises(InvalidKeyError, match=r"\{'tenant': 'nz', 'userId': 1\}"):
        repo.update("users", DatasetDescriptor(USERS, record_key=["tenant", "userId"]))
    assert not repo.load("users").descriptor.record_key


def test_keyed_descriptor_rules(users, repo):
    from cdkds.catalog import DatasetDescriptor
    from tests.catalog.keyed.conftest import USERS
    with pytest.raises(InvalidDescriptorError, match="index.buckets is fixed"):
        repo.update("users", users_descriptor(**{"index.buckets": "8"}))
    with pytest.raises(InvalidDescriptorError, match="ordering field of a keyed dataset cannot change"):
        repo.update("users", users_descriptor(ordering=False))
    with pytest.raises(InvalidDescriptorError, match="record key cannot change"):
        repo.update("users", DatasetDescriptor(USERS, record_key=["userId"], ordering_field="updatedAt",
                                               partition_strategy="identity(tenant)", properties={"index.buckets": "4"}))


def test_writer_appends_are_inserts_and_overwrite_replaces_the_index(users):
    with users.writer() as w:
        w.write(user("nz", 1, 1))
        w.write_batch(pa.Table.from_pylist([user("nz", 2, 1)], schema=users.descriptor.arrow_schema))
    with pytest.raises(KeyExistsError):
        with users.writer() as w:
            w.write(user("nz", 1, 2))
    with users.writer(mode="overwrite") as w:
        w.write(user("au", 9, 1))
    assert list(state(users)) == [("au", 9)] and users.get(("nz", 1)) is None
    with pytest.raises(CdkdsError, match="appends \\(inserts\\) or overwrites"):
        users.writer(mode="overwrite_partitions")


@pytest.mark.parametrize("call, message", [
    (lambda d: d.upsert([{"tenant": "nz", "updatedAt": at(1)}]), "field 'userId' is required and missing"),
    (lambda d: d.upsert([{"tenant": None, "userId": 1, "updatedAt": at(1)}]), "tenant"),
    (lambda d: d.upsert([{"tenant": "nz", "userId": "x", "updatedAt": at(1)}]), "userId"),
    (lambda d: d.upsert([{"tenant": "nz", "userId": 1, "updatedAt": at(1), "bogus": 1}]), "unknown field 'bogus'"),
    (lambda d: d.upsert(pa.table({"tenant": ["nz"], "userId": [None], "updatedAt": [at(1)]})), "userId"),
    (lambda d: d.update([{"tenant": "nz", "userId": 1, "nope": 1}]), "unknown column 'nope'"),
    (lambda d: d.update([{"tenant": "nz", "userId": 1, "score": "high"}]), "update field 'score': value 'high'"),
    (lambda d: d.update([{"tenant": "nz", "email": "x"}]), "no record key field 'userId'"),
    (lambda d: d.delete_keys([("nz",)]), "has 1 value(s)"),
    (lambda d: d.delete_keys([("nz", 1, 2)]), "has 3 value(s)"),
    (lambda d: d.delete_keys([{"tenant": "nz", "user": 1}]), "has no field 'userId'"),
    (lambda d: d.get(("nz", "one")), "record key field 'userId': value 'one' (str) is not an integer"),
    (lambda d: d.upsert([5]), "must be a dict"),
])
def test_bad_input_names_dataset_field_and_value_and_commits_nothing(users, call, message):
    users.upsert([user("nz", 1, 1, "kept")])
    version, files = users.version, set(users.snapshot.files)
    with pytest.raises((InvalidRecordError, InvalidKeyError)) as e:
        call(users)
    assert "dataset 'users'" in str(e.value) and message in str(e.value)
    users.refresh()
    assert users.version == version and set(users.snapshot.files) == files
    assert [k for k, _ in users.store.walk_files("data") if k not in files] == []


def test_operations_on_a_dataset_without_a_key_are_refused(repo):
    from cdkds.catalog import DatasetDescriptor
    from tests.catalog.keyed.conftest import USERS
    ds = repo.create("plain", DatasetDescriptor(USERS))
    with pytest.raises(CdkdsError, match="dataset 'plain' has no record key"):
        ds.upsert([user("nz", 1, 1)])
    with pytest.raises(CdkdsError, match="has no record key"):
        ds.get(("nz", 1))


def test_a_stale_change_conflicts_only_on_the_same_keys(users):
    users.upsert([user("nz", i, 1) for i in range(10)])
    stale = users.repository.load("users")
    users.upsert([user("nz", 1, 2, "theirs")])
    # disjoint keys: rebased
    change = operations.prepare(stale, "upsert", [user("nz", 2, 3, "ours")])
    operations.commit(stale, [change])
    # the same key: conflict naming it, nothing left behind
    stale2 = users.repository.load("users")
    users.refresh().upsert([user("nz", 5, 4, "theirs")])
    change = operations.prepare(stale2, "upsert", [user("nz", 5, 5, "ours")])
    with pytest.raises(CommitConflictError, match=r"it wrote the key \{'tenant': 'nz', 'userId': 5\} too"):
        operations.commit(stale2, [change])
    assert not [a for a in change.adds if users.store.exists(a.path)]
    users.refresh()
    s = state(users)
    assert s[("nz", 1)][0] == "theirs" and s[("nz", 2)][0] == "ours" and s[("nz", 5)][0] == "theirs"
    # the Python entry point retries on the new snapshot
    stale3 = users.repository.load("users")
    users.upsert([user("nz", 6, 9, "theirs")])
    assert stale3.upsert([user("nz", 6, 10, "ours")]).updated == 1
    assert users.refresh().get(("nz", 6))["email"] == "ours"


def test_iterators_and_batches_are_accepted(users):
    schema = users.descriptor.arrow_schema
    batches = (pa.RecordBatch.from_pylist([user("nz", i, 1)], schema=schema) for i in range(3))
    assert users.upsert(batches).inserted == 3
    assert users.upsert(iter([user("au", 1, 1), user("au", 2, 1)])).inserted == 2
    assert users.upsert(pa.Table.from_pylist([user("nz", 0, 2)], schema=schema)).updated == 1


def test_rebuilding_the_log_of_a_keyed_dataset_says_what_is_lost(repo, tmp_path):
    import warnings

    from cdkds.catalog.maintenance.rebuild import IncompleteRebuildWarning
    ds = repo.create("users", users_descriptor())
    ds.upsert([user("nz", i, 1) for i in range(5)])
    ds.upsert([user("nz", 1, 2, "new")])
    for key, _ in list(ds.store.walk_files("_log")):
        ds.store.delete(key)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rebuilt = repo.rebuild("users")
    assert any(isinstance(w.message, IncompleteRebuildWarning) and "rebuild_index" in str(w.message) for w in caught)
    assert rebuilt.snapshot.row_count == 6  # the replaced row is live again, as the warning says
    with pytest.raises(InvalidKeyError, match=r"'userId': 1\}"):
        rebuilt.rebuild_index()


def test_changes_of_several_tasks_commit_once(users):
    """What Spark's clustered path does: one change per task (some empty), one commit."""
    users.upsert([user("nz", i, 1) for i in range(8)])
    key = operations.RecordKey.of(users.descriptor, "users")
    key_buckets = {i: int(key.buckets(key.hashes(key.keys([("nz", i)])), 4)[0]) for i in range(8)}
    by_bucket: dict = {}
    for i, b in key_buckets.items():
        by_bucket.setdefault(b, []).append(user("nz", i, 2, "new"))
    changes = [operations.prepare(users, "upsert", rows, buckets=frozenset({b})) for b, rows in by_bucket.items()]
    changes.append(operations.prepare(users, "upsert", []))
    result = operations.commit(users, changes)
    assert (result.updated, result.revision) == (8, users.version)
    assert {v[0] for v in state(users).values()} == {"new"}
    with pytest.raises(CdkdsError, match="is not in the buckets this change owns"):
        other = next(b for b in range(4) if b != key_buckets[0])
        operations.prepare(users, "upsert", [user("nz", 0, 3)], buckets=frozenset({other}))


def test_a_change_of_whole_buckets_owns_the_buckets_its_rows_hash_to(users):
    """prepare(whole_buckets=True), as a clustered Spark task plans: the change owns exactly
    its rows' buckets; disjoint ones commit together, two holding one bucket are refused."""
    users.upsert([user("nz", i, 1) for i in range(8)])
    key = operations.RecordKey.of(users.descriptor, "users")
    bucket_of = {i: int(key.buckets(key.hashes(key.keys([("nz", i)])), 4)[0]) for i in range(8)}
    split = sorted(set(bucket_of.values()))[:1]
    parts = [[user("nz", i, 2, "new") for i in range(8) if (bucket_of[i] in split) == side] for side in (True, False)]
    changes = [operations.prepare(users, "upsert", rows, whole_buckets=True) for rows in parts]
    assert [c.buckets for c in changes] == [frozenset(split), frozenset(bucket_of.values()) - frozenset(split)]
    assert operations.prepare(users, "upsert", [], whole_buckets=True).buckets is None  # no rows: owns none
    assert operations.commit(users, changes).updated == 8
    one = [i for i in range(8) if bucket_of[i] == split[0]]
    clash = [operations.prepare(users, "upsert", [user("nz", one[0], 3)], whole_buckets=True),
             operations.prepare(users, "upsert", [user("nz", one[-1], 3), user("nz", 100, 3)], whole_buckets=True)]
    with pytest.raises(CdkdsError, match=rf"both planned on index bucket {split[0]}"):
        operations.commit(users, clash)
    for change in clash:
        change.discard(users)
    assert {v[0] for v in state(users).values()} == {"new"}


def test_changes_planned_apart_on_one_bucket_are_refused_and_commit_nothing(users):
    """F2: two changes that both hold a bucket each looked their keys up without the other's,
    so one key in both would become two live rows; the commit refuses before writing."""
    users.upsert([user("nz", i, 1) for i in range(8)])
    version, files = users.version, sorted(p for p, _ in users.store.walk_files(""))
    both = [user("nz", 1, 2, "first")], [user("nz", 1, 3, "second")]
    key = operations.RecordKey.of(users.descriptor, "users")
    bucket = int(key.buckets(key.hashes(key.keys([("nz", 1)])), 4)[0])
    owned = [operations.prepare(users, "upsert", rows, buckets=frozenset({bucket})) for rows in both]
    with pytest.raises(CdkdsError, match=rf"both planned on index bucket {bucket}.*nothing was committed"):
        operations.commit(users, owned)
    unowned = [operations.prepare(users, "upsert", rows) for rows in both]
    with pytest.raises(CdkdsError, match="only when each was planned on whole index buckets"):
        operations.commit(users, unowned)
    for change in owned + unowned:
        change.discard(users)
    users.refresh()
    assert users.version == version and sorted(p for p, _ in users.store.walk_files("")) == files
    assert users.get(("nz", 1))["email"] == user("nz", 1, 1)["email"]


def test_changes_whose_tasks_wrote_their_index_files_commit_them_as_they_are(users):
    """Spark's clustered tasks write their buckets' index files (write_index); the commit
    takes the actions, a conflict deletes the files."""
    users.upsert([user("nz", i, 1) for i in range(8)])
    key = operations.RecordKey.of(users.descriptor, "users")
    by_bucket: dict = {}
    for i in range(8):
        by_bucket.setdefault(int(key.buckets(key.hashes(key.keys([("nz", i)])), 4)[0]), []).append(user("nz", i, 2, "new"))
    changes = [operations.write_index(users, operations.prepare(users, "upsert", rows, buckets=frozenset({b})))
               for b, rows in by_bucket.items()]
    assert all(c.entries is None and c.index and all(users.store.exists(p) for p in c.written) for c in changes)
    assert operations.commit(users, changes).updated == 8
    assert {v[0] for v in state(users).values()} == {"new"} and users.get(("nz", 3))["email"] == "new"
    assert users.check(read_data=True).ok
    stale = users.repository.load("users")
    change = operations.prepare(stale, "upsert", [user("nz", 1, 9, "ours")])
    users.upsert([user("nz", 1, 8, "theirs")])
    with pytest.raises(CdkdsError, match="cannot write its index on revision"):
        operations.write_index(users, change)
    change = operations.write_index(stale, change)
    with pytest.raises(CommitConflictError, match="it wrote the key"):
        operations.commit(stale, [change])
    assert change.written and not any(users.store.exists(p) for p in change.written)
    assert users.refresh().get(("nz", 1))["email"] == "theirs"


def test_upserts_racing_compaction_and_deletes(users):
    users.upsert([user("nz", i, 1, score=i) for i in range(10)])
    users.upsert([user("nz", i, 2, "second", score=i) for i in range(0, 10, 2)])
    # compaction lands while an upsert of a moved key is planned: the upsert conflicts, re-plans, wins
    stale = users.repository.load("users")
    change = operations.prepare(stale, "upsert", [user("nz", 4, 3, "racer")])
    users.compact()
    with pytest.raises(CommitConflictError):
        operations.commit(stale, [change])
    stale.refresh()
    assert stale.upsert([user("nz", 4, 3, "racer")]).updated == 1
    # an upsert lands a row a planned delete-by-predicate would match: the delete conflicts
    deleting = users.repository.load("users")
    from cdkds.catalog.write.delete import plan_delete
    plan = plan_delete("users", deleting.snapshot, "score >= 8")
    users.refresh().upsert([user("nz", 9, 9, "late", score=9)])
    from cdkds.catalog.write.delete import row_deletes
    with pytest.raises(CommitConflictError):
        deleting._commit("delete", row_deletes(deleting.store, deleting.snapshot, plan, 0), rule=plan.rule)
    deleting.refresh().delete("score >= 8")
    s = state(deleting)
    assert sorted(k[1] for k in s) == list(range(8)) and s[("nz", 4)][0] == "racer"


@pytest.mark.parametrize("call", [lambda d: d.upsert(None), lambda d: d.upsert(5), lambda d: d.update(None),
                                  lambda d: d.delete_keys(None), lambda d: d.insert("rows")])
def test_input_of_the_wrong_kind_is_refused_clearly(users, call):
    with pytest.raises((InvalidRecordError, InvalidKeyError), match="dataset 'users': "):
        call(users)


def test_rewriting_a_key_a_predicate_deleted_keeps_the_other_rows_of_its_file(users):
    """Found by the change feed's property test: the upsert deleted the already deleted
    position again, the file's vectors summed to all its rows, and scans skipped the file
    (a live row vanished from reads while get() still found it)."""
    users.upsert([user("nz", 1, 1, "one"), user("nz", 5, 1, "five")])  # one file, two rows
    users.delete("userId > 4")  # a deletion vector: position of 5
    r = users.upsert([user("nz", 5, 1, "again")])
    assert (r.inserted, r.updated) == (1, 0)
    (first,) = [f for f in users.snapshot.files.values() if f.row_count == 2]
    assert len(first.deletes) == 1 and first.live_rows == 1  # nothing deleted twice
    assert {k: v[0] for k, v in state(users).items()} == {("nz", 1): "one", ("nz", 5): "again"}


def test_files_with_overlapping_vectors_are_read_not_skipped(users):
    from cdkds.catalog.log.actions import DeleteRows

    users.upsert([user("nz", 1, 1, "one"), user("nz", 2, 1, "two")])
    users.delete("userId = 2")
    (f,) = users.snapshot.files.values()
    users._commit("delete", [DeleteRows(f.path, f.deletes[0])])  # as the bug above wrote them
    assert users.snapshot.files[f.path].live_rows == 0  # the sum says empty, the union says one row
    assert [r["userId"] for r in users.reader()] == [1]


@pytest.mark.parametrize("keys", ["abc", b"abc", 5, None])
def test_many_keys_given_as_one_value_are_refused_by_every_entry_point(keys):
    """A string is not the keys 'a', 'b', 'c' (get_many("abc") looked up its letters and
    found the row of 'a'); every entry point taking many keys refuses it, naming the dataset."""
    schema = {"type": "record", "name": "r", "fields": [{"name": "k", "type": "string"}, {"name": "v", "type": "long"}]}
    repo = DatasetRepository(f"memory://letters-{uuid.uuid4().hex}")
    ds = repo.create("letters", DatasetDescriptor(schema, record_key="k"))
    ds.upsert([{"k": "a", "v": 1}, {"k": "abc", "v": 2}])
    for call in (ds.get_many, ds.delete_keys):
        with pytest.raises(InvalidKeyError, match="dataset 'letters': .*keys are .*; got"):
            call(keys)
    assert ds.version == 1 and ds.get("abc") == {"k": "abc", "v": 2}


def test_pandas_frames_are_tables_of_rows_and_keys_not_iterables_of_column_names():
    """A DataFrame iterates over its column names: get_many/delete_keys took those for keys
    (deleting the row whose key is 'k'), and upsert refused it."""
    import pandas as pd  # a dependency of cdkds (Spark's mapInArrow needs it)
    schema = {"type": "record", "name": "r", "fields": [{"name": "k", "type": "string"}, {"name": "v", "type": "long"}]}
    repo = DatasetRepository(f"memory://frames-{uuid.uuid4().hex}")
    ds = repo.create("frames", DatasetDescriptor(schema, record_key="k"))
    assert ds.upsert(pd.DataFrame({"k": ["k", "x"], "v": [1, 2]})).inserted == 2
    assert ds.get_many(pd.DataFrame({"k": ["zz", "x"]})).column("k").to_pylist() == ["x"]
    assert ds.delete_keys(pd.DataFrame({"k": ["zz"]})).deleted == 0
    assert ds.update(pd.DataFrame({"k": ["x"], "v": [3]})).updated == 1
    assert sorted((r["k"], r["v"]) for r in ds.reader()) == [("k", 1), ("x", 3)]


@pytest.mark.parametrize("step", ["footer", "row groups"])
def test_a_connection_failing_mid_read_of_the_index_is_a_storage_error(users, monkeypatch, step):
    """s3fs passes a failed connection on as botocore raised it (not an OSError) while a file
    is read: the footer's and the row groups' reads name it as a StorageError kind too."""
    from botocore.exceptions import ConnectionClosedError, EndpointConnectionError

    from cdkds.catalog.errors import StorageConnectionError, StorageUnreachableError
    from cdkds.catalog.keyed import index
    from cdkds.catalog.keyed.index import FOOTERS

    users.upsert([user("nz", i, 1) for i in range(20)])
    FOOTERS.clear()
    if step == "row groups":
        users.get_many([("nz", i) for i in range(20)])  # footers cached: only row groups are read below
    opened = index.open_data_file

    def failing(*args, **kwargs):
        if step == "row groups":
            raise ConnectionClosedError(endpoint_url="http://s3/lake/users/_index")
        raise EndpointConnectionError(endpoint_url="http://s3/lake/users/_index")
    monkeypatch.setattr(index, "open_data_file", failing)
    kind = StorageConnectionError if step == "row groups" else StorageUnreachableError
    with pytest.raises(kind, match="reading index file .*_index/"):
        users.get_many([("nz", i) for i in range(20)])
    monkeypatch.setattr(index, "open_data_file", opened)
    assert len(users.get_many([("nz", i) for i in range(20)])) == 20


def test_the_order_of_placed_rows_is_a_stable_sort_of_them_permutation_or_not():
    import numpy as np

    from cdkds.catalog.keyed.placing import _inverse

    for placed in ([2, 0, 1], [5, 1, 3], [0, 0, 1], [1, 2], [], list(np.random.default_rng(0).permutation(100))):
        array = np.array(placed, dtype=np.int64)
        assert _inverse(array).tolist() == np.argsort(array, kind="stable").tolist()


def test_a_commit_adds_only_positions_no_earlier_vector_of_the_file_deletes(users):
    """Vectors of one file are disjoint (its deleted rows are their cardinalities' sum): a
    change naming a position already deleted (a stale entry's) adds a vector of the others."""
    users.upsert([user("nz", i, 1) for i in range(4)])
    (path,) = users.snapshot.files
    users.upsert([user("nz", 0, 2)])  # deletes the row of key 0 in ``path``
    (earlier,) = users.snapshot.files[path].deletes
    change = operations.prepare(users, "upsert", [user("nz", 1, 3)])
    assert len(change.deletes[path]) == 1
    change.deletes[path] = pa.array([*change.deletes[path].tolist(), *earlier.load(users.store).to_numpy().tolist()]
                                    ).to_numpy().astype("int64")
    operations.commit(users, [change])
    deletes = users.refresh().snapshot.files[path].deletes
    assert [d.cardinality for d in deletes] == [1, 1]
    assert users.snapshot.files[path].live_rows == 2 and len(state(users)) == 4


def test_fields_named_like_the_columns_cdkds_works_with_are_plain_fields(tmp_path):
    """A dataset's fields may be named as the index's stored columns (beside the key) and as
    any column cdkds once used while working on rows (a ``_pos`` field broke get)."""
    plain = ["_file", "_hash", "_deleted", "_row", "_rank", "_key", "_bare", "_pair", "_side", "_reconcile_row"]
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "_pos", "type": "long"},
        {"name": "_expires", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None},
        *({"name": n, "type": "long"} for n in plain)]}
    ds = DatasetRepository(f"file://{tmp_path}").create("odd", DatasetDescriptor(
        schema, record_key="id", ordering_field="_pos", properties={"ttl.field": "_expires", "index.buckets": "2"}))

    def rows(ids, pos):
        return pa.table({"id": ids, "_pos": pos, "_expires": [None] * len(ids),
                         **{n: [i * 10 + k for i in ids] for k, n in enumerate(plain)}})

    ds.upsert(rows([1, 2, 2, 3], [5, 1, 2, 1]))  # key 2 twice: the greater _pos wins
    r = ds.upsert(rows([1, 4], [5, 1]))  # a tie on _pos: the greater row decides
    assert (r.inserted, r.unchanged) == (1, 1)
    assert ds.get({"id": 2})["_pos"] == 2 and ds.get({"id": 1})["_file"] == 10
    ds.delete_keys(pa.table({"id": [3]}))
    ds.compact()
    assert ds.check(read_data=True).ok
    assert sorted(ds.to_table().column("id").to_pylist()) == [1, 2, 4]
    assert sum(b.num_rows for b in ds.changes(0)) > 0
    assert ds.to_arrow_dataset().to_table().num_rows == 3


@pytest.mark.parametrize("name", ["_hash_count", "count_all"])
def test_keys_named_like_an_aggregate_still_count_repeats(tmp_path, name):
    schema = {"type": "record", "name": "R", "fields": [{"name": name, "type": "long"}, {"name": "v", "type": "long"}]}
    ds = DatasetRepository(f"file://{tmp_path}").create("odd", DatasetDescriptor(schema, record_key=name))
    with pytest.raises(InvalidKeyError, match=f"gives the key {{'{name}': 1}} more than once"):
        ds.upsert(pa.table({name: [1, 1], "v": [1, 2]}))
    ds.upsert(pa.table({name: [1, 2, 3], "v": [1, 2, 3]}))
    ds.rebuild_index()  # counts the keys of the data files: each once
    assert ds.get({name: 2})["v"] == 2 and ds.check(read_data=True).ok
