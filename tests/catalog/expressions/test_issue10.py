"""Regression tests for issue 10 items 10, 14, 15, 17 and 18 (predicates and values)."""

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import InvalidRecordError

UTC = dt.timezone.utc
FORMATS = ["parquet", "avro"]


def one_field(kind_type, nullable=False) -> dict:
    return {"type": "record", "name": "R", "fields": [{"name": "x", "type": ["null", kind_type] if nullable else kind_type}]}


def dataset(tmp_path, avro_type, fmt, name="d"):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    return repo.create(name, DatasetDescriptor(one_field(avro_type), format=fmt))


def xs(ds, where=None):
    return [r["x"] for r in ds.reader(where)]


def write(ds, values):
    with ds.writer() as w:
        for v in values:
            w.write({"x": v})


TS_MILLIS = {"type": "long", "logicalType": "timestamp-millis"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_sub_millisecond_literals_on_millis_timestamps(tmp_path, fmt):
    one_ms, later = dt.datetime(2020, 1, 1, 0, 0, 0, 1000, tzinfo=UTC), dt.datetime(2021, 1, 1, tzinfo=UTC)
    ds = dataset(tmp_path, TS_MILLIS, fmt)
    write(ds, [one_ms, later])
    assert xs(ds, "x = '2020-01-01T00:00:00.001500'") == []
    assert xs(ds, "x < '2020-01-01T00:00:00.001500'") == [one_ms]
    assert xs(ds, "x <= '2020-01-01T00:00:00.001500'") == [one_ms]
    assert xs(ds, "x > '2020-01-01T00:00:00.001500'") == [later]
    assert xs(ds, "x != '2020-01-01T00:00:00.001500'") == [one_ms, later]
    assert ds.delete("x = '2020-01-01T00:00:00.001500'") is None
    assert xs(ds) == [one_ms, later]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("extra", [[], [float("nan")]])
def test_float_literals_are_rounded_to_float32(tmp_path, fmt, extra):
    ds = dataset(tmp_path, "float", fmt)
    write(ds, [0.1, 0.5, *extra])
    assert xs(ds, "x > 0.1") == [0.5]
    ds.delete("x > 0.1")
    assert [v for v in xs(ds) if v == v] == [pytest.approx(0.1)]
    assert len(xs(ds)) == 1 + len(extra)


@pytest.mark.parametrize("fmt", FORMATS)
def test_int_literals_outside_the_column_range(tmp_path, fmt):
    ds = dataset(tmp_path, "int", fmt)
    write(ds, [-5, 7])
    assert xs(ds, f"x < {2**40}") == [-5, 7]
    assert xs(ds, f"x = {2**40}") == []
    assert xs(ds, f"x > {-2**40}") == [-5, 7]
    assert xs(ds, f"x in ({2**40}, 7)") == [7]
    assert xs(ds, f"x != {2**40}") == [-5, 7]
    assert xs(ds, "x < 6.5") == [-5]
    assert xs(ds, "x >= -4.5") == [7]


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
def test_decimal_literal_with_more_scale_than_the_column(tmp_path, fmt):
    ds = dataset(tmp_path, {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}, fmt)
    write(ds, [decimal.Decimal("1.00"), decimal.Decimal("1.01")])
    assert xs(ds, "x < 1.005") == [decimal.Decimal("1.00")]
    assert xs(ds, "x = 1.005") == []
    assert xs(ds, "x > 1000") == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_starts_with_on_fixed_and_bytes(tmp_path, fmt):
    for name, avro in [("f", {"type": "fixed", "name": "F", "size": 4}), ("b", "bytes")]:
        ds = dataset(tmp_path, avro, fmt, name)
        write(ds, [b"abcd", b"xbcd"])
        assert xs(ds, "x starts with 'ab'") == [b"abcd"]
        assert xs(ds, "not x starts with 'ab'") == [b"xbcd"]


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
