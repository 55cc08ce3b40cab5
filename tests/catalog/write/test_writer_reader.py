import datetime as dt
import decimal
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdkds.catalog import DatasetDescriptor, DatasetRepository, field
from cdkds.catalog.errors import CdkdsError, ExpressionError, InvalidRecordError
from tests.conftest import one_column_dataset as dataset, write_xs as write, xs, EVENT_SCHEMA, USER_SCHEMA

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 2, 27, tzinfo=UTC)


def events(n, start=0):
    return [{"id": i, "userId": i % 97, "country": [None, "NZ", "AU", "US"][i % 4],
             "ts": T0 + dt.timedelta(hours=2 * i), "amount": i / 2 if i % 5 else None} for i in range(start, start + n)]


def data_files(dataset):
    return sorted(k for k, _ in dataset.store.walk_files("data"))


def test_cdk_example(repo):
    from cdkds.catalog import PartitionStrategy
    users = repo.create("users", DatasetDescriptor(
        schema=USER_SCHEMA, partition_strategy=PartitionStrategy.builder().hash("userId", 53).build(), format="avro"))
    with users.writer() as writer:
        writer.write({"userId": 1234, "username": "jane"})
    assert users.files[0].path.startswith("data/userId_hash=15/") and users.files[0].partition == {"userId_hash": 15}
    assert list(repo.load("users").reader(where="userId = 1234")) == [{"userId": 1234, "username": "jane"}]


@pytest.mark.parametrize("fmt", ["parquet", "avro"])
def test_partitioned_write_read_and_pruning(repo, fmt):
    ds = repo.create("events", DatasetDescriptor(EVENT_SCHEMA, "hash(userId, 8), year(ts), month(ts), day(ts)", format=fmt))
    rows = events(500)
    with ds.writer() as w:
        for r in rows[:250]:
            w.write(r)
        w.write_batch(pa.Table.from_pylist(rows[250:], schema=ds.descriptor.arrow_schema))
    ds = repo.load("events")
    assert ds.version == 1 and ds.snapshot.row_count == 500
    assert sorted(ds.reader(), key=lambda r: r["id"]) == rows
    assert all(f.path.startswith("data/userId_hash=") and "/year=2026/month=" in f.path for f in ds.files)

    one_user = ds.plan("userId = 5")
    assert len(one_user.files) < len(ds.files) / 4
    assert sorted(r["id"] for r in ds.reader("userId = 5")) == [r["id"] for r in rows if r["userId"] == 5]

    since = ds.plan("ts >= '2026-03-20'")
    assert 0 < len(since.files) < len(ds.files)
    assert all(f.partition["month"] >= 3 for f in since.files)
    got = sorted(r["id"] for r in ds.reader(field("ts") >= dt.datetime(2026, 3, 20, tzinfo=UTC)))
    assert got == [r["id"] for r in rows if r["ts"] >= dt.datetime(2026, 3, 20, tzinfo=UTC)]

    assert ds.to_table("country = 'NZ' and amount > 10", columns=["id", "amount"]).column_names == ["id", "amount"]
    batches = list(ds.scan(columns="id", batch_rows=7))
    assert max(b.num_rows for b in batches) <= 7 and sum(b.num_rows for b in batches) == 500


def test_statistics_skip_files_in_an_unpartitioned_dataset(repo):
    ds = repo.create("events", DatasetDescriptor(EVENT_SCHEMA))
    for start in range(0, 400, 100):
        with ds.writer() as w:
            w.write_batch(pa.Table.from_pylist(events(100, start), schema=ds.descriptor.arrow_schema))
    assert len(ds.files) == 4
    assert len(ds.plan("id >= 350").files) == 1 and len(ds.plan("id < 0").files) == 0
    assert len(list(ds.reader("id >= 350"))) == 50


def test_identity_partition_keeps_nulls_and_prunes_on_them(repo):
    ds = repo.create("events", DatasetDescriptor(EVENT_SCHEMA, "identity(country)"))
    with ds.writer() as w:
        for r in events(40):
            w.write(r)
    assert {f.partition["country_copy"] for f in ds.files} == {None, "NZ", "AU", "US"}
    assert len(ds.plan("country is null").files) == 1
    assert len(ds.plan("country in ('NZ', 'AU')").files) == 2
    assert len(list(ds.reader("country is null"))) == 10


def test_flush_commits_and_rolling_and_open_file_bound(repo):
    ds = repo.create("events", DatasetDescriptor(EVENT_SCHEMA, "hash(userId, 16)", format="avro"))
    with ds.writer(target_file_size=1, max_open_files=2) as w:
        w.write_batch(pa.Table.from_pylist(events(64), schema=ds.descriptor.arrow_schema))
        assert w.flush() == 1
        w.write_batch(pa.Table.from_pylist(events(64, 64), schema=ds.descriptor.arrow_schema))
    assert ds.version == 2 and ds.snapshot.row_count == 128
    assert len(ds.files) >= 32  # every partition rolled its file at least once per commit
    assert [h.operation for h in ds.history()] == ["create", "append", "append"]
    assert [h.added_rows for h in ds.history()] == [0, 64, 64]


def test_exception_in_with_block_commits_nothing_and_removes_files(repo):
    ds = repo.create("events", DatasetDescriptor(EVENT_SCHEMA, "hash(userId, 4)"))
    with pytest.raises(RuntimeError):
        with ds.writer(target_file_size=1) as w:
            for r in events(50):
                w.write(r)
            w.write_batch(pa.Table.from_pylist(events(50, 50), schema=ds.descriptor.arrow_schema))
            raise RuntimeError("boom")
    assert repo.load("events").version == 0 and data_files(ds) == []
    with pytest.raises(CdkdsError, match="writer of dataset 'events' is closed"):
        w.write(events(1)[0])


BAD_RECORDS = [
    ({"id": "1"}, "dataset 'events': field 'id': value '1'"),
    ({"ts": None}, "dataset 'events': field 'ts' is required"),
    ({"userId": None}, "dataset 'events': field 'userId' is required"),
    ({"extra": 1}, "dataset 'events': unknown field 'extra'"),
]


@pytest.mark.parametrize("change, message", BAD_RECORDS)
def test_bad_records_name_dataset_field_value_and_commit_nothing(repo, change, message):
    ds = repo.create("events", DatasetDescriptor(EVENT_SCHEMA, "range(userId, [10, 20])"))
    with pytest.raises(InvalidRecordError, match=message):
        with ds.writer() as w:
            w.write(events(1, 5)[0])
            w.write({**events(1)[0], **change})
    assert repo.load("events").version == 0 and data_files(ds) == []


def test_bad_partition_values_are_rejected(repo):
    ds = repo.create("events", DatasetDescriptor(EVENT_SCHEMA, "range(userId, [10, 20])"))
    with pytest.raises(InvalidRecordError, match="dataset 'events': value 50 of field 'userId' is above the last range bound 20"):
        ds.writer().write(events(1, 50)[0])
    with pytest.raises(InvalidRecordError, match=r"field 'userId' \(row 0\): value 50 is above the last range bound 20"):
        ds.writer().write_batch(pa.Table.from_pylist(events(1, 50), schema=ds.descriptor.arrow_schema))
    assert repo.load("events").version == 0


@pytest.mark.parametrize("table, message", [
    (pa.table({"id": [1], "userId": [1], "ts": [T0], "nope": [1]}), "unknown column 'nope'"),
    (pa.table({"id": [1], "ts": [T0]}), "required column 'userId' is missing"),
    (pa.table({"id": [1], "userId": ["x"], "ts": [T0]}), r"field 'userId' \(row 0\): value 'x' is not a long"),
    (pa.table({"id": [1, None], "userId": [1, 2], "ts": [T0, T0]}), r"field 'id' \(row 1\): null in a required field"),
    (pa.table({"id": [2**40], "userId": [1], "ts": [T0]}).cast(pa.schema([("id", pa.uint64()), ("userId", pa.int64()), ("ts", pa.timestamp("us", "UTC"))])).set_column(0, "id", pa.array([2**64 - 1], pa.uint64())),
     r"field 'id' \(row 0\): value 18446744073709551615 is not a long"),
])
def test_bad_batches_are_rejected(repo, table, message):
    ds = repo.create("events", DatasetDescriptor(EVENT_SCHEMA))
    with pytest.raises(InvalidRecordError, match=message):
        with ds.writer() as w:
            w.write_batch(table)
    assert repo.load("events").version == 0 and data_files(ds) == []


def test_batches_are_cast_and_missing_optional_columns_filled(repo):
    ds = repo.create("events", DatasetDescriptor(EVENT_SCHEMA))
    with ds.writer() as w:
        w.write_batch(pa.table({"id": pa.array([1], pa.int32()), "userId": [7], "ts": pa.array([T0], pa.timestamp("ms", tz="UTC"))}))
    assert list(ds.reader()) == [{"id": 1, "userId": 7, "country": None, "ts": T0, "amount": None}]


def test_bad_read_arguments(repo):
    ds = repo.create("events", DatasetDescriptor(EVENT_SCHEMA))
    with pytest.raises(ExpressionError, match="dataset 'events': unknown column 'nope'"):
        list(ds.scan(columns=["id", "nope"]))
    with pytest.raises(ExpressionError, match="dataset 'events': unknown field 'nope'"):
        list(ds.reader("nope = 1"))
    with pytest.raises(ExpressionError, match="cannot parse predicate"):
        list(ds.reader("id = = 1"))


def test_old_files_are_read_with_an_evolved_schema(repo):
    schema = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, {"name": "f", "type": "float"}]}
    ds = repo.create("evolving", DatasetDescriptor(schema))
    with ds.writer() as w:
        w.write({"a": 1, "f": 0.5})
    evolved = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "long"}, {"name": "f", "type": "double"}, {"name": "tag", "type": "string", "default": "none"}]}
    repo.update("evolving", ds.descriptor.replace(schema=evolved))
    ds = repo.load("evolving")
    with ds.writer() as w:
        w.write({"a": 2**40, "f": 1.5, "tag": "new"})
    assert sorted(ds.reader(), key=lambda r: r["a"]) == [{"a": 1, "f": 0.5, "tag": "none"}, {"a": 2**40, "f": 1.5, "tag": "new"}]
    assert [r["a"] for r in ds.reader("tag = 'none'")] == [1]
    assert list(repo.load("evolving", version=1).reader()) == [{"a": 1, "f": 0.5}]


def test_time_travel_by_version_and_timestamp(repo):
    ds = repo.create("events", DatasetDescriptor(EVENT_SCHEMA))
    times = []
    for start in range(0, 30, 10):
        with ds.writer() as w:
            w.write_batch(pa.Table.from_pylist(events(10, start), schema=ds.descriptor.arrow_schema))
        times.append(ds.history()[-1].timestamp)
    assert [repo.load("events", version=v).snapshot.row_count for v in range(4)] == [0, 10, 20, 30]
    assert repo.load("events", timestamp=times[1]).version == 2
    as_datetime = dt.datetime.fromtimestamp(times[0] / 1000, tz=UTC)
    assert repo.load("events", timestamp=as_datetime).version == 1
    assert repo.load("events", timestamp=as_datetime.isoformat()).version == 1


@pytest.mark.parametrize("kwargs, message", [
    ({"version": 9}, "has no revision 9; its latest is 0"),
    ({"version": -1}, "version must be a revision number"),
    ({"version": "1"}, "version must be a revision number"),
    ({"timestamp": "yesterday"}, "dataset 'events': cannot read 'yesterday' as a time"),
    ({"timestamp": float("nan")}, "dataset 'events': cannot read nan as a time"),
    ({"timestamp": float("inf")}, "dataset 'events': cannot read inf as a time"),
    ({"timestamp": 5}, "has no revision at or before 5"),
    ({"version": 0, "timestamp": 5}, "give one of a version, a timestamp or a tag, not several"),
])
def test_bad_time_travel(repo, kwargs, message):
    repo.create("events", DatasetDescriptor(EVENT_SCHEMA))
    with pytest.raises(CdkdsError, match=message):
        repo.load("events", **kwargs)


# ---------------------------------------------------------------- property

_STRATEGIES = [None, "identity(country)", "hash(userId, 5), day(ts)", "range(id, 25), hour(ts)",
               "list(userId, [[0, 1, 2], [3]]) as bucket"]


@pytest.mark.parametrize("fmt", ["parquet", "avro"])
@given(st.lists(st.fixed_dictionaries({
    "id": st.integers(-1000, 1000),
    "userId": st.integers(0, 3),
    "country": st.one_of(st.none(), st.text(max_size=5)),
    "ts": st.datetimes(min_value=dt.datetime(1970, 1, 2), max_value=dt.datetime(2100, 1, 1), timezones=st.just(UTC)),
    "amount": st.one_of(st.none(), st.floats(allow_nan=False)),
}), max_size=40), st.sampled_from(_STRATEGIES))
def test_property_write_then_read_returns_the_same_rows(fmt, rows, strategy):
    import uuid
    repo = DatasetRepository(f"memory://prop-{uuid.uuid4().hex}")
    ds = repo.create("events", DatasetDescriptor(EVENT_SCHEMA, strategy, format=fmt))
    with ds.writer(max_open_files=3) as w:
        for r in rows[: len(rows) // 2]:
            w.write(r)
        w.write_batch(pa.Table.from_pylist(rows[len(rows) // 2:], schema=ds.descriptor.arrow_schema))
    key = lambda r: tuple(sorted(r.items()))
    assert Counter(map(key, repo.load("events").reader())) == Counter(map(key, rows))


def test_a_chunked_table_makes_one_file_per_partition(repo):
    ds = repo.create("events", DatasetDescriptor(EVENT_SCHEMA, "identity(country)"))
    table = pa.Table.from_batches([b for start in range(0, 40, 10)
                                   for b in pa.Table.from_pylist(events(10, start), schema=ds.descriptor.arrow_schema).to_batches()])
    assert table.column("id").num_chunks == 4
    with ds.writer(max_open_files=2) as w:
        w.write_batch(table)
    assert len(ds.files) == 4 and ds.snapshot.row_count == 40


# ---------------------------------------------------------------- values on both write paths (issue 10)

FORMATS = ["parquet", "avro"]
TS_MILLIS = {"type": "long", "logicalType": "timestamp-millis"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_uuids_are_canonical_on_every_path(tmp_path, fmt):
    upper, braced = "ABCDEF00-0000-0000-0000-000000000001", "{abcdef00-0000-0000-0000-000000000002}"
    ds = dataset(tmp_path, {"type": "string", "logicalType": "uuid"}, fmt)
    write(ds, [upper])
    with ds.writer() as w:
        w.write_batch(pa.table({"x": pa.array([braced], pa.string())}))
    assert sorted(xs(ds)) == ["abcdef00-0000-0000-0000-000000000001", "abcdef00-0000-0000-0000-000000000002"]
    assert xs(ds, f"x = '{upper}'") == ["abcdef00-0000-0000-0000-000000000001"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_bad_enum_symbols_are_rejected_on_the_batch_path(tmp_path, fmt):
    ds = dataset(tmp_path, {"type": "enum", "name": "E", "symbols": ["A", "B"]}, fmt)
    with pytest.raises(InvalidRecordError, match=r"'d'.*'x'.*'ZZZ'.*\['A', 'B'\]"):
        with ds.writer() as w:
            w.write_batch(pa.table({"x": ["A", "ZZZ"]}))
    with pytest.raises(InvalidRecordError, match=r"'d'.*'x'.*'ZZZ'.*\['A', 'B'\]"):
        with ds.writer() as w:
            w.write({"x": "ZZZ"})
    assert xs(ds) == [] and ds.version == 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_29_digit_decimals(tmp_path, fmt):
    ds = dataset(tmp_path, {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 2}, fmt)
    big = decimal.Decimal("123456789012345678901234567.89")
    write(ds, [big])
    assert xs(ds) == [big]
    assert xs(ds, f"x = {big}") == [big]


@pytest.mark.parametrize("fmt", FORMATS)
def test_maps_read_back_as_dicts_and_write_back(tmp_path, fmt):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "m", "type": {"type": "map", "values": "long"}},
        {"name": "a", "type": {"type": "array", "items": {"type": "map", "values": "string"}}}]}
    ds = repo.create("maps", DatasetDescriptor(schema, format=fmt))
    record = {"m": {"a": 1, "b": 2}, "a": [{"k": "v"}]}
    write_records(ds, [record])
    assert list(ds.reader()) == [record]
    write_records(ds, list(ds.reader()))
    assert list(ds.reader()) == [record, record]


def write_records(ds, records):
    with ds.writer() as w:
        for r in records:
            w.write(r)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("avro, value", [
    (TS_MILLIS, dt.datetime(2020, 1, 1, 0, 0, 0, 1500, tzinfo=UTC)),
    ({"type": "long", "logicalType": "local-timestamp-millis"}, dt.datetime(2020, 1, 1, 0, 0, 0, 1500)),
    ({"type": "int", "logicalType": "time-millis"}, dt.time(1, 2, 3, 1500)),
])
def test_sub_millisecond_values_are_rejected_on_both_paths(tmp_path, fmt, avro, value):
    ds = dataset(tmp_path, avro, fmt)
    with pytest.raises(InvalidRecordError, match=r"'d'.*'x'.*millisecond"):
        write(ds, [value])
    arrow_type = {"time-millis": pa.time64("us")}.get(avro["logicalType"],
                                                    pa.timestamp("us", tz="UTC" if avro is TS_MILLIS else None))
    with pytest.raises(InvalidRecordError, match=r"'d'.*'x'.*millisecond"):
        with ds.writer() as w:
            w.write_batch(pa.table({"x": pa.array([value], arrow_type)}))
    assert xs(ds) == [] and ds.version == 0
