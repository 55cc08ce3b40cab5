"""The one checked conversion of a column into a field's type (issue 26): each rule, on the
batch path every entry point ends in."""

import datetime as dt
import decimal

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdkds.formats.conversion import FIRST_DAY, LAST_DAY, RefusedValue, conform_column
from cdkds.formats.errors import SchemaMismatchError
from cdkds.formats.records import batch_conformer

LONG_ARRAY = {"type": "array", "items": "long"}
RECORD = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}
LONG_MAP = {"type": "map", "values": "long"}


@pytest.mark.parametrize("avro, column, path, value", [
    (LONG_ARRAY, pa.array([[1.0], [1.9, 2.5]]), "x[0]", 1.9),
    (RECORD, pa.array([{"a": 1.7}]), "x.a", 1.7),
    (LONG_MAP, pa.array([[("k", 2.9)]], pa.map_(pa.string(), pa.float64())), "x['k']", 2.9),
])
def test_fractions_inside_nested_values_are_refused_not_truncated(avro, column, path, value):  # 26.1
    with pytest.raises(RefusedValue) as e:
        conform_column(column, avro, "x")
    assert (e.value.path, e.value.value) == (path, value)
    assert e.value.row == len(column) - 1


def test_a_nested_field_the_schema_lacks_is_refused():  # 26.2
    with pytest.raises(RefusedValue, match=r"field 'x.secret' \(row 0\): value 's' is in no field"):
        conform_column(pa.array([{"a": 1, "secret": "s"}]), RECORD, "x")


def test_a_column_given_twice_is_refused():  # 26.3
    schema = {"type": "record", "name": "T", "fields": [{"name": "id", "type": "long"},
                                                        {"name": "s", "type": ["null", "string"], "default": None}]}
    batch = pa.RecordBatch.from_arrays([pa.array([1]), pa.array(["a"]), pa.array(["b"])], names=["id", "s", "s"])
    with pytest.raises(SchemaMismatchError, match="column 's' appears twice"):
        batch_conformer(schema)(batch)
    twice = pa.StructArray.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"])
    with pytest.raises(SchemaMismatchError, match="two fields named 'a'"):
        conform_column(twice, RECORD, "r")


@pytest.mark.parametrize("kind, unit, ticks", [("time-micros", "us", -1), ("time-micros", "us", 90_000_000_000),
                                               ("time-millis", "ms", 86_400_000)])
def test_a_time_outside_a_day_is_refused(kind, unit, ticks):  # 26.4
    t = pa.time64(unit) if unit == "us" else pa.time32(unit)
    column = pa.array([0, ticks], pa.int64() if unit == "us" else pa.int32()).cast(t)
    with pytest.raises(RefusedValue, match=rf"\(row 1\): value '{ticks} {unit} since midnight' is not a time of day"):
        conform_column(column, {"type": "long" if unit == "us" else "int", "logicalType": kind}, "tm")


def test_a_null_in_a_required_nested_field_is_refused_naming_its_path():  # 26.7
    with pytest.raises(RefusedValue, match=r"field 'arr\[1\]' \(row 1\): null in a required field"):
        conform_column(pa.array([[5], [1, None]]), LONG_ARRAY, "arr")
    # under a null parent a required child holds a placeholder, as Parquet needs
    nested = {"type": "record", "name": "N", "fields": [{"name": "r", "type": ["null", RECORD]}]}
    out = conform_column(pa.array([{"r": None}, {"r": {"a": 3}}, None]), ["null", nested], "n")
    assert out.to_pylist() == [{"r": None}, {"r": {"a": 3}}, None]
    assert out.type.field(0).type.field(0).nullable is False


@pytest.mark.parametrize("avro, column", [
    ({"type": "int", "logicalType": "date"}, pa.array([2_932_897], pa.int32()).cast(pa.date32())),
    ({"type": "int", "logicalType": "date"}, pa.array([-719_163], pa.int32()).cast(pa.date32())),
    ({"type": "long", "logicalType": "timestamp-micros"},
     pa.array([253_402_300_800_000_000], pa.int64()).cast(pa.timestamp("us", "UTC"))),
    ({"type": "long", "logicalType": "local-timestamp-millis"},
     pa.array([253_402_300_800], pa.int64()).cast(pa.timestamp("s"))),
])
def test_dates_and_timestamps_past_9999_are_refused(avro, column):  # 26.8
    with pytest.raises(RefusedValue, match=r"in the years 1 to 9999"):
        conform_column(column, avro, "d")
    last = {"date": dt.date(9999, 12, 31)}.get(avro["logicalType"], dt.datetime(9999, 12, 31, 23, 59, 59, 999000))
    back = conform_column(pa.array([last]), avro, "d").to_pylist()[0]
    assert (back.replace(tzinfo=None) if isinstance(back, dt.datetime) else back) == last


def test_a_map_key_given_twice_is_refused():  # 26.12
    with pytest.raises(RefusedValue, match=r"field 'm' \(row 1\): value 'k' is a key given twice"):
        conform_column(pa.array([[("k", 1)], [("k", 1), ("k", 2)]], pa.map_(pa.string(), pa.int64())), LONG_MAP, "m")


def test_text_that_overflows_a_double_is_refused():  # 26.5
    with pytest.raises(RefusedValue, match="1e400"):
        conform_column(pa.array(["1", "1e400"]), "double", "f")
    assert conform_column(pa.array(["inf", "-Infinity"]), "double", "f").to_pylist() == [float("inf"), float("-inf")]
    with pytest.raises(RefusedValue, match=r"1e\+39"):
        conform_column(pa.array([1.0, 1e39]), "float", "f")


def test_sliced_nested_columns_convert_their_own_values():
    column = pa.array([[1, 2], None, [3], [4, None]], pa.list_(pa.int64())).slice(1, 2)
    assert conform_column(column, ["null", LONG_ARRAY], "x").to_pylist() == [None, [3]]
    maps = pa.array([[("a", 1)], None, [("b", 2)]], pa.map_(pa.string(), pa.int64())).slice(1)
    assert conform_column(maps, ["null", LONG_MAP], "m").to_pylist() == [None, [("b", 2)]]


DECIMAL_5_2 = {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}


@pytest.mark.parametrize("list_type", [pa.list_view(pa.int64()), pa.large_list_view(pa.int64())])
def test_list_views_keep_their_values(list_type):  # review: Arrow's list_view -> list cast lost them
    column = pa.array([[1, 2], None, [], [3]], list_type)
    assert conform_column(column, ["null", LONG_ARRAY], "x").to_pylist() == [[1, 2], None, [], [3]]
    assert conform_column(column.slice(3), LONG_ARRAY, "x").to_pylist() == [[3]]


@pytest.mark.parametrize("column, avro, value", [
    (pa.array([dt.datetime(2020, 1, 1, 5)], pa.timestamp("us")), {"type": "int", "logicalType": "date"},
     dt.datetime(2020, 1, 1, 5)),
    (pa.array([0, 2]), "boolean", 2),
    (pa.array([0.5]), "boolean", 0.5),
    (pa.array([1.0, 2.675]), DECIMAL_5_2, 2.675),
    (pa.array([decimal.Decimal(16777217)], pa.decimal128(10, 0)), "float",
     decimal.Decimal(16777217)),
])
def test_casts_arrow_lets_lose_a_value_are_refused(column, avro, value):  # review: Arrow's safe cast truncates these
    with pytest.raises(RefusedValue) as e:
        conform_column(column, avro, "x")
    assert (e.value.path, e.value.row, e.value.value) == ("x", len(column) - 1, value)


@pytest.mark.parametrize("column, avro", [
    (pa.array([dt.datetime(2020, 1, 1, 5)], pa.timestamp("us")), {"type": "long", "logicalType": "time-micros"}),
    (pa.array([dt.datetime(2020, 1, 1, 5)], pa.timestamp("ms")), {"type": "int", "logicalType": "time-millis"}),
])
def test_a_timestamp_is_not_a_time_of_day(column, avro):  # review: the date was dropped, or a raw Arrow error
    with pytest.raises(SchemaMismatchError, match="cannot be written as time"):
        conform_column(column, avro, "x")


def test_exact_casts_between_those_types_still_pass():
    assert conform_column(pa.array([0.1, 2.5, None]), ["null", DECIMAL_5_2], "x").to_pylist() == \
        [decimal.Decimal("0.10"), decimal.Decimal("2.50"), None]
    assert conform_column(pa.array([1, 0]), "boolean", "x").to_pylist() == [True, False]
    assert conform_column(pa.array([dt.datetime(2020, 1, 1)], pa.timestamp("s")),
                          {"type": "int", "logicalType": "date"}, "x").to_pylist() == [dt.date(2020, 1, 1)]


def test_a_null_map_entry_is_refused_not_made_up():  # review: [[None]] became [('', 0)]
    entries = pa.array([[None]], pa.list_(pa.struct([("key", pa.string()), ("value", pa.int64())])))
    with pytest.raises(RefusedValue, match=r"null"):
        conform_column(entries, LONG_MAP, "x")


BYTES_DEFAULTS = [
    {"name": "b", "type": "bytes", "default": "\u00ff\u0000"},
    {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}, "default": "\u00ff\u0001"},
    {"name": "u", "type": {"type": "string", "logicalType": "uuid"}, "default": "12345678-1234-5678-1234-56781234567A"},
    {"name": "l", "type": {"type": "array", "items": "bytes"}, "default": ["\u00e9"]},
]
BYTES_VALUES = {"b": b"\xff\x00", "f": b"\xff\x01", "u": "12345678-1234-5678-1234-56781234567a", "l": [b"\xe9"]}


def test_defaults_are_read_in_avros_json_form_everywhere():  # review: "\u00ff" was stored as b'\xc3\xbf', fixed raw
    from cdkds.formats.projection import filled
    from cdkds.formats.records import record_validator
    from cdkds.formats.schema import arrow_type
    schema = {"type": "record", "name": "T", "fields": [{"name": "id", "type": "long"}, *BYTES_DEFAULTS]}
    batch = batch_conformer(schema)(pa.RecordBatch.from_pydict({"id": [1]}))
    assert batch.to_pylist() == [{"id": 1, **BYTES_VALUES}]
    assert batch_conformer(schema)(pa.RecordBatch.from_pylist([record_validator(schema)({"id": 1})])).to_pylist() == \
        [{"id": 1, **BYTES_VALUES}]
    nested = {"type": "record", "name": "N", "fields": [{"name": "a", "type": "long"}, *BYTES_DEFAULTS]}
    assert conform_column(pa.array([{"a": 1}]), nested, "r").to_pylist() == [{"a": 1, **BYTES_VALUES}]
    for f in BYTES_DEFAULTS:  # a file written before the field was added
        assert filled(f, arrow_type(f["type"], f["name"]), 1).to_pylist() == [BYTES_VALUES[f["name"]]]


_DAYS = st.sampled_from([FIRST_DAY - 1, FIRST_DAY, 0, LAST_DAY, LAST_DAY + 1, -(2**31), 2**31 - 1]) | \
    st.integers(FIRST_DAY - 3, LAST_DAY + 3)


@given(st.lists(st.none() | _DAYS, max_size=20))
def test_the_range_check_finds_the_first_value_outside(days):  # review: one min/max pass when all lie within
    outside = [i for i, d in enumerate(days) if d is not None and not FIRST_DAY <= d <= LAST_DAY]
    column = pa.array(days, pa.int32()).cast(pa.date32())
    try:
        out = conform_column(column, ["null", {"type": "int", "logicalType": "date"}], "d")
    except RefusedValue as e:
        assert outside and e.row == outside[0]
    else:
        assert not outside and out.equals(column)


@pytest.mark.parametrize("avro", ["int", "long", "float", "double", DECIMAL_5_2])
def test_a_boolean_column_is_not_a_number(avro):  # review: True became 1 (a key True found row 1); write() refuses it
    with pytest.raises(SchemaMismatchError, match="a boolean is not a number"):
        conform_column(pa.array([True, False]), avro, "x")
