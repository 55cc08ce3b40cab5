"""The inline pass after a write, seen from the user's Dataset object: it keeps showing its
write's revision, its next write starts from the services' commit, and a failing pass is
a warning, never the write's failure."""

from __future__ import annotations

import datetime as dt

import pytest

from cdkds.catalog import DatasetDescriptor
from cdkds.catalog.errors import ServiceWarning, StorageError
from tests.catalog.keyed.conftest import state, user, users_descriptor
from tests.catalog.services.conftest import TINY, rows, service_revisions

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "string"}]}


def _append(ds, ids):
    with ds.writer() as w:
        for i in ids:
            w.write({"id": i, "v": f"v{i}"})
    return ds.version


def test_the_users_object_after_an_inline_pass(mem_repo, inline_services):
    ds = mem_repo.create("d", DatasetDescriptor(SCHEMA, properties=TINY))
    _append(ds, range(5))
    written = _append(ds, range(5, 10))
    assert ds.version == written and ds.last_services.revisions == (written + 1,)
    assert [h.operation for h in ds.history()][-2:] == ["append", "compact"]
    assert ds.history()[-1].info["service"] == "inline" and mem_repo.load("d").version == written + 1
    assert rows(ds) == rows(mem_repo.load("d")) == [{"id": i, "v": f"v{i}"} for i in range(10)]
    third = _append(ds, range(10, 15))  # planned on the services' commit: no race, no replan
    assert third == written + 2
    assert ds.delete("id = 3") > third
    assert [r["id"] for r in rows(mem_repo.load("d"))] == [i for i in range(15) if i != 3]
    assert service_revisions(ds) and mem_repo.load("d").check(read_data=True).ok
    ds.refresh()
    assert ds.version == mem_repo.load("d").version


def test_a_keyed_write_reports_its_inline_pass(mem_repo, inline_services):
    ds = mem_repo.create("k", users_descriptor(**TINY, **{"index.compaction.deltas": "2"}))
    first = ds.upsert([user("nz", i, 0) for i in range(5)])
    assert first.services is not None and not first.services.revisions
    second = ds.upsert([user("nz", i, 1, "again") for i in range(3)])
    assert second.revision == ds.version and second.services.revisions
    assert second.services.revisions[0] == second.revision + 1
    third = ds.delete_keys([("nz", 4)])
    assert third.revision > second.services.revisions[-1]
    assert set(state(mem_repo.load("k"))) == {("nz", i) for i in range(4)}


def test_inline_services_off_by_property(mem_repo, inline_services):
    ds = mem_repo.create("d", DatasetDescriptor(SCHEMA, properties={**TINY, "services.inline": "false"}))
    for k in range(3):
        _append(ds, [k])
    assert ds.last_services is None and not service_revisions(ds)
    mem_repo.update("d", DatasetDescriptor(SCHEMA, properties=TINY))  # switched on
    ds.refresh()
    _append(ds, [9])
    assert ds.last_services.revisions and service_revisions(ds)


def test_a_failing_inline_pass_is_a_warning_and_leaves_nothing(tmp_path, inline_services, monkeypatch):
    from cdkds.catalog import DatasetRepository
    from cdkds.catalog.maintenance import rewrite

    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("d", DatasetDescriptor(SCHEMA, properties=TINY))
    _append(ds, range(5))

    class FailingWriter(rewrite.PartitionedWriter):
        def _close_file(self, key):
            super()._close_file(key)  # a file is written: it must go
            raise StorageError("the store went away")
    monkeypatch.setattr(rewrite, "PartitionedWriter", FailingWriter)
    with pytest.warns(ServiceWarning, match="'d'.*the store went away.*the write stands"):
        written = _append(ds, range(5, 10))
    assert ds.last_services.gave_up and repo.load("d").version == written
    assert [r["id"] for r in rows(repo.load("d"))] == list(range(10))
    assert repo.load("d").check(read_data=True).ok
    assert ds.vacuum(dt.timedelta(0), force=True) == []  # the pass removed what it wrote
