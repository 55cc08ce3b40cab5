"""Properties of every partition function on every source kind it accepts, extremes included:
the scalar path equals the column path, inclusive projection never drops a partition holding
a match, strict projection never keeps one holding a non-match (out-of-domain literals too)."""

import datetime as dt
import functools

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdkds.catalog.expressions import Predicate, bind, evaluate
from cdkds.catalog.partitioning import PartitionStrategy, make_function
from cdkds.catalog.partitioning.hashing import HashFunction
from cdkds.formats.schema import fields as schema_fields
from cdkds.formats.schema import to_arrow

UTC = dt.timezone.utc
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
MILLIS_MIN, MILLIS_MAX = -62_135_596_800_000, 253_402_300_799_999  # years 1 to 9999
SYMBOLS = ["A", "B", "CC", "Z"]

AVRO = {
    "int": "int", "long": "long", "string": "string", "boolean": "boolean",
    "enum": {"type": "enum", "name": "E", "symbols": SYMBOLS},
    "uuid": {"type": "string", "logicalType": "uuid"},
    "date": {"type": "int", "logicalType": "date"},
    "decimal": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
    **{k: {"type": "long", "logicalType": k} for k in (
        "timestamp-millis", "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros")},
}


def _extremes(lo, hi):
    return st.one_of(st.sampled_from([lo, lo + 1, -1, 0, 1, hi - 1, hi]), st.integers(lo, hi))


def _datetimes(kind):
    tz = st.none() if kind.startswith("local-") else st.just(UTC)
    extremes = [dt.datetime.min, dt.datetime(999, 12, 31, 23, 59, 59, 999999), dt.datetime(1970, 1, 1),
                dt.datetime.max]
    values = st.one_of(st.sampled_from(extremes), st.datetimes()).flatmap(
        lambda d: tz.map(lambda z: d.replace(tzinfo=z)))
    if kind.endswith("-millis"):
        values = values.map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000))
    return values


VALUES = {
    "int": _extremes(INT_MIN, INT_MAX),
    "long": _extremes(LONG_MIN, LONG_MAX),
    "string": st.one_of(st.sampled_from(["", "a", "g", "gz", "z", "zz", "😀", "\uffff", "NZ"]), st.text(max_size=6)),
    "enum": st.sampled_from(SYMBOLS),
    "uuid": st.uuids().map(str),
    "boolean": st.booleans(),
    "date": st.one_of(st.sampled_from([dt.date.min, dt.date(999, 12, 31), dt.date(1970, 1, 1), dt.date.max]),
                      st.dates()),
    "decimal": st.decimals(min_value=-10**8 + 1, max_value=10**8 - 1, places=2, allow_nan=False),
    **{k: _datetimes(k) for k in ("timestamp-millis", "timestamp-micros", "local-timestamp-millis",
                                  "local-timestamp-micros")},
}
MILLIS = _extremes(MILLIS_MIN, MILLIS_MAX)  # a long source of a time function

# Each case puts every function a kind accepts in one strategy: inclusive projections are
# combined with 'and' and strict ones with 'or', so one unsound function fails the case.
_INTEGERS = ("identity(s), hash(s, 7), hash(s, 2147483647) as h2, range(s, 10), range(s, 4611686018427387904) as r2, "
             "range(s, [-100, 0, 18, 65, 2147483647]) as r3, list(s, [[-1, 0], [1], [2147483647]])")
_STRINGS = "identity(s), hash(s, 7), range(s, ['', 'g', 'n', 'z'])"
_CALENDAR = "year(s), month(s), day(s), hour(s), minute(s)"
_FORMATS = ("dateFormat(s, 'yyyy-MM-dd'), dateFormat(s, 'yyyy-MM-dd''T''HH:mm:ss') as f2, "
            "dateFormat(s, 'yy/dd.MM') as f3")
_TIMESTAMPS = ["timestamp-millis", "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros"]
CASES = [
    ("int", _INTEGERS), ("long", _INTEGERS),
    ("string", _STRINGS + ", list(s, [['A', 'B'], ['Z'], ['😀', '']])"),
    ("enum", _STRINGS + ", list(s, [['A', 'B'], ['Z']])"), ("uuid", _STRINGS),
    ("boolean", "identity(s), list(s, [[true], [false]])"), ("decimal", "identity(s)"),
    ("date", "identity(s), year(s), month(s), day(s), dateFormat(s, 'yyyy-MM-dd'), dateFormat(s, 'yy/dd.MM') as f3"),
    ("date", "year(s)"), ("date", "month(s), day(s)"),
    ("long", _CALENDAR + ", " + _FORMATS), ("long", "year(s), month(s)"), ("long", "day(s), hour(s)"),
    *[(kind, "identity(s), " + _CALENDAR + ", " + _FORMATS) for kind in _TIMESTAMPS],
    *[(kind, "year(s)") for kind in _TIMESTAMPS], *[(kind, "hour(s), minute(s)") for kind in _TIMESTAMPS],
]


def _schema(kind):
    return {"type": "record", "name": "R", "fields": [{"name": "s", "type": AVRO[kind]}]}


def _setup(text, kind):
    fields = schema_fields(_schema(kind))
    strategy = PartitionStrategy.parse(text).bind(fields)
    return strategy, fields


@functools.lru_cache(maxsize=None)  # hypothesis strategies are costly to build per example
def _values(kind):
    """Source values and literals of ``kind``: those a domain excludes too (they are
    dropped from rows, since writes reject them, and kept as literals)."""
    return st.one_of(MILLIS, VALUES["long"]) if kind == "long" else VALUES[kind]


def _in_domain(strategy, kind, v):
    return all(f.domain(kind).contains(v) for f in strategy.functions)


@st.composite
def _predicates(draw, kind, literals):
    ops = ["eq", "ne", "in", "not_in", "is_null", "not_null"]
    if kind != "boolean":
        ops += ["lt", "le", "gt", "ge"]
    if kind in ("string", "enum", "uuid"):
        ops += ["starts_with", "not_starts_with"]
    op = draw(st.sampled_from(ops))
    if op in ("is_null", "not_null"):
        return Predicate(op, "s")
    if op in ("in", "not_in"):
        return Predicate(op, "s", values=tuple(draw(st.lists(literals, min_size=1, max_size=3))))
    if op in ("starts_with", "not_starts_with"):
        return Predicate(op, "s", draw(literals)[:draw(st.integers(0, 3))])
    return Predicate(op, "s", draw(literals))


@functools.lru_cache(maxsize=None)
def _expressions(kind):
    leaf = _predicates(kind, _values(kind))
    return st.recursive(leaf, lambda inner: st.one_of(
        st.builds(lambda a, b: a & b, inner, inner), st.builds(lambda a, b: a | b, inner, inner),
        st.builds(lambda a: ~a, inner)), max_leaves=3)


# each case gets a share of the profile's examples (ci: 10, thorough: 200)
PER_CASE = settings(max_examples=max(10, settings.default.max_examples // 10))


@pytest.mark.parametrize("kind, text", CASES)
@PER_CASE
@given(data=st.data())
def test_property_function_paths_agree_and_projections_are_sound(kind, text, data):
    strategy, fields = _setup(text, kind)
    rows = [v for v in data.draw(st.lists(_values(kind), min_size=1, max_size=12)) if _in_domain(strategy, kind, v)]
    column = pa.array(rows, type=to_arrow(_schema(kind)).field("s").type)
    partitions = [{} for _ in rows]
    for f in strategy.functions:
        values = f.apply_array(column, kind).to_pylist()  # the write path
        assert values == [f.apply(v, kind) for v in rows]  # the record path and projection's
        for partition, value in zip(partitions, values):
            partition[f.name] = value

    expr = bind(data.draw(_expressions(kind)), fields)
    inclusive = strategy.project(expr, fields)
    strict = strategy.project_strict(expr, fields)
    for value, partition in zip(rows, partitions):
        matches = evaluate(expr, {"s": value}) is True
        if matches:
            assert evaluate(inclusive, partition) is True, (value, partition, inclusive)
        if evaluate(strict, partition) is True:
            assert matches, (value, partition, strict)


@given(st.lists(_extremes(INT_MIN, INT_MAX), min_size=1, max_size=20), st.integers(1, 1000))
def test_property_hash_created_on_int_keeps_buckets_after_promotion_to_long(values, buckets):
    on_int = HashFunction("x", "x_hash", buckets, source_type="int")
    assert on_int.apply_array(pa.array(values, pa.int64()), "long").equals(on_int.apply_array(pa.array(values, pa.int32()), "int"))


def test_kite_compatibility_vectors():
    f = make_function("hash", "userId", buckets=53)
    assert f.apply(1234, "long") == f.apply(1234, "int") == 15
    assert f.apply_array(pa.array([1234], pa.int64()), "long").to_pylist() == [15]
