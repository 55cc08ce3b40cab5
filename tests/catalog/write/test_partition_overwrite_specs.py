"""A partition overwrite after a change of partition strategy: files of older specs wholly
inside the partitions written are replaced, those wholly outside kept, and when a file
may hold rows of both it refuses, naming the dataset, the partition and the old spec."""

from __future__ import annotations

import datetime as dt
import uuid

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import AmbiguousOverwriteError
from cdkds.catalog.partitioning.coverage import INSIDE, OUTSIDE, UNKNOWN, coverage

SCHEMA = {"type": "record", "name": "E", "fields": [
    {"name": "id", "type": "long"}, {"name": "userId", "type": "long"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}}]}


def day(year: int, month: int, d: int = 1) -> dt.datetime:
    return dt.datetime(year, month, d, tzinfo=dt.timezone.utc)


def events(first: int, times: list[dt.datetime]) -> pa.Table:
    ids = list(range(first, first + len(times)))
    return pa.table({"id": ids, "userId": [i % 5 for i in ids], "ts": pa.array(times, pa.timestamp("us", "UTC"))})


def write(ds, table: pa.Table, mode: str = "append") -> int | None:
    with ds.writer(mode=mode) as w:
        w.write_batch(table)
    return ds.version


def ids(ds) -> list[int]:
    return sorted(ds.to_table().column("id").to_pylist())


@pytest.fixture
def ds():
    """Written under year(ts) (spec 0): 2025 across its months, and March 2026 alone; then
    partitioned by year(ts), month(ts) (spec 1)."""
    repo = DatasetRepository(f"memory://overwrite-specs-{uuid.uuid4().hex}")
    ds = repo.create("events", DatasetDescriptor(SCHEMA, "year(ts)"))
    write(ds, events(0, [day(2025, m) for m in range(1, 13)]))  # ids 0-11
    write(ds, events(100, [day(2026, 3, d) for d in range(1, 6)]))  # ids 100-104
    ds.alter().partition_by("year(ts), month(ts)").commit()
    return ds


def test_old_files_wholly_inside_are_replaced_and_those_outside_kept(ds):
    old = {f.path: f for f in ds.files}
    write(ds, events(200, [day(2026, 3, 9), day(2026, 3, 10)]), mode="overwrite_partitions")
    assert ids(ds) == [*range(12), 200, 201]  # March 2026's old file replaced, 2025's kept
    kept = [f for f in ds.files if f.path in old]
    assert [f.partition for f in kept] == [{"year": 2025}]
    assert {f.spec_id for f in ds.files if f.path not in old} == {1}


def test_an_old_file_partly_inside_is_refused_naming_it_and_nothing_is_committed(ds):
    write(ds, events(400, [day(2026, m, 2) for m in range(1, 5)]))  # spec 1 now: one file per month
    version, rows, files = ds.version, ids(ds), {f.path for f in ds.files}
    with pytest.raises(AmbiguousOverwriteError) as e:
        write(ds, events(500, [day(2025, 6, 2)]), mode="overwrite_partitions")
    message = str(e.value)
    assert "dataset 'events'" in message and "partition spec 0 (year(ts), partition year=2025)" in message
    assert "partition year=2025, month=6" in message and "dataset.compact()" in message
    ds.refresh()
    assert ds.version == version and ids(ds) == rows and {f.path for f in ds.files} == files
    assert ds.vacuum(dt.timedelta(0), force=True) == []  # the overwrite's files were deleted
    ds.compact()  # into spec 1: now it can tell
    write(ds, events(500, [day(2025, 6, 2)]), mode="overwrite_partitions")
    assert ids(ds) == sorted([i for i in rows if i != 5] + [500])


def test_coverage_reads_bounds_through_each_function(ds):
    by_year = {f.partition["year"]: f for f in ds.files}
    descriptor = ds.descriptor
    assert coverage(descriptor, by_year[2026], {(2026, 3)}) == INSIDE
    assert coverage(descriptor, by_year[2026], {(2026, 4), (2025, 3)}) == OUTSIDE
    assert coverage(descriptor, by_year[2025], {(2025, 3)}) == UNKNOWN
    assert coverage(descriptor, by_year[2025], {(2025, m) for m in range(1, 13)}) == INSIDE
    assert coverage(descriptor, by_year[2025], {(2024, m) for m in range(1, 13)}) == OUTSIDE


def test_coverage_of_a_hash_is_every_bucket():
    repo = DatasetRepository(f"memory://overwrite-specs-{uuid.uuid4().hex}")
    ds = repo.create("events", DatasetDescriptor(SCHEMA, "year(ts)"))
    write(ds, events(0, [day(2026, 3, d) for d in range(1, 9)]))
    ds.alter().partition_by("year(ts), hash(id, 2)").commit()
    old = ds.files[0]
    assert coverage(ds.descriptor, old, {(2026, 0)}) == UNKNOWN  # its rows of bucket 1 would be lost
    assert coverage(ds.descriptor, old, {(2026, 0), (2026, 1)}) == INSIDE
    write(ds, events(10, [day(2026, 3, 9)] * 8), mode="overwrite_partitions")  # ids 10-17 hash into both buckets
    assert ids(ds) == list(range(10, 18))
