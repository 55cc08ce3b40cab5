"""The StructuredTable contract (CDAP's StructuredTableTest), run per implementation.

Each backend subclasses :class:`StructuredTableContract` with ``admin`` and ``admin_factory``
fixtures: SQLite, memory and local files here, S3 in ``test_objectstore.py``, PostgreSQL in
``test_postgres.py``."""

import multiprocessing
import threading
import uuid

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from cdkds.catalog.errors import (
    CdkdsError, InvalidFieldError, NestedTransactionError, NoSuchFieldError, TableExistsError, TableNotFoundError,
)
from cdkds.catalog.expressions import field
from cdkds.catalog.tables import Fields, Range, TableSpecification
from cdkds.catalog.tables import TableAdmin, TransactionRunner

SPEC = TableSpecification.builder("meta").fields(
    Fields.int("k1"), Fields.string("k2"), Fields.long("k3"), Fields.int("c1"), Fields.long("c2"), Fields.string("c3"),
    Fields.double("c4"), Fields.bytes("c5"), Fields.boolean("c6"), Fields.float("c7"),
).primary_key("k1", "k2", "k3").indexes("c1", "c2").build()


def key(k1, k2="a", k3=0):
    return {"k1": k1, "k2": k2, "k3": k3}


class StructuredTableContract:
    serializes_writers = False  # the database queues writers: a concurrent writer waits for the commit
    checks_scanned_ranges = True  # a concurrent write into a scanned range is a conflict (False: never; None: maybe)

    @pytest.fixture
    def runner(self, admin):
        admin.create(SPEC)
        return TransactionRunner(admin)

    def run(self, runner, fn):
        return runner.run(lambda ctx: fn(ctx.table("meta")))

    def fill(self, runner, n=20):
        def write(t):
            for i in range(n):
                for k2 in ("a", "b"):
                    t.upsert({**key(i, k2, i * 10), "c1": i % 3, "c2": i, "c3": f"s{i}", "c6": i % 2 == 0})
        self.run(runner, write)

    # ---------------------------------------------------------------- admin

    def test_admin(self, admin):
        assert not admin.exists("meta") and admin.list() == []
        admin.create(SPEC)
        assert admin.exists("meta") and admin.list() == ["meta"] and admin.get_specification("meta") == SPEC
        with pytest.raises(TableExistsError):
            admin.create(SPEC)
        wider = TableSpecification("meta", SPEC.fields + (Fields.string("c8"),), SPEC.primary_key, SPEC.indexes + ("c3",))
        admin.create_or_update(wider)
        assert admin.get_specification("meta") == wider
        with pytest.raises(InvalidFieldError, match="primary key"):
            admin.create_or_update(TableSpecification("meta", SPEC.fields, ("k1",)))
        assert admin.drop("meta") and not admin.drop("meta") and not admin.exists("meta")
        with pytest.raises(TableNotFoundError):
            admin.get_specification("meta")

    # ---------------------------------------------------------------- rows

    def test_upsert_is_partial_and_read_selects_columns(self, runner):
        self.run(runner, lambda t: t.upsert({**key(1), "c1": 5, "c3": "x"}))
        self.run(runner, lambda t: t.upsert({**key(1), "c2": 7}))
        row = self.run(runner, lambda t: t.read(key(1)))
        assert row == {**key(1), "c1": 5, "c2": 7, "c3": "x", "c4": None, "c5": None, "c6": None, "c7": None}
        assert self.run(runner, lambda t: t.read(key(1), columns=["c1"])) == {"c1": 5}
        assert self.run(runner, lambda t: t.read(key(2))) is None
        self.run(runner, lambda t: t.update({**key(2), "c1": 1}))  # no row: no-op
        assert self.run(runner, lambda t: t.read(key(2))) is None
        values = {"c4": 1.5, "c5": b"\x00\xff", "c6": False, "c7": 2.0}
        self.run(runner, lambda t: t.update({**key(1), **values}))
        assert {k: self.run(runner, lambda t: t.read(key(1)))[k] for k in values} == values

    def test_scans_are_sorted_and_follow_ranges_limits_filters(self, runner):
        self.fill(runner)
        scan = lambda r, **kw: [(x["k1"], x["k2"]) for x in self.run(runner, lambda t: list(t.scan(r, **kw)))]  # noqa: E731
        assert scan(Range.all(), limit=3) == [(0, "a"), (0, "b"), (1, "a")]
        assert scan(Range.all(), limit=2, order="desc") == [(19, "b"), (19, "a")]
        assert scan(Range.of({"k1": 3, "k2": "b"}, Range.INCLUSIVE, {"k1": 5}, Range.EXCLUSIVE)) == [(3, "b"), (4, "a"), (4, "b")]
        assert scan(Range.of({"k1": 3}, Range.EXCLUSIVE, {"k1": 5}, Range.INCLUSIVE)) == [(4, "a"), (4, "b"), (5, "a"), (5, "b")]
        assert scan(Range.singleton({"k1": 7})) == [(7, "a"), (7, "b")]
        assert scan(Range.all(), filter="k2 = 'b' and (c1 != 0 or c3 in ('s0', 's6'))", limit=5) == \
            [(0, "b"), (1, "b"), (2, "b"), (4, "b"), (5, "b")]
        assert scan(Range.all(), filter="c3 starts with 's1' and k1 > 15") == [(16, "a"), (16, "b"), (17, "a"), (17, "b"),
                                                                             (18, "a"), (18, "b"), (19, "a"), (19, "b")]
        multi = self.run(runner, lambda t: [x["k1"] for x in t.multi_scan(
            [Range.singleton({"k1": 9}), Range.singleton({"k1": 2})], filter="k2 = 'a'")])
        assert multi == [2, 9]
        assert self.run(runner, lambda t: t.count([Range.to({"k1": 4}, Range.EXCLUSIVE)])) == 8
        assert [x["k1"] for x in self.run(runner, lambda t: list(t.scan_index("c1", 2, filter="k2 = 'a'")))] == [2, 5, 8, 11, 14, 17]
        rows = self.run(runner, lambda t: t.multi_read([key(5, "b", 50), key(1, "a", 10), key(99)]))
        assert [(r["k1"], r["k2"]) for r in rows] == [(1, "a"), (5, "b")]

    def test_deletes_cas_and_increments(self, runner):
        self.fill(runner, 5)
        self.run(runner, lambda t: t.delete(key(0, "a", 0)))
        self.run(runner, lambda t: t.delete_all(Range.singleton({"k1": 1})))
        self.run(runner, lambda t: t.update_all(Range.singleton({"k1": 2}), {"c3": "z"}))
        rows = self.run(runner, lambda t: list(t.scan(Range.all(), columns=["k1", "k2", "c3"])))
        assert [(r["k1"], r["k2"], r["c3"]) for r in rows][:3] == [(0, "b", "s0"), (2, "a", "z"), (2, "b", "z")]
        k = key(3, "a", 30)
        assert not self.run(runner, lambda t: t.compare_and_swap(k, {"c1": 99}, {"c1": 1}))
        assert self.run(runner, lambda t: t.compare_and_swap(k, {"c1": 0}, {"c1": 1}))
        assert not self.run(runner, lambda t: t.compare_and_swap(k, None, {"c1": 5}))
        assert self.run(runner, lambda t: t.compare_and_swap(key(50), None, {"c1": 5}))
        assert self.run(runner, lambda t: t.read(key(50))["c1"]) == 5
        assert self.run(runner, lambda t: [t.increment(key(60), "c2", 2), t.increment(key(60), "c2", 3)]) == [2, 5]
        with pytest.raises(InvalidFieldError, match="non-key long column"):
            self.run(runner, lambda t: t.increment(key(60), "c1", 1))

    BAD = [
        (lambda t: t.upsert({**key(1), "zz": 1}), NoSuchFieldError, "no field 'zz'"),
        (lambda t: t.upsert({"k1": 1, "k2": "a", "c1": 1}), InvalidFieldError, "'k3' is missing"),
        (lambda t: t.upsert({**key(1), "c1": "x"}), InvalidFieldError, "field 'c1': value 'x'"),
        (lambda t: t.upsert({**key(1), "c4": float("nan")}), InvalidFieldError, "NaN"),
        (lambda t: t.upsert({**key(None)}), InvalidFieldError, "'k1' is .*null"),
        (lambda t: t.read({"k1": 1, "k2": "a"}), InvalidFieldError, "'k3' is missing"),
        (lambda t: list(t.scan(Range.of({"k1": 1, "k3": 2}, "inclusive", None, "inclusive"))), InvalidFieldError,
         "without 'k2'"),
        (lambda t: list(t.scan(Range.all(), filter="nope = 1")), InvalidFieldError, "unknown field 'nope'"),
        (lambda t: list(t.scan_index("c3", "x")), InvalidFieldError, "'c3' is not indexed"),
        (lambda t: t.update_all(Range.all(), {"k1": 5}), InvalidFieldError, "cannot set key fields"),
        (lambda t: list(t.scan(Range.all(), limit=-1)), InvalidFieldError, "limit"),
    ]

    @pytest.mark.parametrize("call, error, message", BAD)
    def test_schema_errors_name_the_table_field_and_value(self, runner, call, error, message):
        self.fill(runner, 2)
        with pytest.raises(error, match=message) as e:
            self.run(runner, call)
        assert "table 'meta'" in str(e.value)
        assert self.run(runner, lambda t: t.count()) == 4

    # ---------------------------------------------------------------- transactions

    def test_an_exception_commits_nothing_and_a_transaction_sees_its_own_writes(self, runner, admin):
        admin.create(TableSpecification.builder("runs").fields(Fields.string("id"), Fields.long("n")).primary_key("id").build())

        def fail(ctx):
            ctx.table("meta").upsert({**key(1), "c1": 1})
            ctx.table("runs").upsert({"id": "r", "n": 1})
            assert ctx.table("meta").read(key(1))["c1"] == 1
            raise RuntimeError("boom")

        with pytest.raises(RuntimeError):
            runner.run(fail)
        assert runner.run(lambda ctx: (ctx.table("meta").read(key(1)), ctx.table("runs").read({"id": "r"}))) == (None, None)
        runner.run(lambda ctx: (ctx.table("meta").upsert({**key(1), "c1": 1}), ctx.table("runs").upsert({"id": "r", "n": 1})))
        assert runner.run(lambda ctx: ctx.table("runs").read({"id": "r"})["n"]) == 1

    def test_concurrent_increments_from_processes_all_count(self, runner, admin):
        context = multiprocessing.get_context("spawn")
        processes = [context.Process(target=_increment, args=(admin.url, 20)) for _ in range(3)]
        for p in processes:
            p.start()
        for p in processes:
            p.join(120)
        assert [p.exitcode for p in processes] == [0, 0, 0]
        assert self.run(runner, lambda t: t.read(key(0))["c2"]) == 60

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors])
    @given(st.lists(st.tuples(st.sampled_from(["upsert", "delete"]), st.integers(0, 6), st.sampled_from(["a", "b"]),
                              st.one_of(st.none(), st.integers(-3, 3))), max_size=25),
           st.integers(0, 6), st.integers(0, 6), st.sampled_from(["inclusive", "exclusive"]))
    def test_random_writes_against_a_model(self, admin_factory, ops, lo, hi, bound):
        admin = admin_factory()
        admin.create(SPEC)
        runner = TransactionRunner(admin)
        model: dict = {}
        for op, k1, k2, c1 in ops:
            k = key(k1, k2)
            if op == "upsert":
                self.run(runner, lambda t: t.upsert({**k, "c1": c1}))
                model[(k1, k2)] = c1
            else:
                self.run(runner, lambda t: t.delete(k))
                model.pop((k1, k2), None)
        rows = self.run(runner, lambda t: list(t.scan(Range.of({"k1": lo}, "inclusive", {"k1": hi}, bound),
                                                      filter="c1 >= 0")))
        expected = sorted(k for k, v in model.items() if lo <= k[0] and (k[0] <= hi if bound == "inclusive" else k[0] < hi)
                          and v is not None and v >= 0)
        assert [(r["k1"], r["k2"]) for r in rows] == expected


    # ---------------------------------------------------------------- more reads

    def test_index_scans_follow_updates_deletes_and_new_indexes(self, runner, admin):
        self.fill(runner, 9)
        ids = lambda rows: [(r["k1"], r["k2"]) for r in rows]  # noqa: E731
        assert ids(self.run(runner, lambda t: list(t.scan_index("c1", 1)))) == [(i, k) for i in (1, 4, 7) for k in "ab"]
        assert ids(self.run(runner, lambda t: list(t.scan_index("c1", 1, limit=3, filter="k2 = 'b'")))) == \
            [(1, "b"), (4, "b"), (7, "b")][:3]
        assert ids(self.run(runner, lambda t: list(t.scan_index("c1", 1, limit=2)))) == [(1, "a"), (1, "b")]
        self.run(runner, lambda t: (t.upsert({**key(1, "a", 10), "c1": 2}), t.delete(key(4, "b", 40))))
        assert ids(self.run(runner, lambda t: list(t.scan_index("c1", 1)))) == [(1, "b"), (4, "a"), (7, "a"), (7, "b")]
        assert (1, "a") in ids(self.run(runner, lambda t: list(t.scan_index("c1", 2))))
        assert self.run(runner, lambda t: list(t.scan_index("c2", 5, columns=["c3"]))) == [{"c3": "s5"}] * 2
        admin.create_or_update(TableSpecification("meta", SPEC.fields, SPEC.primary_key, SPEC.indexes + ("c3",)))
        assert ids(self.run(runner, lambda t: list(t.scan_index("c3", "s7")))) == [(7, "a"), (7, "b")]
        self.run(runner, lambda t: t.update({**key(7, "a", 70), "c3": None}))
        assert ids(self.run(runner, lambda t: list(t.scan_index("c3", "s7")))) == [(7, "b")]

    def test_multi_reads_multi_scans_and_counts(self, runner):
        self.fill(runner, 10)
        rows = self.run(runner, lambda t: t.multi_read([key(5, "b", 50), key(99), key(2, "a", 20)], columns=["k1", "k2"]))
        assert rows == [{"k1": 2, "k2": "a"}, {"k1": 5, "k2": "b"}]
        ranges = [Range.of({"k1": 2}, "inclusive", {"k1": 4}, "inclusive"), Range.of({"k1": 3}, "inclusive", {"k1": 6}, "exclusive"),
                  Range.singleton({"k1": 9, "k2": "b"})]
        got = self.run(runner, lambda t: [(r["k1"], r["k2"]) for r in t.multi_scan(ranges)])
        assert got == [(i, k) for i in range(2, 6) for k in "ab"] + [(9, "b")]
        got = self.run(runner, lambda t: [(r["k1"], r["k2"]) for r in t.multi_scan(ranges, limit=3, order="desc")])
        assert got == [(9, "b"), (5, "b"), (5, "a")]
        assert self.run(runner, lambda t: t.count()) == 20
        assert self.run(runner, lambda t: t.count(ranges, filter="c6 = true")) == 4
        assert self.run(runner, lambda t: t.count([Range.of({"k1": 3}, "exclusive", {"k1": 5}, "exclusive")])) == 2
        assert self.run(runner, lambda t: list(t.scan(Range.all(), limit=0))) == []

    def test_a_dropped_table_created_again_is_empty(self, runner, admin):
        self.fill(runner, 3)
        assert admin.drop("meta")
        with pytest.raises(TableNotFoundError, match="'meta'"):
            self.run(runner, lambda t: t.count())
        admin.create(SPEC)
        assert self.run(runner, lambda t: t.count()) == 0
        assert self.run(runner, lambda t: list(t.scan_index("c1", 0))) == []

    # ---------------------------------------------------------------- isolation and conflicts

    def _concurrently(self, admin, read, write, during):
        """Runs ``read(ctx)`` twice then ``write(ctx, value)`` in a transaction, with
        ``during(ctx)`` run to completion in its own transaction (another thread) between the
        reads, when the store lets it; returns the pairs of values read, one per attempt."""
        seen, threads = [], []

        def other():
            TransactionRunner(admin).run(during)

        def fn(ctx):
            before = read(ctx)
            if not threads:
                thread = threading.Thread(target=other)
                thread.start()
                thread.join(1.0)  # a database that serializes writers finishes it after this commit
                threads.append(thread)
            after = read(ctx)
            seen.append((before, after))
            write(ctx, after)
            return after

        TransactionRunner(admin).run(fn)
        threads[0].join(60)
        return seen

    def test_a_transaction_does_not_see_concurrent_commits_and_retries_on_their_writes(self, runner, admin):
        self.run(runner, lambda t: t.upsert({**key(0), "c2": 0}))
        seen = self._concurrently(admin, lambda ctx: ctx.table("meta").read(key(0))["c2"],
                                  lambda ctx, value: ctx.table("meta").upsert({**key(0), "c2": value + 1}),
                                  lambda ctx: ctx.table("meta").increment(key(0), "c2", 10))
        assert seen[0] == (0, 0)  # isolated: the concurrent increment is not seen before commit
        assert self.run(runner, lambda t: t.read(key(0))["c2"]) == 11  # neither update lost
        if not self.serializes_writers:
            assert len(seen) == 2 and seen[1] == (10, 10)  # the conflict retried the function

    def test_a_write_into_a_scanned_range_conflicts(self, runner, admin):
        self.fill(runner, 5)
        seen = self._concurrently(
            admin, lambda ctx: ctx.table("meta").count([Range.of({"k1": 0}, "inclusive", {"k1": 2}, "inclusive")]),
            lambda ctx, n: ctx.table("meta").upsert({**key(100), "c2": n}),
            lambda ctx: ctx.table("meta").upsert({**key(1, "zz", 5)}))
        assert seen[0] == (6, 6)
        # the insert committed first: a store that checks scanned ranges retried the scan (7); a
        # serializing one ordered the scan first (6), which is as serializable
        expected = {True: {7}, False: {6}, None: {6, 7}}[self.checks_scanned_ranges]
        assert self.run(runner, lambda t: t.read(key(100))["c2"]) in expected

    def test_write_skew_is_prevented(self, runner, admin):
        """Two transactions each insert into a range only if it is empty: one row results."""
        empty = lambda ctx: ctx.table("meta").count([Range.of({"k1": 50}, "inclusive", {"k1": 60}, "inclusive")])  # noqa: E731

        def claim(ctx, k1):
            if empty(ctx) == 0:
                ctx.table("meta").upsert({**key(k1)})

        self._concurrently(admin, empty, lambda ctx, n: claim(ctx, 51) if n == 0 else None, lambda ctx: claim(ctx, 52))
        assert self.run(runner, lambda t: t.count([Range.of({"k1": 50}, "inclusive", {"k1": 60}, "inclusive")])) == 1

    def test_writes_elsewhere_and_reads_only_do_not_conflict(self, runner, admin):
        self.fill(runner, 5)
        seen = self._concurrently(admin, lambda ctx: ctx.table("meta").read(key(1, "a", 10))["c3"],
                                  lambda ctx, value: ctx.table("meta").upsert({**key(200), "c1": 1}),
                                  lambda ctx: ctx.table("meta").upsert({**key(3, "a", 30), "c3": "new"}))
        assert seen == [("s1", "s1")]
        seen = self._concurrently(admin, lambda ctx: ctx.table("meta").read(key(3, "a", 30))["c3"],
                                  lambda ctx, value: None,
                                  lambda ctx: ctx.table("meta").upsert({**key(3, "a", 30), "c3": "newer"}))
        assert seen == [("new", "new")]  # read-only: never retried


    # ---------------------------------------------------------------- found by review

    def test_threads_sharing_one_admin(self, runner, admin):
        def worker():
            r = TransactionRunner(admin, attempts=1000, backoff=0.001)
            for _ in range(25):
                r.run(lambda ctx: ctx.table("meta").increment(key(1), "c2", 1))
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert self.run(runner, lambda t: t.read(key(1))["c2"]) == 100

    def test_float_columns_compare_as_written_and_zero_has_one_sign(self, runner, admin):
        self.run(runner, lambda t: (t.upsert({**key(1), "c7": 0.1, "c4": -0.0}), t.upsert({**key(2), "c7": 0.5})))
        ids = lambda **kw: [r["k1"] for r in self.run(runner, lambda t: list(t.scan(Range.all(), **kw)))]  # noqa: E731
        assert ids(filter=field("c7") == 0.1) == [1] and ids(filter="c7 < 0.1") == [] and ids(filter="c7 > 0.1") == [2]
        assert str(self.run(runner, lambda t: t.read(key(1))["c4"])) == "0.0"
        admin.create_or_update(TableSpecification("meta", SPEC.fields, SPEC.primary_key, SPEC.indexes + ("c7",)))
        assert [r["k1"] for r in self.run(runner, lambda t: list(t.scan_index("c7", 0.1)))] == [1]

    def test_an_empty_bound_is_no_bound(self, runner):
        self.fill(runner, 2)
        for r in (Range({}, "exclusive", None), Range(None, "inclusive", {}, "exclusive"), Range({}, "inclusive", {})):
            assert self.run(runner, lambda t: t.count([r])) == 4

    def test_a_scan_reads_when_called(self, runner):
        self.fill(runner, 2)

        def fn(t):
            rows = t.scan(Range.all(), columns=["k1", "k2"])
            t.upsert({**key(10)})
            t.delete(key(0, "a", 0))
            return [(r["k1"], r["k2"]) for r in rows]
        assert self.run(runner, fn) == [(0, "a"), (0, "b"), (1, "a"), (1, "b")]

    def test_nested_transactions_are_refused_and_commit_nothing(self, runner, admin):
        def fn(ctx):
            ctx.table("meta").upsert({**key(1)})
            admin.create(TableSpecification.builder("u").fields(Fields.long("id")).primary_key("id").build())
        with pytest.raises(NestedTransactionError, match="already running"):
            runner.run(fn)
        with pytest.raises(NestedTransactionError):
            runner.run(lambda ctx: admin.exists("meta"))
        with pytest.raises(NestedTransactionError):
            runner.run(lambda ctx: runner.run(lambda inner: 1))
        assert not admin.exists("u") and self.run(runner, lambda t: t.count()) == 0

    @pytest.mark.parametrize("call", [
        lambda t: t.increment(key(1), "c2", None), lambda t: t.increment(key(1), ["c2"], 1),
        lambda t: list(t.scan_index(["c1"], 1)), lambda t: t.read(key(1), [["c1"]]), lambda t: t.read(key(1), 5),
        lambda t: t.compare_and_swap(key(1), None, None), lambda t: t.multi_read(None), lambda t: list(t.multi_scan(None)),
        lambda t: t.upsert({**key(1), "c4": 10**400}), lambda t: list(t.scan(Range.all(), limit=2**70)),
        lambda t: t.upsert({**key(1), "c3": "\ud800"}), lambda t: list(t.scan(Range.all(), filter=field("c3") == "\ud800")),
    ])
    def test_bad_arguments_raise_errors_naming_the_table(self, runner, call):
        with pytest.raises(CdkdsError, match="table 'meta'|'meta'"):
            self.run(runner, call)

    def test_a_single_range_is_taken_as_one(self, runner):
        self.fill(runner, 3)
        assert self.run(runner, lambda t: t.count(Range.singleton({"k1": 1}))) == 2
        assert len(self.run(runner, lambda t: list(t.multi_scan(Range.all())))) == 6

    def test_bad_admin_and_runner_arguments(self, admin):
        for call in (lambda: admin.exists(["t"]), lambda: admin.drop(None), lambda: admin.get_specification(3),
                     lambda: TransactionRunner(admin).run(None), lambda: TransactionRunner("admin"),
                     lambda: TransactionRunner(admin).run(lambda ctx: ctx.table(None))):
            with pytest.raises(CdkdsError):
                call()
        for fields, key_, indexes in ((None, ("a",), ()), (("a",), ("a",), ()), ((Fields.int("a"),), [["a"]], ()),
                                      ((Fields.int("a"), Fields.int("A")), ("a",), ())):
            with pytest.raises(InvalidFieldError):
                TableSpecification("x", fields, key_, indexes)
        for name in ("_cdkds_tables", "sqlite_x", "pg_class"):
            with pytest.raises(InvalidFieldError, match="reserved"):
                TableSpecification.builder(name).fields(Fields.int("a")).primary_key("a").build()

    def test_names_that_differ_only_in_case_or_join_with_underscores(self, admin):
        spec = lambda name, *fields, indexes=(): TableSpecification(  # noqa: E731
            name, tuple(Fields.int(f) for f in fields), (fields[0],), indexes)
        admin.create(spec("p", "a", "b__c", indexes=("b__c",)))
        admin.create(spec("p__b", "a", "c", indexes=("c",)))
        admin.create(spec("p__b__c", "a"))
        with pytest.raises(TableExistsError, match="ignore case"):
            admin.create(spec("P", "a"))
        with pytest.raises(TableExistsError, match="ignore case"):
            admin.create_or_update(spec("P__B", "a"))
        assert admin.list()[:3] == ["p", "p__b", "p__b__c"]

def _increment(url, n):
    runner = TransactionRunner(TableAdmin.open(url))
    for _ in range(n):
        runner.run(lambda ctx: ctx.table("meta").increment(key(0), "c2", 1))


class TestSqlite(StructuredTableContract):
    serializes_writers = True
    checks_scanned_ranges = False

    @pytest.fixture
    def admin_factory(self, tmp_path):
        counter = iter(range(10**6))
        return lambda: TableAdmin.open(f"sqlite:///{tmp_path}/db{next(counter)}.sqlite")

    @pytest.fixture
    def admin(self, admin_factory):
        return admin_factory()


class TestMemory(StructuredTableContract):
    @pytest.fixture
    def admin_factory(self):
        return lambda: TableAdmin.open(f"memory://tables-{uuid.uuid4().hex}")

    @pytest.fixture
    def admin(self, admin_factory):
        return admin_factory()

    @pytest.mark.skip(reason="memory:// is one process's: the process test runs on file and S3")
    def test_concurrent_increments_from_processes_all_count(self):
        pass


class TestFile(StructuredTableContract):
    @pytest.fixture
    def admin_factory(self, tmp_path):
        counter = iter(range(10**6))
        return lambda: TableAdmin.open(f"file://{tmp_path}/root{next(counter)}")

    @pytest.fixture
    def admin(self, admin_factory):
        return admin_factory()
