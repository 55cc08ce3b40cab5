"""Writers planned on a partition strategy that changed before they committed: an append
rebases (its files keep the spec they were written with), a keyed write is planned again
on the new layout, anything else that read the layout fails with CommitConflictError
naming the change, nothing of it committed."""

from __future__ import annotations

import multiprocessing
import time

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import CommitConflictError

SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "writer", "type": "long"}, {"name": "g", "type": "string"}]}
COMMITS_EACH = 4


def rows(first: int, count: int, writer: int = 0) -> pa.Table:
    ids = list(range(first, first + count))
    return pa.table({"id": ids, "writer": [writer] * count, "g": ["abc"[i % 3] for i in ids]})


def ids(ds, where: str | None = None) -> list[int]:
    return sorted(ds.to_table(where=where).column("id").to_pylist())


def test_an_append_planned_before_a_partition_change_rebases_with_its_spec():
    repo = DatasetRepository("memory://spec-races-append")
    repo.create("t", DatasetDescriptor(SCHEMA, "identity(g)"))
    stale, other = repo.load("t"), repo.load("t")
    writer = stale.writer()
    writer.write_batch(rows(0, 30))  # files written on spec 0
    other.alter().partition_by("hash(id, 4)").commit()
    assert writer.close() == 2  # rebased over revision 1
    ds = repo.load("t")
    assert ds.descriptor.partition_spec_id == 1
    assert {f.spec_id for f in ds.files} == {0} and all(set(f.partition) == {"g_copy"} for f in ds.files)
    assert ids(ds) == list(range(30))
    assert ids(ds, "g = 'a'") == [i for i in range(30) if i % 3 == 0]
    assert len(ds.plan(where="g = 'a'").files) == 1  # pruned by its own spec
    with ds.writer() as w:
        w.write_batch(rows(30, 10))
    assert {f.spec_id for f in repo.load("t").files} == {0, 1}


@pytest.mark.parametrize("mode", ["overwrite", "overwrite_partitions"])
def test_an_overwrite_planned_before_a_partition_change_fails_naming_it(mode):
    repo = DatasetRepository(f"memory://spec-races-{mode}")
    ds = repo.create("t", DatasetDescriptor(SCHEMA, "identity(g)"))
    with ds.writer() as w:
        w.write_batch(rows(0, 30))
    stale, other = repo.load("t"), repo.load("t")
    writer = stale.writer(mode=mode)
    writer.write_batch(rows(100, 3))
    other.alter().partition_by("hash(id, 4)").commit()
    with pytest.raises(CommitConflictError, match=r"changed the partition strategy to hash\(id, 4\) \(partition spec 1"):
        writer.close()
    after = repo.load("t")
    assert after.version == 2 and ids(after) == list(range(30))


def test_a_keyed_write_planned_before_a_partition_change_is_planned_again_on_the_new_one():
    repo = DatasetRepository("memory://spec-races-keyed")
    ds = repo.create("t", DatasetDescriptor(SCHEMA, "identity(g)", record_key="id"))
    ds.upsert(rows(0, 10))
    stale, other = repo.load("t"), repo.load("t")
    writer = stale.writer()
    writer.write_batch(rows(20, 10, writer=1))
    other.alter().partition_by("hash(id, 4)").commit()
    assert writer.close() == 3  # its keyed commit conflicted, and was planned again on revision 2
    ds = repo.load("t")
    assert {f.spec_id for f in ds.files if f.revision == 3} == {1}
    assert ids(ds) == [*range(10), *range(20, 30)]
    assert ds.get(25)["writer"] == 1 and ds.get(5)["writer"] == 0


def _stale_writer(url, index, barrier, changed):
    barrier.wait()
    for k in range(COMMITS_EACH):
        if k == COMMITS_EACH - 1:
            changed.wait(120)  # the last append of each writer lands after the changes, surely
        ds = DatasetRepository(url).load("t", version=0)  # planned on the first strategy
        with ds.writer() as w:
            w.write_batch(rows((index * COMMITS_EACH + k) * 10, 10, index))


@pytest.mark.slow
def test_appends_of_other_processes_racing_partition_changes_all_land(tmp_path):
    url = f"file://{tmp_path}/lake"
    repo = DatasetRepository(url)
    repo.create("t", DatasetDescriptor(SCHEMA, "identity(g)"))
    context = multiprocessing.get_context("spawn")
    writers = 3
    barrier, changed = context.Barrier(writers + 1), context.Event()
    processes = [context.Process(target=_stale_writer, args=(url, i, barrier, changed)) for i in range(writers)]
    for p in processes:
        p.start()
    barrier.wait()
    while repo.load("t").version < 2:  # appends are landing
        time.sleep(0.01)
    for strategy in ("hash(id, 4)", "identity(g), hash(writer, 2)"):
        repo.load("t").alter().partition_by(strategy).commit()
    changed.set()
    for p in processes:
        p.join(300)
    assert [p.exitcode for p in processes] == [0] * writers
    ds = repo.load("t")
    assert ds.version == writers * COMMITS_EACH + 2 and ds.descriptor.partition_spec_id == 2
    operations = [h.operation for h in ds.history()]
    assert "append" in operations[operations.index("alter") + 1:]  # appends planned on revision 0 landed after
    assert {f.spec_id for f in ds.files} == {0}  # each kept the spec it was written with
    everything = list(range(writers * COMMITS_EACH * 10))
    assert ids(ds) == everything
    assert ids(ds, "g = 'b'") == [i for i in everything if i % 3 == 1]
    ds.compact()
    assert {f.spec_id for f in ds.files} == {2} and ids(ds) == everything
