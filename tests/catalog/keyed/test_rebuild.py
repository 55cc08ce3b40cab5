"""Rebuilding the record index changes nothing a later operation sees: the rebuilt index
holds every live row of the data files and every key tombstone still within gc.grace."""

from __future__ import annotations

import time
import uuid

from hypothesis import given, settings, strategies as st

from cdkds.catalog import DatasetRepository
from tests.catalog.keyed.conftest import at, state, user, users_descriptor

KEYS = [("nz", 1), ("nz", 2), ("au", 1)]


def clean(ds) -> None:
    report = ds.check(read_data=True)
    assert report.ok, report.to_json()


def test_a_rebuilt_index_keeps_the_tombstones_of_deleted_keys(users):
    users.upsert([user("nz", 1, 5, "a"), user("nz", 2, 5, "b")])
    users.delete_keys([{"tenant": "nz", "userId": 1, "updatedAt": at(10)}])
    users.delete_keys([("nz", 2)])  # a bare delete: its tombstone keeps the stored ordering value
    users.rebuild_index()
    late = users.upsert([user("nz", 1, 7, "late"), user("nz", 2, 4, "older")])
    assert (late.inserted, late.unchanged) == (0, 2)  # as after compact(): the tombstones win
    assert users.upsert([user("nz", 1, 11, "newer")]).inserted == 1
    assert state(users) == {("nz", 1): ("newer", None, at(11))}
    clean(users)


def test_tombstones_past_gc_grace_are_not_carried_over(repo):
    ds = repo.create("users", users_descriptor(**{"gc.grace": "0.001 s"}))
    ds.upsert([user("nz", 1, 5)])
    ds.delete_keys([{"tenant": "nz", "userId": 1, "updatedAt": at(10)}])
    time.sleep(0.01)
    ds.rebuild_index()
    assert not any(e.rows for e in ds.snapshot.index.values())
    assert ds.upsert([user("nz", 1, 7)]).inserted == 1  # as without the rebuild: the tombstone had expired
    clean(ds)


def test_a_key_written_again_after_its_delete_is_indexed_by_its_row(users):
    users.upsert([user("nz", 1, 5, "a")])
    users.delete_keys([{"tenant": "nz", "userId": 1, "updatedAt": at(6)}])
    users.upsert([user("nz", 1, 8, "again")])
    users.rebuild_index()
    assert users.get(("nz", 1))["email"] == "again"
    assert users.upsert([user("nz", 1, 7, "older")]).unchanged == 1
    assert users.delete_keys([("nz", 1)]).deleted == 1
    clean(users)


operation = st.one_of(
    st.tuples(st.just("upsert"), st.sampled_from(KEYS), st.integers(0, 4), st.sampled_from([None, "a", "b"])),
    st.tuples(st.just("delete"), st.sampled_from(KEYS), st.one_of(st.none(), st.integers(0, 4))),
    st.tuples(st.just("compact")),
)


def apply(ds, op) -> object:
    """One operation and what it returned (without revisions: the two datasets differ in them)."""
    if op[0] == "upsert":
        r = ds.upsert([user(op[1][0], op[1][1], op[2], op[3])])
    elif op[0] == "delete":
        key = {"tenant": op[1][0], "userId": op[1][1]}
        r = ds.delete_keys([key if op[2] is None else {**key, "updatedAt": at(op[2])}])
    else:
        ds.compact()
        return None
    return (r.inserted, r.updated, r.deleted, r.unchanged)


@settings(max_examples=max(10, settings.default.max_examples // 4))
@given(st.lists(operation, min_size=1, max_size=10), st.sets(st.integers(0, 10)), st.sampled_from(["2", "3", "8"]))
def test_rebuilding_anywhere_changes_no_later_result(operations, rebuild_before, deltas):
    repo = DatasetRepository(f"memory://rebuild-{uuid.uuid4().hex}")
    plain = repo.create("plain", users_descriptor(**{"index.compaction.deltas": deltas}))
    rebuilt = repo.create("rebuilt", users_descriptor(**{"index.compaction.deltas": deltas}))
    for i, op in enumerate(operations):
        if i in rebuild_before:
            rebuilt.rebuild_index()
        assert apply(rebuilt, op) == apply(plain, op), f"operation {i}: {op}"
        assert state(rebuilt) == state(plain)
    if len(operations) in rebuild_before:
        rebuilt.rebuild_index()
    assert rebuilt.get_many(KEYS) == plain.get_many(KEYS)
    for ds in (plain, rebuilt):
        clean(ds)
