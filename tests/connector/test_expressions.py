"""Property: a bound expression translated to a Spark column (``to_spark_column``) means on
every row what the row evaluator (``rows.evaluate``) says: true, false or unknown (null).

Random tables with a column of every scalar type (nulls, NaN, -0.0, infinities, extreme
ints, unicode and empty strings, binary, old and far dates and timestamps, decimals,
booleans, UUIDs), written as Parquet and read by Spark's own Parquet reader (as the native
read path does), and random bound predicates over them (every operator, nested ``and``,
``or``, ``not`` and constants), all evaluated in one ``select`` per example, in a session
time zone other than UTC.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import tempfile
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdkds.catalog.expressions import (
    ALWAYS_FALSE, ALWAYS_TRUE, And, BoundPredicate, Not, Or, Predicate, bind, evaluate, field,
)
from cdkds.connector.expressions import to_spark_column
from cdkds.formats.schema import fields, to_arrow
from tests.catalog.expressions.test_agreement import NAN, TYPES, UTC, _millis

pytestmark = pytest.mark.slow

# Spark's Parquet reader refuses TIME(MILLIS) columns, so the native path never reads them
KINDS = [kind for kind in TYPES if kind != "time-millis"]
NAMES = {kind: kind for kind in KINDS} | {"double": "a.b double", "string": "`s` t", "bytes": "in"}

_far_aware = [dt.datetime(1, 1, 1, tzinfo=UTC), dt.datetime(1582, 10, 10, 12, tzinfo=UTC),
              dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
              dt.datetime(2020, 3, 8, 7, 30, tzinfo=UTC)]  # 02:30 in New York, an hour that does not exist there
_far_naive = [d.replace(tzinfo=None) for d in _far_aware] + [dt.datetime(2020, 3, 8, 2, 30), dt.datetime(2020, 11, 1, 1, 30)]
EXTRA_VALUES = {
    "int": st.integers(-2 ** 31, 2 ** 31 - 1),
    "long": st.integers(-2 ** 63, 2 ** 63 - 1),
    "double": st.sampled_from([math.inf, 1e308, -5e-324, NAN, 0.0]),
    "float": st.sampled_from([-math.inf, 3.4028234663852886e38, 0.0]),
    "string": st.text(st.characters(exclude_categories=("Cs",)), max_size=4),
    "bytes": st.binary(max_size=4),
    "date": st.sampled_from([dt.date(1, 1, 1), dt.date(1582, 10, 10), dt.date(9999, 12, 31)]),
    "timestamp-micros": st.sampled_from(_far_aware),
    "timestamp-millis": st.sampled_from(_far_aware).map(_millis),
    "local-timestamp-micros": st.sampled_from(_far_naive),
    "local-timestamp-millis": st.sampled_from(_far_naive).map(_millis),
}
_PREFIXED = {"string", "bytes", "fixed", "enum", "uuid"}


def _values(kind):
    values = TYPES[kind][1]
    return values | EXTRA_VALUES[kind] if kind in EXTRA_VALUES else values


@st.composite
def tables(draw):
    """Columns of every kind, as many rows each, and the Avro schema naming them."""
    n = draw(st.integers(0, 8))
    columns = {kind: draw(st.lists(st.none() | _values(kind), min_size=n, max_size=n)) for kind in KINDS}
    schema = {"type": "record", "name": "R",
              "fields": [{"name": NAMES[kind], "type": ["null", TYPES[kind][0]]} for kind in KINDS]}
    return columns, schema


@st.composite
def predicates(draw, columns):
    kind = draw(st.sampled_from(KINDS))
    name, literals = NAMES[kind], TYPES[kind][2]
    present = [v for v in columns[kind] if v is not None]
    if present:
        literals = literals | st.sampled_from(present)
    ops = ["eq", "ne", "in", "not_in", "is_null", "not_null"]
    if kind != "boolean":
        ops += ["lt", "le", "gt", "ge"]
    if kind in _PREFIXED:
        ops += ["starts_with", "not_starts_with"]
    op = draw(st.sampled_from(ops))
    if op in ("is_null", "not_null"):
        return Predicate(op, name)
    if op in ("in", "not_in"):
        return Predicate(op, name, values=tuple(draw(st.lists(st.none() | literals, max_size=13))))
    if op in ("starts_with", "not_starts_with"):
        prefixes = (st.binary(max_size=2) if kind in ("bytes", "fixed")
                    else st.sampled_from(["", "a", "B", "0000", "A", "\u00e9"]) | st.text(max_size=2))
        if present and kind not in ("bytes", "fixed"):
            prefixes = prefixes | st.sampled_from(present).map(lambda v: v[:2])
        return Predicate(op, name, draw(prefixes))
    return Predicate(op, name, draw(literals))


@st.composite
def expressions(draw, columns, depth=0):
    shapes = ["leaf"] * 6 + ["true", "false"] if depth else ["leaf"] * 2
    shape = draw(st.sampled_from(shapes + ["not", "and", "or"] * (depth < 3)))
    if shape == "leaf":
        return draw(predicates(columns))
    if shape in ("true", "false"):
        return ALWAYS_TRUE if shape == "true" else ALWAYS_FALSE
    if shape == "not":
        return Not(draw(expressions(columns, depth + 1)))
    terms = draw(st.lists(expressions(columns, depth + 1), min_size=2, max_size=3))
    return And(*terms) if shape == "and" else Or(*terms)


@contextmanager
def session_conf(spark, **conf):
    """``spark`` with the given SQL settings (``_`` for ``.`` in their names), restored after."""
    keys = {key.replace("_", "."): value for key, value in conf.items()}
    before = {key: spark.conf.get(key, None) for key in keys}
    for key, value in keys.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)


def spark_results(spark, table: pa.Table, bound: list) -> list[list]:
    """Per row of ``table``, each of the ``bound`` expressions as Spark evaluates it on the
    table written as Parquet and read by Spark's Parquet reader (one job for them all)."""
    table = table.append_column("__row", pa.array(range(table.num_rows), pa.int32()))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.parquet")
        pq.write_table(table, path)
        columns = [to_spark_column(b, table.schema).alias(f"p{i}") for i, b in enumerate(bound)]
        rows = spark.read.parquet(path).select("__row", *columns).collect()
    return [list(row[1:]) for row in sorted(rows, key=lambda row: row[0])]


def row_results(table: pa.Table, bound: list) -> list[list]:
    return [[evaluate(b, record) for b in bound] for record in table.to_pylist()]


NON_UTC = ["America/New_York", "Asia/Kolkata", "Pacific/Chatham"]


@settings(max_examples=max(10, settings.default.max_examples * 2 // 5))  # one Spark job per example
@given(data=st.data())
def test_spark_columns_mean_what_rows_evaluate_says(spark, data):
    columns, schema = data.draw(tables())
    arrow_schema = to_arrow(schema)
    table = pa.table({NAMES[kind]: pa.array(columns[kind], arrow_schema.field(NAMES[kind]).type) for kind in KINDS},
                     schema=arrow_schema)
    exprs = data.draw(st.lists(expressions(columns), min_size=8, max_size=16))
    bound = [bind(e, fields(schema)) for e in exprs]
    with session_conf(spark, spark_sql_session_timeZone=data.draw(st.sampled_from(NON_UTC)),
                      spark_sql_timeType_enabled="true"):
        got = spark_results(spark, table, bound)
    expected = row_results(table, bound)
    for i, b in enumerate(bound):
        assert [row[i] for row in got] == [row[i] for row in expected], (str(exprs[i]), str(b), table.to_pylist())


# ---------------------------------------------------------------- explicit cases

def _one_column(avro, values):
    schema = {"type": "record", "name": "R", "fields": [{"name": "x", "type": ["null", avro]}]}
    arrow_schema = to_arrow(schema)
    return pa.table({"x": pa.array(values, arrow_schema.field("x").type)}, schema=arrow_schema), fields(schema)


def test_nan_compares_unknown_and_the_zeros_equal(spark):
    table, fs = _one_column("double", [NAN, 1.0, -0.0, 0.0, math.inf, None])
    x = field("x")
    exprs = [x > 0.5, x == 1.0, x != 1.0, x < math.inf, x.isin([0.0]), x.notin([-0.0]), x == -0.0, x <= 0.0,
             x >= -0.0, x.is_null(), x.not_null(), Not(x > 0.5)]
    bound = [bind(e, fs) for e in exprs]
    got = spark_results(spark, table, bound)
    assert got == row_results(table, bound)
    assert got[0] == [None] * 9 + [False, True, None]  # NaN: every comparison unknown, Spark's own order unused
    assert [row[4] for row in got] == [None, False, True, True, False, None]  # -0.0 is in (0.0)


def test_in_with_nulls_and_empty_lists(spark):
    table, fs = _one_column("long", [1, 2, None])
    x = field("x")
    bound = [bind(e, fs) for e in (x.isin([1, None]), x.notin([1, None]), x.isin([None]), x.notin([None]))]
    bound += [BoundPredicate("in", "x", kind="long"), BoundPredicate("not_in", "x", kind="long")]
    got = spark_results(spark, table, bound)
    assert got == row_results(table, bound)
    assert got == [[True, False, False, False, False, True],
                   [False, False, False, False, False, True],
                   [None, False, False, False, None, None]]


def test_timestamp_literals_do_not_depend_on_the_session_time_zone(spark):
    local = dt.datetime(2020, 3, 8, 2, 30)  # does not exist in New York
    aware = dt.datetime(2020, 3, 8, 7, 30, tzinfo=UTC)
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "local", "type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}]},
        {"name": "aware", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}]}]}
    table = pa.table({"local": [local, local + dt.timedelta(microseconds=1), None],
                      "aware": [aware, aware - dt.timedelta(microseconds=1), None],
                      "day": [dt.date(2020, 3, 8), dt.date(1582, 10, 4), None]}, schema=to_arrow(schema))
    exprs = [field("local") == local, field("local") > local, field("aware") == aware, field("aware") < aware,
             field("day") == dt.date(2020, 3, 8), field("day") < dt.date(1582, 10, 15)]
    bound = [bind(e, fields(schema)) for e in exprs]
    expected = [[True, False, True, False, True, False], [False, True, False, True, False, True], [None] * 6]
    assert row_results(table, bound) == expected
    for zone in ("America/New_York", "Asia/Kolkata", "UTC"):
        with session_conf(spark, spark_sql_session_timeZone=zone):
            assert spark_results(spark, table, bound) == expected, zone


def test_filters_keep_exactly_the_true_rows_of_odd_names(spark, tmp_path):
    """As a read filters and a tombstone deletes: on a column whose name holds a dot and a backtick."""
    name = "a.`b c"
    table = pa.table({name: pa.array([1.0, NAN, None, 3.0, -0.0])})
    pq.write_table(table, tmp_path / "t.parquet")
    df = spark.read.parquet(str(tmp_path / "t.parquet"))
    from pyspark.sql import functions as F

    where = to_spark_column(bind(field(name) != 1.0, {name: fields(
        {"fields": [{"name": name, "type": ["null", "double"]}]})[name]}), table.schema)
    assert sorted(r[0] for r in df.filter(where).collect()) == [-0.0, 3.0]
    kept = df.filter(~F.coalesce(where, F.lit(False))).collect()
    assert sorted(repr(r[0]) for r in kept) == ["1.0", "None", "nan"]
