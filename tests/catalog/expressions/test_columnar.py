"""Property: pruning a FileTable column-wise (``may_match_mask``, ``must_match_mask``) gives,
row by row, the per-file answer of ``FileFilter.may_match``/``must_match`` on the AddFile
the row was made from — for random files (partition values with nulls; statistics missing,
without bounds, all null, with a minimum but no maximum, NaN bounds) of a schema of many
kinds under several partition strategies — also of datasets whose strategy changed, each
file of one of its partition specs — and random bound predicates."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import math
import time
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdkds.catalog import DatasetDescriptor
from cdkds.catalog.errors import ExpressionError
from cdkds.catalog.expressions import ALWAYS_FALSE, ALWAYS_TRUE, BoundPredicate, Not, Predicate, bind, field
from cdkds.catalog.expressions import columnar
from cdkds.catalog.expressions.columnar import may_match_mask, must_match_mask
from cdkds.catalog.expressions.pruning import FileFilter
from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.log.files import FileTable, file_schema
from cdkds.formats.statistics import ColumnStatistics

UTC = dt.timezone.utc
D = decimal.Decimal
T0 = dt.datetime(2020, 1, 1)


def _optional(avro):
    return ["null", avro]


FIELDS = {
    "l": "long", "i": "int", "d": "double", "f": "float", "s": "string", "b": "bytes",
    "fx": {"type": "fixed", "name": "F", "size": 2}, "flag": "boolean",
    "dt": {"type": "int", "logicalType": "date"},
    "ts": {"type": "long", "logicalType": "timestamp-micros"},
    "lts": {"type": "long", "logicalType": "local-timestamp-micros"},
    "tms": {"type": "long", "logicalType": "timestamp-millis"},
    "dec": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
    "t": {"type": "long", "logicalType": "time-micros"},
    "arr": {"type": "array", "items": "long"},
}
SCHEMA = {"type": "record", "name": "R",
          "fields": [{"name": name, "type": _optional(avro)} for name, avro in FIELDS.items()]}
STRATEGIES = [
    None, "identity(s), identity(i)", "identity(dt), identity(dec), identity(flag)",
    "year(ts), month(ts), day(ts), hour(ts)", "hash(l, 4), range(i, 3)", "identity(ts), identity(lts), day(lts)",
    "range(s, ['a', 'b', 'c'])", "identity(l), list(i, [[1, 2], [3]]), month(dt)",
]
DESCRIPTORS = [DatasetDescriptor(SCHEMA, partition_strategy=s) for s in STRATEGIES]
# descriptors whose strategy changed: files of each spec are pruned by that spec's strategy;
# some reuse a partition name for another function (l_hash: 4 then 8 buckets, then i itself)
MULTI_SPEC = [
    DatasetDescriptor(SCHEMA, partition_strategy=current, partition_specs=past, partition_spec_id=spec_id)
    for past, spec_id, current in [
        ({0: "hash(l, 4), range(i, 3)", 1: "identity(s), identity(i)"}, 2, "hash(l, 8), month(ts)"),
        ({0: None, 1: "year(ts), month(ts), day(ts), hour(ts)"}, 2, "identity(dt), identity(dec), identity(flag)"),
        ({0: "identity(s), identity(i)"}, 1, None),
        ({0: "range(s, ['a', 'b', 'c'])", 2: "identity(l), list(i, [[1, 2], [3]]), month(dt)"}, 1,
         "range(s, ['a', 'c']), identity(i) as i_list"),
        ({0: "hash(l, 4)", 1: "identity(ts), identity(lts), day(lts)"}, 3, "identity(i) as l_hash, day(ts)"),
    ]
]

_hours = st.integers(-30_000, 30_000)
VALUES = {
    "l": st.integers(-4, 4) | st.sampled_from([-2 ** 63, 2 ** 63 - 1]),
    "i": st.integers(-4, 4),
    "d": st.floats(-4, 4) | st.sampled_from([-0.0, 0.0, math.inf, -math.inf, 0.5]),
    "f": st.floats(-4, 4, width=32) | st.sampled_from([-0.0, 0.0, math.inf]),
    "s": st.text(alphabet="abB\u00e9", max_size=3),
    "b": st.binary(max_size=3),
    "fx": st.binary(min_size=2, max_size=2),
    "flag": st.booleans(),
    "dt": st.dates(dt.date(2019, 11, 25), dt.date(2020, 2, 5)),
    "ts": _hours.map(lambda h: (T0 + dt.timedelta(hours=h)).replace(tzinfo=UTC)),
    "lts": _hours.map(lambda h: T0 + dt.timedelta(hours=h, microseconds=h % 3)),
    "tms": _hours.map(lambda h: (T0 + dt.timedelta(hours=h, milliseconds=h % 3)).replace(tzinfo=UTC)),
    "dec": st.decimals(-3, 3, places=2),
    "t": st.integers(0, 86_400 * 10 ** 6 - 1).map(
        lambda us: (dt.datetime(2000, 1, 1) + dt.timedelta(microseconds=us // 10 ** 9 * 10 ** 9)).time()),
}
ORDERED = set(VALUES) - {"flag"}
PREFIXED = {"s", "b", "fx"}
NAN = float("nan")


def _literals(name):
    """Literals for predicates on ``name``: its values and some that binding adjusts."""
    values = VALUES[name]
    if name in ("l", "i"):
        return values | values.map(lambda v: v + 0.5) | st.sampled_from([2 ** 40, -2 ** 70])
    if name in ("d", "f"):
        return values | st.just(NAN) | st.floats(-4, 4, width=16)
    if name == "dt":
        return values | st.datetimes(dt.datetime(2019, 11, 25), dt.datetime(2020, 2, 5))
    if name == "dec":
        return values | st.decimals(-3, 3, places=3)
    return values


NAMES = [*VALUES, "arr"]


@st.composite
def predicates(draw, names, depth=2):
    """Random predicates on the fields ``names``, nested ``depth`` levels at most."""
    shape = draw(st.sampled_from(["leaf"] * 3 + (["and", "or", "not"] if depth else [])))
    if shape == "and":
        return draw(predicates(names, depth - 1)) & draw(predicates(names, depth - 1))
    if shape == "or":
        return draw(predicates(names, depth - 1)) | draw(predicates(names, depth - 1))
    if shape == "not":
        return Not(draw(predicates(names, depth - 1)))
    name = draw(st.sampled_from(names))
    ops = ["is_null", "not_null"]
    if name != "arr":
        ops += ["eq", "ne", "in", "not_in"]
    if name in ORDERED:
        ops += ["lt", "le", "gt", "ge"]
    if name in PREFIXED:
        ops += ["starts_with", "not_starts_with"]
    op = draw(st.sampled_from(ops))
    if op in ("is_null", "not_null"):
        return Predicate(op, name)
    if op in ("in", "not_in"):
        size = draw(st.sampled_from([3, 3, 20]))  # long lists take the binary search
        return Predicate(op, name, values=tuple(draw(st.lists(_literals(name), max_size=size))))
    if op in ("starts_with", "not_starts_with"):
        return Predicate(op, name, draw(st.text(alphabet="abB\u00e9", max_size=2) if name == "s" else
                                        st.binary(max_size=3)))
    return Predicate(op, name, draw(_literals(name)))


@st.composite
def statistics(draw, name, rows):
    nulls = draw(st.sampled_from([0, rows, draw(st.integers(0, rows))]))
    if name == "arr":
        return ColumnStatistics(nulls)
    shape = draw(st.sampled_from(["bounds"] * 4 + ["none", "min only"] + (["nan"] if name in ("d", "f") else [])))
    if shape == "none":
        return ColumnStatistics(nulls)
    lo, hi = draw(VALUES[name]), draw(VALUES[name])
    try:
        lo, hi = min(lo, hi), max(lo, hi)
    except TypeError:
        pass
    if shape == "min only":
        return ColumnStatistics(nulls, lo)
    if shape == "nan":
        return ColumnStatistics(nulls, draw(st.sampled_from([NAN, lo])), draw(st.sampled_from([NAN, hi])))
    return ColumnStatistics(nulls, lo, hi)


@st.composite
def add_files(draw, descriptor):
    """Files of ``descriptor``, each of one of its partition specs."""
    fields = descriptor.fields
    adds = []
    for n in range(draw(st.integers(0, 12))):
        spec_id = draw(st.sampled_from(sorted(descriptor.partition_specs)))
        strategy = descriptor.strategy_of(spec_id)
        rows = draw(st.integers(0, 4))
        partition = {}
        for f in strategy.functions if strategy is not None else ():
            source = draw(st.none() | VALUES[f.source])
            try:
                partition[f.name] = None if source is None else f.apply(source, fields[f.source].kind)
            except Exception:  # outside the function's domain
                partition[f.name] = None
        stats = {}
        for name in (*VALUES, "arr"):
            if draw(st.integers(0, 5)):
                stats[name] = draw(statistics(name, rows))
        adds.append(AddFile(f"f{n}.parquet", partition, 1, rows, stats, spec_id=spec_id))
    return adds


@st.composite
def cases(draw, focus):
    """A descriptor, files of it and a filter mostly on the field ``focus``."""
    descriptor = draw(st.sampled_from(DESCRIPTORS + MULTI_SPEC))
    adds = draw(add_files(descriptor))
    names = [focus] * 4 + NAMES
    try:
        bound = bind(draw(predicates(names)), descriptor.fields)
    except ExpressionError:
        bound = ALWAYS_TRUE
    return descriptor, adds, FileFilter.of(bound, descriptor)


def _answers(decide, adds):
    """The per-file answers, or the exception the per-file rule raises (a minimum
    without a maximum has no prefix to take)."""
    try:
        return [decide(a) for a in adds]
    except Exception as e:  # noqa: BLE001 - the columnar path must raise the same
        return type(e)


def _check(file_filter: FileFilter, adds, table: FileTable):
    for mask, decide in ((may_match_mask, file_filter.may_match), (must_match_mask, file_filter.must_match)):
        expected = _answers(decide, adds)
        if isinstance(expected, type):
            with pytest.raises(expected):
                mask(file_filter, table)
            continue
        got = mask(file_filter, table)
        assert got.type == pa.bool_() and got.null_count == 0
        assert got.to_pylist() == expected


@pytest.mark.parametrize("focus", NAMES)
@settings(max_examples=40)
@given(data=st.data())
def test_masks_equal_the_per_file_answers(focus, data):
    descriptor, adds, file_filter = data.draw(cases(focus))
    with _vectorised_only():
        _check(file_filter, adds, FileTable.of(adds, descriptor))


@contextlib.contextmanager
def _vectorised_only():
    """Bound predicates are decided column-wise: only rows whose statistics have a
    minimum but no maximum (where Python may raise) are left to the per-file rule."""
    per_row = columnar._Metrics._per_row

    def rows_with_half_bounds(self, p, out):
        assert out is not None, f"{p} decided row by row"
        undecided = out.is_null()
        half = pc.and_(pc.struct_field(self.s.column, ["min"]).is_valid(),
                       pc.struct_field(self.s.column, ["max"]).is_null())
        assert pc.all(pc.or_(pc.invert(undecided), half)).as_py()
        return per_row(self, p, out)

    def evaluate(*args):
        raise AssertionError("partitions decided row by row")

    with mock.patch.object(columnar._Metrics, "_per_row", rows_with_half_bounds), \
            mock.patch.object(columnar, "evaluate", evaluate):
        yield


@given(add_files(DESCRIPTORS[1]), st.sampled_from([
    BoundPredicate("lt", "i", "a", kind="int"),  # the per-file comparison raises TypeError
    BoundPredicate("eq", "s", b"a", kind="string"),
    BoundPredicate("in", "d", values=(NAN, 1.0), kind="double"),
    BoundPredicate("not_in", "d", values=(0.0,), kind="double"),
    BoundPredicate("in", "d", values=(-0.0,), kind="double"),
    BoundPredicate("starts_with", "b", "a", kind="bytes"),
    BoundPredicate("eq", "arr", 1, kind="array"),
    BoundPredicate("ge", "ts", T0, kind="timestamp-micros"),  # naive against aware values
    BoundPredicate("lt", "f", 0.1, kind="float"),  # not a float32
    BoundPredicate("eq", "i", True, kind="int"),
    BoundPredicate("eq", "nowhere", 1, kind="int"),  # no statistics column
]))
@settings(max_examples=120)
def test_literals_arrow_cannot_compare_are_decided_per_file(adds, predicate):
    descriptor = DESCRIPTORS[1]
    for f in (FileFilter(predicate), FileFilter(predicate, Predicate("eq", "s_copy", "a") | Predicate("lt", "i_copy", 2),
                                                Predicate("eq", "i_copy", "zz") | Predicate("eq", "zz", 1))):
        _check(f, adds, FileTable.of(adds, descriptor))


def test_an_empty_table_gives_empty_masks():
    for descriptor in DESCRIPTORS[:2]:
        table = FileTable.empty(descriptor)
        for predicate in (ALWAYS_TRUE, ALWAYS_FALSE, bind(field("l") < 3, descriptor.fields)):
            f = FileFilter.of(predicate, descriptor)
            assert may_match_mask(f, table).to_pylist() == [] == must_match_mask(f, table).to_pylist()


def test_constants_and_a_table_without_partitions():
    descriptor = DESCRIPTORS[0]
    adds = [AddFile("a", {}, 1, 3, {"l": ColumnStatistics(0, 1, 5)}), AddFile("b", {}, 1, 3, {})]
    table = FileTable.of(adds, descriptor)
    assert "partition" not in table.table.schema.names
    assert may_match_mask(FileFilter(ALWAYS_TRUE), table).to_pylist() == [True, True]
    assert must_match_mask(FileFilter(ALWAYS_TRUE), table).to_pylist() == [True, True]
    assert may_match_mask(FileFilter(ALWAYS_FALSE), table).to_pylist() == [False, False]
    assert must_match_mask(FileFilter(ALWAYS_FALSE), table).to_pylist() == [False, False]
    greater = bind(field("l") > 4, descriptor.fields)
    assert may_match_mask(FileFilter(greater), table).to_pylist() == [True, True]
    assert must_match_mask(FileFilter(greater), table).to_pylist() == [False, False]
    # a projection onto partitions the table has none of: every file's partition is {}
    for projected in (Predicate("eq", "p", 1), Predicate("is_null", "p")):
        f = FileFilter(greater, projected, projected)
        _check(f, adds, table)


def _forbid_per_row(monkeypatch):
    def per_row(*args):
        raise AssertionError("decided row by row")
    monkeypatch.setattr(columnar, "evaluate", per_row)
    monkeypatch.setattr(columnar._Metrics, "_per_row", per_row)


def _big_table(n: int) -> tuple[FileTable, DatasetDescriptor]:
    """``n`` files partitioned by ``identity(s)`` with statistics on ``l``, made as columns."""
    descriptor = DatasetDescriptor(SCHEMA, partition_strategy="identity(s)")
    schema = file_schema(descriptor)
    rng = np.random.default_rng(7)
    lo = rng.integers(0, 1_000_000, n)
    columns = {"path": pa.array([f"f{i}" for i in range(n)]), "deletes": pa.nulls(n, pa.string())}
    for name in ("size", "rows", "schema_version", "revision", "timestamp", "deleted_rows"):
        columns[name] = pa.array(np.full(n, 10 if name == "rows" else 0))
    partition = pa.array(rng.choice(["x", "y", "z", "w"], n))
    columns["partition"] = pa.StructArray.from_arrays([partition], fields=list(schema.field("partition").type))
    stats_type = schema.field("stats").type
    children = []
    for i in range(stats_type.num_fields):
        child = stats_type.field(i)
        if child.name == str(descriptor.field_ids["l"]):
            children.append(pa.StructArray.from_arrays(
                [pa.array(np.zeros(n, dtype=np.int64)), pa.array(lo), pa.array(lo + 1000)], fields=list(child.type)))
        else:
            children.append(pa.nulls(n, child.type))
    columns["stats"] = pa.StructArray.from_arrays(children, fields=list(stats_type))
    return FileTable(pa.table([columns[f.name] for f in schema], schema=schema), descriptor), descriptor


def _best_of(runs, work):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def test_pruning_is_vectorised(monkeypatch):
    table, descriptor = _big_table(200_000)
    f = FileFilter.of(bind((field("s") == "x") & (field("l") >= 500_000) & (field("l") < 600_000),
                           descriptor.fields), descriptor)
    expected = [f.may_match(a) for a in FileTable(table.table.slice(0, 2000), descriptor).files()]
    _forbid_per_row(monkeypatch)
    mask = may_match_mask(f, table)
    assert mask.slice(0, 2000).to_pylist() == expected and 0 < mask.true_count < 200_000
    assert _best_of(3, lambda: may_match_mask(f, table)) < 0.5
    assert _best_of(3, lambda: must_match_mask(f, table)) < 0.5


WIDE = {  # values of a few kinds spread widely enough for 'in' lists longer than a handful
    "l": st.integers(-60, 60),
    "i": st.integers(-60, 60),
    "d": st.integers(-60, 60).map(float) | st.just(-0.0) | st.floats(-60, 60),
    "dt": st.integers(0, 120).map(lambda n: dt.date(2020, 1, 1) + dt.timedelta(days=n)),
    "ts": st.integers(0, 120).map(lambda n: (T0 + dt.timedelta(hours=n)).replace(tzinfo=UTC)),
    "t": st.integers(0, 120).map(lambda n: dt.time(n // 60, n % 60)),
    "dec": st.integers(-60, 60).map(lambda n: D(n) / 4),
    "s": st.text(alphabet="abc", max_size=3),
}


@pytest.mark.parametrize("name", list(WIDE))
@settings(max_examples=40)
@given(data=st.data())
def test_long_in_lists_equal_the_per_file_answers(name, data):
    """'in' and 'not in' of many literals (a binary search over them for numbers and times)."""
    descriptor = DESCRIPTORS[0]
    adds = []
    for n in range(data.draw(st.integers(1, 10))):
        rows = data.draw(st.integers(1, 3))
        lo, hi = sorted([data.draw(WIDE[name]), data.draw(WIDE[name])])
        if name == "d" and data.draw(st.integers(0, 5)) == 0:
            lo, hi = data.draw(st.sampled_from([(NAN, hi), (lo, NAN), (NAN, NAN)]))
        adds.append(AddFile(f"f{n}", {}, 1, rows, {name: ColumnStatistics(data.draw(st.sampled_from([0, 0, rows])), lo, hi)}))
    values = data.draw(st.lists(WIDE[name], min_size=17, max_size=30))
    op = data.draw(st.sampled_from(["in", "not_in"]))
    _check(FileFilter.of(bind(Predicate(op, name, values=tuple(values)), descriptor.fields), descriptor),
           adds, FileTable.of(adds, descriptor))


def test_dictionary_encoded_columns_prune_as_plain_ones(monkeypatch):
    """A part read back may hold text as dictionaries: the masks are the same, and made
    without asking the per-file rules."""
    table, descriptor = _big_table(3000)
    key = str(descriptor.field_ids["s"])
    plain = table.table
    partition = plain.column("partition").combine_chunks()
    stats = plain.column("stats").combine_chunks()
    text = pa.StructArray.from_arrays([pa.array(["a", "x"] * 1500), pa.array(["b", "y"] * 1500),
                                       pa.array(["c", "z"] * 1500)], names=["nulls", "min", "max"])
    text = pa.StructArray.from_arrays([pa.array([0, 1] * 1500), text.field("min"), text.field("max")],
                                      names=["nulls", "min", "max"])
    fields = [stats.type.field(i) for i in range(stats.type.num_fields)]
    children = [text if f.name == key else stats.field(i) for i, f in enumerate(fields)]
    plain = plain.set_column(plain.schema.get_field_index("stats"), "stats",
                             pa.StructArray.from_arrays(children, names=[f.name for f in fields]))
    encoded_text = pa.StructArray.from_arrays(
        [text.field("nulls"), text.field("min").dictionary_encode(), text.field("max").dictionary_encode()],
        names=["nulls", "min", "max"])
    encoded = plain.set_column(plain.schema.get_field_index("partition"), "partition", pa.StructArray.from_arrays(
        [partition.field(0).dictionary_encode()], names=[partition.type.field(0).name]))
    encoded = encoded.set_column(encoded.schema.get_field_index("stats"), "stats", pa.StructArray.from_arrays(
        [encoded_text if f.name == key else stats.field(i) for i, f in enumerate(fields)],
        names=[f.name for f in fields]))
    for e in ((field("s") == "x") & (field("l") < 400_000), field("s").isin(["x", "b"]), field("s") > "b",
              field("s").startswith("y")):
        f = FileFilter.of(bind(e, descriptor.fields), descriptor)
        for mask in (may_match_mask, must_match_mask):
            expected = mask(f, FileTable(plain, descriptor))
            with monkeypatch.context() as m:
                _forbid_per_row(m)
                assert mask(f, FileTable(encoded, descriptor)).equals(expected)
            assert expected.to_pylist() == [mask is may_match_mask and f.may_match(a) or
                                            mask is must_match_mask and f.must_match(a)
                                            for a in FileTable(plain, descriptor).files()]


def test_tables_of_many_chunks_give_the_masks_of_one():
    table, descriptor = _big_table(3000)
    chunked = FileTable(pa.concat_tables([table.table.slice(0, 1000), table.table.slice(1000, 1500),
                                          table.table.slice(2500)]), descriptor)
    assert chunked.table.column("stats").num_chunks == 3
    half_bounds = pa.StructArray.from_arrays(  # statistics of 'l' with a minimum only: decided per row
        [pa.array(np.zeros(3000, dtype=np.int64)), pa.array(np.arange(3000)), pa.nulls(3000, pa.int64())],
        names=["nulls", "min", "max"])
    for f in (FileFilter.of(bind((field("s") == "x") & (field("l") < 400_000), descriptor.fields), descriptor),
              FileFilter(BoundPredicate("lt", "l", "a", kind="long")),
              FileFilter(BoundPredicate("ge", "l", 2000, kind="long"))):
        for mask in (may_match_mask, must_match_mask):
            assert mask(f, chunked).equals(mask(f, table))
    stats = table.table.column("stats").combine_chunks()
    key = str(descriptor.field_ids["l"])
    children = [half_bounds if stats.type.field(i).name == key else stats.field(i) for i in range(stats.type.num_fields)]
    odd = table.table.set_column(table.table.schema.get_field_index("stats"), "stats", pa.StructArray.from_arrays(
        children, fields=list(stats.type)))
    f = FileFilter(BoundPredicate("ge", "l", 2000, kind="long") | BoundPredicate("lt", "l", 10, kind="long"))
    odd_table = FileTable(odd, descriptor)
    expected = [f.may_match(a) for a in odd_table.files()]
    chunked_odd = FileTable(pa.concat_tables([odd.slice(0, 1000), odd.slice(1000)]), descriptor)
    assert may_match_mask(f, chunked_odd).to_pylist() == expected == may_match_mask(f, odd_table).to_pylist()


def test_a_minimum_without_a_maximum_leaves_a_prefix_test_undecided():
    """Per file and column-wise alike: such statistics decide nothing a prefix test asks
    (the per-file rule used to raise, column-wise too, but only where the partition
    projection did not prune the file first)."""
    from cdkds.catalog.expressions.metrics import may_match, must_match
    descriptor = DESCRIPTORS[1]
    for op in ("starts_with", "not_starts_with"):
        p = BoundPredicate(op, "s", "", kind="string")
        assert may_match(p, 2, {"s": ColumnStatistics(0, "", None)}) is True
        assert must_match(p, 2, {"s": ColumnStatistics(0, "", None)}) is False
        adds = [AddFile("a", {"s_copy": None, "i_copy": None}, 1, 2, {"s": ColumnStatistics(0, "", None)}),
                AddFile("b", {"s_copy": "a", "i_copy": None}, 1, 2, {"s": ColumnStatistics(0, "", None)})]
        _check(FileFilter(p, Predicate("not_null", "s_copy")), adds, FileTable.of(adds, descriptor))
