import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdkds.catalog.errors import InvalidPartitionStrategyError
from cdkds.catalog.partitioning import java_hash, make_function
from cdkds.catalog.partitioning.layout import escape, parse_partition_path, partition_path
from cdkds.formats.errors import SchemaMismatchError

UTC = dt.timezone.utc


def test_cdk_example_user_1234_lands_in_bucket_15():
    f = make_function("hash", "userId", buckets=53)
    assert f.apply(1234, "long") == 15
    assert f.apply_array(pa.array([1234], pa.int64()), "long").to_pylist() == [15]
    assert f.name == "userId_hash"


@pytest.mark.parametrize("value, kind, expected", [
    ("hello", "string", 99162322),
    ("", "string", 0),
    ("Aa", "string", 2112), ("BB", "string", 2112),
    ("é", "string", 233),
    ("日本", "string", 26085 * 31 + 26412),
    ("😀", "string", 0xD83D * 31 + 0xDE00),
    (1234, "long", 1234), (-1, "long", 0), (1 << 32, "long", 1), (-5, "int", -5),
    (2**63 - 1, "long", -2**31), (-(2**31), "int", -(2**31)),
])
def test_java_hash_code_known_values(value, kind, expected):
    assert java_hash(value, kind) == expected


@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=50), st.integers(1, 1000))
def test_property_vectorised_long_hash_equals_scalar(values, buckets):
    f = make_function("hash", "x", buckets=buckets)
    assert f.apply_array(pa.array(values, pa.int64()), "long").to_pylist() == [f.apply(v, "long") for v in values]


@given(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=50), st.integers(1, 1000))
def test_property_vectorised_int_hash_equals_scalar(values, buckets):
    f = make_function("hash", "x", buckets=buckets)
    assert f.apply_array(pa.array(values, pa.int32()), "int").to_pylist() == [f.apply(v, "int") for v in values]


@given(st.lists(st.text(), min_size=1, max_size=20))
def test_property_string_hash_in_range_and_vectorised(values):
    f = make_function("hash", "x", buckets=7)
    out = f.apply_array(pa.array(values, pa.string()), "string").to_pylist()
    assert out == [f.apply(v, "string") for v in values] and all(0 <= b < 7 for b in out)


def test_range_and_list_functions():
    fixed = make_function("range", "age", size=10)
    assert [fixed.apply(v, "long") for v in (0, 9, 10, -1, -10)] == [0, 0, 10, -10, -10]
    bounds = make_function("range", "age", bounds=(18, 65, 150))
    assert [bounds.apply(v, "int") for v in (0, 18, 19, 150)] == [18, 18, 65, 150]
    with pytest.raises(SchemaMismatchError, match="above the last range bound 150"):
        bounds.apply(151, "int")
    with pytest.raises(SchemaMismatchError, match="above the last range bound"):
        bounds.apply_array(pa.array([1, 200], pa.int32()), "int")
    words = make_function("range", "name", bounds=("g", "n", "z"))
    assert words.apply("hello", "string") == "n"
    lists = make_function("list", "country", values=(("NZ", "AU"), ("US",)))
    assert lists.apply("AU", "string") == 0 and lists.apply("US", "string") == 1
    with pytest.raises(SchemaMismatchError, match="in none of the partition lists"):
        lists.apply("FR", "string")


def test_calendar_and_date_format_functions_in_utc():
    ts = dt.datetime(2026, 3, 1, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-2)))  # 2026-03-02 01:30 UTC
    for unit, expected in [("year", 2026), ("month", 3), ("day", 2), ("hour", 1), ("minute", 30)]:
        f = make_function(unit, "ts")
        assert f.apply(ts, "timestamp-micros") == expected
        assert f.apply_array(pa.array([ts], pa.timestamp("us", tz="UTC")), "timestamp-micros").to_pylist() == [expected]
    millis = int(dt.datetime(2026, 3, 2, 1, 30, tzinfo=UTC).timestamp() * 1000)
    assert make_function("day", "ts").apply(millis, "long") == 2
    assert make_function("day", "ts").apply_array(pa.array([millis], pa.int64()), "long").to_pylist() == [2]
    fmt = make_function("dateFormat", "ts", format="yyyy-MM-dd'T'HH")
    assert fmt.apply(ts, "timestamp-micros") == "2026-03-02T01"
    assert fmt.apply_array(pa.array([ts], pa.timestamp("us", tz="UTC")), "timestamp-micros").to_pylist() == ["2026-03-02T01"]
    assert make_function("month", "d").apply(dt.date(2026, 7, 9), "date") == 7


@pytest.mark.parametrize("make, message", [
    (lambda: make_function("hash", "x", buckets=0), "buckets must be a positive integer"),
    (lambda: make_function("hash", "x"), "needs a number of buckets"),
    (lambda: make_function("range", "x"), "needs either a size or a list of upper bounds"),
    (lambda: make_function("range", "x", bounds=(3, 1)), "strictly increasing"),
    (lambda: make_function("range", "x", bounds=(1, "a")), "all integers or all strings"),
    (lambda: make_function("list", "x", values=((1,), (1, 2))), "in more than one list"),
    (lambda: make_function("dateFormat", "x", format="EEE"), "'E' is not supported"),
    (lambda: make_function("bucket", "x"), "unknown partition function type 'bucket'"),
    (lambda: make_function("identity", "x", buckets=3), "does not take"),
])
def test_bad_functions_are_rejected(make, message):
    with pytest.raises(InvalidPartitionStrategyError, match=message):
        make()


def test_layout_escapes_any_value():
    path = partition_path(["a", "b", "c", "d"], ["x/y=z", None, "", dt.date(2026, 1, 2)])
    assert path == "a=x%2Fy%3Dz/b=__NULL__/c=%00/d=2026-01-02"
    assert parse_partition_path(path) == {"a": "x/y=z", "b": None, "c": "", "d": "2026-01-02"}
    assert "/" not in escape("../..") and escape("..") != ".."


@given(st.text())
def test_property_escaped_segment_is_one_safe_segment(text):
    segment = escape(text)
    assert "/" not in segment and segment not in ("", ".", "..")
    shares_a_folder = {"__NULL__": None, "\x00": ""}  # see the layout module: paths are informative
    assert parse_partition_path(f"p={segment}")["p"] == shares_a_folder.get(text, text)
