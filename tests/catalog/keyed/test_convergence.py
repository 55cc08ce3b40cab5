"""Last write wins converges: the same writes in any order, split into any batches,
give one state — the state of a dict model of the rule."""

from __future__ import annotations

import datetime as dt
import uuid

import pyarrow as pa
from hypothesis import given, settings, strategies as st

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.work_columns import ROW
from tests.catalog.keyed.conftest import at, state, user, users_descriptor

KEYS = [("nz", 1), ("nz", 2), ("au", 1)]
ops = st.lists(st.tuples(
    st.sampled_from(["upsert", "delete"]), st.sampled_from(KEYS), st.integers(0, 3),  # ordering values tie often
    st.sampled_from([None, "a", "b"]), st.sampled_from([None, 1, 2])), min_size=1, max_size=10)


def model(writes) -> dict:
    """Per key the winning write: greatest ordering value; on a tie a delete, else the greater row."""
    best: dict = {}
    for kind, key, t, email, score in writes:
        rank = (t, 1 if kind == "delete" else 0, (email is not None, email or ""), (score is not None, score or 0))
        if key not in best or rank > best[key][0]:
            best[key] = (rank, kind, email, score, t)
    return {k: (e, s, t) for k, (_, kind, e, s, t) in best.items() if kind == "upsert"}


def apply(ds, batch) -> None:
    upserts = [user(k[0], k[1], t, e, s) for kind, k, t, e, s in batch if kind == "upsert"]
    deletes = [{"tenant": k[0], "userId": k[1], "updatedAt": user(*k, t)["updatedAt"]}
               for kind, k, t, _, _ in batch if kind == "delete"]
    # one write holds one kind: keep the batch's order by splitting at kind changes
    if upserts:
        ds.upsert(upserts)
    if deletes:
        ds.delete_keys(deletes)


@settings(max_examples=40)
@given(ops, st.randoms(use_true_random=False), st.integers(1, 4))
def test_any_order_and_batching_converges_to_the_model(tmp_path_factory, writes, rnd, batches):
    shuffled = list(writes)
    rnd.shuffle(shuffled)
    cuts = sorted(rnd.sample(range(1, len(shuffled)), min(batches - 1, len(shuffled) - 1))) if len(shuffled) > 1 else []
    repo = DatasetRepository(f"file://{tmp_path_factory.mktemp('c')}")
    ds = repo.create("users", users_descriptor(**{"index.compaction.deltas": "3"}))
    start = 0
    for cut in [*cuts, len(shuffled)]:
        # writes of one batch are applied one kind at a time, each write its own commit
        for w in shuffled[start:cut]:
            apply(ds, [w])
        start = cut
    expected = {k: (e, s, user("x", 0, t)["updatedAt"]) for k, (e, s, t) in model(writes).items()}
    got = {k: (e, s, u.astimezone(dt.timezone.utc)) for k, (e, s, u) in state(ds).items()}
    assert got == expected
    assert ds.get_many(KEYS).num_rows == len(expected)


@settings(max_examples=40)
@given(ops.filter(lambda w: all(kind == "upsert" for kind, *_ in w)), st.randoms(use_true_random=False))
def test_one_batched_upsert_equals_one_write_at_a_time(tmp_path_factory, writes, rnd):
    repo = DatasetRepository(f"file://{tmp_path_factory.mktemp('b')}")
    one, many = repo.create("one", users_descriptor()), repo.create("many", users_descriptor())
    apply(one, writes)
    shuffled = list(writes)
    rnd.shuffle(shuffled)
    for w in shuffled:
        apply(many, [w])
    assert state(one) == state(many)


deletes = st.lists(st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.integers(0, 3))), min_size=1, max_size=8)


@settings(max_examples=max(10, settings.default.max_examples // 4))
@given(ops.filter(lambda w: all(kind == "upsert" for kind, *_ in w)), deletes, st.randoms(use_true_random=False))
def test_one_delete_equals_its_keys_deleted_one_at_a_time(writes, keys, rnd):
    """Keys repeated in one delete, bare (None) or with ordering values, reduce to what
    deleting them one at a time, in any order, does: the same rows and tombstones."""
    import uuid
    repo = DatasetRepository(f"memory://deletes-{uuid.uuid4().hex}")
    one, many = repo.create("one", users_descriptor()), repo.create("many", users_descriptor())
    for ds in (one, many):
        apply(ds, writes)
    given_ = [{"tenant": k[0], "userId": k[1], **({} if t is None else {"updatedAt": user(*k, t)["updatedAt"]})}
              for k, t in keys]
    one.delete_keys(given_)
    shuffled = list(given_)
    rnd.shuffle(shuffled)
    for key in shuffled:
        many.delete_keys([key])
    live, tombs = delete_model({k: t for k, (_, _, t) in model(writes).items()}, keys)
    assert set(state(one)) == set(state(many)) == live
    assert tombstones(one) == tombstones(many) == {k: at(t) for k, t in tombs.items()}  # late writes meet these
    for ds in (one, many):
        assert ds.check(read_data=True).ok


def delete_model(live: dict, keys: list) -> tuple[set, dict]:
    """The keys left live and the tombstones (key -> ordering value) after deleting ``keys``
    one at a time from live rows of ordering values ``live``: a key with an ordering value
    deletes a row whose value is not greater and leaves a tombstone of the greatest value
    seen; a bare key deletes the row whatever its value, its tombstone keeping that value."""
    live, tombs = dict(live), {}
    for key, t in keys:
        if t is None:
            if key in live:
                tombs[key] = live.pop(key)
        elif key in live and live[key] > t:
            continue
        else:
            live.pop(key, None)
            tombs[key] = max(t, tombs.get(key, t))
    return set(live), tombs


def tombstones(ds) -> dict:
    """Key -> ordering value of each tombstone the index holds."""
    from cdkds.catalog.keyed.index import RecordIndex
    from cdkds.catalog.log.commit import clock
    index = RecordIndex(ds.store, ds.snapshot, ds.name)
    keys = index.key.keys(KEYS)
    found = index.lookup(keys, index.key.hashes(keys))
    held = found.filter(pa.array(index.tombstone_alive(found, clock())))
    return {KEYS[r]: o for r, o in zip(held.column(ROW).to_pylist(), held.column("_order").to_pylist())}


FLOAT_ORDERS = [None, float("-inf"), -0.0, 0.0, 1.5, float("inf"), float("nan")]
FLOATS = {"type": "record", "name": "r", "fields": [
    {"name": "k", "type": "long"}, {"name": "v", "type": "long"}, {"name": "o", "type": ["null", "double"]}]}


def float_rank(o: float | None) -> tuple:
    """Arrow's order of a double, nulls first: null, NaN, then the numbers (-0.0 equal to 0.0)."""
    return (0,) if o is None else (1,) if o != o else (2, o)


def float_model(writes) -> dict:
    """Key -> (v, o) of the winner: greatest ordering value; on a tie a delete, else the greater v."""
    best: dict = {}
    for kind, k, o, v in writes:
        rank = (float_rank(o), kind == "delete", v)
        if k not in best or rank > best[k][0]:
            best[k] = (rank, kind, v, o)
    return {k: (v, float_rank(o)) for k, (_, kind, v, o) in best.items() if kind == "upsert"}


@settings(max_examples=30)
@given(st.lists(st.tuples(st.sampled_from(["upsert", "upsert", "delete"]), st.integers(0, 1),
                          st.sampled_from(FLOAT_ORDERS), st.integers(0, 2)), min_size=1, max_size=6),
       st.randoms(use_true_random=False))
def test_float_ordering_values_converge_with_nan_and_signed_zeros(writes, rnd):
    """Across writes, ordering values compare as one write's own rows are sorted (Arrow's
    order, nulls first): NaN above null and below every number, -0.0 equal to 0.0."""
    writes = [(kind, k, 0.0 if kind == "delete" and o is None else o, v) for kind, k, o, v in writes]  # no bare deletes
    repo = DatasetRepository(f"memory://floats-{uuid.uuid4().hex}")
    shuffled = list(writes)
    rnd.shuffle(shuffled)
    ds = repo.create("f", DatasetDescriptor(FLOATS, record_key="k", ordering_field="o"))
    for kind, k, o, v in shuffled:
        if kind == "upsert":
            ds.upsert([{"k": k, "v": v, "o": o}])
        else:
            ds.delete_keys([{"k": k, "o": o}])
    got = {r["k"]: (r["v"], float_rank(r["o"])) for r in ds.reader()}
    assert got == float_model(writes)
    upserts = [w for w in writes if w[0] == "upsert"]
    if upserts:
        batch = repo.create("b", DatasetDescriptor(FLOATS, record_key="k", ordering_field="o"))
        batch.upsert([{"k": k, "v": v, "o": o} for _, k, o, v in upserts])
        assert {r["k"]: (r["v"], float_rank(r["o"])) for r in batch.reader()} == float_model(upserts)
