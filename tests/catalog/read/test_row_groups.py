"""Reading parts of Parquet files: row groups skipped by their statistics, files read in
splits. Neither may change which rows a scan returns."""

import dataclasses
import datetime as dt
import math
import uuid
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.expressions import ALWAYS_TRUE, Not, Predicate, bind, evaluate
from cdkds.catalog.read.scan import read_plan, read_task
from cdkds.formats.files import Split
from cdkds.catalog.work_columns import POSITION

UTC = dt.timezone.utc
SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"},
    {"name": "x", "type": ["null", "long"], "default": None},
    {"name": "d", "type": ["null", "double"], "default": None},
    {"name": "s", "type": ["null", "string"], "default": None},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
]}
GROUP = 4  # rows per row group in these tests

_ROW = st.fixed_dictionaries({
    "x": st.one_of(st.none(), st.integers(-20, 20)),
    "d": st.one_of(st.none(), st.just(math.nan), st.sampled_from([-1.5, 0.0, 2.0, 3.25])),
    "s": st.one_of(st.none(), st.sampled_from(["", "a", "ab", "b", "ba", "c"])),
    "ts": st.datetimes(min_value=dt.datetime(2025, 12, 30), max_value=dt.datetime(2026, 1, 3), timezones=st.just(UTC)),
})


def _predicates():
    ops = st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge"])
    ts = st.datetimes(min_value=dt.datetime(2025, 12, 29), max_value=dt.datetime(2026, 1, 4), timezones=st.just(UTC))
    return st.one_of(
        st.builds(lambda op, v: Predicate(op, "x", v), ops, st.integers(-22, 22)),
        st.builds(lambda op, v: Predicate(op, "d", v), ops, st.sampled_from([-2.0, -1.5, 0.0, 1.0, 3.25, 4.0])),
        st.builds(lambda op, v: Predicate(op, "s", v), ops, st.sampled_from(["", "a", "b", "bb", "d"])),
        st.builds(lambda op, v: Predicate(op, "ts", v), ops, ts),
        st.builds(lambda vs: Predicate("in", "x", values=tuple(vs)), st.lists(st.integers(-22, 22), max_size=3)),
        st.builds(lambda n: Predicate("is_null", n), st.sampled_from(["x", "d", "s"])),
        st.builds(lambda n: Predicate("not_null", n), st.sampled_from(["x", "d", "s"])),
        st.builds(lambda v: Predicate("starts_with", "s", v), st.sampled_from(["", "a", "b"])),
    )


def _expressions():
    return st.recursive(_predicates(), lambda inner: st.one_of(
        st.builds(lambda a, b: a & b, inner, inner), st.builds(lambda a, b: a | b, inner, inner),
        st.builds(Not, inner)), max_leaves=4)


def _dataset(rows, sort_by=None):
    """A dataset of one Parquet file of row groups of GROUP rows (ids in write order)."""
    rows = [{"id": i, **r} for i, r in enumerate(rows)]
    if sort_by is not None:
        rows.sort(key=lambda r: (r[sort_by] is None, r[sort_by] if r[sort_by] is not None else 0))
    ds = DatasetRepository(f"memory://rg-{uuid.uuid4().hex}").create("t", DatasetDescriptor(SCHEMA))
    arrow = ds.descriptor.arrow_schema
    with mock.patch("cdkds.formats.parquet.ROW_GROUP_ROWS", GROUP), ds.writer() as writer:
        for i in range(0, len(rows), GROUP):
            writer.write_batch(pa.RecordBatch.from_pylist(rows[i:i + GROUP], schema=arrow))
    return ds.refresh(), rows


def _same(a, b):
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _ids(table):
    return sorted(table.column("id").to_pylist())


@settings(max_examples=150, deadline=None)
@given(st.lists(_ROW, min_size=1, max_size=40), _expressions(), st.sampled_from([None, "x", "x", "d", "s", "ts"]))
def test_property_row_group_pruning_never_drops_a_matching_row(rows, expression, sort_by):
    ds, written = _dataset(rows, sort_by)
    assert pq.ParquetFile(ds.store.fs.open(ds.store.path(ds.files[0].path))).metadata.num_row_groups == \
        -(-len(rows) // GROUP)
    bound = bind(expression, ds.descriptor.fields)
    expected = sorted(r["id"] for r in written if evaluate(bound, r) is True)
    assert _ids(ds.to_table(where=expression)) == expected


@settings(max_examples=25, deadline=None)
@given(st.lists(_ROW, min_size=1, max_size=40), st.lists(st.integers(1, 400), min_size=1, max_size=6),
       st.lists(st.integers(1, 40), max_size=8))
def test_property_splits_read_every_row_once_at_its_position(rows, cuts, deleted):
    ds, written = _dataset(rows)
    ds.delete(f"id in ({', '.join(str(i) for i in [-1, *deleted])})")  # a tombstone, read in every split
    (task,) = ds.plan().tasks
    names = ["id", "x", "d", "s", "ts"]
    whole = pa.Table.from_batches(list(read_task(ds.store, ds.descriptor, ALWAYS_TRUE, names,
                                                 task, positions=True)))
    bounds = sorted({0, task.file.size, *(c * task.file.size // 400 for c in cuts)})
    pieces = []
    for start, end in zip(bounds, bounds[1:]):
        part = dataclasses.replace(task, split=Split(start, end - start))
        pieces.extend(read_task(ds.store, ds.descriptor, ALWAYS_TRUE, names, part, positions=True))
    together = pa.Table.from_batches(pieces, schema=whole.schema).sort_by(POSITION)
    assert together.column(POSITION).to_pylist() == whole.column(POSITION).to_pylist()
    assert together.column("id").to_pylist() == whole.column("id").to_pylist()
    assert sorted(whole.column("id").to_pylist()) == sorted(set(range(len(rows))) - set(deleted))
    assert whole.column(POSITION).to_pylist() == whole.column("id").to_pylist()  # written in id order


def per_file(ds, where):
    return pa.Table.from_batches(list(read_plan(ds.store, ds.plan(where))), schema=ds.plan(where).output_schema)


def test_a_selective_predicate_on_a_sorted_column_reads_one_row_group():
    """cdkds's own reader (the fallback of to_table, which reads plain Parquet through pyarrow's scanner)."""
    ds, _ = _dataset([{"x": i, "d": float(i), "s": f"{i:03}", "ts": dt.datetime(2026, 1, 1, tzinfo=UTC)}
                      for i in range(40)], sort_by="x")
    read = []
    original = pq.ParquetFile.iter_batches

    def spy(self, *args, **kwargs):
        read.append(kwargs.get("row_groups"))
        return original(self, *args, **kwargs)

    with mock.patch.object(pq.ParquetFile, "iter_batches", spy):
        assert per_file(ds, "x = 21").column("x").to_pylist() == [21]
        assert read == [[5]]
        read.clear()
        assert per_file(ds, "x >= 30 and x < 34").num_rows == 4
        assert read == [[7, 8]]
        read.clear()
        assert per_file(ds, "s = '013'").num_rows == 1 and read == [[3]]
        read.clear()
        assert per_file(ds, "d > 38.5").num_rows == 1 and read == [[9]]
        read.clear()
        assert per_file(ds, "x = 100").num_rows == 0  # the file itself is pruned
        assert read == []


def test_a_large_batch_is_written_in_row_groups_of_at_most_row_group_rows(tmp_path):
    from cdkds.formats.parquet import ROW_GROUP_ROWS

    ds = DatasetRepository(str(tmp_path)).create("t", DatasetDescriptor(SCHEMA))
    rows = 3 * ROW_GROUP_ROWS + 5
    with ds.writer() as writer:
        writer.write_batch(pa.table({"id": range(rows), "ts": [0] * rows}).cast(
            pa.schema([pa.field("id", pa.int64()), pa.field("ts", pa.timestamp("us", "UTC"))])))
    ds = ds.refresh()
    meta = pq.read_metadata(ds.store.path(ds.files[0].path))
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [ROW_GROUP_ROWS] * 3 + [5]
    assert ds.to_table(where=f"id = {2 * ROW_GROUP_ROWS + 1}").num_rows == 1
