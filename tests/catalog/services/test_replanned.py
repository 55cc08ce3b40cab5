"""A user's write that lost a race to a service's commit is planned again and commits
(:class:`ConcurrentRewriteError` and :func:`cdkds.catalog.log.conflicts.replanned`): each
write is planned on a stale Dataset object while another object commits a service pass."""

from __future__ import annotations

import pytest

from cdkds.catalog import DatasetDescriptor
from tests.catalog.keyed.conftest import state, user, users_descriptor
from tests.catalog.services.conftest import TINY, rows

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "string"}]}
PROPS = {**TINY, "services.inline": "false"}  # passes run only when a test calls maintain()


@pytest.fixture
def plain(mem_repo):
    ds = mem_repo.create("d", DatasetDescriptor(SCHEMA, properties=PROPS))
    for i in range(3):
        with ds.writer() as w:
            for j in range(5):
                w.write({"id": 10 * i + j, "v": f"v{j}"})
    return ds


@pytest.fixture
def keyed(mem_repo):
    ds = mem_repo.create("k", users_descriptor(**PROPS, **{"index.compaction.deltas": "2"}))
    for i in range(3):
        ds.upsert([user("nz", 10 * i + j, i, f"{i}.{j}") for j in range(5)])
    ds.delete_keys([("nz", 1)])
    return ds


def _service_pass(repo, name):
    """A service pass committed by another object; returns its revisions."""
    report = repo.load(name).maintain()
    assert report.revisions, report
    return report.revisions


def _ops(ds):
    return [h.operation for h in ds.history()]


def test_a_delete_planned_before_a_service_pass(mem_repo, plain):
    expected = [r for r in rows(plain) if not r["id"] % 2 == 0 or r["id"] > 12]
    _service_pass(mem_repo, "d")
    revision = plain.delete("id <= 12 and v in ('v0', 'v2', 'v4')")
    assert revision == plain.version and _ops(plain)[-2:] == ["compact", "delete"]
    assert rows(mem_repo.load("d")) == expected


@pytest.mark.parametrize("mode", ["overwrite", "dynamic"])
def test_an_overwrite_planned_before_a_service_pass(mem_repo, plain, mode):
    writer = plain.writer(mode=mode)
    writer.write({"id": 99, "v": "new"})
    _service_pass(mem_repo, "d")
    writer.close()
    assert rows(mem_repo.load("d")) == [{"id": 99, "v": "new"}]


def test_a_writer_flush_planned_before_a_service_pass(mem_repo, plain):
    writer = plain.writer(mode="overwrite")
    writer.write({"id": 98, "v": "first"})
    _service_pass(mem_repo, "d")
    writer.flush()
    writer.write({"id": 99, "v": "second"})
    writer.close()
    assert rows(mem_repo.load("d")) == [{"id": 98, "v": "first"}, {"id": 99, "v": "second"}]


def test_an_alter_planned_before_a_service_pass(mem_repo, plain):
    before = rows(plain)
    update = plain.alter().rename("v", "w").add("c", "long", default=7)
    _service_pass(mem_repo, "d")
    update.commit()
    assert rows(mem_repo.load("d")) == [{"id": r["id"], "w": r["v"], "c": 7} for r in before]


def test_a_descriptor_update_planned_before_a_service_pass(mem_repo, plain):
    descriptor = DatasetDescriptor(SCHEMA, properties={**PROPS, "checkpoint.interval": "3"})
    _service_pass(mem_repo, "d")
    plain.update_descriptor(descriptor)
    assert mem_repo.load("d").descriptor.properties["checkpoint.interval"] == "3"


def test_a_compaction_planned_before_a_service_pass(mem_repo, plain):
    before = rows(plain)
    _service_pass(mem_repo, "d")
    plain.compact()
    assert rows(mem_repo.load("d")) == before


def test_keyed_writes_planned_before_a_service_pass(mem_repo, keyed):
    expected = state(keyed)
    del expected[("nz", 12)]
    _service_pass(mem_repo, "k")
    keyed.delete("userId = 12")
    assert state(mem_repo.load("k")) == expected

    _service_pass_after = mem_repo.load("k")
    _service_pass_after.upsert([user("nz", 40, 9, "x")])  # deltas enough for another pass
    stale = mem_repo.load("k")
    _service_pass(mem_repo, "k")
    stale.delete_keys([("nz", 0)])
    stale.upsert([user("nz", 2, 9, "updated")])
    got = state(mem_repo.load("k"))
    assert ("nz", 0) not in got and got[("nz", 2)][0] == "updated" and got[("nz", 40)][0] == "x"


def test_an_index_rebuild_planned_before_a_service_pass(mem_repo, keyed):
    expected = state(keyed)
    _service_pass(mem_repo, "k")
    keyed.rebuild_index()
    rebuilt = mem_repo.load("k")
    assert state(rebuilt) == expected and rebuilt.get(("nz", 12))["email"] == "1.2"
    assert rebuilt.check(read_data=True).ok


def test_a_keyed_overwrite_planned_before_a_service_pass(mem_repo, keyed):
    writer = keyed.writer(mode="overwrite")
    writer.write(user("au", 1, 5, "only"))
    _service_pass(mem_repo, "k")
    writer.close()
    assert state(mem_repo.load("k")) == {("au", 1): ("only", None, user("au", 1, 5)["updatedAt"])}


def test_a_keyed_streaming_batch_planned_before_a_service_pass(mem_repo):
    """A keyed writer's first commit carrying a streaming batch's SetTransaction, whose index
    merge loses to the service's."""
    from cdkds.catalog.log.actions import SetTransaction

    ds = mem_repo.create("s", users_descriptor(**{**PROPS, "index.compaction.deltas": "2", "index.buckets": "1",
                                                  "services.file.size": "64k"}))
    for r in range(3):  # the bucket: a base and one delta; both commits below merge it
        ds.upsert([user("nz", r, r)])
    writer = ds.writer(extra_actions=[SetTransaction("query", 7)])
    writer.write(user("nz", 50, 9, "streamed"))
    _service_pass(mem_repo, "s")
    writer.close()
    latest = mem_repo.load("s")
    assert latest.transaction_version("query") == 7 and latest.get(("nz", 50))["email"] == "streamed"
    assert set(state(latest)) == {("nz", 0), ("nz", 1), ("nz", 2), ("nz", 50)}
