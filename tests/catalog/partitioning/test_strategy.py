import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdkds.catalog.errors import InvalidPartitionStrategyError
from cdkds.catalog.expressions import Predicate, bind, evaluate, parse
from cdkds.catalog.partitioning import PartitionStrategy
from cdkds.formats.schema import fields as schema_fields

UTC = dt.timezone.utc
SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "userId", "type": "long"},
    {"name": "age", "type": "int"},
    {"name": "country", "type": ["null", "string"], "default": None},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "name", "type": "string"},
]}
FIELDS = schema_fields(SCHEMA)


def test_three_equal_forms():
    built = (PartitionStrategy.builder().hash("userId", 53).identity("country").range("age", bounds=[18, 65, 200])
             .year("ts").month("ts").day("ts").date_format("ts", "yyyy-MM-dd", name="date")
             .list("name", [["a", "b"], ["c"]]).build())
    text = ("hash(userId, 53), identity(country), range(age, [18, 65, 200]), year(ts), month(ts), day(ts), "
            "dateFormat(ts, 'yyyy-MM-dd') as date, list(name, [['a', 'b'], ['c']])")
    kite = [{"type": "hash", "source": "userId", "buckets": 53}, {"type": "identity", "source": "country"},
            {"type": "range", "source": "age", "bounds": [18, 65, 200]}, {"type": "year", "source": "ts"},
            {"type": "month", "source": "ts"}, {"type": "day", "source": "ts"},
            {"type": "dateFormat", "source": "ts", "format": "yyyy-MM-dd", "name": "date"},
            {"type": "list", "source": "name", "values": [["a", "b"], ["c"]]}]
    assert PartitionStrategy.parse(text) == built == PartitionStrategy.from_json(kite)
    assert built.to_text() == text and built.to_json() == kite
    assert PartitionStrategy.parse(str(kite).replace("'", '"')) == built
    assert built.names == ["userId_hash", "country_copy", "age_range", "year", "month", "day", "date", "name_list"]
    built.check(FIELDS)


@pytest.mark.parametrize("text, message", [
    ("hash(userId)", "takes 1 argument"),
    ("hash(userId, 53", "expected '\\)'"),
    ("hash(userId, 53) identity(country)", "expected ','"),
    ("", "expected a partition function"),
    ("year(ts), year(ts)", "partition names must be unique"),
    ("[{\"type\": \"hash\"}]", "needs 'type' and 'source'"),
    ("[not json", "not valid JSON"),
    ("list(name, 'a')", "takes a list of value lists"),
])
def test_bad_strategy_text(text, message):
    with pytest.raises(InvalidPartitionStrategyError, match=message):
        PartitionStrategy.parse(text)


@pytest.mark.parametrize("text, message", [
    ("hash(nope, 4)", "partition source 'nope' .* is not a field"),
    ("identity(age) as name", "partition name 'name' .* equals a schema field"),
    ("year(name)", "needs a source of type .* but field 'name' is string"),
    ("hour(age)", "but field 'age' is int"),
    ("range(name, 10)", "but field 'name' is string"),
    ("list(age, [['a']])", "value 'a' is not a int"),
])
def test_strategy_must_fit_schema(text, message):
    with pytest.raises(InvalidPartitionStrategyError, match=message):
        PartitionStrategy.parse(text).check(FIELDS)


def test_projection_prunes_through_every_function():
    strategy = PartitionStrategy.parse("hash(userId, 53), year(ts), month(ts), day(ts)")

    def project(text):
        return strategy.project(bind(parse(text), FIELDS), FIELDS)

    p = project("userId = 1234")
    assert evaluate(p, {"userId_hash": 15}) is True and evaluate(p, {"userId_hash": 16}) is False
    p = project("ts >= '2026-03-01'")
    keep = lambda y, m, d: evaluate(p, {"year": y, "month": m, "day": d}) is True
    assert keep(2026, 3, 1) and keep(2027, 1, 1) and keep(2026, 4, 1)
    assert not keep(2026, 2, 28) and not keep(2025, 12, 31)
    p = project("userId in (1234, 1)")
    assert {b for b in range(53) if evaluate(p, {"userId_hash": b, "year": 1, "month": 1, "day": 1})} == {15, 1}


# ---------------------------------------------------------------- properties

STRATEGY = PartitionStrategy.parse(
    "hash(userId, 7), range(age, 10), identity(country), year(ts), month(ts), day(ts), hour(ts), "
    "dateFormat(ts, 'yyyy-MM') as ym, list(name, [['a', 'b'], ['c'], ['d', 'e', 'f']])")

_VALUES = {
    "userId": st.integers(-50, 50),
    "age": st.integers(-30, 120),
    "country": st.one_of(st.none(), st.sampled_from(["NZ", "AU", "US", "N", ""])),
    "ts": st.datetimes(min_value=dt.datetime(2025, 11, 25), max_value=dt.datetime(2026, 2, 5), timezones=st.just(UTC)),
    "name": st.sampled_from(["a", "b", "c", "d", "e", "f"]),
}
_ROW = st.fixed_dictionaries(_VALUES)
_OPS = ["eq", "ne", "lt", "le", "gt", "ge"]


@st.composite
def predicates(draw):
    name = draw(st.sampled_from(sorted(_VALUES)))
    values = _VALUES[name].filter(lambda v: v is not None)
    kind = draw(st.sampled_from(["cmp", "in", "not_in", "null", "prefix"]))
    if kind == "cmp" and name != "name":
        return Predicate(draw(st.sampled_from(_OPS)), name, draw(values))
    if kind == "cmp":
        return Predicate(draw(st.sampled_from(["eq", "ne"])), name, draw(values))
    if kind in ("in", "not_in"):
        return Predicate(kind, name, values=tuple(draw(st.lists(values, min_size=1, max_size=4))))
    if kind == "prefix" and name == "country":
        return Predicate(draw(st.sampled_from(["starts_with", "not_starts_with"])), name, draw(values))
    return Predicate(draw(st.sampled_from(["is_null", "not_null"])), name)


def expressions():
    return st.recursive(predicates(), lambda inner: st.one_of(
        st.builds(lambda a, b: a & b, inner, inner), st.builds(lambda a, b: a | b, inner, inner),
        st.builds(lambda a: ~a, inner)), max_leaves=4)


def partition_of(row):
    return {f.name: (row[f.source] if row[f.source] is None else f.apply(row[f.source], FIELDS[f.source].kind))
            for f in STRATEGY.functions}


@given(expressions(), st.lists(_ROW, min_size=1, max_size=25))
def test_property_inclusive_projection_never_drops_a_matching_partition(expr, rows):
    bound = bind(expr, FIELDS)
    projected = STRATEGY.project(bound, FIELDS)
    for row in rows:
        if evaluate(bound, row) is True:
            assert evaluate(projected, partition_of(row)) is True, (row, projected)


@given(expressions(), st.lists(_ROW, min_size=1, max_size=25))
def test_property_strict_projection_never_keeps_a_non_matching_row(expr, rows):
    bound = bind(expr, FIELDS)
    strict = STRATEGY.project_strict(bound, FIELDS)
    for row in rows:
        if evaluate(strict, partition_of(row)) is True:
            assert evaluate(bound, row) is True, (row, strict)
