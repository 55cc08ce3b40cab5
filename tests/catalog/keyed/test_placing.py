"""Speculative placing (cdkds.catalog.keyed.placing): an upsert or insert writes all its rows
while the index is looked up; the result is the same as placing the winners afterwards, and a
speculation that loses leaves no file behind."""

from __future__ import annotations

import datetime as dt
import tempfile

import pytest
from hypothesis import given, settings, strategies as st

from cdkds.catalog import DatasetRepository, KeyExistsError
from cdkds.catalog.keyed import placing
from tests.catalog.keyed.conftest import state, user, users_descriptor


def files(ds) -> list[str]:
    return sorted(k for k, _ in ds.store.walk_files("") if not k.startswith("_log"))


def leftovers(ds) -> list[str]:
    """Files no revision references, however new."""
    return ds.vacuum(dt.timedelta(0), dry_run=True, force=True)


@pytest.fixture
def speculating(monkeypatch):
    monkeypatch.setattr(placing, "SPECULATE_ROWS", 1)


def test_a_speculation_that_loses_leaves_no_file(users, speculating):
    users.upsert([user("nz", i, 10, "first") for i in range(20)])
    before = files(users)
    result = users.upsert([user("nz", i, 5, "older") for i in range(20)])  # every row loses
    assert (result.unchanged, result.revision) == (20, None) and files(users) == before
    result = users.upsert([user("nz", 0, 5, "older"), user("nz", 1, 11, "newer")])  # one loses: placed again
    assert (result.updated, result.unchanged) == (1, 1)
    assert {k[1]: v[0] for k, v in state(users).items()} == {i: "newer" if i == 1 else "first" for i in range(20)}
    assert leftovers(users) == [] and users.check(read_data=True).ok
    version = users.version
    with pytest.raises(KeyExistsError):
        users.insert([user("nz", 100, 1), user("nz", 3, 1)])
    assert users.refresh().version == version and leftovers(users) == []


def test_a_won_speculation_commits_its_index_files(users, speculating):
    result = users.upsert([user("au", i, 1, "a") for i in range(30)])
    assert result.inserted == 30 and users.get(("au", 7))["email"] == "a"
    assert users.upsert([user("au", i, 2, "b") for i in range(0, 30, 3)]).updated == 10
    assert users.get(("au", 9))["email"] == "b" and users.get(("au", 10))["email"] == "a"
    assert leftovers(users) == [] and users.check(read_data=True).ok


writes = st.lists(st.tuples(st.sampled_from(["upsert", "upsert", "insert"]),
                            st.lists(st.tuples(st.integers(0, 12), st.integers(0, 4)), min_size=1, max_size=12,
                                     unique_by=lambda r: r[0])), min_size=1, max_size=6)


@settings(max_examples=25, deadline=None)
@given(writes)
def test_speculation_changes_nothing_a_write_does(steps):
    """The same writes with speculation always on and always off: the same counts, errors and
    rows after every write, and no file the log does not reference."""
    outcomes = {}
    for speculate in (True, False):
        with tempfile.TemporaryDirectory() as root, pytest.MonkeyPatch.context() as mp:
            mp.setattr(placing, "SPECULATE_ROWS", 1 if speculate else 10 ** 12)
            ds = DatasetRepository(f"file://{root}").create("users", users_descriptor())
            seen = []
            for n, (kind, rows) in enumerate(steps):
                batch = [user("nz", k, t, f"w{n}") for k, t in rows]
                try:
                    r = getattr(ds, kind)(batch)
                    seen.append((r.inserted, r.updated, r.unchanged, state(ds)))
                except KeyExistsError:
                    seen.append(("exists", state(ds.refresh())))
            assert leftovers(ds) == [], speculate
            outcomes[speculate] = seen
    assert outcomes[True] == outcomes[False]


def test_a_placing_that_fails_after_its_files_closed_leaves_none(users, speculating, monkeypatch):
    """Found in review: a failure after the data files closed (making the index entries) left them."""
    from cdkds.catalog.keyed.index import RecordIndex

    users.upsert([user("nz", i, 10, "a") for i in range(20)])

    def failing(self, *args, **kwargs):
        raise MemoryError("injected")

    monkeypatch.setattr(RecordIndex, "entries", failing)
    with pytest.raises(MemoryError):  # speculated, then placed again: both fail after closing their files
        users.upsert([user("nz", i, 5 if i < 5 else 12, "b") for i in range(20)])
    assert leftovers(users.refresh()) == []


@pytest.mark.parametrize("speculate", [True, False])
def test_an_overwrite_replaces_the_whole_index_whether_or_not_it_speculates(repo, monkeypatch, speculate):
    """Found in review: without speculation an overwrite's index was written against the
    snapshot it replaces, so a bucket due for a merge kept the old entries and tombstones."""
    import pyarrow as pa

    monkeypatch.setattr(placing, "SPECULATE_ROWS", 1 if speculate else 10 ** 12)
    ds = repo.create("d", users_descriptor(**{"index.buckets": "1", "index.compaction.deltas": "1",
                                              "services.inline": "false"}))
    ds.upsert([user("x", i, 10) for i in range(3)])
    ds.delete_keys([{"tenant": "x", "userId": 0, "updatedAt": user("x", 0, 100)["updatedAt"]}])  # a tombstone
    with ds.writer(mode="overwrite") as w:
        w.write_batch(pa.Table.from_pylist([user("y", i, 1) for i in range(5)], schema=ds.descriptor.arrow_schema))
    assert sorted(a.rows for a in ds.refresh().snapshot.index.values()) == [5]
    assert ds.upsert([user("x", 0, 50, "after")]).inserted == 1  # the tombstone went with the overwrite
    assert ds.get(("x", 0))["email"] == "after" and ds.check(read_data=True).ok
