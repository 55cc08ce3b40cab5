"""Rows sorted within each data file: property ``sort.by``, the writer's ``sort_by``, the
keyed default (the record key), compaction, and the positions the record index keeps."""

from __future__ import annotations

import datetime as dt
import json
import random
import uuid
from collections import Counter

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import CdkdsError, InvalidDescriptorError
from cdkds.catalog.write.sorting import sort_order
from cdkds.formats.statistics import StatisticsCollector
from tests.catalog.keyed.conftest import at, state, user, users_descriptor
from tests.conftest import EVENT_SCHEMA

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 3, 1, tzinfo=UTC)
NESTED = {"type": "record", "name": "N", "fields": [
    {"name": "id", "type": "long"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "point", "type": {"type": "record", "name": "P", "fields": [{"name": "x", "type": "double"}]}},
]}


def events(n, seed=0):
    rnd = random.Random(seed)
    return [{"id": i, "userId": rnd.randrange(50), "country": rnd.choice([None, "NZ", "AU", "US"]),
             "ts": T0 + dt.timedelta(minutes=rnd.randrange(10_000)),
             "amount": rnd.choice([None, rnd.uniform(-5, 5)])} for i in rnd.sample(range(n), n)]


def file_table(ds, f) -> pa.Table:
    """A data file's rows, read directly (pyarrow for Parquet, fastavro for Avro)."""
    with ds.store.fs.open(ds.store.path(f.path), "rb") as stream:
        if f.path.endswith(".parquet"):
            return pq.read_table(stream)
        return pa.Table.from_pylist(list(fastavro.reader(stream)), schema=ds.descriptor.arrow_schema)


def is_sorted(table: pa.Table, columns) -> bool:
    order = sort_order(table, columns)
    return order.tolist() == list(range(table.num_rows))


def key_tuples(table: pa.Table, columns) -> list:
    """Rows as sortable tuples (nulls last), for checking an order without pyarrow."""
    rows = table.select(list(columns)).to_pylist()
    return [tuple((v is None, v if v is not None else 0) for v in r.values()) for r in rows]


def check_files_sorted(ds, columns):
    assert ds.files
    for f in ds.files:
        table = file_table(ds, f)
        keys = key_tuples(table, columns)
        assert keys == sorted(keys), f"{f.path} is not sorted by {columns}"
        collector = StatisticsCollector(ds.descriptor.arrow_schema)
        collector.update(table.cast(ds.descriptor.arrow_schema).combine_chunks().to_batches()[0])
        assert f.row_count == table.num_rows == collector.row_count
        assert dict(f.statistics) == collector.result(), f"{f.path}: statistics differ from its rows"


def rows_of(ds) -> Counter:
    return Counter(json.dumps(r, default=str, sort_keys=True) for r in ds.reader())


# ---------------------------------------------------------------- the property and the writer option

@pytest.mark.parametrize("fmt", ["parquet", "avro"])
def test_property_sorts_every_file_and_statistics_hold(repo, fmt):
    ds = repo.create("events", DatasetDescriptor(EVENT_SCHEMA, "identity(country)", format=fmt,
                                                 properties={"sort.by": "userId, ts"}))
    rows = events(3000)
    with ds.writer(target_file_size=20_000) as w:
        for r in rows[:1000]:
            w.write(r)
        w.write_batch(pa.Table.from_pylist(rows[1000:], schema=ds.descriptor.arrow_schema))
    ds = repo.load("events")
    assert ds.descriptor.sort_by == ("userId", "ts")
    assert len(ds.files) > 4  # rolled at the target size
    check_files_sorted(ds, ["userId", "ts"])
    assert sorted(r["id"] for r in ds.reader()) == list(range(3000))
    metadata = pq.read_metadata(ds.store.fs.open(ds.store.path(ds.files[0].path), "rb")).metadata if fmt == "parquet" \
        else None
    if metadata is not None:
        assert json.loads(metadata[b"cdkds.sort_by"]) == ["userId", "ts"]


def test_nulls_sort_last_and_floats_sort_with_nan_after_numbers(tmp_path):
    ds = DatasetRepository(f"file://{tmp_path}/lake").create(
        "e", DatasetDescriptor(EVENT_SCHEMA, properties={"sort.by": "amount"}))
    values = [3.0, None, float("nan"), -1.0, None, 0.5]
    with ds.writer() as w:
        for i, v in enumerate(values):
            w.write({"id": i, "userId": 0, "ts": T0, "amount": v})
    (f,) = ds.files
    got = file_table(ds, f).column("amount").to_pylist()
    assert got[:3] == [-1.0, 0.5, 3.0] and got[3] != got[3] and got[4:] == [None, None]


def test_the_writer_option_overrides_the_property(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("e", DatasetDescriptor(EVENT_SCHEMA, properties={"sort.by": "userId"}))
    rows = events(500)
    with ds.writer(sort_by=["ts", "id"]) as w:
        for r in rows:
            w.write(r)
    check_files_sorted(repo.load("e"), ["ts", "id"])
    ds = repo.create("u", DatasetDescriptor(EVENT_SCHEMA, properties={"sort.by": "userId"}))
    with ds.writer(sort_by="none") as w:  # unsorted: the rows stay in the order written
        for r in rows:
            w.write(r)
    (f,) = repo.load("u").files
    assert file_table(ds, f).column("id").to_pylist() == [r["id"] for r in rows]
    ds = repo.create("plain", DatasetDescriptor(EVENT_SCHEMA))
    assert ds.descriptor.sort_by == ()
    with ds.writer(sort_by="country,id") as w:
        w.write_batch(pa.Table.from_pylist(rows, schema=ds.descriptor.arrow_schema))
    check_files_sorted(repo.load("plain"), ["country", "id"])


@pytest.mark.parametrize("value, message", [
    ("nope", "field 'nope' is not in the schema"),
    ("id, nope", "field 'nope' is not in the schema"),
    ("tags", "field 'tags' is a array, which has no order"),
    ("attrs", "field 'attrs' is a map, which has no order"),
    ("point", "field 'point' is a record, which has no order"),
    ("point.x", "field 'point.x' is not in the schema"),
    ("id, id", "names field 'id' twice"),
    ("", "names no field"),
    (" , ", "names no field"),
    ("id,,", "has an empty field name"),
])
def test_bad_property_values_are_refused_naming_property_and_value(tmp_path, value, message):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    with pytest.raises(InvalidDescriptorError) as e:
        repo.create("n", DatasetDescriptor(NESTED, properties={"sort.by": value}))
    assert message in str(e.value) and "sort.by" in str(e.value) and repr(value) in str(e.value)
    assert not repo.exists("n")
    ds = repo.create("n", DatasetDescriptor(NESTED))
    with pytest.raises(InvalidDescriptorError, match="sort.by"):
        ds.update_descriptor(ds.descriptor.replace(properties={"sort.by": value}))
    assert repo.load("n").version == 0


@pytest.mark.parametrize("value, message", [
    ("nope", "field 'nope' is not in the schema"),
    (["id", "tags"], "field 'tags' is a array"),
    ("", "names no field"),
    (42, "must be field names"),
])
def test_bad_writer_option_values_are_refused_and_nothing_is_committed(tmp_path, value, message):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("n", DatasetDescriptor(NESTED))
    with pytest.raises(CdkdsError) as e:
        with ds.writer(sort_by=value) as w:
            w.write({"id": 1, "tags": [], "attrs": {}, "point": {"x": 0.0}})
    text = str(e.value)
    assert text.startswith("dataset 'n': option sort_by") and message in text
    assert repo.load("n").version == 0 and not list(ds.store.walk_files("data"))


def test_renames_follow_and_a_sort_field_cannot_be_dropped(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("e", DatasetDescriptor(EVENT_SCHEMA, properties={"sort.by": "userId, ts"}))
    ds.alter().rename("userId", "user").commit()
    assert repo.load("e").descriptor.properties["sort.by"] == "user, ts"
    with pytest.raises(CdkdsError, match="sort.by"):
        repo.load("e").alter().drop("ts").commit()


# ---------------------------------------------------------------- rolling and memory

def test_sorted_files_roll_near_the_target_size(tmp_path):
    ds = DatasetRepository(f"file://{tmp_path}/lake").create(
        "e", DatasetDescriptor(EVENT_SCHEMA, properties={"sort.by": "ts"}, compression="none"))
    target = 200_000
    table = pa.Table.from_pylist(events(40_000), schema=ds.descriptor.arrow_schema)
    with ds.writer(target_file_size=target) as w:
        w.write_batch(table)  # one big batch: split across files
    sizes = sorted(f.size for f in ds.files)
    assert len(sizes) > 3
    assert all(s < 2 * target for s in sizes)  # the roll size follows the compression of the files written
    assert sum(s >= target / 2 for s in sizes) >= len(sizes) - 1  # only the last file may be small
    check_files_sorted(ds, ["ts"])


# ---------------------------------------------------------------- keyed datasets

def test_keyed_files_are_sorted_by_key_and_upserts_deletes_find_the_right_rows(repo):
    ds = repo.create("users", users_descriptor())
    assert ds.descriptor.sort_by == ("tenant", "userId")
    ids = list(range(300))
    random.Random(1).shuffle(ids)
    ds.upsert([user("nz" if i % 3 else "au", i, 1, f"v1-{i}", i) for i in ids])
    check_files_sorted(ds, ["tenant", "userId"])
    # positions in the index refer to the sorted rows: replacing and deleting mark exactly those rows
    ds.upsert([user("nz" if i % 3 else "au", i, 2, f"v2-{i}") for i in ids[:40]])
    ds.delete_keys([{"tenant": "nz" if i % 3 else "au", "userId": i, "updatedAt": at(3)} for i in ids[40:80]])
    ds.update([{"tenant": "nz" if i % 3 else "au", "userId": i, "score": -i, "updatedAt": at(4)} for i in ids[80:120]])
    expected = {}
    for i in ids:
        key = ("nz" if i % 3 else "au", i)
        if i in ids[:40]:
            expected[key] = (f"v2-{i}", None, at(2))
        elif i in ids[40:80]:
            continue
        elif i in ids[80:120]:
            expected[key] = (f"v1-{i}", -i, at(4))
        else:
            expected[key] = (f"v1-{i}", i, at(1))
    ds = repo.load("users")
    assert state(ds) == expected
    check_files_sorted(ds, ["tenant", "userId"])
    got = ds.get_many([k for k in expected])
    assert {(r["tenant"], r["userId"]): (r["email"], r["score"], r["updatedAt"]) for r in got.to_pylist()} == expected
    # compaction rewrites into several sorted files; the index follows the sorted positions
    assert ds.compact(target_file_size=3_000) is not None
    ds = repo.load("users")
    check_files_sorted(ds, ["tenant", "userId"])
    assert state(ds) == expected
    ds.upsert([user("au", 3, 9, "after")])
    ds.delete_keys([("nz", 1)])
    expected[("au", 3)] = ("after", None, at(9))
    del expected[("nz", 1)]
    assert state(repo.load("users")) == expected
    assert ds.get(("nz", 2))["email"] == expected[("nz", 2)][0]


def test_keyed_sort_by_none_and_other_fields(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("users", users_descriptor(**{"sort.by": "none"}))
    assert ds.descriptor.sort_by == ()
    rows = [user("nz", i, 1, f"e{i}", 100 - i) for i in (5, 3, 9, 1)]
    ds.upsert(rows)
    (f,) = ds.files
    assert file_table(ds, f).column("userId").to_pylist() == [5, 3, 9, 1]
    ds = repo.create("scored", users_descriptor(**{"sort.by": "score"}))
    ds.upsert(rows)
    check_files_sorted(ds, ["score"])
    with ds.writer(sort_by="email") as w:  # a keyed writer takes the option too
        for i in (40, 20, 30):
            w.write(user("nz", i, 1, f"x{100 - i}"))
    ds = repo.load("scored")
    newest = max(ds.files, key=lambda f: f.revision)
    assert file_table(ds, newest).column("email").to_pylist() == ["x60", "x70", "x80"]
    ds.delete_keys([("nz", 30)])
    assert {r["userId"] for r in ds.reader()} == {1, 3, 5, 9, 20, 40}
    with pytest.raises(CdkdsError, match="dataset 'scored': option sort_by = 'nope'"):
        ds.writer(sort_by="nope")


# ---------------------------------------------------------------- compaction

def test_compaction_makes_an_unsorted_dataset_sorted(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("e", DatasetDescriptor(EVENT_SCHEMA, "identity(country)"))
    rows = events(2000)
    for part in range(4):
        with ds.writer() as w:
            w.write_batch(pa.Table.from_pylist(rows[part * 500:(part + 1) * 500], schema=ds.descriptor.arrow_schema))
    before = rows_of(ds)
    ds.delete("id < 100")
    ds.update_descriptor(ds.descriptor.replace(properties={"sort.by": "ts"}))
    assert ds.compact() is not None
    ds = repo.load("e")
    check_files_sorted(ds, ["ts"])
    assert len(ds.files) == 4  # one per country
    assert rows_of(ds) == Counter({k: v for k, v in before.items() if json.loads(k)["id"] >= 100})


# ---------------------------------------------------------------- property test

SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "i", "type": ["null", "long"], "default": None},
    {"name": "s", "type": ["null", "string"], "default": None},
    {"name": "f", "type": ["null", "double"], "default": None},
    {"name": "b", "type": ["null", "boolean"], "default": None},
    {"name": "p", "type": "int"},
]}
_row = st.fixed_dictionaries({
    "i": st.none() | st.integers(-5, 5),
    "s": st.none() | st.text("abc", max_size=3),
    "f": st.none() | st.floats(allow_nan=False, width=64, min_value=-1e6, max_value=1e6),
    "b": st.none() | st.booleans(),
    "p": st.integers(0, 2),
})


@given(rows=st.lists(_row, max_size=120), columns=st.lists(st.sampled_from(["i", "s", "f", "b"]), min_size=1,
                                                           max_size=3, unique=True),
       target=st.integers(300, 6000), partitioned=st.booleans(), batches=st.integers(1, 4))
def test_sorted_writes_keep_the_rows_and_sort_every_file(rows, columns, target, partitioned, batches):
    repo = DatasetRepository(f"memory://sort-{uuid.uuid4().hex}")
    ds = repo.create("r", DatasetDescriptor(SCHEMA, "identity(p)" if partitioned else None,
                                            properties={"sort.by": ",".join(columns)}))
    schema = ds.descriptor.arrow_schema
    step = max(1, len(rows) // batches)
    with ds.writer(target_file_size=target) as w:
        for start in range(0, len(rows), step):
            w.write_batch(pa.Table.from_pylist(rows[start:start + step], schema=schema))
    ds = repo.load("r")
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    assert Counter(map(key, ds.reader())) == Counter(map(key, rows))
    if rows:
        check_files_sorted(ds, columns)


def test_placements_name_each_rows_file_and_position_as_arrow(tmp_path):
    """The writer tells where each input row went as Arrow arrays (a Python string per row
    was most of the time a rewrite spent building its index entries): the file's path and
    the row's position in that sorted file."""
    from cdkds.catalog.write.writer import PartitionedWriter
    repo = DatasetRepository(f"file://{tmp_path}")
    ds = repo.create("placed", DatasetDescriptor(EVENT_SCHEMA, partition_strategy="identity(country)",
                                                        properties={"sort.by": "id"}))
    table = pa.table({"id": pa.array([5, 3, 9, 1, 7, 2], pa.int64()), "userId": pa.array([0] * 6, pa.int64()),
                      "country": ["a", "b", "a", "b", "a", "b"], "ts": pa.array([0] * 6, pa.timestamp("us", tz="UTC"))})
    writer = PartitionedWriter(ds.store, ds.name, ds.descriptor, ds.descriptor_version, ds.version, "t" * 32)
    writer.write_batch(table.slice(0, 4))
    writer.write_batch(table.slice(4))
    writer.close()
    rows, files, positions = writer.placements()
    assert isinstance(files, pa.DictionaryArray) and files.type.value_type == pa.string()  # a path per file, not per row
    for row, path, position in zip(rows, files.to_pylist(), positions):
        stored = pq.read_table(ds.store.path(path))
        assert stored.column("id")[int(position)].as_py() == table.column("id")[int(row)].as_py()


@settings(max_examples=60)
@given(data=st.data())
def test_a_sort_leaving_out_columns_of_one_value_orders_rows_as_the_full_sort(data):
    """Columns of one value (a partition's), all null, or floats with NaN: the same order as
    Arrow's sort by every column."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from cdkds.catalog.write.sorting import sort_order

    n = data.draw(st.integers(0, 30))
    values = {"s": st.sampled_from(["a", "b"]), "i": st.integers(-2, 2), "f": st.sampled_from([1.0, float("nan"), 0.5])}
    columns = {}
    for name, kind in (("s", pa.string()), ("i", pa.int64()), ("f", pa.float64())):
        one = data.draw(st.booleans())
        pool = st.just(data.draw(values[name])) if one else values[name]
        columns[name] = pa.array(data.draw(st.lists(st.one_of(pool, st.none()) if data.draw(st.booleans()) else pool,
                                                    min_size=n, max_size=n)), kind)
    table = pa.table(columns)
    keys = data.draw(st.permutations(["s", "i", "f"]))[:data.draw(st.integers(1, 3))]
    expected = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in keys]).to_numpy()
    assert sort_order(table, keys).tolist() == np.asarray(expected).tolist()
