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
