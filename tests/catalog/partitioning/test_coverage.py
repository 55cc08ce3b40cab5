"""Coverage is sound: a file it calls inside the partitions has every row in one of them,
a file it calls outside has none there, for random strategies, rows and partitions."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

from hypothesis import given, strategies as st

from cdkds.catalog import DatasetDescriptor
from cdkds.catalog.partitioning.coverage import INSIDE, OUTSIDE, coverage
from cdkds.formats.statistics import ColumnStatistics

SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "n", "type": "long"}, {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}}]}
FUNCTIONS = ["identity(n)", "hash(n, 3)", "range(n, 5)", "year(ts)", "month(ts)", "day(ts)", "hour(ts)",
             "dateFormat(ts, 'yyyy-MM')"]
START = dt.datetime(2025, 12, 20, tzinfo=dt.timezone.utc)

rows = st.lists(st.tuples(st.integers(-20, 20), st.integers(0, 60 * 24 * 30)), min_size=1, max_size=8)


@given(st.lists(st.sampled_from(FUNCTIONS), min_size=1, max_size=3, unique=True), rows, rows, st.booleans())
def test_inside_and_outside_are_what_the_rows_say(functions, file_rows, other_rows, with_file_partitions):
    descriptor = DatasetDescriptor(SCHEMA, "identity(n) as n_old").with_partitioning(", ".join(functions))
    strategy, fields = descriptor.partition_strategy, descriptor.fields

    def partition(n: int, minutes: int) -> tuple:
        values = {"n": n, "ts": START + dt.timedelta(minutes=minutes)}
        return tuple(f.apply(values[f.source], fields[f.source].kind) for f in strategy.functions)

    ns = [n for n, _ in file_rows]
    times = [START + dt.timedelta(minutes=m) for _, m in file_rows]
    # spec 0, identity(n) as n_old: the file's partition value is n, when it has one value
    file = SimpleNamespace(partition={"n_old": ns[0]}, row_count=len(file_rows), spec_id=0,
                           statistics={"n": ColumnStatistics(0, min(ns), max(ns)),
                                       "ts": ColumnStatistics(0, min(times), max(times))})
    if len(set(ns)) > 1:
        ns = [ns[0]] * len(ns)
        file_rows = [(ns[0], m) for _, m in file_rows]
    written = {partition(*r) for r in other_rows} | ({partition(*file_rows[0])} if with_file_partitions else set())
    found = coverage(descriptor, file, written)
    in_written = [partition(*r) in written for r in file_rows]
    if found == INSIDE:
        assert all(in_written)
    if found == OUTSIDE:
        assert not any(in_written)


def test_a_single_row_file_is_always_decided():
    descriptor = DatasetDescriptor(SCHEMA, "identity(n) as n_old").with_partitioning("hash(n, 3), month(ts)")
    file = SimpleNamespace(partition={"n_old": 4}, row_count=1, spec_id=0,
                           statistics={"n": ColumnStatistics(0, 4, 4), "ts": ColumnStatistics(0, START, START)})
    bucket = descriptor.partition_strategy.functions[0].apply(4, "long")
    assert coverage(descriptor, file, {(bucket, 12)}) == INSIDE
    assert coverage(descriptor, file, {(bucket, 11), ((bucket + 1) % 3, 12)}) == OUTSIDE


def test_equal_images_of_the_bounds_say_nothing_of_the_rows_between():
    """hour(ts) of two midnights is 0, of the 01:00 between them 1; hash(n, 3) may give 1 and 5 one bucket."""
    descriptor = DatasetDescriptor(SCHEMA, "identity(n) as n_old").with_partitioning("hour(ts)")
    times = ColumnStatistics(0, START, START + dt.timedelta(days=15))
    file = SimpleNamespace(partition={"n_old": 0}, row_count=3, spec_id=0, statistics={"ts": times})
    assert coverage(descriptor, file, {(0,)}) not in (INSIDE, OUTSIDE)
    hashed = DatasetDescriptor(SCHEMA, "identity(ts) as t_old").with_partitioning("hash(n, 3)")
    bucket = hashed.partition_strategy.functions[0].apply
    low, high = next((a, b) for a in range(20) for b in range(a + 2, 40) if bucket(a, "long") == bucket(b, "long"))
    spread = SimpleNamespace(partition={"t_old": None}, row_count=3, spec_id=0,
                             statistics={"n": ColumnStatistics(0, low, high)})
    assert coverage(hashed, spread, {(bucket(low, "long"),)}) != INSIDE
