"""Literals bound to the column's type: reads and deletes on real datasets (issue 10 items 10 and 17)."""

import datetime as dt
import decimal

import pytest

from tests.conftest import one_column_dataset as dataset, write_xs as write, xs

UTC = dt.timezone.utc
FORMATS = ["parquet", "avro"]


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
