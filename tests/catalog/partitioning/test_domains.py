"""Values at and beyond the edges of each function's domain (issue 10 items 12, 13, 16)."""

import datetime as dt
import re

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import InvalidRecordError
from cdkds.catalog.expressions import ALWAYS_FALSE, ALWAYS_TRUE, bind, evaluate, parse
from cdkds.catalog.partitioning import PartitionStrategy, make_function
from cdkds.formats.errors import SchemaMismatchError
from cdkds.formats.schema import fields as schema_fields

UTC = dt.timezone.utc
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
INT_MIN = -(2**31)
SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "x", "type": "int"}, {"name": "t", "type": "long"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}}]}
FIELDS = schema_fields(SCHEMA)


def project(strategy, text, strict=False):
    bound = bind(parse(text), FIELDS)
    s = PartitionStrategy.parse(strategy)
    return s.project_strict(bound, FIELDS) if strict else s.project(bound, FIELDS)


# ---------------------------------------------------------------- item 12: dateFormat before year 1000

def test_date_format_pads_years_before_1000_like_java_on_both_paths():
    f = make_function("dateFormat", "ts", format="yyyy-MM-dd")
    t = dt.datetime(790, 3, 1, 12, tzinfo=UTC)
    assert f.apply(t, "timestamp-micros") == "0790-03-01"
    assert f.apply_array(pa.array([t], pa.timestamp("us", tz="UTC")), "timestamp-micros").to_pylist() == ["0790-03-01"]
    assert make_function("dateFormat", "ts", format="yy").apply(t, "timestamp-micros") == "90"


def test_date_format_projection_keeps_the_partition_of_an_early_year():
    inclusive = project("dateFormat(ts, 'yyyy-MM-dd') as d", "ts = '0790-03-01T12:00:00Z'")
    assert evaluate(inclusive, {"d": "0790-03-01"}) is True
    strict = project("dateFormat(ts, 'yyyy-MM-dd') as d", "ts >= '0790-03-02T00:00:00Z'", strict=True)
    assert evaluate(strict, {"d": "0790-03-01"}) is False and evaluate(strict, {"d": "0790-03-03"}) is True


def test_date_format_seconds_are_whole_seconds_like_java():
    f = make_function("dateFormat", "ts", format="HH:mm:ss")
    t = dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC)
    assert f.apply(t, "timestamp-micros") == "23:59:59"
    assert f.apply_array(pa.array([t], pa.timestamp("ms", tz="UTC")), "timestamp-millis").to_pylist() == ["23:59:59"]


# ---------------------------------------------------------------- item 13: range overflow

def test_fixed_range_lowest_bucket_starts_at_the_smallest_long():
    f = make_function("range", "id", size=10)
    assert f.apply(LONG_MIN, "long") == LONG_MIN
    assert f.apply(LONG_MIN + 7, "long") == LONG_MIN and f.apply(LONG_MIN + 8, "long") == LONG_MIN + 8
    assert f.apply(LONG_MAX, "long") == LONG_MAX - 7
    assert f.apply_array(pa.array([LONG_MIN, LONG_MAX, -1], pa.int64()), "long").to_pylist() == \
        [LONG_MIN, LONG_MAX - 7, -10]
    # an int source is ranged as the long it may be promoted to: the same ranges either way
    assert f.apply_array(pa.array([INT_MIN], pa.int32()), "int").to_pylist() == [INT_MIN - 2]
    assert f.result_kind("int") == "long"


def test_fixed_range_projection_reads_the_lowest_bucket():
    inclusive = project("range(id, 10)", f"id = {LONG_MIN}")
    assert evaluate(inclusive, {"id_range": LONG_MIN}) is True
    assert evaluate(project("range(id, 10)", f"id <= {LONG_MIN + 3}"), {"id_range": LONG_MIN}) is True


@pytest.mark.parametrize("field, value", [("id", LONG_MIN), ("x", INT_MIN), ("id", LONG_MAX)])
def test_fixed_range_extremes_are_written_and_read_back(tmp_path, field, value):
    ds = DatasetRepository(f"file://{tmp_path}").create("r", DatasetDescriptor(SCHEMA, f"range({field}, 10)"))
    row = {"id": 1, "x": 1, "t": 0, "ts": dt.datetime(2026, 1, 1, tzinfo=UTC), field: value}
    with ds.writer() as w:
        w.write(row)
    with ds.writer() as w:
        w.write_batch(pa.Table.from_pylist([row], schema=ds.descriptor.arrow_schema))
    assert len({f.partition[f"{field}_range"] for f in ds.files}) == 1
    assert list(ds.reader(f"{field} = {value}")) == [row, row]
    assert ds.delete(f"{field} = {value}") is not None and list(ds.reader()) == []


# ---------------------------------------------------------------- item 16: literals outside the domain

@pytest.mark.parametrize("text, inclusive, strict", [
    ("x < 200", ALWAYS_TRUE, ALWAYS_TRUE),
    ("x <= 151", ALWAYS_TRUE, ALWAYS_TRUE),
    ("x > 151", ALWAYS_FALSE, ALWAYS_FALSE),
    ("x >= 200", ALWAYS_FALSE, ALWAYS_FALSE),
    ("x = 200", ALWAYS_FALSE, ALWAYS_FALSE),
    ("x in (200, 300)", ALWAYS_FALSE, ALWAYS_FALSE),
    ("x != 200", ALWAYS_TRUE, ALWAYS_TRUE),
    ("x not in (200, 300)", ALWAYS_TRUE, ALWAYS_TRUE),
])
def test_range_bounds_project_literals_above_the_last_bound(text, inclusive, strict):
    assert project("range(x, [18, 65, 150])", text) == inclusive
    assert project("range(x, [18, 65, 150])", text, strict=True) == strict


@pytest.mark.parametrize("text, expected", [
    ("t < 1000000000000000", ALWAYS_TRUE), ("t >= 1000000000000000", ALWAYS_FALSE),
    ("t > -1000000000000000", ALWAYS_TRUE), ("t <= -1000000000000000", ALWAYS_FALSE),
    ("t = 1000000000000000", ALWAYS_FALSE), ("t != 1000000000000000", ALWAYS_TRUE),
])
@pytest.mark.parametrize("strategy", ["year(t)", "year(t), month(t), day(t)", "dateFormat(t, 'yyyy-MM') as ym"])
def test_calendar_on_long_projects_times_beyond_year_9999(strategy, text, expected):
    assert project(strategy, text) == expected
    assert project(strategy, text, strict=True) == expected


def test_values_beyond_the_domain_are_rejected_with_field_and_value(tmp_path):
    ds = DatasetRepository(f"file://{tmp_path}").create("t", DatasetDescriptor(SCHEMA, "year(t), range(x, [18, 65])"))
    row = {"id": 1, "x": 1, "t": 10**15, "ts": dt.datetime(2026, 1, 1, tzinfo=UTC)}
    with ds.writer() as w:
        with pytest.raises(InvalidRecordError, match=r"dataset 't'.* value 1000000000000000 of field 't' is not a time"):
            w.write(row)
        with pytest.raises(InvalidRecordError, match=r"field 'x' \(row 0\): value 70 is above the last range bound 65"):
            w.write_batch(pa.Table.from_pylist([{**row, "t": 0, "x": 70}], schema=ds.descriptor.arrow_schema))
    assert ds.version == 0 and ds.files == []
    beyond = pa.array([253_402_300_800_000_000], pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    with pytest.raises(SchemaMismatchError, match="of field 'ts' is not a time in the years 1 to 9999"):
        make_function("day", "ts").apply_array(beyond, "timestamp-micros")


def test_projection_literal_predicate_objects_are_only_read_through_attributes():
    class Bound:  # the predicates engineer's bound predicates may be their own class
        op, name, value, values = "lt", "x", 200, ()

    assert PartitionStrategy.parse("range(x, [18, 65, 150])").functions[0].project(Bound(), "int") == ALWAYS_TRUE


@pytest.mark.parametrize("function, array, kind", [
    ("year", pa.array([2**31 - 1], pa.int32()).cast(pa.date32()), "date"),
    ("day", pa.array([-(2**62)], pa.int64()).cast(pa.timestamp("ms")), "local-timestamp-millis"),
    ("identity", pa.array([2**62], pa.int64()).cast(pa.timestamp("us", tz="UTC")), "timestamp-micros"),
])
def test_arrow_times_without_a_python_form_are_rejected_with_their_raw_value(function, array, kind):
    raw = str(array[0].value)
    with pytest.raises(SchemaMismatchError, match=re.escape(f"value '{raw} ({array.type})' of field 'ts'")):
        make_function(function, "ts").apply_array(array, kind)
