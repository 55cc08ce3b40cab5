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
    they are taken before the data files but for room kept for the first data group (the
    data files used to come first, and buckets waited for passes that never had budget left)."""
    from tests.catalog.keyed.conftest import state, user, users_descriptor

    props = {"services.inline": "false", "index.buckets": "2", "services.small.files": "2"}
    ds = mem_repo.create("k", users_descriptor(**props, **{"index.compaction.deltas": "8"}))
    for r in range(4):  # a small file in each of two partitions and a delta in each bucket a commit
        ds.upsert([user("nz", 4 * r, r), user("nz", 4 * r + 2, r), user("au", 4 * r + 1, r), user("au", 4 * r + 3, r)])
    mem_repo.update("k", users_descriptor(**props, **{"index.compaction.deltas": "4"}))  # (a write merged at 4)
    ds.refresh()
    expected = state(ds)
    plan = ds.services_plan()
    assert len(plan.groups) == 2 and len(plan.buckets) == 2
    buckets = sum(m.bytes for m in plan.buckets)
    first, second = (g.bytes for g in plan.groups)
    share = plan.within(buckets + first)
    assert len(share.buckets) == 2 and share.groups == plan.groups[:1] and any("1 group(s)" in line for line in share.left)
    share = plan.within(first)  # room for the first group only
    assert share.groups == plan.groups[:1] and not share.buckets
    report = ds.maintain(budget=buckets + first)
    assert report.merged_buckets == 2 and report.rewritten_files == 4
    assert len(ds.services_plan().groups) == 1 and not ds.services_plan().buckets
    assert state(ds) == expected
    report = ds.maintain(budget=buckets + first)  # the next pass takes the other group
    assert report.rewritten_files == 4 and state(ds) == expected and not ds.services_plan().groups


def test_buckets_due_at_every_pass_do_not_starve_the_data_files(mem_repo, inline_services):
    """Inline passes with a budget under the index's bytes and buckets due after every
    write: each pass still keeps room for the first data group, so a partition's small
    files do not pile up (they did while buckets came first without it)."""
    import numpy as np
    from tests.catalog.keyed.conftest import state, users_descriptor

    props = {"index.compaction.deltas": "1", "services.small.files": "2", "services.file.size": "1m"}
    ds = mem_repo.create("k", users_descriptor(**props, **{"services.inline": "false"}))

    def rows(tenant, ids, t):
        return pa.table({"tenant": [tenant] * len(ids), "userId": pa.array(ids, pa.int64()),
                         "email": [f"u{i}@x" for i in ids], "score": pa.array(ids, pa.int64()),
                         "updatedAt": pa.array(np.full(len(ids), 1_767_225_600_000 + t), pa.timestamp("ms", tz="UTC"))})

    ds.upsert(rows("b", np.arange(30_000), 0))
    ds.upsert(rows("a", np.arange(5_000), 0))
    budget = int(0.8 * sum(e.size for e in ds.snapshot.index.values()))
    mem_repo.update("k", users_descriptor(**props, **{"services.budget": str(budget)}))  # inline passes
    ds.refresh()
    overfull = 0
    for i in range(6):
        plan_before = ds.upsert(rows("a", np.arange(10 * i, 10 * i + 50), 1 + i)).services
        assert plan_before is not None and plan_before.rewritten_files, plan_before
        overfull += any("index bucket" in line for line in plan_before.left)  # buckets did not all fit
    assert overfull >= 3
    assert len(ds.snapshot.files) <= 3
    assert len(state(ds)) == 35_000


def test_a_rewrite_that_moves_most_of_a_bucket_merges_it(mem_repo):
    """The entries of a bucket's moved rows, as a delta, would nearly double what lookups
    read: when they are half its entries or more, the rewrite gives the bucket a new base;
    a rewrite moving a few of its rows leaves a delta."""
    from tests.catalog.keyed.conftest import state, user, users_descriptor

    props = {"services.inline": "false", "index.buckets": "1", "services.small.files": "2",
             "index.compaction.deltas": "8"}
    ds = mem_repo.create("k", users_descriptor(**props))
    ds.upsert([user("nz", i, 0) for i in range(40)])
    ds.upsert([user("au", i, 0) for i in range(40)])
    ds.upsert([user("nz", 100 + i, 0) for i in range(2)])  # nz: two files, 42 of the 82 entries
    assert len(ds.snapshot.index_files(0)) == 3
    expected = state(ds)
    report = ds.maintain()
    assert report.rewritten_files == 2 and report.merged_buckets == 1, report
    assert [f.base for f in ds.snapshot.index_files(0)] == [True]
    assert state(ds) == expected and ds.get_many(list(expected)).num_rows == 82
    ds.upsert([user("au", 100 + i, 0) for i in range(2)])  # au: two files, 42 of the 84 entries
    ds.upsert([user("nz", 200 + i, 0) for i in range(50)])
    mem_repo.update("k", users_descriptor(**{**props, "services.small.files": "3"}))  # nz's 2 files stay
    ds.refresh()
    ds.upsert([user("au", 300, 0)])  # au: three files, 43 entries of 135
    expected = state(ds)
    report = ds.maintain()
    assert report.rewritten_files == 3 and report.merged_buckets == 0, report
    assert [f.base for f in ds.snapshot.index_files(0)] == [True, False, False, False, False], \
        ds.snapshot.index_files(0)
    assert state(ds) == expected and ds.get_many(list(expected)).num_rows == 135


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


def test_inline_passes_merge_buckets_due_together_over_several_commits(mem_repo, inline_services):
    """Writes of random keys add a delta to every bucket, so all buckets fall due at one
    commit: an inline pass merges at most ``inline_pace`` of them (most deltas first), the
    next passes the rest, while a detached pass merges every due bucket."""
    from cdkds.catalog.services.planner import inline_pace
    from tests.catalog.keyed.conftest import at, state, user, users_descriptor

    props = {"index.buckets": "8", "services.deleted.fraction": "1", "services.small.files": "1000"}  # buckets alone

    def due(name: str):
        """A dataset whose 8 buckets hold 4 deltas each, due at 3."""
        ds = mem_repo.create(name, users_descriptor(**props, **{"services.inline": "false", "index.compaction.deltas": "8"}))
        for r in range(4):
            ds.upsert([user("nz", i, r) for i in range(64)])
        assert all(sum(not f.base for f in ds.snapshot.index_files(b)) == 4 for b in range(8))
        mem_repo.update(name, users_descriptor(**props, **{"index.compaction.deltas": "3"}))
        ds.refresh()
        return ds

    ds = due("k")
    assert inline_pace(ds.descriptor) == 4
    expected = {("nz", i): (None, None, at(3)) for i in range(64)}
    merged = []
    for r in range(4, 7):
        result = ds.upsert([user("nz", i, r) for i in range(0, 64, 2)])  # every bucket again
        merged.append(result.services.merged_buckets)
        expected.update({("nz", i): (None, None, at(r)) for i in range(0, 64, 2)})
        assert state(ds) == expected
    assert merged[:2] == [4, 4], merged
    assert not [m for m in ds.services_plan().buckets if m.deltas > 3]
    assert due("c").maintain().merged_buckets == 8  # a detached pass is not paced
