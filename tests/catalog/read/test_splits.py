"""Input partitions by Spark's rules: split size, file splits, packing."""

import dataclasses
import pickle

from hypothesis import given
from hypothesis import strategies as st

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.expressions import Predicate, bind
from cdkds.catalog.log.actions import AddFile, Tombstone
from cdkds.catalog.log.files import FileTable
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.read.scan import FileScanTask, FileScanTasks
from cdkds.catalog.read.splits import FILE_OPEN_COST, MIN_SPLIT_BYTES, input_partitions, pack, split, split_size
from cdkds.formats.files import Split
from cdkds.formats.statistics import ColumnStatistics

MB = 1024 * 1024


def _task(size: int, name: str = "f") -> FileScanTask:
    return FileScanTask(AddFile(path=f"data/{name}-{size}.parquet", partition={}, size=size, row_count=1))


def test_split_size_keeps_every_core_busy():
    four = [_task(14 * MB, str(i)) for i in range(4)]  # 2M rows in four files: 57 MB
    assert split_size(four, 128 * MB, 2) == (4 * (14 * MB + FILE_OPEN_COST)) // 2
    assert len(input_partitions(four, 128 * MB, 2, True)) == 2  # Spark plans two here; packing by 128 MB gave one
    assert split_size(four, 128 * MB, 1) == 4 * (14 * MB + FILE_OPEN_COST)  # one core: one partition
    assert split_size([_task(10 * MB)], 128 * MB, 64) == FILE_OPEN_COST  # never below the cost of opening a file
    assert split_size([_task(10_000 * MB)], 128 * MB, 2) == 128 * MB  # never above maxPartitionBytes
    # never below 1 MiB: smaller splits hold no row group's middle (a 64-byte maxPartitionBytes planned 5M tasks)
    assert split_size([_task(10_000 * MB)], 64, 2) == MIN_SPLIT_BYTES


def test_a_large_file_is_cut_into_splits_that_cover_it_once():
    task = _task(1000 * MB)
    pieces = split([task], 128 * MB, True)
    assert [p.split.start for p in pieces] == [i * 128 * MB for i in range(8)]
    assert sum(p.split.length for p in pieces) == 1000 * MB
    assert all(p.file is task.file for p in pieces)
    assert len(input_partitions([task], 128 * MB, 2, True)) == 8
    assert split([task], 128 * MB, False) == [task]  # Avro: read whole
    assert split([_task(5 * MB)], 128 * MB, True)[0].split is None


def test_pack_is_next_fit_largest_first():
    tasks = [_task(s * MB, str(i)) for i, s in enumerate([1, 30, 2, 60, 3])]
    groups = pack(tasks, 64 * MB)
    assert [[t.length // MB for t in g] for g in groups] == [[60], [30, 3, 2, 1]]
    assert pack([], 64 * MB) == []


@given(st.lists(st.integers(1, 3000), min_size=1, max_size=30), st.integers(1, 64), st.integers(1, 512))
def test_property_every_byte_is_read_once(sizes, parallelism, max_mb):
    tasks = [_task(s * 100_000, str(i)) for i, s in enumerate(sizes)]
    groups = input_partitions(tasks, max_mb * MB, parallelism, True)
    size = split_size(tasks, max_mb * MB, parallelism)
    covered: dict[str, list[tuple[int, int]]] = {}
    for group in groups:
        assert group
        # a group holds one piece, or pieces that fit in the split size (each costing the open cost too)
        assert len(group) == 1 or sum(t.length for t in group) + (len(group) - 1) * FILE_OPEN_COST <= size
        for t in group:
            s = t.split or Split(0, t.file.size)
            assert t.length == s.length <= max(size, 1) or t.split is None
            covered.setdefault(t.file.path, []).append((s.start, s.start + s.length))
    for t in tasks:
        ranges = sorted(covered[t.file.path])
        assert ranges[0][0] == 0 and ranges[-1][1] == t.file.size
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))


def test_split_holds_each_middle_in_exactly_one_split():
    splits = [Split(0, 10), Split(10, 10), Split(20, 5)]
    for first in range(25):
        for last in range(first + 1, 26):
            assert sum(s.holds(first, last) for s in splits) == 1
    assert dataclasses.asdict(Split(3, 4)) == {"start": 3, "length": 4}


# ---------------------------------------------------------------- tasks known column-wise

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "p", "type": "string"}]}


def _column_tasks(sizes: list[int], tombstones=()) -> FileScanTasks:
    """A plan's tasks over files of ``sizes`` bytes, known column-wise."""
    descriptor = DatasetDescriptor(SCHEMA, partition_strategy="identity(p)")
    adds = [AddFile(f"data/p_copy=v{i % 3}/f{i}.parquet", {"p_copy": f"v{i % 3}"}, size, 10,
                    {"id": ColumnStatistics(0, i, i + 9)}, 0, revision=i % 4) for i, size in enumerate(sizes)]
    snapshot = Snapshot(4, 0, "", descriptor, 0, {a.path: a for a in adds}, tuple(tombstones))
    return FileScanTasks(snapshot, FileTable.of(adds, descriptor), 0)


def _spark_rules(tasks: list[FileScanTask], max_bytes: int, parallelism: int, splittable: bool):
    """Spark's rules spelt out task by task (FilePartition.maxSplitBytes, splitFiles, getFilePartitions)."""
    total = sum(t.length + FILE_OPEN_COST for t in tasks)
    size = max(MIN_SPLIT_BYTES, min(max_bytes, max(FILE_OPEN_COST, total // parallelism)))
    pieces = []
    for t in tasks:
        if splittable and t.file.size > size:
            pieces += [dataclasses.replace(t, split=Split(s, min(size, t.file.size - s))) for s in range(0, t.file.size, size)]
        else:
            pieces.append(t)
    groups, current, used = [], [], 0
    for t in sorted(pieces, key=lambda t: t.length, reverse=True):
        if current and used + t.length > size:
            groups.append(current)
            current, used = [], 0
        current.append(t)
        used += t.length + FILE_OPEN_COST
    return groups + [current] if current else groups


@given(st.lists(st.sampled_from([1, 5, 40, 127, 128, 129, 300, 1000, 3000]) | st.integers(1, 3000), max_size=40),
       st.integers(1, 64), st.integers(1, 512), st.booleans())
def test_property_column_wise_packing_is_spark_packing_of_the_tasks(sizes, parallelism, max_mb, splittable):
    tasks = _column_tasks([s * 100_000 for s in sizes])
    expected = _spark_rules(list(tasks), max_mb * MB, parallelism, splittable)
    columnar = input_partitions(tasks, max_mb * MB, parallelism, splittable)
    assert all(isinstance(g, FileScanTasks) for g in columnar)  # no task object made to pack them
    assert [list(g) for g in columnar] == expected
    assert input_partitions(list(tasks), max_mb * MB, parallelism, splittable) == expected


def test_a_group_travels_as_its_own_rows_and_makes_its_tasks_where_it_is_read():
    tombstone = Tombstone(bind(Predicate("eq", "id", 3), DatasetDescriptor(SCHEMA).fields), revision=2)
    tasks = _column_tasks([10 * MB] * 2000 + [700 * MB], [tombstone])
    groups = input_partitions(tasks, 128 * MB, 4, True)
    assert sum(len(g) for g in groups) == 2000 + 6  # the large file in six splits
    for group in (groups[0], groups[-1]):
        shipped = pickle.loads(pickle.dumps(group))
        assert isinstance(shipped, FileScanTasks)
        assert list(shipped) == list(group)  # its splits, and the tombstones that apply to each file
        assert len(pickle.dumps(group)) < 20_000  # its rows, not the plan's 2,001 files
    assert [t.split for t in groups[0]] == [Split(i * 128 * MB, 128 * MB) for i in range(1)]
    assert any(t.tombstones for g in groups for t in g) and not all(t.tombstones for g in groups for t in g)


def test_tasks_restricted_to_some_paths():
    tasks = _column_tasks([MB, 2 * MB, 3 * MB])
    kept = tasks.restricted({"data/p_copy=v2/f2.parquet", "data/p_copy=v0/f0.parquet"})
    assert isinstance(kept, FileScanTasks)
    assert list(kept) == [tasks[0], tasks[2]]
