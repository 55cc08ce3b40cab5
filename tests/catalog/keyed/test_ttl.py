"""TTL: expired rows are invisible to every read from the moment they expire."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, strategies as st

from cdkds.catalog import DatasetDescriptor
from cdkds.catalog.expressions import bind, filter_batch
from cdkds.catalog.keyed.ttl import TimeToLive
from cdkds.catalog.log import commit as log_commit
from tests.catalog.keyed.conftest import EPOCH, USERS, at, state, user, users_descriptor

DAY_MS = 86_400_000
EPOCH_MS = int(EPOCH.timestamp() * 1000)


@pytest.fixture
def clock(monkeypatch):
    now = {"ms": EPOCH_MS}
    import importlib
    import sys

    monkeypatch.setattr(log_commit, "clock", lambda: now["ms"])
    for name in ("cdkds.catalog.keyed.operations", "cdkds.catalog.maintenance.rewrite", "cdkds.catalog.read.scan",
                 "cdkds.catalog.dataset", "cdkds.catalog.maintenance.compaction"):
        module = sys.modules.get(name) or importlib.import_module(name)
        monkeypatch.setattr(module, "clock", lambda: now["ms"])
    return now


def test_rows_expire_ttl_after_their_ordering_value(repo, clock):
    ds = repo.create("users", users_descriptor(ttl="1 day"))
    ds.upsert([user("nz", 1, 0, "old"), user("nz", 2, 43_200, "newer")])  # at 0 h and 12 h
    clock["ms"] = EPOCH_MS + DAY_MS + 1
    assert list(state(ds)) == [("nz", 2)]
    assert ds.get(("nz", 1)) is None and ds.get(("nz", 2)) is not None
    assert ds.to_table().num_rows == 1
    r = ds.upsert([user("nz", 1, 86_400, "again")])  # an expired key: an insert
    assert (r.inserted, r.updated) == (1, 0)
    assert ds.get(("nz", 1))["email"] == "again"
    clock["ms"] = EPOCH_MS + 3 * DAY_MS
    assert state(ds) == {}
    ds.compact()
    assert ds.snapshot.row_count == 0


def test_a_ttl_field_holds_each_rows_expiry(repo, clock):
    schema = {**USERS, "fields": [*USERS["fields"], {"name": "expiresAt", "type": [
        "null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None}]}
    ds = repo.create("s", DatasetDescriptor(schema, record_key=["tenant", "userId"], ordering_field="updatedAt",
                                            properties={"ttl.field": "expiresAt"}))
    ds.upsert([{**user("nz", 1, 0), "expiresAt": at(10)}, {**user("nz", 2, 0), "expiresAt": None}])
    clock["ms"] = EPOCH_MS + 11_000
    assert [r["userId"] for r in ds.reader()] == [2]
    assert ds.get(("nz", 1)) is None


def test_commit_time_ttl_without_an_ordering_field(repo, clock):
    ds = repo.create("s", users_descriptor(ordering=False, ttl="1h"))
    ds.upsert([user("nz", 1, 0)])
    clock["ms"] = EPOCH_MS + 1800_000
    ds.upsert([user("nz", 2, 0)])
    clock["ms"] = EPOCH_MS + 3600_000 + 1
    assert list(state(ds)) == [("nz", 2)]
    assert ds.plan().files == [f for f in ds.snapshot.files.values() if f.timestamp >= EPOCH_MS + 1800_000]
    assert ds.upsert([user("nz", 1, 0)]).inserted == 1


kinds = st.sampled_from(["timestamp-millis", "timestamp-micros", "date"])


@given(kinds, st.integers(1, 10 * DAY_MS), st.booleans(),
       st.lists(st.tuples(st.integers(0, 30 * DAY_MS), st.one_of(st.none(), st.integers(0, 30 * DAY_MS))),
                min_size=1, max_size=20),
       st.integers(0, 40 * DAY_MS))
def test_scans_and_the_index_agree_on_what_expired(kind, ttl_ms, with_field, rows, now):
    fields = [{"name": "k", "type": "long"}, {"name": "o", "type": {"type": "int" if kind == "date" else "long",
                                                                      "logicalType": kind}}]
    props = {"ttl": f"{ttl_ms / 1000}s"}
    if with_field:
        fields.append({"name": "e", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None})
        props["ttl.field"] = "e"
    descriptor = DatasetDescriptor({"type": "record", "name": "r", "fields": fields}, record_key="k",
                                   ordering_field="o", properties=props)
    schema = descriptor.arrow_schema
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    columns = {"k": list(range(len(rows))),
               "o": [(epoch + dt.timedelta(milliseconds=o)).date() if kind == "date" else
                     epoch + dt.timedelta(milliseconds=o) for o, _ in rows]}
    if with_field:
        columns["e"] = [None if e is None else epoch + dt.timedelta(milliseconds=e) for _, e in rows]
    batch = pa.RecordBatch.from_pydict(columns, schema=schema)
    ttl = TimeToLive.of(descriptor)
    visible = filter_batch(batch, bind(ttl.visible(now), descriptor.fields)).column("k").to_pylist()
    alive = ttl.alive(ttl.expiry(batch), np.zeros(len(rows), np.int64), now)
    assert visible == [k for k, a in zip(columns["k"], alive) if a]


def test_compaction_rewrites_only_files_that_may_hold_expired_rows(repo, clock):
    ds = repo.create("users", users_descriptor(ttl="1 day"))
    ds.upsert([user("nz", 1, 0)])
    ds.compact()
    version = ds.version
    assert ds.compact() is None and ds.version == version  # nothing expired: nothing to rewrite
    clock["ms"] = EPOCH_MS + 2 * DAY_MS
    assert ds.compact() is not None and ds.snapshot.row_count == 0
