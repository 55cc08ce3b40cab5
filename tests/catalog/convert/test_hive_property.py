"""Random Hive layouts (partition columns, their types and values, nulls, files with and
without the partition columns, empty files) convert and read back as pyarrow reads the
folder, on cdkds's reader, pyarrow's scanner and the lazy dataset, and pass ``check --read-data`` (hypothesis)."""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from hypothesis import given, settings, strategies as st

from cdkds.catalog import DatasetRepository
from tests.catalog.convert.folders import bag, write_file

ARROW = {"int": pa.int32(), "date": pa.date32(), "string": pa.string()}
VALUES = {
    "int": st.integers(-2 ** 31, 2 ** 31 - 1),
    "date": st.dates(dt.date(1900, 1, 1), dt.date(2100, 12, 31)),
    "string": st.from_regex(r"[A-Za-z][A-Za-z0-9 -]{0,6}", fullmatch=True).map(str.strip).filter(bool),
}


@st.composite
def layouts(draw):
    names = draw(st.lists(st.sampled_from(["region", "day", "n"]), min_size=1, max_size=2, unique=True))
    kinds = {n: draw(st.sampled_from(sorted(ARROW))) for n in names}
    given = {n: k for n, k in kinds.items() if draw(st.booleans())}  # the rest inferred
    partitions = draw(st.lists(st.tuples(*(st.one_of(st.none(), VALUES[kinds[n]]) for n in names)),
                               min_size=1, max_size=4, unique=True))
    for n, i in zip(names, range(len(names))):  # an inferred column needs a value to infer from
        if n not in given and all(p[i] is None for p in partitions):
            partitions.append(tuple(draw(VALUES[kinds[m]]) if m == n else None for m in names))
    files = []
    for values in partitions:
        for _ in range(draw(st.integers(1, 2))):
            rows = draw(st.integers(0, 3))
            holds = draw(st.booleans())  # the file holds its partition columns too
            files.append((dict(zip(names, values)), rows, holds))
    return names, kinds, given, files


@settings(max_examples=25, deadline=None)
@given(layouts())
def test_random_hive_layouts_read_back_as_pyarrow_reads_them(layout):
    names, kinds, given, files = layout
    with tempfile.TemporaryDirectory() as root:
        folder = Path(root) / "t"
        next_id = 0
        for i, (partition, rows, holds) in enumerate(files):
            columns = {"id": pa.array(range(next_id, next_id + rows), pa.int64()),
                       "v": pa.array([None if j % 2 else f"v{j}" for j in range(rows)], pa.string())}
            if holds:
                columns.update({n: pa.array([partition[n]] * rows, ARROW[kinds[n]]) for n in names})
            write_file(folder, {n: _text(partition[n]) for n in names}, pa.table(columns), f"part-{i}.parquet")
            next_id += rows
        ds = DatasetRepository(f"file://{root}").convert("t", partition_types=given)
        partitioning = pads.partitioning(pa.schema([(n, ARROW[kinds[n]]) for n in names]), flavor="hive")
        schema = pa.schema([("id", pa.int64()), ("v", pa.string()), *((n, ARROW[kinds[n]]) for n in names)])
        theirs = pads.dataset(str(folder), schema=schema, format="parquet", partitioning=partitioning).to_table()
        assert bag(ds.to_table()) == bag(theirs)  # pyarrow's scanner
        assert bag(ds.to_arrow_dataset().to_table()) == bag(theirs)  # the lazy dataset
        assert bag(pa.Table.from_batches(list(_cdkds_reader(ds)), schema=ds.plan().output_schema)) == bag(theirs)
        assert not ds.check(read_data=True).problems


def _text(value) -> str | None:
    return None if value is None else value.isoformat() if isinstance(value, dt.date) else str(value)


def _cdkds_reader(ds):
    from cdkds.catalog.read.scan import read_plan
    return read_plan(ds.store, ds.plan())


FOLDER_TEXT = st.one_of(
    st.from_regex(r"[+-]?0*[0-9]{1,12}", fullmatch=True),  # whole numbers, signed, leading zeros, beyond an int
    st.from_regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", fullmatch=True),  # dates, and texts that only look like them
    st.text(min_size=1, max_size=6),  # anything: '/', '=', '%', spaces, other scripts' digits
)


@settings(max_examples=25, deadline=None)
@given(st.lists(FOLDER_TEXT, min_size=1, max_size=4, unique=True))
def test_inferred_partition_values_keep_the_text_pyarrow_reads(texts):
    """Whatever type a folder's values are inferred as (cdkds also infers dates, and longs
    where pyarrow keeps text), each row's value reads as the text pyarrow reads with its own
    inference: no value is changed (``+5`` to ``5``, ``٣`` to ``3``)."""
    from urllib.parse import quote
    with tempfile.TemporaryDirectory() as root:
        folder = Path(root) / "t"
        for i, text in enumerate(texts):
            where = folder / f"k={quote(text, safe='')}"
            where.mkdir(parents=True)
            pq.write_table(pa.table({"id": [i]}), where / "part-0.parquet")
        theirs = pads.dataset(str(folder), format="parquet", partitioning="hive").to_table()
        ds = DatasetRepository(f"file://{root}").convert("t")
        assert _as_text(ds.to_table()) == _as_text(theirs)
        assert not ds.check(read_data=True).problems


def _as_text(table: pa.Table) -> list[tuple[int, str | None]]:
    return sorted((r["id"], None if r["k"] is None else _text(r["k"])) for r in table.to_pylist())
