"""Wide and deep predicates (issue 26.9): chains of ``and``/``or`` of any length are flat
nodes, redundant parentheses and ``not`` s cost nothing, and real nesting beyond
``MAX_DEPTH`` is one clear :class:`ExpressionError` — never a ``RecursionError`` — through
the parser, the Python operators, ``reader(where=...)``, ``delete`` and the CLI."""

from __future__ import annotations

import functools
import json
import operator
import pickle
import sqlite3

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import ExpressionError
from cdkds.catalog.expressions import (
    ALWAYS_TRUE, And, Not, Or, bind, evaluate, field, filter_batch, from_json, may_match, parse, references,
)
from cdkds.catalog.expressions.tree import MAX_DEPTH
from cdkds.catalog.tables.sql import compile_filter
from cdkds.formats.schema import fields as schema_fields
from tests.cli.running import run

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "x", "type": "long"}]}
FIELDS = schema_fields(SCHEMA)
ROWS = 40


def ors(n: int) -> str:
    return " or ".join(f"x = {i}" for i in range(n))


def ands(n: int) -> str:
    return " and ".join(f"x != {i}" for i in range(n))


def nested(depth: int) -> str:
    """``x = 0 or (x = 1 and (x = 2 or (...)))``: every parenthesis a real level."""
    text = f"x = {depth}"
    for i in reversed(range(depth)):
        text = f"x = {i} {'or' if i % 2 == 0 else 'and'} ({text})"
    return text


WIDE = {  # text -> the x in range(ROWS) it matches
    "1000 ands": (ands(1000), []),
    "3000 ors": (ors(3000), list(range(ROWS))),
    "1000 parentheses": ("(" * 1000 + "x = 3" + ")" * 1000, [3]),
    "1000 nots": ("not " * 1000 + "x = 3", [3]),
    "1001 nots": ("not " * 1001 + "x = 3", [i for i in range(ROWS) if i != 3]),
    "nots around parentheses": ("not (" * 999 + "x = 3" + ")" * 999, [i for i in range(ROWS) if i != 3]),
    "nesting at the limit": (nested(MAX_DEPTH), [0]),
}


def _json_depth(data) -> int:
    if isinstance(data, dict):
        return 1 + max((_json_depth(v) for v in data.values()), default=0)
    if isinstance(data, list):
        return 1 + max((_json_depth(v) for v in data), default=0)
    return 0


def deep_python(depth: int):
    expr = field("x") == depth
    for i in reversed(range(depth)):
        expr = (field("x") == i) | expr if i % 2 == 0 else (field("x") == i) & expr
    return expr


@pytest.mark.parametrize("name", WIDE)
def test_wide_predicates_parse_flat_and_evaluate(name):
    text, expected = WIDE[name]
    expr = parse(text)
    assert expr.depth <= MAX_DEPTH
    bound = bind(expr, FIELDS)
    assert [x for x in range(ROWS) if evaluate(bound, {"x": x})] == expected
    batch = pa.record_batch({"x": pa.array(range(ROWS), pa.int64())})
    assert filter_batch(batch, bound).column(0).to_pylist() == expected
    assert from_json(json.loads(json.dumps(expr.to_json()))) == expr
    assert parse(str(expr)) == expr and references(expr) == {"x"}


def test_chains_are_one_flat_node():
    assert parse(ors(3000)) == Or(*[field("x") == i for i in range(3000)])
    assert len(parse(ands(1000)).terms) == 1000 and parse(ands(1000)).depth == 10  # the log2 n pairs of its forms
    stored = parse(ors(3000)).to_json()  # pairs, as the format has them, nested log2(n) deep
    assert _json_depth(stored) <= 2 * 13 and set(stored) == {"or"} and len(stored["or"]) == 2
    assert parse("(x = 1 or (x = 2 or x = 3)) or x = 4") == Or(*[field("x") == i for i in (1, 2, 3, 4)])


@pytest.mark.parametrize("text", [nested(MAX_DEPTH + 1), nested(1000), "not (x = 1 and " * 600 + "x = 2" + ")" * 600])
def test_too_deep_a_text_is_refused_with_the_limit(text):
    with pytest.raises(ExpressionError, match=f"cannot parse predicate .* more than {MAX_DEPTH} levels deep"):
        parse(text)


def test_python_operator_chains_are_flat():
    terms = [field("x") == i for i in range(3000)]
    for combine, kind in ((operator.and_, And), (operator.or_, Or)):
        expr = functools.reduce(combine, terms)
        assert isinstance(expr, kind) and expr.terms == tuple(terms) and expr.depth == 12  # log2 3000, rounded up
        assert pickle.loads(pickle.dumps(expr)) == expr and hash(expr) == hash(kind(*terms))
    assert functools.reduce(lambda e, _: ~e, range(1000), field("x") == 3) == (field("x") == 3)
    assert functools.reduce(lambda e, _: ~e, range(1001), field("x") == 3) == Not(field("x") == 3)
    bound = bind(functools.reduce(operator.or_, terms), FIELDS)
    assert may_match(bound, 1, {}) and [x for x in range(ROWS) if evaluate(bound, {"x": x})] == list(range(ROWS))


def test_too_deep_a_python_tree_is_refused_when_built():
    assert deep_python(MAX_DEPTH).depth == MAX_DEPTH
    with pytest.raises(ExpressionError, match=f"more than {MAX_DEPTH} levels deep"):
        deep_python(MAX_DEPTH + 1)
    with pytest.raises(ExpressionError, match=f"more than {MAX_DEPTH} levels deep"):
        from_json({"not": deep_python(MAX_DEPTH).to_json()})


def test_old_binary_json_chains_read_back_flat():
    old = {"op": "eq", "field": "x", "value": 0}
    for i in range(1, 5000):  # as logs before n-ary nodes stored a long chain: nested pairs
        old = {"or": [old, {"op": "eq", "field": "x", "value": i}]}
    assert from_json(old) == Or(*[field("x") == i for i in range(5000)])


def test_sql_compiles_wide_chains_within_sqlite_limits():
    for text in (ors(3000), ands(3000)):
        condition, params = compile_filter(bind(parse(text), FIELDS))
        db = sqlite3.connect(":memory:")
        db.execute('create table t ("x" integer)')
        db.executemany("insert into t values (?)", [(i,) for i in range(ROWS)])
        count, = db.execute(f"select count(*) from t where {condition}", params).fetchone()
        assert count == (ROWS if "or" in text else 0)


@given(st.lists(st.sampled_from(["and", "or"]), min_size=1, max_size=300), st.data())
def test_any_chain_of_and_or_means_what_python_says(words, data):
    values = data.draw(st.lists(st.booleans(), min_size=len(words) + 1, max_size=len(words) + 1))
    text = " ".join(f"{'x = 1' if v else 'x = 0'} {w}" for v, w in zip(values, words)) + \
        (" x = 1" if values[-1] else " x = 0")
    python = " ".join(f"{v} {w}" for v, w in zip(values, words)) + f" {values[-1]}"
    assert evaluate(parse(text), {"x": 1}) is eval(python)  # noqa: S307 - booleans and and/or only


# ---------------------------------------------------------------- through a dataset and the command


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = f"file://{tmp_path_factory.mktemp('deep')}/lake"
    ds = DatasetRepository(root).create("deep", DatasetDescriptor(SCHEMA))
    with ds.writer() as w:
        w.write_batch(pa.table({"x": pa.array(range(ROWS), pa.int64())}))
    return root


@pytest.mark.parametrize("name", WIDE)
def test_reader_takes_wide_predicates(lake, name):
    text, expected = WIDE[name]
    ds = DatasetRepository(lake).load("deep")
    assert sorted(r["x"] for r in ds.reader(where=text)) == expected
    python = functools.reduce(operator.or_, [field("x") == i for i in range(3000)])
    assert sorted(r["x"] for r in ds.reader(where=python)) == list(range(ROWS))


@pytest.mark.parametrize("where", [nested(1000), "not (x = 1 or " * 500 + "x = 2" + ")" * 500])
def test_reader_and_delete_refuse_a_deep_predicate_naming_the_dataset(lake, where):
    ds = DatasetRepository(lake).load("deep")
    with pytest.raises(ExpressionError, match=f"dataset 'deep': .*more than {MAX_DEPTH} levels deep"):
        list(ds.reader(where=where))
    with pytest.raises(ExpressionError, match=f"dataset 'deep': .*more than {MAX_DEPTH} levels deep"):
        ds.delete(where)
    assert DatasetRepository(lake).load("deep").version == ds.version


def test_the_command_takes_wide_predicates_and_refuses_deep_ones(lake):
    url = f"{lake}/deep"
    rows = json.loads(run("show", url, "--where", ors(3000), "--limit", "100", "--json").stdout)
    assert sorted(r["x"] for r in rows) == list(range(ROWS))
    assert json.loads(run("show", url, "--where", "not " * 1000 + "x = 3", "--json").stdout) == [{"x": 3}]
    done = run("show", url, "--where", nested(1000), code=1)
    assert done.stderr.startswith("error: dataset 'deep': cannot parse predicate")
    assert f"more than {MAX_DEPTH} levels deep" in done.stderr and "Recursion" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def wide_and_deep(width: int, levels: int):
    """``levels`` nested chains alternating or/and, each of ``width`` terms; matches x = 5 alone."""
    expr = field("x") == 5
    for level in range(levels):
        if level % 2:
            expr = And(*[field("x") != 1000 + i for i in range(width - 1)], expr)
        else:
            expr = Or(*[field("x") == 1000 + level * width + i for i in range(width - 1)], expr)
    return expr


def test_a_tree_wide_at_every_level_is_refused_or_stored_and_read_back(lake):
    """JSON and Arrow nest a chain as pairs: a tree the limit lets through has forms they
    take (a chain of 32 terms counts 5 levels), and a delete by it commits a tombstone that
    reads back (a RecursionError encoding the commit before)."""
    accepted = None
    for levels in range(1, 120):
        try:
            accepted = wide_and_deep(32, levels)
        except ExpressionError as e:
            assert f"more than {MAX_DEPTH} levels deep" in str(e)
            break
    assert accepted is not None and accepted.depth <= MAX_DEPTH
    assert from_json(json.loads(json.dumps(accepted.to_json()))) == accepted
    bound = bind(accepted, FIELDS)
    batch = pa.record_batch({"x": pa.array(range(ROWS), pa.int64())})
    assert filter_batch(batch, bound).column(0).to_pylist() == [5]
    ds = DatasetRepository(lake).create("wide_and_deep", DatasetDescriptor(SCHEMA))
    with ds.writer() as w:
        w.write_batch(pa.table({"x": pa.array(range(ROWS), pa.int64())}))
    ds.delete(accepted)
    assert sorted(r["x"] for r in DatasetRepository(lake).load("wide_and_deep").reader()) == \
        [x for x in range(ROWS) if x != 5]
