"""Property: reads across partition specs are correct (issue 33).

A dataset is written under two or three random partition strategies in turn (random
functions among identity, hash, range, list and the calendar ones over a few typed
fields; ``alter().partition_by`` between the batches; sometimes a delete, whose tombstone
then outlives later changes; sometimes a checkpoint, in one part or in many). Then, for a
random predicate P (the columnar test's predicates):

- ``to_table(where=P)`` (and ``scan``, ``to_arrow_dataset``) holds exactly the rows the row
  evaluator says P holds for, on the dataset as written and as loaded again (from its
  checkpoint's parts);
- ``plan(P)`` never leaves out a file holding a match;
- after ``delete(P)`` the dataset holds every row but P's: read(P) + rows left = all rows.
"""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import ExpressionError, IncompatibleDescriptorError, UnsupportedLogVersionError
from cdkds.catalog.expressions import ALWAYS_TRUE, bind, evaluate
from cdkds.catalog.read.scan import FileScanTask, read_task
from tests.catalog.expressions.test_columnar import VALUES, predicates

NAMES = ["l", "i", "s", "ts", "d", "dt"]
SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"},
    *({"name": n, "type": ["null", t]} for n, t in [
        ("l", "long"), ("i", "int"), ("s", "string"), ("ts", {"type": "long", "logicalType": "timestamp-micros"}),
        ("d", "double"), ("dt", {"type": "int", "logicalType": "date"})])]}
# partition functions over the fields, each with its source and whether it takes nulls; a
# name (l_hash, i_range, year...) comes back under other functions, sources or arguments
FUNCTIONS = [
    ("identity(s)", "s", True), ("identity(i)", "i", True), ("identity(dt)", "dt", True), ("identity(l)", "l", True),
    ("hash(l, 2)", "l", False), ("hash(l, 5)", "l", False), ("hash(s, 3)", "s", False),
    ("range(i, [-2, 1, 4])", "i", False), ("range(i, [0, 4])", "i", False),
    ("range(s, ['B', 'b', '\u00e9\u00e9\u00e9'])", "s", False),
    ("list(i, [[-4, -3, -2, -1], [0], [1, 2, 3, 4]])", "i", False),
    ("year(ts)", "ts", False), ("month(ts)", "ts", False), ("day(ts)", "ts", False), ("hour(ts)", "ts", False),
    ("month(dt)", "dt", False), ("year(dt)", "dt", False),
]


def _name(function: str) -> str:
    kind, rest = function.split("(", 1)
    source = rest.split(",")[0].rstrip(")")
    if kind in ("year", "month", "day", "hour"):
        return kind  # Kite's names: year(ts) and year(dt) share one
    return {"identity": f"{source}_copy"}.get(kind, f"{source}_{kind}")


@st.composite
def strategies(draw):
    """A partition strategy (text, or None: unpartitioned) and the fields it cannot take nulls of."""
    if draw(st.integers(0, 4)) == 0:
        return None, set()
    chosen = draw(st.lists(st.sampled_from(FUNCTIONS), min_size=1, max_size=3, unique_by=lambda f: _name(f[0])))
    return ", ".join(f for f, _, _ in chosen), {source for _, source, nulls in chosen if not nulls}


@st.composite
def histories(draw):
    """Strategies in turn, a batch of rows written under each, where to checkpoint, and the
    deletes made after some batches (before the next change)."""
    layouts = draw(st.lists(strategies(), min_size=2, max_size=3))
    not_null = set().union(*(n for _, n in layouts))
    batches, first = [], 0
    for _ in layouts:
        rows = []
        for i in range(draw(st.integers(1, 8))):
            row = {"id": first + i}
            for name in NAMES:
                nullable = name not in not_null
                row[name] = draw(st.none() | VALUES[name] if nullable else VALUES[name])
            rows.append(row)
        first += len(rows)
        batches.append(rows)
    checkpoints = draw(st.lists(st.booleans(), min_size=len(layouts), max_size=len(layouts)))
    sources = sorted({f.split("(")[1].split(",")[0].rstrip(")") for s, _ in layouts if s for f in s.split("), ")})
    deletes = [draw(st.none() | st.none() | predicates(sources * 3 + NAMES, depth=1)) for _ in layouts]
    return [s for s, _ in layouts], batches, checkpoints, draw(st.sampled_from(["2", "1000"])), deletes


def _write(ds, rows, flushes: int) -> None:
    with ds.writer() as w:
        for n, row in enumerate(rows):
            w.write(row)
            if flushes and n % (len(rows) // flushes + 1) == 0:
                w.flush()


def _build(history, flushes):
    """The dataset a history makes, and the ids its deletes took (each delete's rows judged
    by the row evaluator on the rows live before it)."""
    layouts, batches, checkpoints, part_files, deletes = history
    repo = DatasetRepository(f"memory://specs-{uuid.uuid4().hex}")
    ds = repo.create("t", DatasetDescriptor(SCHEMA, layouts[0], properties={
        "checkpoint.interval": "1000", "checkpoint.partFiles": part_files}))
    deleted: set[int] = set()
    for n, (layout, rows, checkpoint, delete) in enumerate(zip(layouts, batches, checkpoints, deletes)):
        if n and _changes(ds.descriptor, layout):
            ds.alter().partition_by(layout).commit()
        _write(ds, rows, flushes)
        if delete is not None:
            try:
                bound = bind(delete, ds.descriptor.fields)
            except ExpressionError:
                bound = None
            if bound is not None:
                deleted |= {r["id"] for r in ds.to_table().to_pylist() if evaluate(bound, r) is True}
                ds.delete(bound)
        if checkpoint:
            ds.checkpoint()
    return repo, ds, deleted


def _changes(descriptor: DatasetDescriptor, layout: str | None) -> bool:
    try:
        descriptor.with_partitioning(layout)
    except IncompatibleDescriptorError:  # partitioned so already
        return False
    return True


def _sources(descriptor: DatasetDescriptor) -> list[str]:
    """The partition sources of every spec: predicates are mostly on them."""
    return sorted({f.source for s in descriptor.partition_specs.values() if s is not None for f in s.functions})


def _ids(table) -> list[int]:
    return sorted(table.column("id").to_pylist())


@settings(max_examples=30, deadline=None)
@given(histories(), st.integers(0, 2), st.data())
def test_reads_and_deletes_across_partition_specs_equal_a_filter_of_all_rows(history, flushes, data):
    repo, ds, deleted = _build(history, flushes)
    descriptor = ds.descriptor
    everything = ds.to_table()
    assert _ids(everything) == sorted(set(range(sum(len(b) for b in history[1]))) - deleted)
    try:
        bound = bind(data.draw(predicates(_sources(descriptor) * 4 + NAMES)), descriptor.fields)
    except ExpressionError:
        bound = ALWAYS_TRUE
    matching = sorted(r["id"] for r in everything.to_pylist() if evaluate(bound, r) is True)

    for reader in (ds, repo.load("t")):  # as written, and read back from the log (its checkpoint's parts)
        assert _ids(reader.to_table(where=bound)) == matching, bound
        assert sorted(r["id"] for b in reader.scan(bound) for r in b.to_pylist()) == matching  # cdkds's reader
        assert _ids(reader.to_arrow_dataset(bound).to_table()) == matching  # pyarrow's lazy dataset
        planned = {f.path for f in reader.plan(bound).files}
        for f in reader.files:
            rows = [r for b in read_task(reader.store, descriptor, ALWAYS_TRUE, list(descriptor.fields),
                                         FileScanTask(f)) for r in b.to_pylist()]
            assert f.path in planned or not any(evaluate(bound, r) is True for r in rows), (f, bound)

    ds.delete(bound)
    left = _ids(repo.load("t").to_table())
    assert sorted(left + matching) == _ids(everything)
    assert not set(left) & set(matching)


# ---------------------------------------------------------------- time travel, change feed, check

EVENTS = {"type": "record", "name": "E", "fields": [
    {"name": "id", "type": "long"}, {"name": "s", "type": "string"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}}]}


def _events(first: int, count: int) -> list[dict]:
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    return [{"id": i, "s": "abc"[i % 3], "ts": t0 + dt.timedelta(hours=7 * i)} for i in range(first, first + count)]


@pytest.fixture
def mem_repo() -> DatasetRepository:
    return DatasetRepository(f"memory://specs-{uuid.uuid4().hex}")


def _changed(repo):
    """Revisions: 1 a write under day(ts), 2 the change to hash(id, 3) (the name 'day' gone,
    then back under hash(s, 5) in spec 2), 3 a write, 4 the change, 5 a write, 6 a delete
    of rows of all three specs."""
    ds = repo.create("e", DatasetDescriptor(EVENTS, "day(ts)", properties={"checkpoint.partFiles": "2"}))
    with ds.writer() as w:
        for r in _events(0, 12):
            w.write(r)
    ds.alter().partition_by("hash(id, 3)").commit()
    with ds.writer() as w:
        for r in _events(12, 6):
            w.write(r)
    ds.checkpoint()
    ds.alter().partition_by("hash(s, 5) as day").commit()  # 'day' names another function
    with ds.writer() as w:
        for r in _events(18, 6):
            w.write(r)
    ds.delete("s = 'a'")
    return ds


def test_time_travel_across_a_partition_change_reads_with_the_old_descriptor(mem_repo):
    ds = _changed(mem_repo)
    assert ds.version == 6 and sorted(ds.descriptor.partition_specs) == [0, 1, 2]
    before = mem_repo.load("e", version=1)
    assert not before.descriptor.has_past_specs and before.descriptor.partition_strategy.to_text() == "day(ts)"
    assert _ids(before.to_table()) == list(range(12))
    assert _ids(before.to_table(where="ts < timestamp '2026-01-02T00:00:00Z'")) == [0, 1, 2, 3]
    assert _ids(before.to_table(where="s = 'b'")) == [1, 4, 7, 10]
    between = mem_repo.load("e", version=3)
    assert sorted(between.descriptor.partition_specs) == [0, 1]
    assert _ids(between.to_table(where="id >= 10 and s = 'a'")) == [12, 15]
    assert _ids(mem_repo.load("e", version=5).to_table(where="s = 'a'")) == list(range(0, 24, 3))
    assert _ids(ds.to_table(where="s = 'a'")) == []
    assert _ids(ds.to_table()) == [i for i in range(24) if i % 3]
    assert _ids(mem_repo.load("e", timestamp=mem_repo.load("e", version=1).snapshot.timestamp).to_table()) \
        == list(range(12))


def test_the_change_feed_across_partition_changes(mem_repo):
    ds = _changed(mem_repo)
    rows = ds.changes(0).read_all().to_pylist()
    inserted = sorted(r["id"] for r in rows if r["_change_type"] == "insert")
    deleted = sorted((r["id"], r["_commit_version"]) for r in rows if r["_change_type"] == "delete")
    assert inserted == list(range(24))
    assert deleted == [(i, 6) for i in range(0, 24, 3)]
    assert not [r for r in rows if r["_commit_version"] in (2, 4)]  # the changes move no row
    assert sorted(r["id"] for r in ds.changes(3, 5).read_all().to_pylist()) == list(range(12, 24))


def test_check_reads_every_file_of_several_specs(tmp_path):
    ds = _changed(DatasetRepository(f"file://{tmp_path}/lake"))
    assert {f.spec_id for f in ds.files} == {0, 1, 2}
    assert ds.check(read_data=True).ok


def test_a_version_4_reader_refuses_a_dataset_once_its_strategy_changed(mem_repo, monkeypatch):
    from cdkds.catalog.log import actions
    ds = mem_repo.create("e", DatasetDescriptor(EVENTS, "day(ts)"))
    assert ds.snapshot.protocol.reader_version == 4
    ds.alter().partition_by("hash(id, 3)").commit()
    assert (ds.snapshot.protocol.reader_version, ds.snapshot.protocol.writer_version) == (5, 5)
    monkeypatch.setattr(actions, "READER_VERSION", 4)
    mem_repo.load("e", version=0)  # before the change: still readable
    with pytest.raises(UnsupportedLogVersionError, match="needs log reader version 5; this cdkds reads version 4"):
        mem_repo.load("e")


def test_a_delete_before_a_partition_change_still_applies_to_the_files_it_predates(mem_repo):
    """A tombstone committed under hash(id, 4) is matched to the files it predates by their
    own spec after the change to hash(id, 8) (the same partition name, id_hash), in memory,
    from a checkpoint and in the files it keeps alive; it is spent once they are gone."""
    ds = mem_repo.create("e", DatasetDescriptor(EVENTS, "hash(id, 4)"))
    with ds.writer() as w:
        for r in _events(0, 40):
            w.write(r)
    ds.delete("id in (6, 13, 30)")  # buckets 2, 1, 2 of 4 (6, 5, 6 of 8)
    ds.alter().partition_by("hash(id, 8)").commit()
    with ds.writer() as w:
        for r in _events(40, 10):
            w.write(r)
    expected = [i for i in range(50) if i not in (6, 13, 30)]
    assert _ids(ds.to_table()) == expected
    hit = [f for f in ds.files if ds.snapshot.tombstones_for(f)]
    assert hit and all(f.spec_id == 0 for f in hit)
    assert {f.partition["id_hash"] for f in hit} == {_bucket_of(ds, i) for i in (6, 13, 30)}  # of 4 buckets
    ds.checkpoint()
    fresh = mem_repo.load("e")
    assert _ids(fresh.to_table()) == expected and _ids(fresh.to_table(where="id = 13")) == []
    assert len(fresh.snapshot.tombstones) == 1


def _bucket_of(ds, value: int) -> int:
    strategy = ds.descriptor.strategy_of(0)
    (function,) = strategy.functions
    return function.apply(value, ds.descriptor.fields["id"].kind)


def test_a_past_specs_source_follows_a_rename_and_may_not_be_dropped(mem_repo):
    ds = _changed(mem_repo)  # spec 0: day(ts); ts is no source of the current spec
    ds.alter().rename("ts", "at").commit()
    assert ds.descriptor.strategy_of(0).functions[0].source == "at"
    early = "at < timestamp '2026-01-02T00:00:00Z'"
    assert _ids(ds.to_table(where=early)) == [1, 2]  # 0 and 3 were deleted
    plan = ds.plan(early)
    assert [f.partition["day"] for f in plan.files if f.spec_id == 0] == [1]  # day of month: spec 0 pruned by it
    assert _ids(mem_repo.load("e").to_table(where=early)) == [1, 2]
    with pytest.raises(IncompatibleDescriptorError, match="at"):
        ds.alter().drop("at").commit()


def test_a_hash_spec_taken_back_after_its_source_was_widened_keeps_hashing_as_its_files_were(mem_repo):
    """hash(id, 4) over an int, id widened to long, another spec, then hash(id, 4) again: the
    spec's id comes back and so must its source type, or its old files' negative ids (whose
    long hash differs from their int hash) are pruned by the wrong buckets."""
    schema = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "int"}]}
    ds = mem_repo.create("w", DatasetDescriptor(schema, "hash(id, 4)", properties={"services.inline": "false"}))
    with ds.writer() as w:
        for i in range(-8, 8):
            w.write({"id": i})
    ds.alter().widen("id", "long").commit()
    ds.alter().partition_by("hash(id, 8)").commit()
    ds.alter().partition_by("hash(id, 4)").commit()
    assert ds.descriptor.partition_spec_id == 0
    assert ds.descriptor.partition_strategy.functions[0].source_type == "int"
    with ds.writer() as w:
        for i in (-2**40, 2**40):
            w.write({"id": i})
    for reader in (ds, mem_repo.load("w")):
        for i in [*range(-8, 8), -2**40, 2**40]:
            assert _ids(reader.to_table(where=f"id = {i}")) == [i], i


def test_a_past_specs_identity_source_may_be_widened_while_another_spec_shares_its_partition_name(mem_repo):
    """identity(u) as p, then identity(w) as p (both ints): widening u makes spec 0's p long
    and spec 1's int — one integer column of the file table, so the widen is not refused,
    and files of both specs still prune right, from memory and from checkpoint parts."""
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "u", "type": "int"}, {"name": "w", "type": "int"}]}
    ds = mem_repo.create("k", DatasetDescriptor(schema, "identity(u) as p", properties={
        "services.inline": "false", "checkpoint.partFiles": "1"}))
    with ds.writer() as w:
        for i in range(6):
            w.write({"id": i, "u": i % 3, "w": i})
    ds.alter().partition_by("identity(w) as p").commit()
    with ds.writer() as w:
        for i in range(6, 9):
            w.write({"id": i, "u": i % 3, "w": i})
    ds.checkpoint()
    ds.alter().widen("u", "long").commit()
    ds.alter().partition_by("identity(u) as p").commit()  # spec 0 again, now over a long
    with ds.writer() as w:
        w.write({"id": 9, "u": 2**40, "w": 9})
    for reader in (ds, mem_repo.load("k")):
        assert _ids(reader.to_table(where="u = 1")) == [1, 4, 7]
        assert _ids(reader.to_table(where="w = 7")) == [7]
        assert _ids(reader.to_table(where=f"u = {2**40}")) == [9]
    ds.checkpoint()
    assert _ids(mem_repo.load("k").to_table(where="u = 2")) == [2, 5, 8]
    assert _ids(mem_repo.load("k").to_table(where=f"u >= {2**40}")) == [9]
