"""The SQL filter compiler agrees with the expression tree's own row evaluator."""

import sqlite3

from hypothesis import given, settings, strategies as st

from cdkds.catalog.expressions import and_, evaluate, field, not_, or_
from cdkds.catalog.tables import Fields, Range, TableSpecification
from cdkds.catalog.tables.sql import SqlTable

SPEC = TableSpecification.builder("t").fields(Fields.int("k"), Fields.int("c1"), Fields.string("c3"),
                                              Fields.boolean("c6"), Fields.bytes("c5"), Fields.float("c7")
                                              ).primary_key("k").build()
ints = st.one_of(st.none(), st.integers(-3, 3))
texts = st.one_of(st.none(), st.sampled_from(["", "a", "ab", "b", "é", "éa", "a\x00", "a\x00b", "\x00"]))
blobs = st.one_of(st.none(), st.sampled_from([b"", b"a", b"\xc3\xa9x", b"\x00", b"\x00a"]))
floats = st.one_of(st.none(), st.sampled_from([0.1, 0.5, -0.0, 1e300]))


def predicates():
    c1, c3 = field("c1"), field("c3")
    number = st.integers(-3, 3)
    text = st.sampled_from(["", "a", "ab", "b", "é", "a\x00", "\x00"])
    blob = st.sampled_from([b"", b"\xc3", b"\xc3\xa9", b"\x00", b"a"])
    c5, c7 = field("c5"), field("c7")
    return st.one_of(
        st.builds(lambda v: c1 == v, number), st.builds(lambda v: c1 != v, number), st.builds(lambda v: c1 < v, number),
        st.builds(lambda v: c1 >= v, number), st.builds(lambda v: c3 > v, text), st.builds(lambda v: c3 <= v, text),
        st.builds(lambda vs: c1.isin(vs), st.lists(number, max_size=3)),
        st.builds(lambda vs: c3.notin(vs), st.lists(text, max_size=3)),
        st.just(c1.is_null()), st.just(c3.not_null()), st.builds(lambda v: c3.startswith(v), text),
        st.just(field("c6") == True),  # noqa: E712
        st.builds(lambda v: c5.startswith(v), blob), st.builds(lambda v: not_(c5.startswith(v)), blob),
        st.builds(lambda v: c7 == v, st.sampled_from([0.1, 0.0])), st.builds(lambda v: c7 < v, st.sampled_from([0.1, 0.0])),
    )


filters = st.recursive(predicates(), lambda inner: st.one_of(
    st.builds(and_, inner, inner), st.builds(or_, inner, inner), st.builds(not_, inner)), max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(ints, texts, st.one_of(st.none(), st.booleans()), blobs, floats), max_size=12), filters)
def test_sql_filters_match_the_row_evaluator(rows, where):
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.execute('CREATE TABLE "t" ("k" INTEGER NOT NULL, "c1" INTEGER, "c3" TEXT, "c6" INTEGER, "c5" BLOB, "c7" REAL, '
               'PRIMARY KEY ("k"))')
    table = SqlTable(SPEC, db)
    records = [{"k": i, "c1": c1, "c3": c3, "c6": c6, "c5": c5, "c7": c7} for i, (c1, c3, c6, c5, c7) in enumerate(rows)]
    for r in records:
        table.upsert(r)
    bound = table._filter(where)
    expected = [r["k"] for r in records if evaluate(bound, r) is True]
    assert [r["k"] for r in table.scan(Range.all(), filter=where)] == expected, str(bound)


def test_filters_nested_beyond_the_sql_parser_match_the_row_evaluator():
    """SQLite's parser holds about 30 nested parentheses; a filter nested deeper (MAX_DEPTH
    allows 100 levels) is evaluated on the rows rather than refused with 'parser stack overflow'."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.execute('CREATE TABLE "t" ("k" INTEGER NOT NULL, "c1" INTEGER, "c3" TEXT, "c6" INTEGER, "c5" BLOB, "c7" REAL, '
               'PRIMARY KEY ("k"))')
    table = SqlTable(SPEC, db)
    for k in range(40):
        table.upsert({"k": k, "c1": k % 7, "c3": None, "c6": None, "c5": None, "c7": None})
    for depth in (10, 40, 100):
        where = field("c1") == depth % 7
        for i in reversed(range(depth)):
            where = or_(field("k") == i, where) if i % 2 == 0 else and_(field("k") != i, where)
        bound = table._filter(where)
        expected = [k for k in range(40) if evaluate(bound, {"k": k, "c1": k % 7}) is True]
        assert [r["k"] for r in table.scan(Range.all(), filter=where)] == expected
        assert [r["k"] for r in table.scan(Range.all(), filter=where, limit=3)] == expected[:3]
        assert table.count([Range.all()], filter=where) == len(expected)
