"""Changing a keyed dataset's partitioning: every key keeps one live row, and the record
index stays right through upserts of rows living in files of the old spec, deletes, and
compaction into the new spec."""

from __future__ import annotations

import uuid

from cdkds.catalog import DatasetRepository
from tests.catalog.keyed.conftest import state, user, users_descriptor


def expected_after(model: dict, rows: list[dict]) -> None:
    for r in rows:
        key = (r["tenant"], r["userId"])
        if key not in model or r["updatedAt"] >= model[key][2]:
            model[key] = (r["email"], r["score"], r["updatedAt"])


def test_keys_keep_one_live_row_and_the_index_is_right_across_a_partition_change():
    ds = DatasetRepository(f"memory://keyed-specs-{uuid.uuid4().hex}").create("users", users_descriptor())
    model: dict = {}
    first = [user("abc"[i % 3], i, 1, f"u{i}@old", i) for i in range(60)]
    ds.upsert(first)
    expected_after(model, first)
    ds.alter().partition_by("hash(userId, 4)").commit()
    assert ds.descriptor.record_key == ("tenant", "userId")
    moved = [user("abc"[i % 3], i, 2, f"u{i}@new", -i) for i in range(0, 60, 4)]  # keys living in spec 0 files
    ds.upsert(moved + [user("d", 100 + i, 2) for i in range(5)])
    expected_after(model, moved + [user("d", 100 + i, 2) for i in range(5)])
    stale = [user("abc"[i % 3], i, 0, "stale") for i in range(0, 60, 4)]  # older than what is stored: ignored
    ds.upsert(stale)
    ds.delete_keys([{"tenant": "b", "userId": 1}, {"tenant": "d", "userId": 101}])
    del model[("b", 1)], model[("d", 101)]
    assert {f.spec_id for f in ds.files} == {0, 1}
    assert state(ds) == model
    assert ds.get({"tenant": "a", "userId": 12})["email"] == "u12@new"  # upserted, was in a spec 0 file
    assert ds.get({"tenant": "a", "userId": 3})["email"] == "u3@old"
    assert ds.get({"tenant": "b", "userId": 1}) is None
    assert ds.check(read_data=True).ok
    ds.compact()
    assert {f.spec_id for f in ds.files} == {1}
    assert state(ds) == model
    assert ds.get({"tenant": "a", "userId": 12})["email"] == "u12@new"
    assert ds.get({"tenant": "c", "userId": 5})["score"] == 5
    assert ds.check(read_data=True).ok
    again = [user("abc"[i % 3], i, 3, "third") for i in range(0, 60, 3)]  # the index points at the rewritten files
    ds.upsert(again)
    expected_after(model, again)
    assert state(ds) == model and ds.check(read_data=True).ok
    assert ds.get_many([{"tenant": "a", "userId": 0}]).column("email").to_pylist() == ["third"]
