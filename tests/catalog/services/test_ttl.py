"""TTL and the services: a rewrite must not change when a row expires. Where ``ttl`` counts
from a row's commit time (no ordering field), moving a live row into a new file would
make the rewrite's commit its commit time, so such files are left as they are until their
rows have expired (then they go without a rewrite of anything)."""

from __future__ import annotations

import pytest

from cdkds.catalog import DatasetDescriptor
from cdkds.catalog.errors import CdkdsError
from cdkds.catalog.maintenance.rewrite import rewrite
from tests.catalog.keyed.conftest import state, user, users_descriptor
from tests.catalog.services.conftest import EPOCH_MS, TINY

MINUTE = 60_000
SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "string"}]}


def _plain(repo, props):
    return repo.create("p", DatasetDescriptor(SCHEMA, properties={"ttl": "1h", **props}))


def _keyed(repo, props):
    return repo.create("k", users_descriptor(ordering=False, ttl="1h", **props))


def _write(ds, i):
    if ds.descriptor.record_key:
        ds.upsert([user("nz", i, 0), user("nz", i + 100, 0)])
    else:
        with ds.writer() as w:
            w.write({"id": i, "v": "x"})
            w.write({"id": i + 100, "v": "y"})


def _ids(ds):
    if ds.descriptor.record_key:
        return sorted(k[1] for k in state(ds))
    return sorted(r["id"] for r in ds.reader())


@pytest.mark.parametrize("make", [_plain, _keyed])
def test_inline_services_keep_commit_time_expiry(mem_repo, clock, inline_services, make):
    ds = make(mem_repo, TINY)
    _write(ds, 0)
    clock.ms += 30 * MINUTE
    _write(ds, 1)
    ds.delete("id = 100" if not ds.descriptor.record_key else "userId = 100")
    ds.maintain()
    assert any("2 file(s) whose rows' ttl counts from their commit time" in line
               for line in mem_repo.load(ds.name).services_plan().describe())
    clock.ms = EPOCH_MS + 61 * MINUTE  # the rows of the first write expired, those of the second live
    assert _ids(mem_repo.load(ds.name)) == [1, 101]
    if ds.descriptor.record_key:
        assert mem_repo.load("k").get_many([("nz", i) for i in (0, 1, 100, 101)]).num_rows == 2
    clock.ms = EPOCH_MS + 91 * MINUTE
    report = mem_repo.load(ds.name).maintain()  # every file expired now: they go
    assert report.revisions and not mem_repo.load(ds.name).files and _ids(mem_repo.load(ds.name)) == []
    assert mem_repo.load(ds.name).check(read_data=True).ok


@pytest.mark.parametrize("make", [_plain, _keyed])
def test_compaction_keeps_commit_time_expiry(mem_repo, clock, make):
    ds = make(mem_repo, {})
    _write(ds, 0)
    clock.ms += 30 * MINUTE
    _write(ds, 1)
    ds.compact()
    clock.ms = EPOCH_MS + 61 * MINUTE
    assert _ids(mem_repo.load(ds.name)) == [1, 101]


def test_a_rewrite_refuses_to_move_rows_whose_expiry_it_would_reset(mem_repo, clock):
    ds = _plain(mem_repo, {})
    _write(ds, 0)
    with pytest.raises(CdkdsError, match="'p'.*commit time"):
        rewrite(ds, ds.files)
    assert mem_repo.load("p").version == 1


@pytest.mark.parametrize("keyed", [False, True])
def test_rows_expiring_during_a_pass(mem_repo, clock, monkeypatch, keyed):
    """The pass plans before rows expire and rewrites after: it drops them, as every read
    at that moment does, and lookups agree."""
    from cdkds.catalog import DatasetDescriptor as Descriptor
    from cdkds.catalog.services import runner
    from tests.catalog.keyed.conftest import USERS

    props = {**TINY, "services.inline": "false", "services.file.size": "64k", "ttl": "1h"}
    if keyed:
        ds = mem_repo.create("x", users_descriptor(**props))
    else:
        ds = mem_repo.create("x", Descriptor(USERS, ordering_field="updatedAt", properties=props))
    for r, t in enumerate((0, 1800, 1800)):
        rows = [user("nz", 10 * r + i, t) for i in range(4)]
        if keyed:
            ds.upsert(rows)
        else:
            with ds.writer() as w:
                for row in rows:
                    w.write(row)
    clock.ms = EPOCH_MS + 3600_000 - 1  # nothing expired yet
    plan = runner.plan_services

    def plan_then_expire(*args, **kwargs):
        planned = plan(*args, **kwargs)
        clock.ms = EPOCH_MS + 3600_000 + 1  # the rows of the first write expire now
        return planned
    monkeypatch.setattr(runner, "plan_services", plan_then_expire)
    before = mem_repo.load("x").version
    report = mem_repo.load("x").maintain()
    assert report.revisions
    expected = [(r["tenant"], r["userId"]) for r in sorted(mem_repo.load("x", version=before).reader(),
                                                             key=lambda r: r["userId"])]
    assert [k for k in expected] == [("nz", i) for i in range(10, 14)] + [("nz", i) for i in range(20, 24)]
    after = mem_repo.load("x")
    assert sorted((r["tenant"], r["userId"]) for r in after.reader()) == expected
    assert after.snapshot.row_count == 8  # the rewrite dropped the rows that expired while it ran
    if keyed:
        assert after.get_many([("nz", i) for i in range(24)]).num_rows == 8
    assert after.check(read_data=True).ok
