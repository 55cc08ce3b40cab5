"""Input partitions by Spark's rules: split size, file splits, packing."""

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.read.scan import FileScanTask
from cdkds.catalog.read.splits import FILE_OPEN_COST, MIN_SPLIT_BYTES, input_partitions, pack, split, split_size
from cdkds.formats.files import Split

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
