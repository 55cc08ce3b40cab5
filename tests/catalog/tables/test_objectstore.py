"""Keyed tables on the object store: runs, compaction, crashes, S3 and its request counts."""

import multiprocessing
import os
import signal
import time
from collections import Counter

import pytest
from hypothesis import given, strategies as st

from cdkds.catalog import DatasetRepository
from cdkds.catalog.errors import DataFileError
from cdkds.catalog.tables import Fields, Range, TableAdmin, TableSpecification, TransactionRunner
from cdkds.catalog.tables import objectstore, runs
from cdkds.catalog.tables.objectstore import merge_choice, _union
from tests.catalog.tables.test_contract import SPEC, StructuredTableContract, key
from tests.conftest import new_bucket, s3_options

COUNTER = TableSpecification.builder("counter").fields(Fields.string("name"), Fields.long("n")).primary_key("name").build()
EVENTS = TableSpecification.builder("events").fields(Fields.long("id"), Fields.string("what")).primary_key("id").build()


def _runs(admin):
    return admin.store.runs(admin.store.current())


# ---------------------------------------------------------------- policy and intervals

@given(st.lists(st.integers(1, 5), min_size=1, max_size=400))
def test_size_tiered_merges_keep_few_runs(sizes):
    stack = []  # newest first
    for size in sizes:
        stack.insert(0, size)
        while n := merge_choice(stack):
            stack[:n] = [sum(stack[:n])]
    assert sum(stack) == sum(sizes)
    assert len(stack) <= 3 * (sum(sizes).bit_length() + 1)  # logarithmic in the rows


@given(st.lists(st.tuples(st.binary(max_size=2), st.one_of(st.none(), st.binary(max_size=2))), max_size=6),
       st.lists(st.binary(max_size=3), max_size=30))
def test_the_union_of_intervals_holds_each_key_once(spans, keys):
    union = _union(spans)
    for (a, b), (c, d) in zip(union, union[1:]):
        assert b is not None and b < c
    inside = lambda k, lo, hi: lo <= k and (hi is None or k < hi)  # noqa: E731
    for k in keys:
        assert any(inside(k, lo, hi) for lo, hi in spans) == (sum(inside(k, lo, hi) for lo, hi in union) == 1)


# ---------------------------------------------------------------- many small transactions

def test_many_small_transactions_are_compacted_and_read_back(tmp_path):
    admin = TableAdmin.open(f"file://{tmp_path}/root")
    admin.create(SPEC)
    runner = TransactionRunner(admin)
    model = {}
    for i in range(300):
        k = key(i % 37, "ab"[i % 2], 0)
        if i % 5 == 4:
            runner.run(lambda ctx: ctx.table("meta").delete(k))
            model.pop((k["k1"], k["k2"]), None)
        else:
            runner.run(lambda ctx: ctx.table("meta").upsert({**k, "c1": i % 3, "c2": i}))
            model[(k["k1"], k["k2"])] = i
    assert len(_runs(admin)) <= 16
    rows = runner.run(lambda ctx: list(ctx.table("meta").scan(Range.all())))
    assert [((r["k1"], r["k2"]), r["c2"]) for r in rows] == sorted(model.items())
    by_index = runner.run(lambda ctx: list(ctx.table("meta").scan_index("c1", 1)))
    assert [(r["k1"], r["k2"]) for r in by_index] == sorted(k for k, v in model.items() if v % 3 == 1)
    fresh = TableAdmin.open(f"file://{tmp_path}/root")  # another process's view: no cache
    assert TransactionRunner(fresh).run(lambda ctx: ctx.table("meta").count()) == len(model)


def test_a_merge_reaching_the_oldest_run_drops_tombstones_and_dropped_tables(tmp_path):
    admin = TableAdmin.open(f"file://{tmp_path}/root")
    admin.create(SPEC)
    admin.create(EVENTS)
    runner = TransactionRunner(admin)
    runner.run(lambda ctx: [ctx.table("events").upsert({"id": i, "what": "x"}) for i in range(50)])
    for i in range(20):
        runner.run(lambda ctx: (ctx.table("meta").upsert({**key(i)}), ctx.table("meta").delete(key(i - 1))))
    admin.drop("events")
    for i in range(20, 60):
        runner.run(lambda ctx: (ctx.table("meta").upsert({**key(i)}), ctx.table("meta").delete(key(i - 1))))
    store = admin.store
    entries = [(k, v) for r in _runs(admin) for k, v in r.entries(b"", None)]
    assert len(_runs(admin)) < 10
    assert not any(k.startswith(objectstore.encode_text("events/")[:-2]) for k, _ in entries[-60:])
    assert sum(v is None for _, v in entries) < 40  # tombstones do not pile up
    assert runner.run(lambda ctx: [r["k1"] for r in ctx.table("meta").scan(Range.all())]) == [59]
    assert store.log.snapshot().version == store.current().version


def test_row_groups_of_large_runs_are_read_by_range(tmp_path, monkeypatch):
    monkeypatch.setattr(runs, "WHOLE_BYTES", 0)
    monkeypatch.setattr(runs, "ROW_GROUP_ROWS", 16)
    admin = TableAdmin.open(f"file://{tmp_path}/root")
    admin.create(SPEC)
    runner = TransactionRunner(admin)
    runner.run(lambda ctx: [ctx.table("meta").upsert({**key(i, "x" * (i % 7)), "c2": i}) for i in range(500)])
    fresh = TransactionRunner(TableAdmin.open(f"file://{tmp_path}/root"))
    assert fresh.run(lambda ctx: ctx.table("meta").read(key(333, "x" * (333 % 7)))["c2"]) == 333
    assert fresh.run(lambda ctx: ctx.table("meta").read(key(333, "x"))) is None
    got = fresh.run(lambda ctx: [r["c2"] for r in ctx.table("meta").scan(
        Range.of({"k1": 100}, "exclusive", {"k1": 140}, "inclusive"), order="desc")])
    assert got == list(range(140, 100, -1))


def test_a_missing_run_fails_loudly(tmp_path):
    admin = TableAdmin.open(f"file://{tmp_path}/root")
    admin.create(SPEC)
    TransactionRunner(admin).run(lambda ctx: ctx.table("meta").upsert({**key(1)}))
    for add in admin.store.current().files.values():
        os.remove(admin.store.store.path(add.path))
    with pytest.raises(DataFileError, match="missing"):
        TransactionRunner(TableAdmin.open(f"file://{tmp_path}/root")).run(lambda ctx: ctx.table("meta").read(key(1)))


def test_the_tables_dataset_is_an_ordinary_dataset(tmp_path):
    admin = TableAdmin.open(f"file://{tmp_path}/root")
    admin.create(SPEC)
    TransactionRunner(admin).run(lambda ctx: ctx.table("meta").upsert({**key(1), "c1": 3}))
    dataset = DatasetRepository(f"file://{tmp_path}/root").load("tables")
    rows = [r for batch in dataset.scan() for r in batch.to_pylist()]
    assert any(r["row"] and '"c1":3' in r["row"] for r in rows)


# ---------------------------------------------------------------- crashes

def _transactions_forever(url):
    runner = TransactionRunner(TableAdmin.open(url))
    i = 0
    while True:
        def step(ctx):
            n = ctx.table("counter").read({"name": "c"})
            n = 0 if n is None else n["n"]
            ctx.table("counter").upsert({"name": "c", "n": n + 1})
            ctx.table("events").upsert({"id": n, "what": f"event {n}"})
        runner.run(step)
        i += 1


@pytest.mark.slow
def test_a_process_killed_mid_commit_leaves_whole_transactions(tmp_path):
    url = f"file://{tmp_path}/root"
    admin = TableAdmin.open(url)
    admin.create(COUNTER)
    admin.create(EVENTS)
    context = multiprocessing.get_context("spawn")
    for delay in (1.6, 2.1, 3.5):
        p = context.Process(target=_transactions_forever, args=(url,))
        p.start()
        time.sleep(delay)
        os.kill(p.pid, signal.SIGKILL)
        p.join()
        runner = TransactionRunner(TableAdmin.open(url))
        n, events = runner.run(lambda ctx: (ctx.table("counter").read({"name": "c"}),
                                            [r["id"] for r in ctx.table("events").scan(Range.all())]))
        assert events == list(range(0 if n is None else n["n"]))  # both tables, whole transactions only
    assert n is not None and n["n"] > 0  # the killed processes committed (their start is slow: spawn)
    runner.run(lambda ctx: ctx.table("events").upsert({"id": -1, "what": "after"}))  # still takes writes


# ---------------------------------------------------------------- S3

@pytest.mark.slow
class TestS3(StructuredTableContract):
    @pytest.fixture
    def admin_factory(self, s3_endpoint):
        return lambda: TableAdmin.open(f"s3://{new_bucket(s3_endpoint)}/system", s3_options(s3_endpoint))

    @pytest.fixture
    def admin(self, admin_factory):
        return admin_factory()

    def test_concurrent_increments_from_processes_all_count(self, runner, admin):
        pytest.skip("processes on S3: test_processes_on_s3")


def _increment_s3(url, options, n):
    runner = TransactionRunner(TableAdmin.open(url, options))
    for _ in range(n):
        runner.run(lambda ctx: ctx.table("meta").increment(key(0), "c2", 1))


@pytest.mark.slow
def test_processes_on_s3(s3_endpoint):
    url, options = f"s3://{new_bucket(s3_endpoint)}/system", s3_options(s3_endpoint)
    TableAdmin.open(url, options).create(SPEC)
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_increment_s3, args=(url, options, 10)) for _ in range(3)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(300)
    assert [p.exitcode for p in processes] == [0, 0, 0]
    runner = TransactionRunner(TableAdmin.open(url, options))
    assert runner.run(lambda ctx: ctx.table("meta").read(key(0))["c2"]) == 30


class _Requests:
    """Counts the HTTP requests an s3fs filesystem sends, by method."""

    def __init__(self, fs):
        self.counts = Counter()
        fs.s3.meta.events.register("before-send.s3", self._count)

    def _count(self, request, **kwargs):
        self.counts[request.method] += 1

    def during(self, fn):
        self.counts.clear()
        result = fn()
        return result, dict(self.counts)


@pytest.mark.slow
def test_s3_requests_of_point_reads_and_commits(s3_endpoint, monkeypatch):
    monkeypatch.setattr(runs, "WHOLE_BYTES", 0)  # every run read by row group, as a large one is
    admin = TableAdmin.open(f"s3://{new_bucket(s3_endpoint)}/system", s3_options(s3_endpoint))
    admin.create(SPEC)
    runner = TransactionRunner(admin)
    for batch in range(5):
        runner.run(lambda ctx: [ctx.table("meta").upsert({**key(i), "c2": i}) for i in range(batch * 2000, batch * 2000 + 2000)])
    runner.run(lambda ctx: ctx.table("meta").read(key(1)))  # warm-up: footers and small runs
    requests = _Requests(admin.store.store.fs)
    for i in (17, 4242, 9999):
        row, counts = requests.during(lambda: runner.run(lambda ctx: ctx.table("meta").read(key(i))))
        assert row["c2"] == i
        assert set(counts) == {"GET"} and counts["GET"] <= 2, counts  # the next commit (absent), a row group
    _, counts = requests.during(lambda: runner.run(lambda ctx: ctx.table("meta").upsert({**key(5), "c1": 1})))
    assert counts.get("PUT", 0) == 2, counts  # the run and the conditional PUT of the commit
