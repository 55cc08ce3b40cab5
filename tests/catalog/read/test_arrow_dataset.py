"""Dataset.to_arrow_dataset and to_batch_reader: the rows of to_table, through pyarrow,
DuckDB and Polars, whichever files pyarrow reads itself (hypothesis: random operation
sequences, predicates and columns give the same rows both ways)."""

import datetime as dt
from collections import Counter

import pyarrow as pa
import pyarrow.dataset as pads
import pytest
from hypothesis import given, settings, strategies as st

from cdkds.catalog import DatasetDescriptor, DatasetRepository, ExpressionError
from tests.catalog.read.test_changes import KEYED, PLAIN
from tests.components import imported

pytestmark = pytest.mark.needs("duckdb", "polars")
duckdb = imported("duckdb")
polars = imported("polars")


def bag(table: pa.Table) -> Counter:
    return Counter(tuple(sorted(r.items())) for r in table.to_pylist())


def direct_files(dataset: pads.Dataset) -> list[str]:
    """The files pyarrow reads itself (the FileSystemDataset part)."""
    parts = dataset.children if isinstance(dataset, pads.UnionDataset) else [dataset]
    return [f for p in parts if isinstance(p, pads.FileSystemDataset) for f in p.files]


def append(ds, rows):
    with ds.writer() as w:
        for r in rows:
            w.write(r)


@pytest.fixture
def events(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}")
    ds = repo.create("events", DatasetDescriptor(PLAIN, "identity(g)"))
    append(ds, [{"id": i, "g": "ab"[i % 2], "x": i % 5} for i in range(100)])
    append(ds, [{"id": i, "g": "c", "x": None} for i in range(100, 150)])
    return ds


def test_an_append_only_dataset_is_read_by_pyarrow_lazily(events):
    arrow = events.to_arrow_dataset()
    assert sorted(direct_files(arrow)) == sorted(events.store.path(f.path) for f in events.files)
    assert bag(arrow.to_table()) == bag(events.to_table())
    append(events, [{"id": 999, "g": "a", "x": 1}])
    assert arrow.count_rows() == 150  # the revision it was made from
    events.store.fs.rm(direct_files(arrow)[0])
    with pytest.raises(FileNotFoundError):  # lazy: files are read when the dataset is scanned
        arrow.to_table()
    pruned = events.to_arrow_dataset(where="g = 'c' and id >= 140", columns=["id", "g"])
    assert len(direct_files(pruned)) == 1  # partition pruning
    assert sorted(pruned.to_table().column("id").to_pylist()) == list(range(140, 150))


def test_duckdb_polars_and_pandas_read_it(events):
    events.delete("id < 10")  # a tombstone: those files are read by cdkds, the others by pyarrow
    arrow = events.to_arrow_dataset(columns=["id", "g", "x"])
    assert direct_files(arrow) and len(direct_files(arrow)) < len(events.files)
    expected = events.to_table()
    con = duckdb.connect()
    con.register("ev", arrow)
    assert con.sql("select count(*), sum(id) from ev").fetchall()[0] == (expected.num_rows, sum(expected["id"].to_pylist()))
    assert con.sql("select min(id) from ev where g = 'a'").fetchall()[0] == (10,)
    assert con.sql("select count(*) from ev where x is null").fetchall()[0] == (50,)
    frame = polars.scan_pyarrow_dataset(arrow).filter(polars.col("g") == "c").select("id").collect()
    assert sorted(frame["id"].to_list()) == list(range(100, 150))
    assert len(arrow.to_table().to_pandas()) == expected.num_rows
    # and again: a dataset is scanned as often as asked
    assert con.sql("select count(*) from ev").fetchall()[0] == (expected.num_rows,)


def test_a_batch_reader_streams_once(events):
    reader = events.to_batch_reader(where="x = 3", batch_rows=7)
    assert reader.schema.names == ["id", "g", "x"]
    assert duckdb.sql("select count(*) from reader").fetchall()[0] == (20,)
    with pytest.raises(ExpressionError, match="unknown column 'nope'"):
        events.to_batch_reader(columns=["nope"])


def test_deletion_vectors_ttl_schema_changes_and_avro_are_applied(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}")
    users = repo.create("users", DatasetDescriptor(KEYED, record_key=["k"], ordering_field="o"))
    users.upsert([{"k": i, "v": "a", "o": 1} for i in range(20)])
    users.upsert([{"k": i, "v": "b", "o": 2} for i in range(5)])  # deletion vectors on the first file
    users.delete_keys([19])
    arrow = users.to_arrow_dataset()
    assert bag(arrow.to_table()) == bag(users.to_table())
    assert duckdb.sql("select count(*) from arrow where v = 'b'").fetchall()[0] == (5,)
    users.compact()  # deletion vectors applied: pyarrow reads every file again
    assert len(direct_files(users.to_arrow_dataset())) == len(users.files)

    events = repo.create("events", DatasetDescriptor(PLAIN))
    append(events, [{"id": i, "g": "a", "x": i} for i in range(10)])
    events.alter().rename("x", "y").add("z", "long", default=7).commit()
    append(events, [{"id": 10, "g": "b", "y": 1, "z": 1}])
    arrow = events.to_arrow_dataset()
    assert len(direct_files(arrow)) == 1  # only the file written after the change
    assert bag(arrow.to_table()) == bag(events.to_table())
    assert duckdb.sql("select sum(z) from arrow").fetchall()[0] == (71,)

    expiring = repo.create("expiring", DatasetDescriptor(
        {"type": "record", "name": "E", "fields": [
            {"name": "id", "type": "long"},
            {"name": "until", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None}]},
        properties={"ttl.field": "until"}))
    append(expiring, [{"id": 1, "until": dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)},
                      {"id": 2, "until": dt.datetime(2999, 1, 1, tzinfo=dt.timezone.utc)}, {"id": 3, "until": None}])
    arrow = expiring.to_arrow_dataset()  # one rule for every file: the TTL is the dataset's filter
    assert direct_files(arrow) and sorted(arrow.to_table().column("id").to_pylist()) == [2, 3]
    assert duckdb.sql("select count(*) from arrow where id > 1").fetchall()[0] == (2,)

    avro = repo.create("avro", DatasetDescriptor(PLAIN, format="avro"))
    append(avro, [{"id": 1, "g": "a", "x": None}])
    assert not direct_files(avro.to_arrow_dataset()) and avro.to_arrow_dataset().to_table().num_rows == 1


def test_tombstones_are_the_filter_only_where_every_file_has_them(events):
    events.delete("x = 2")  # every file may hold x = 2 but the one of g = 'c' (x is null there)
    arrow = events.to_arrow_dataset()
    assert len(direct_files(arrow)) == 1  # the tombstone's files are held, the others read lazily
    assert bag(arrow.to_table()) == bag(events.to_table())
    only_tombstoned = events.to_arrow_dataset(where="g != 'c'")
    assert len(direct_files(only_tombstoned)) == 2  # one rule for all: the tombstone is part of the filter
    assert bag(only_tombstoned.to_table()) == bag(events.to_table(where="g != 'c'"))
    assert 2 not in only_tombstoned.to_table().column("x").to_pylist()


def test_a_predicate_on_a_column_left_out_is_applied(events):
    arrow = events.to_arrow_dataset(where="x = 4", columns=["id"])
    assert not direct_files(arrow)  # pyarrow could not filter on x: cdkds reads these files
    assert sorted(arrow.to_table().column("id").to_pylist()) == [i for i in range(100) if i % 5 == 4]


def test_bad_input_is_refused(events):
    with pytest.raises(ExpressionError, match="unknown column 'nope'"):
        events.to_arrow_dataset(columns=["nope"])
    with pytest.raises(ExpressionError):
        events.to_arrow_dataset(where="id = ")


def test_a_missing_file_fails_loudly(events):
    events.store.fs.rm(events.store.path(events.files[0].path))
    with pytest.raises(Exception, match="missing|not found|No such file"):
        events.to_arrow_dataset().to_table()


OPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.lists(st.tuples(st.integers(0, 9), st.sampled_from("ab"),
                                                    st.one_of(st.none(), st.integers(0, 5))), min_size=1, max_size=6)),
    st.tuples(st.just("delete"), st.sampled_from(["id < 3", "g = 'a'", "x = 2", "x is null"])),
    st.tuples(st.just("compact"), st.none()),
    st.tuples(st.just("rename"), st.none()),
    st.tuples(st.just("add"), st.none()),
), min_size=1, max_size=8)
WHERE = st.sampled_from([None, "id > 4", "g = 'b'", "id in (1, 2, 3) or g = 'a'", "id >= 2 and g != 'a'"])


@settings(max_examples=40)
@given(ops=OPS, where=WHERE, columns=st.one_of(st.none(), st.sampled_from([["id"], ["g", "id"], ["id", "g"]])))
def test_pyarrow_and_cdkds_read_the_same_rows(tmp_path_factory, ops, where, columns):
    repo = DatasetRepository(f"file://{tmp_path_factory.mktemp('ad')}")
    ds = repo.create("t", DatasetDescriptor(PLAIN, "identity(g)"))
    append(ds, [{"id": i, "g": "ab"[i % 2], "x": i % 4 or None} for i in range(10)])
    x = "x"
    for n, (op, arg) in enumerate(ops):
        if op == "append":
            append(ds, [{"id": i, "g": g, x: v} for i, g, v in arg])
        elif op == "delete":
            ds.delete(arg.replace("x", x))
        elif op == "compact":
            ds.compact()
        elif op == "rename":
            ds.alter().rename(x, f"x{n}").commit()
            x = f"x{n}"
        else:
            ds.alter().add(f"y{n}", "long", default=n).commit()
    expected = ds.to_table(where, columns)
    arrow = ds.to_arrow_dataset(where, columns)
    assert arrow.schema == expected.schema
    assert bag(arrow.to_table()) == bag(expected)
    assert bag(ds.to_batch_reader(where, columns).read_all()) == bag(expected)


def test_every_backend(repo):
    """Local files, memory:// and S3 (moto) through pyarrow's fsspec bridge."""
    ds = repo.create("events", DatasetDescriptor(PLAIN, "identity(g)"))
    append(ds, [{"id": i, "g": "ab"[i % 2], "x": i} for i in range(40)])
    ds.delete("x >= 30 and g = 'a'")
    arrow = ds.to_arrow_dataset(columns=["id", "g", "x"])
    assert bag(arrow.to_table()) == bag(ds.to_table())
    assert duckdb.sql("select count(*) from arrow where g = 'b'").fetchall()[0] == (20,)
