"""The services keep every row: random writes run on a dataset with the services at tiny
thresholds and on one with them off give the same rows at every revision of the user's
writes, a service commit shows the rows of the revision before it, and ``check`` finds
nothing wrong."""

from __future__ import annotations

import warnings

from hypothesis import HealthCheck, example, given, settings, strategies as st

from cdkds.catalog import DatasetDescriptor
from cdkds.catalog.errors import ServiceWarning
from tests.catalog.keyed.conftest import USERS, at
from tests.catalog.services.conftest import OFF, TINY, Clock, EPOCH_MS, memory_repo, patch_clock, rows

HOUR_MS = 3_600_000
EXAMPLES = max(10, settings.default.max_examples // 4)  # a quarter of the profile's: each example writes twice
EVENTS = {"type": "record", "name": "E", "fields": [
    {"name": "id", "type": "long"}, {"name": "v", "type": ["null", "string"], "default": None}]}

plain_ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 30)),
    st.tuples(st.just("overwrite"), st.integers(0, 20)),
    st.tuples(st.just("delete"), st.sampled_from(["<", ">=", "="]), st.integers(0, 60)),
    st.tuples(st.just("add")),
    st.tuples(st.just("rename")),
    st.tuples(st.just("tick"), st.integers(1, 3 * HOUR_MS)),
), min_size=1, max_size=8)

keys = st.tuples(st.sampled_from(["nz", "au"]), st.integers(0, 11))
keyed_ops = st.lists(st.one_of(
    st.tuples(st.just("upsert"), st.lists(st.tuples(keys, st.integers(0, 5 * HOUR_MS)), min_size=1, max_size=12)),
    st.tuples(st.just("delete_keys"), st.lists(keys, min_size=1, max_size=6)),
    st.tuples(st.just("delete"), st.integers(0, 11)),
    st.tuples(st.just("overwrite"), st.lists(keys, max_size=6)),
    st.tuples(st.just("tick"), st.integers(1, 3 * HOUR_MS)),
    st.tuples(st.just("add")),
    st.tuples(st.just("rename")),
), min_size=1, max_size=8)


def _no_service_warning(caught: list) -> None:
    failures = [str(w.message) for w in caught if issubclass(w.category, ServiceWarning)]
    assert not failures, failures


def _side_by_side(repo, served, plain, ops, now, write_both, sort_by, keyed=False):
    """Run ``ops`` on both datasets (``tick`` moves the clock; any other, ``write_both(op)``),
    then compare them at every revision of the user's writes."""
    user_revisions = [(0, 0)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for op in ops:
            if op[0] == "tick":
                now.ms += op[1]
            else:
                write_both(op)
                user_revisions.append((served.version, plain.version))
    _no_service_warning(caught)
    _assert_rows_kept(repo, "on", "off", sorted(set(user_revisions)), sort_by, keyed=keyed)


def _assert_rows_kept(repo, served, plain, user_revisions, sort_by, keyed=False) -> None:
    """Each user revision holds the same rows on both datasets (read, and on a keyed dataset
    looked up by key); every revision of the serviced one holds the rows of the last user
    revision at or before it; both check clean."""
    by_revision = dict(user_revisions)
    for on, off in user_revisions:
        expected = rows(repo.load(plain, version=off), sort_by)
        ds = repo.load(served, version=on)
        assert rows(ds, sort_by) == expected, f"revision {on} (services on) differs from {off} (services off)"
        if keyed:
            keys = [(t, u) for t in ("nz", "au") for u in range(12)]
            found = sorted(ds.get_many(keys).to_pylist(), key=lambda r: tuple(r[k] for k in sort_by))
            assert found == expected, f"revision {on}: the record index finds other rows than a scan"
    latest = repo.load(served)
    last_user = 0
    for revision in range(latest.version + 1):
        if revision in by_revision:
            last_user = revision
            continue
        ds = repo.load(served, version=revision)
        assert ds.history()[revision].operation == "compact" and ds.history()[revision].info["service"] == "inline"
        assert rows(ds, sort_by) == rows(repo.load(served, version=last_user), sort_by), \
            f"the service commit {revision} changed the rows of revision {last_user}"
    for name in (served, plain):
        report = repo.load(name).check(read_data=True)
        assert report.ok, report.problems


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=plain_ops, partitioned=st.booleans(), fmt=st.sampled_from(["parquet", "avro"]), ttl=st.booleans())
@example(ops=[("append", 5), ("tick", HOUR_MS), ("append", 5), ("tick", 3 * HOUR_MS // 2)], partitioned=False,
         fmt="parquet", ttl=True)  # a bin-packing must not make rows outlive a commit-time ttl
def test_plain_datasets_keep_their_rows(inline_services, ops, partitioned, fmt, ttl):
    """(With ``ttl``, rows expire 2 hours after their commit.)"""
    from _pytest.monkeypatch import MonkeyPatch

    now = Clock(EPOCH_MS)
    with MonkeyPatch.context() as mp:
        patch_clock(mp, now)
        _plain_writes(ops, partitioned, fmt, ttl, now)


def _plain_writes(ops, partitioned, fmt, ttl, now):
    repo = memory_repo()
    strategy = "hash(id, 2)" if partitioned else None
    props = {"ttl": "2h"} if ttl else {}
    served = repo.create("on", DatasetDescriptor(EVENTS, format=fmt, partition_strategy=strategy,
                                                 properties={**TINY, **props}))
    plain = repo.create("off", DatasetDescriptor(EVENTS, format=fmt, partition_strategy=strategy,
                                                 properties={**OFF, **props}))
    next_id, added, v_name = 0, 0, "v"

    def write_both(op):
        nonlocal next_id, added, v_name
        for ds in (served, plain):
            if op[0] in ("append", "overwrite"):
                with ds.writer(mode=op[0]) as w:
                    for i in range(op[1]):
                        w.write({"id": next_id + i, v_name: None if i % 3 == 0 else f"v{i % 4}"})
            elif op[0] == "delete":
                ds.delete(f"id {op[1]} {op[2]}")
            elif op[0] == "add":
                ds.alter().add(f"c{added}", "long", default=added).commit()
            else:
                ds.alter().rename(v_name, f"{v_name}x").commit()
        if op[0] in ("append", "overwrite"):
            next_id += op[1]
        added += op[0] == "add"
        v_name = f"{v_name}x" if op[0] == "rename" else v_name

    _side_by_side(repo, served, plain, ops, now, write_both, "id")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=keyed_ops, fmt=st.sampled_from(["parquet", "avro"]),
       strategy=st.sampled_from(["identity(tenant)", "hash(userId, 2)", None]))
def test_keyed_datasets_with_ttl_keep_their_rows(inline_services, ops, fmt, strategy):
    from _pytest.monkeypatch import MonkeyPatch

    now = Clock(EPOCH_MS)
    with MonkeyPatch.context() as mp:
        patch_clock(mp, now)
        repo = memory_repo()

        def descriptor(props):
            return DatasetDescriptor(USERS, record_key=["tenant", "userId"], ordering_field="updatedAt",
                                     partition_strategy=strategy, format=fmt,
                                     properties={"index.buckets": "2", "index.compaction.deltas": "2",
                                                 "ttl": "4h", **props})

        served, plain = repo.create("on", descriptor(TINY)), repo.create("off", descriptor(OFF))
        added, email = 0, "email"

        def write_both(op):
            nonlocal added, email
            for ds in (served, plain):
                if op[0] == "upsert":
                    ds.upsert([{"tenant": t, "userId": u, email: f"{t}{u}@{dt}", "score": dt,
                                "updatedAt": at((now.ms - EPOCH_MS + dt) / 1000)} for (t, u), dt in op[1]])
                elif op[0] == "delete_keys":
                    ds.delete_keys(op[1])
                elif op[0] == "delete":
                    ds.delete(f"userId = {op[1]}")
                elif op[0] == "overwrite":
                    with ds.writer(mode="overwrite") as w:
                        for t, u in dict.fromkeys(op[1]):
                            w.write({"tenant": t, "userId": u, "updatedAt": at((now.ms - EPOCH_MS) / 1000)})
                elif op[0] == "rename":
                    ds.alter().rename(email, f"{email}x").commit()
                else:
                    ds.alter().add(f"c{added}", "long", default=added).commit()
            added += op[0] == "add"
            email = f"{email}x" if op[0] == "rename" else email

        _side_by_side(repo, served, plain, ops, now, write_both, ["tenant", "userId"], keyed=True)
