import datetime as dt
import re

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdkds.catalog.errors import ExpressionError
from cdkds.catalog.expressions import (
    ALWAYS_TRUE, BoundPredicate, Not, Predicate, bind, evaluate, field, filter_batch, from_json, may_match, parse, rewrite_not,
)
from cdkds.formats.schema import fields as schema_fields, to_arrow
from cdkds.formats.statistics import StatisticsCollector

UTC = dt.timezone.utc
SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "x", "type": ["null", "long"], "default": None},
    {"name": "s", "type": ["null", "string"], "default": None},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
]}
FIELDS = schema_fields(SCHEMA)
ARROW = to_arrow(SCHEMA)


def test_parser_reads_every_form():
    cases = {
        "x = 5": field("x") == 5,
        "x <> 5": field("x") != 5,
        "5 < x": field("x") > 5,
        "x >= -2.5e1": field("x") >= -25.0,
        "s = 'it''s'": field("s") == "it's",
        "s in ('a', 'b')": field("s").isin(["a", "b"]),
        "s not in ('a')": field("s").notin(["a"]),
        "x is null": field("x").is_null(),
        "x IS NOT NULL": field("x").not_null(),
        "s starts with 'ab'": field("s").startswith("ab"),
        "s like 'ab%'": field("s").startswith("ab"),
        "`weird name` = 1": Predicate("eq", "weird name", 1),
        "ts >= timestamp '2026-01-01T00:00:00+00:00'": field("ts") >= dt.datetime(2026, 1, 1, tzinfo=UTC),
        "d = date '2026-01-01'": field("d") == dt.date(2026, 1, 1),
        "x = 1 and s = 'a' or not x = 2": ((field("x") == 1) & (field("s") == "a")) | Not(field("x") == 2),
        "": ALWAYS_TRUE,
    }
    for text, expected in cases.items():
        assert parse(text) == expected, text


@pytest.mark.parametrize("text, message", [
    ("x = ", "expected a literal"),
    ("x == = 1", "expected a literal"),
    ("x = 1 and", "expected a field name"),
    ("(x = 1", "expected ')'"),
    ("x = 1 y = 2", "expected 'and', 'or' or the end"),
    ("x ~ 1", "unexpected '~'"),
    ("x = null", "use 'is null'"),
    ("s like '%a'", "only prefix patterns"),
    ("x", "expected an operator after 'x'"),
])
def test_parser_errors_quote_the_text_and_position(text, message):
    with pytest.raises(ExpressionError, match=re.escape(message)) as info:
        parse(text)
    assert repr(text) in str(info.value)


def test_bind_checks_fields_and_converts_literals():
    bound = bind(parse("ts >= '2026-03-01' and x in (1, 2.0)"), FIELDS, "events")
    assert bound == BoundPredicate("ge", "ts", dt.datetime(2026, 3, 1, tzinfo=UTC), kind="timestamp-micros") & \
        BoundPredicate("in", "x", values=(1, 2), kind="long")
    assert bind(bound, FIELDS) == bound
    with pytest.raises(ExpressionError, match="dataset 'events': unknown field 'nope'"):
        bind(parse("nope = 1"), FIELDS, "events")
    with pytest.raises(ExpressionError, match="field 'x' .* cannot be read as long"):
        bind(parse("x = 'abc'"), FIELDS, "events")
    with pytest.raises(ExpressionError, match="'starts with' needs a string field"):
        bind(parse("x starts with 'a'"), FIELDS, "events")


def test_three_valued_logic_on_nulls():
    row = {"x": None, "s": "a"}
    assert evaluate(parse("x = 1"), row) is None
    assert evaluate(parse("not x = 1"), row) is None
    assert evaluate(parse("x = 1 or s = 'a'"), row) is True
    assert evaluate(parse("x = 1 and s = 'b'"), row) is False
    assert evaluate(bind(parse("x not in (1, null)"), FIELDS), {"x": 5}) is False


def test_json_round_trip_of_typed_literals():
    e = (field("ts") >= dt.datetime(2026, 1, 1, tzinfo=UTC)) | field("s").isin(["a", "b"]) | ~field("x").is_null()
    assert from_json(e.to_json()) == e


# ---------------------------------------------------------------- properties

_ROWS = st.lists(st.fixed_dictionaries({
    "x": st.one_of(st.none(), st.integers(-20, 20)),
    "s": st.one_of(st.none(), st.sampled_from(["", "a", "ab", "abc", "b", "ba", "c"])),
    "ts": st.datetimes(min_value=dt.datetime(2025, 12, 30), max_value=dt.datetime(2026, 1, 3), timezones=st.just(UTC)),
}), min_size=1, max_size=30)


def _predicates():
    x = st.integers(-22, 22)
    s = st.sampled_from(["", "a", "ab", "b", "bb", "c", "d"])
    ts = st.datetimes(min_value=dt.datetime(2025, 12, 29), max_value=dt.datetime(2026, 1, 4), timezones=st.just(UTC))
    ops = st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge"])
    return st.one_of(
        st.builds(lambda op, v: Predicate(op, "x", v), ops, x),
        st.builds(lambda op, v: Predicate(op, "s", v), ops, s),
        st.builds(lambda op, v: Predicate(op, "ts", v), ops, ts),
        st.builds(lambda vs: Predicate("in", "x", values=tuple(vs)), st.lists(x, max_size=4)),
        st.builds(lambda vs: Predicate("not_in", "s", values=tuple(vs)), st.lists(s, max_size=3)),
        st.builds(lambda n: Predicate("is_null", n), st.sampled_from(["x", "s"])),
        st.builds(lambda n: Predicate("not_null", n), st.sampled_from(["x", "s"])),
        st.builds(lambda v: Predicate("starts_with", "s", v), s),
        st.builds(lambda v: Predicate("not_starts_with", "s", v), s),
    )


def expressions():
    return st.recursive(_predicates(), lambda inner: st.one_of(
        st.builds(lambda a, b: a & b, inner, inner),
        st.builds(lambda a, b: a | b, inner, inner),
        st.builds(lambda a: Not(a), inner),
    ), max_leaves=6)


@given(expressions(), _ROWS)
def test_property_rows_and_arrow_agree(expr, rows):
    bound = bind(expr, FIELDS)
    batch = pa.RecordBatch.from_pylist(rows, schema=ARROW)
    expected = [r for r in rows if evaluate(bound, r) is True]
    assert filter_batch(batch, bound).to_pylist() == expected
    # rewriting NOT never changes which rows are kept
    assert [r for r in rows if evaluate(rewrite_not(expr), r) is True] == [r for r in rows if evaluate(expr, r) is True]


@given(expressions(), _ROWS)
def test_property_statistics_never_skip_a_matching_file(expr, rows):
    bound = bind(expr, FIELDS)
    collector = StatisticsCollector(ARROW)
    collector.update(pa.RecordBatch.from_pylist(rows, schema=ARROW))
    if any(evaluate(bound, r) is True for r in rows):
        assert may_match(bound, len(rows), collector.result())


@pytest.mark.parametrize("name", ["and", "OR", "not", "in", "is", "null", "true", "False", "like", "starts", "a b",
                                  "x"])
def test_the_text_of_a_predicate_parses_back_whatever_its_field_is_named(name):
    """A field may be named like a keyword of the text form (Avro allows ``and``): its text
    quotes it, so that text parses back to the same predicate."""
    expr = (field(name) == 1) & ~field(name).startswith("a") & field("y").isin([1, 2])
    assert parse(str(expr)) == expr


def test_the_text_of_a_partition_strategy_parses_back_whatever_its_source_is_named():
    from cdkds.catalog.partitioning import PartitionStrategy
    strategy = PartitionStrategy.parse("identity(`and`) as `in`, hash(`x``y`, 4)")
    assert PartitionStrategy.parse(strategy.to_text()) == strategy
