"""What a pass would do: the plan, its share within a budget, and its description."""

from __future__ import annotations

import pyarrow as pa

from cdkds.catalog import DatasetDescriptor
from tests.catalog.services.conftest import TINY

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "string"}]}


def _small_files(repo, name="d", count=4, props=None):
    ds = repo.create(name, DatasetDescriptor(SCHEMA, properties={**TINY, "services.inline": "false", **(props or {})}))
    for i in range(count):
        with ds.writer() as w:
            w.write({"id": 2 * i, "v": "x" * 10})
            w.write({"id": 2 * i + 1, "v": "y" * 10})
    return ds


def test_a_plan_within_a_budget_keeps_what_it_leaves_and_its_counts(mem_repo):
    ds = _small_files(mem_repo)
    ds.delete("id = 0")  # a tombstone
    whole = ds.services_plan()
    assert whole.groups and whole.tombstoned == 1
    share = whole.within(0)
    assert not share.groups and not share.buckets
    assert share.left and share.tombstoned == whole.tombstoned and share.next_checkpoint == whole.next_checkpoint
    assert (share.expire_log, share.vacuum) == (False, False)
    assert any("nothing to do" in line for line in share.describe())
    assert whole.within(None) is whole and whole.within(whole.bytes).groups == whole.groups


def test_a_pass_reports_the_work_over_its_budget(mem_repo):
    ds = _small_files(mem_repo)
    report = ds.maintain(budget=1)
    assert not report.revisions and report.left, report
    assert "left for later" in report.summary()
    report = ds.maintain()
    assert report.revisions and not report.left


def test_planning_reads_no_file_whose_statistics_show_no_row_expired(mem_repo, clock, monkeypatch):
    """A dataset with a TTL: files whose ordering values are all recent are not read to count
    expired rows (an inline pass plans after every write: it must not read the dataset)."""
    from cdkds.catalog.services import planner
    from tests.catalog.keyed.conftest import user, users_descriptor

    ds = mem_repo.create("k", users_descriptor(ttl="30 days", **{"services.inline": "false"}))
    for r in range(4):
        ds.upsert([user("nz", 10 * r + i, 60 * r) for i in range(5)])
    reads = []
    monkeypatch.setattr(planner, "read_task", lambda *a, **k: reads.append(a) or iter(()))
    clock.ms += 86_400_000  # a day later: nothing is near its expiry
    assert not ds.services_plan().deleted and not reads
    clock.ms += 30 * 86_400_000 + 60 * 60_000  # rows of the first two writes expired, the others' not
    monkeypatch.undo()
    from tests.catalog.services.conftest import patch_clock
    patch_clock(monkeypatch, clock)
    plan = ds.services_plan()
    assert len(plan.deleted) == 4 and {f for f, x in plan.deleted if x == 1.0}


def test_index_buckets_at_the_threshold_are_merged(mem_repo):
    from tests.catalog.keyed.conftest import state, user, users_descriptor

    props = {"services.inline": "false", "index.buckets": "2"}
    ds = mem_repo.create("k", users_descriptor(**props, **{"index.compaction.deltas": "8"}))
    for r in range(4):
        ds.upsert([user("nz", 2 * r, r), user("nz", 2 * r + 1, r)])  # a delta in each bucket a commit
    assert not ds.services_plan().buckets
    mem_repo.update("k", users_descriptor(**props, **{"index.compaction.deltas": "4"}))
    ds.refresh()
    plan = ds.services_plan()
    assert sorted((m.bucket, m.deltas) for m in plan.buckets) == [(0, 4), (1, 4)]
    assert any("index bucket 0 has 4 deltas" in line for line in plan.describe())
    smallest = min(m.bytes for m in plan.buckets)
    assert len(plan.within(smallest).buckets) == 1 and plan.within(smallest).left
    report = ds.maintain()
    assert report.merged_buckets == 2 and not ds.services_plan().buckets
    assert all(f.base for b in (0, 1) for f in ds.snapshot.index_files(b))
    expected = state(ds)
    assert len(expected) == 8 and ds.get_many(list(expected)).num_rows == 8
    assert ds.history()[-1].info["reasons"] == ["index"]


def test_a_pass_takes_the_index_buckets_before_the_data_files(mem_repo):
    """Merging index buckets is cheap and speeds every later keyed write: within a budget
    they are taken first, and the data files wait for the next pass (the data files used to
    come first, and buckets waited for passes that never had budget left)."""
    from tests.catalog.keyed.conftest import state, user, users_descriptor

    props = {"services.inline": "false", "index.buckets": "2", "services.small.files": "2"}
    ds = mem_repo.create("k", users_descriptor(**props, **{"index.compaction.deltas": "8"}))
    for r in range(4):
        ds.upsert([user("nz", 2 * r, r), user("nz", 2 * r + 1, r)])  # a small file and two deltas a commit
    mem_repo.update("k", users_descriptor(**props, **{"index.compaction.deltas": "4"}))  # (a write merged at 4)
    ds.refresh()
    expected = state(ds)
    plan = ds.services_plan()
    assert plan.groups and len(plan.buckets) == 2
    buckets = sum(m.bytes for m in plan.buckets)
    assert buckets + min(g.bytes for g in plan.groups) > buckets  # a budget of the buckets leaves the files
    share = plan.within(buckets)
    assert len(share.buckets) == 2 and not share.groups and any("group(s)" in line for line in share.left)
    report = ds.maintain(budget=buckets)
    assert report.merged_buckets == 2 and report.rewritten_files == 0
    assert ds.services_plan().groups and not ds.services_plan().buckets
    assert state(ds) == expected
    report = ds.maintain(budget=buckets)  # the next pass has the budget for the files
    assert report.rewritten_files and state(ds) == expected


def test_a_whole_plan_makes_objects_only_of_the_files_it_may_rewrite(mem_repo, monkeypatch):
    """Without TTL, the files a whole-dataset plan (``describe``, ``maintain``) looks at one by
    one are picked column-wise: small, deleted past the threshold, or under a tombstone."""
    from cdkds.catalog.log.files import FileTable

    ds = mem_repo.create("big", DatasetDescriptor(SCHEMA, properties={
        "services.inline": "false", "services.file.size": "16384", "services.small.files": "2"}))
    for i in range(6):
        with ds.writer() as w:  # files over 12,288 bytes: not small
            w.write_batch(pa.table({"id": list(range(4000 * i, 4000 * i + 4000)),
                                    "v": [f"{j * 7919 % 100003:08d}-{i}" for j in range(4000)]}))
    with ds.writer() as w:
        w.write({"id": 1000, "v": "a"})  # small
    ds.checkpoint()
    assert sorted(f.size > 12288 for f in ds.files) == [False] + [True] * 6
    ds.delete("id = 4500")  # a tombstone that may match one file
    made = []
    real = FileTable.files
    monkeypatch.setattr(FileTable, "files", lambda self: made.append(len(self)) or real(self))
    plan = mem_repo.load("big").services_plan()
    assert plan.tombstoned == 1
    assert sum(made) == 2, made  # the small file and the one the tombstone applies to, of seven


def test_by_default_a_file_is_rewritten_once_15_percent_of_its_rows_are_deleted(mem_repo):
    """Two 10% upserts of random keys leave ~19% of a file's rows deleted: the default
    threshold rewrites it then, not after a third (a scan pays for every deleted row it
    decodes and for filtering the rest: 1.4-1.7x the same rows compacted before then)."""
    from tests.catalog.keyed.conftest import user, users_descriptor

    ds = mem_repo.create("k", users_descriptor(**{"services.inline": "false"}))
    ds.upsert([user("nz", i, 0) for i in range(100)])
    base = next(iter(ds.files)).path
    ds.upsert([user("nz", i, 1) for i in range(10)])
    assert not ds.services_plan().deleted  # 10%
    ds.upsert([user("nz", i, 2) for i in range(10, 16)])
    assert [f for f, _ in ds.services_plan().deleted] == [base]  # 16%
