"""Checkpoint parts (log protocol 4): written, summarised, read back and checked."""

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdkds.catalog import DatasetDescriptor
from cdkds.catalog.errors import CorruptLogError
from cdkds.catalog.expressions import bind, parse
from cdkds.catalog.expressions.pruning import FileFilter
from cdkds.catalog.keyed.deletion import DeletionVectorRef
from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.log.files import FileTable
from cdkds.catalog.log.parts import (
    CheckpointPart, StoredParts, in_partition_order, part_revision, split, summarise, write_parts,
)
from cdkds.catalog.storage import ObjectStore
from cdkds.formats.statistics import ColumnStatistics

SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "g", "type": "string"}, {"name": "n", "type": "int"},
    {"name": "x", "type": ["null", "double"], "default": None}]}


def recorded(descriptor):
    return DatasetDescriptor.from_json(descriptor.to_json())  # with field ids, as the log holds it


DESCRIPTOR = recorded(DatasetDescriptor(SCHEMA, "identity(g)"))


def store():
    return ObjectStore.open(f"memory://parts-{uuid.uuid4().hex}")


def add(i, g, n=(0, 9), x=(0.0, 1.0), nulls=0, rows=10, stats=True, deletes=()):
    statistics = {"id": ColumnStatistics(0, i, i + rows - 1), "g": ColumnStatistics(0, g, g)}
    if n is not None:
        statistics["n"] = ColumnStatistics(0, *n)
    if x is not None:
        statistics["x"] = ColumnStatistics(nulls, *x)
    return AddFile(f"data/g={g}/f{i}.parquet", {"g_copy": g}, 100 + i, rows, statistics if stats else {},
                   schema_version=0, revision=i % 7, timestamp=1000 + i, deletes=tuple(deletes))


def adds_of(table):
    return sorted(table.files(), key=lambda a: a.path)


def test_a_part_reads_back_the_files_written():
    vector = DeletionVectorRef.from_json({"cardinality": 2, "inline": "OjAAAAEAAAAAAAEAEAAAAAEAAwA="})
    adds = [add(i, "abc"[i % 3], deletes=(vector,) if i == 4 else ()) for i in range(12)]
    adds.append(add(50, "d", x=None, stats=False))
    s = store()
    parts = write_parts(s, [FileTable.of(adds, DESCRIPTOR)], revision=7, most=5)
    assert sorted(p.files for p in parts) == [4, 4, 5] and all(part_revision(p.key) == 7 for p in parts)
    loaded = FileTable.concat([StoredParts(s, "cp").load(p, DESCRIPTOR) for p in parts], DESCRIPTOR)
    assert adds_of(loaded) == sorted(adds, key=lambda a: a.path)
    assert sum(p.rows for p in parts) == sum(a.row_count for a in adds)


def test_a_parts_row_round_trips_through_json():
    table = FileTable.of([add(i, "ab"[i % 2], nulls=i) for i in range(4)], DESCRIPTOR)
    (part,) = write_parts(store(), [table], revision=3)
    assert CheckpointPart.from_json(part.to_json(DESCRIPTOR)["part"], DESCRIPTOR) == part
    assert set(part.to_json(DESCRIPTOR)["part"]["stats"]) == {str(i) for i in DESCRIPTOR.field_ids.values()}


def test_parts_cover_contiguous_ranges_of_partitions():
    adds = [add(i, f"p{i % 10}") for i in range(40)]
    pieces = split(FileTable.of(adds, DESCRIPTOR), most=8)
    assert [len(p) for p in pieces] == [8] * 5
    ranges = [summarise(p)[0]["g_copy"] for p in pieces]
    for before, after in zip(ranges, ranges[1:]):
        assert before.max <= after.min  # sorted by partition: a partition spans neighbours at most
    ordered = [a.partition["g_copy"] for a in in_partition_order(FileTable.of(adds, DESCRIPTOR)).files()]
    assert ordered == sorted(ordered)


def test_merged_statistics_leave_out_what_some_file_does_not_bound():
    adds = [add(0, "a", n=(1, 5), x=(0.5, 2.0), nulls=1),
            add(1, "a", n=(3, 9), x=None, stats=True),  # no statistics for x
            add(2, "a", n=None, x=(None, None), nulls=10)]  # no statistics for n; x all null
    partition, statistics = summarise(FileTable.of(adds, DESCRIPTOR))
    assert partition == {"g_copy": ColumnStatistics(0, "a", "a")}
    assert statistics["id"] == ColumnStatistics(0, 0, 11)
    assert "x" not in statistics and "n" not in statistics
    partition, statistics = summarise(FileTable.of([adds[0], adds[2]], DESCRIPTOR))
    assert statistics["x"] == ColumnStatistics(11, 0.5, 2.0)  # the all-null file bounds nothing, counts its nulls
    unbounded = add(3, "a", x=(None, None), nulls=2)  # values without bounds (NaN, long text): anything
    assert summarise(FileTable.of([adds[0], unbounded], DESCRIPTOR))[1]["x"] == ColumnStatistics(3)


PREDICATES = st.sampled_from([
    "g = 'a'", "g = 'q'", "g in ('b', 'c')", "g != 'a'", "id < 20", "id >= 55", "n > 7", "n = 3", "x > 0.9",
    "x is null", "x is not null", "g = 'c' and id > 30", "g = 'a' or n < 2", "not (id < 40)", "g >= 'b'",
])


@st.composite
def file_lists(draw):
    count = draw(st.integers(0, 40))
    out = []
    for i in range(count):
        lo = draw(st.integers(0, 10))
        x = draw(st.one_of(st.none(), st.tuples(st.floats(0, 1), st.floats(1, 2)), st.just((None, None))))
        out.append(add(i * 3, draw(st.sampled_from("abcd")), n=draw(st.one_of(st.none(), st.just((lo, lo + 2)))),
                       x=x, nulls=draw(st.integers(0, 10)), rows=10))
    return out


@settings(max_examples=40, deadline=None)
@given(file_lists(), PREDICATES, st.integers(1, 9))
def test_reading_only_the_parts_that_may_match_plans_the_same_files(adds, text, most):
    table = FileTable.of(adds, DESCRIPTOR)
    s = store()
    parts = write_parts(s, [table], revision=1, most=most)
    f = FileFilter.of(bind(parse(text), DESCRIPTOR.fields), DESCRIPTOR)
    loader = StoredParts(s, "cp")
    read = [loader.load(p, DESCRIPTOR) for p in parts if p.may_match(f, DESCRIPTOR)]
    partial = [a for table in read for a in table.files() if f.may_match(a)]
    full = [a for a in adds if f.may_match(a)]
    assert sorted(a.path for a in partial) == sorted(a.path for a in full)


@pytest.mark.parametrize("damage", ["missing", "truncated", "flipped", "other part"])
def test_a_damaged_or_missing_part_fails_naming_it_and_the_checkpoint(damage):
    s = store()
    first, second = write_parts(s, [FileTable.of([add(i, "ab"[i % 2]) for i in range(6)], DESCRIPTOR)], 4, most=3)
    data = s.read(first.key)
    if damage == "missing":
        s.delete(first.key)
    elif damage == "truncated":
        s.put(first.key, data[: len(data) // 2])
    elif damage == "flipped":
        s.put(first.key, data[:100] + bytes([data[100] ^ 1]) + data[101:])
    else:
        s.put(first.key, s.read(second.key))
    with pytest.raises(CorruptLogError, match=f"part .*{first.key}.* of checkpoint _log/4.checkpoint"):
        StoredParts(s, "_log/4.checkpoint").load(first, DESCRIPTOR)


def test_a_part_that_lies_about_its_count_fails():
    s = store()
    (part,) = write_parts(s, [FileTable.of([add(i, "a") for i in range(3)], DESCRIPTOR)], 4)
    import dataclasses
    with pytest.raises(CorruptLogError, match="holds 3 files, the checkpoint says 4"):
        StoredParts(s, "cp").load(dataclasses.replace(part, files=4), DESCRIPTOR)


def test_a_part_written_under_an_older_descriptor_reads_under_the_current_one():
    s = store()
    (part,) = write_parts(s, [FileTable.of([add(i, "ab"[i % 2], n=(i, i + 5)) for i in range(4)], DESCRIPTOR)], 2)
    schema = {**SCHEMA, "fields": [{"name": "id", "type": "long"}, {"name": "g", "type": "string"},
                                   {"name": "n", "type": "long"},  # widened
                                   {"name": "y", "type": ["null", "string"], "default": None}]}  # x dropped, y added
    current = recorded(DESCRIPTOR.evolve(DatasetDescriptor(schema, "identity(g)")))
    table = StoredParts(s, "cp").load(part, current)
    assert table.table.schema.equals(FileTable.empty(current).table.schema)
    files = adds_of(table)
    assert sorted(f.statistics["n"].min for f in files) == [0, 1, 2, 3]
    assert all(f.statistics["n"].max == f.statistics["n"].min + 5 for f in files)
    assert all(set(f.statistics) == {"id", "g", "n"} for f in files)  # y: none yet; x gone
    evolved = part.evolve(DESCRIPTOR, current)
    assert set(evolved.statistics) == {"id", "g", "n"} and evolved.statistics["n"] == ColumnStatistics(0, 0, 8)


def test_files_of_several_specs_are_parted_by_spec_first():
    """Spec 1 gives g_copy to a range function: sorted by value alone, files of both specs
    would share parts. Parts hold one spec's files each and are pruned by it; a part
    written before the change (no spec bound) reads as spec 0's."""
    changed = recorded(DESCRIPTOR.with_partitioning("range(g, ['b', 'z']) as g_copy"))
    old = [add(i, "abcd"[i % 4]) for i in range(6)]
    new = [AddFile(f"data/r/f{i}.parquet", {"g_copy": "bz"[i % 2]}, 100, 10, {"id": ColumnStatistics(0, i, i)},
                   schema_version=0, revision=9, spec_id=1) for i in range(6)]
    parts = write_parts(store(), [FileTable.of(old + new, changed)], revision=9, most=3)
    assert sorted((p.partition["#spec"].min, p.partition["#spec"].max) for p in parts) == [(0, 0)] * 2 + [(1, 1)] * 2
    f = FileFilter.of(bind(parse("g = 'a'"), changed.fields), changed)
    matched = [p for p in parts if p.may_match(f, changed)]
    assert sorted((p.partition["#spec"].min, p.partition["g_copy"].min) for p in matched) == [(0, "a"), (1, "b")]
    (before,) = write_parts(store(), [FileTable.of(old, DESCRIPTOR)], revision=2)
    assert "#spec" not in before.partition
    assert before.may_match(FileFilter.of(bind(parse("g = 'a'"), changed.fields), changed), changed)
    assert not before.may_match(FileFilter.of(bind(parse("g = 'q'"), changed.fields), changed), changed)
