"""to_table, scan and to_batch_reader through pyarrow's dataset scanner: the rows of
read_plan (cdkds's own per-file reader) for every schema change and rule, files read by
pyarrow where they can be, errors naming the file."""

import datetime as dt
import math
from collections import Counter

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import DataFileError
from cdkds.catalog.read.arrow_scan import native_plan
from cdkds.catalog.read.scan import read_plan
from cdkds.formats.projection import CastTo, FileColumn, MissingField
from tests.catalog.read.test_changes import KEYED

UTC = dt.timezone.utc
SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "int"}, {"name": "g", "type": "string"},
    {"name": "x", "type": ["null", "long"], "default": None}, {"name": "f", "type": ["null", "float"], "default": None}]}


def append(ds, rows):
    with ds.writer() as w:
        for r in rows:
            w.write(r)


def bag(table: pa.Table) -> Counter:
    return Counter(repr(sorted(r.items())) for r in table.to_pylist())


def per_file(ds, where=None, columns=None) -> pa.Table:
    plan = ds.plan(where, columns)
    return pa.Table.from_batches(list(read_plan(ds.store, plan)), schema=plan.output_schema)


def agree(ds, where=None, columns=None) -> pa.Table:
    """The rows of to_table, scan and to_batch_reader, checked against read_plan's."""
    expected = per_file(ds, where, columns)
    table = ds.to_table(where, columns)
    assert table.schema.equals(expected.schema, check_metadata=True)
    assert bag(table) == bag(expected) and table.num_rows == expected.num_rows
    batches = list(ds.scan(where, columns, batch_rows=3))
    assert all(0 < b.num_rows <= 3 for b in batches)
    assert bag(pa.Table.from_batches(batches, schema=expected.schema)) == bag(expected)
    assert bag(ds.to_batch_reader(where, columns).read_all()) == bag(expected)
    return table


@pytest.fixture
def evolved(tmp_path):
    """Files under three layouts (renamed, added with and without defaults, widened, dropped),
    a tombstone over NULLs and NaNs, and files written after it."""
    ds = DatasetRepository(f"file://{tmp_path}").create("d", DatasetDescriptor(SCHEMA))
    append(ds, [{"id": i, "g": "ab"[i % 2], "x": None if i % 3 == 0 else i, "f": math.nan if i == 4 else i / 2}
                for i in range(12)])
    ds.alter().rename("x", "y").add("z", "long", default=7).add("w", "string", nullable=True).commit()
    append(ds, [{"id": 100 + i, "g": "a", "y": i, "z": i, "w": "w"} for i in range(3)])
    ds.delete("y > 4 or f = 0.5")  # NULL (and NaN) rows are not deleted
    ds.alter().widen("id", "long").widen("f", "double").drop("g").commit()
    append(ds, [{"id": 2**40, "y": None, "z": 5, "w": None, "f": 0.25}])
    return ds


def test_schema_changes_and_tombstones_read_as_cdkds_reads_them(evolved):
    native = native_plan(evolved.store, evolved.plan())
    assert not native.fallback and len(native.groups) >= 3  # every file read by pyarrow
    readers = {type(r.convert) if isinstance(r, FileColumn) else type(r)
               for g in native.groups for r in g.projection.readers}
    assert {CastTo, MissingField} <= readers and any(g.tombstones for g in native.groups)
    table = agree(evolved)
    assert table.schema.names == ["id", "y", "f", "z", "w"]
    assert sorted(table.column("z").to_pylist(), key=str)[:3] == [0, 1, 2]
    assert 7 in table.column("z").to_pylist() and None in table.column("y").to_pylist()
    assert 2**40 in table.column("id").to_pylist()
    for where in ["y > 2", "y is null", "z = 7", "id > 5", "f > 1", "f = 0.5", "f != 2.0", "f is null", "w = 'w'", "id in (1, 2, 100)",
                  "not (y < 3)", "id > 10000000000000"]:
        agree(evolved, where)
    agree(evolved, "y = 2", columns=["id"])  # the predicate's column is read, then left out
    agree(evolved, columns=["w", "id"])
    assert agree(evolved, "id = -1").num_rows == 0
    assert agree(evolved, columns=[]).num_rows == per_file(evolved).num_rows


def test_ttl_is_applied_at_the_plan_time(tmp_path):
    ds = DatasetRepository(f"file://{tmp_path}").create("e", DatasetDescriptor(
        {"type": "record", "name": "E", "fields": [
            {"name": "id", "type": "long"},
            {"name": "until", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None}]},
        properties={"ttl.field": "until"}))
    append(ds, [{"id": 1, "until": dt.datetime(2000, 1, 1, tzinfo=UTC)},
                {"id": 2, "until": dt.datetime(2999, 1, 1, tzinfo=UTC)}, {"id": 3, "until": None}])
    native = native_plan(ds.store, ds.plan())
    assert native.native_files == 1 and not native.fallback
    assert sorted(agree(ds, columns=["id"]).column("id").to_pylist()) == [2, 3]
    assert agree(ds, "id > 1", columns=["id"]).num_rows == 2


def test_deletion_vectors_are_read_by_pyarrow_and_nested_conversions_by_cdkds(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}")
    users = repo.create("u", DatasetDescriptor(KEYED, record_key=["k"], ordering_field="o"))
    users.upsert([{"k": i, "v": "a", "o": 1} for i in range(20)])
    users.upsert([{"k": i, "v": "b", "o": 2} for i in range(5)])
    users.delete_keys([19])
    native = native_plan(users.store, users.plan())
    assert not native.fallback and native.native_files == 2  # the first file has deletion vectors, the second not
    assert agree(users).num_rows == 19
    agree(users, "v = 'a'", columns=["k"])

    nested = repo.create("n", DatasetDescriptor({"type": "record", "name": "N", "fields": [
        {"name": "id", "type": "long"},
        {"name": "r", "type": {"type": "record", "name": "In", "fields": [{"name": "a", "type": "long"}]}}]}))
    append(nested, [{"id": 1, "r": {"a": 1}}])
    nested.alter().add("r.b", "string", nullable=True).commit()
    append(nested, [{"id": 2, "r": {"a": 2, "b": "x"}}])
    native = native_plan(nested.store, nested.plan())
    assert len(native.fallback) == 1 and "children" in next(iter(native.reasons.values()))
    assert bag(agree(nested)) == Counter([repr(sorted({"id": 1, "r": {"a": 1, "b": None}}.items())),
                                         repr(sorted({"id": 2, "r": {"a": 2, "b": "x"}}.items()))])


def test_an_empty_scan_has_the_output_schema(tmp_path):
    ds = DatasetRepository(f"file://{tmp_path}").create("d", DatasetDescriptor(SCHEMA))
    assert ds.to_table().schema.names == ["id", "g", "x", "f"] and ds.to_table().num_rows == 0
    append(ds, [{"id": 1, "g": "a", "x": 1, "f": 1.0}])
    assert ds.to_table(where="id > 1", columns=["g"]).schema.names == ["g"]
    assert list(ds.scan(where="id > 1")) == []


def test_a_missing_or_damaged_file_is_a_data_file_error_naming_it(tmp_path):
    ds = DatasetRepository(f"file://{tmp_path}").create("d", DatasetDescriptor(SCHEMA, "identity(g)"))
    append(ds, [{"id": i, "g": "ab"[i % 2], "x": i, "f": None} for i in range(10)])
    gone, damaged = sorted(ds.files, key=lambda f: f.path)
    ds.store.fs.rm(ds.store.path(gone.path))
    for read in (lambda: ds.to_table(), lambda: list(ds.scan())):
        with pytest.raises(DataFileError, match=f"data file .*{gone.path}.* is missing"):
            read()
    with pytest.raises(Exception, match=f"data file .*{gone.path}.* is missing"):  # through Arrow's C stream
        ds.to_batch_reader().read_all()
    with pytest.raises(DataFileError, match=f"{damaged.path}.* is damaged"):
        with ds.store.fs.open(ds.store.path(damaged.path), "wb") as f:
            f.write(b"not parquet at all")
        ds.to_table(where=f"g = '{next(iter(damaged.partition.values()))}'")


def test_a_batch_reader_closed_early_stops_pyarrow(tmp_path):
    ds = DatasetRepository(f"file://{tmp_path}").create("d", DatasetDescriptor(SCHEMA))
    for i in range(4):
        append(ds, [{"id": j, "g": "a", "x": j, "f": None} for j in range(i * 100, i * 100 + 100)])
    reader = ds.to_batch_reader(batch_rows=10)
    assert reader.read_next_batch().num_rows == 10
    reader.close()
    with pytest.raises(Exception):
        reader.read_next_batch()
    scan = ds.scan(batch_rows=10)
    next(scan)
    scan.close()
    assert list(scan) == []


def test_every_backend_reads_through_pyarrow(backend):
    """to_table through pyarrow everywhere; scan and to_batch_reader stream through pyarrow on local files only."""
    url, options = backend
    ds = DatasetRepository(url, options).create("d", DatasetDescriptor(SCHEMA, "identity(g)"))
    append(ds, [{"id": i, "g": "ab"[i % 2], "x": i, "f": None} for i in range(10)])
    ds.alter().rename("x", "y").commit()
    append(ds, [{"id": 10, "g": "a", "y": None, "f": 1.0}])
    ds.delete("y = 3")
    assert native_plan(ds.store, ds.plan()).native_files == 3
    assert agree(ds).num_rows == 10
    agree(ds, "g = 'a'", columns=["y"])
    ds.store.fs.rm(ds.store.path(ds.files[0].path))
    with pytest.raises(DataFileError, match=f"{ds.files[0].path}"):
        ds.to_table()


@pytest.mark.slow
@pytest.mark.parametrize("left_open", ["ds.scan(batch_rows=100)", "ds.to_batch_reader(batch_rows=100)"])
def test_a_stream_left_open_on_an_fsspec_store_lets_python_exit(left_open):
    """Arrow's scanner threads reading fsspec's Python files while Python tears down aborted
    the process ("terminate called without an active exception"): streams on such stores
    are read by cdkds's own reader."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import pyarrow as pa
        from cdkds.catalog import DatasetDescriptor, DatasetRepository
        ds = DatasetRepository("memory://lake").create("t", DatasetDescriptor(
            {{"type": "record", "name": "R", "fields": [{{"name": "x", "type": "long"}}, {{"name": "s", "type": "string"}}]}}))
        for i in range(12):
            with ds.writer() as w:
                w.write_batch(pa.table({{"x": list(range(i * 5000, i * 5000 + 5000)), "s": ["abc" * 10] * 5000}}))
        ds = ds.refresh()
        stream = {left_open}
        first = next(stream) if hasattr(stream, "__next__") else stream.read_next_batch()
        print(first.num_rows)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "100", done.stderr
