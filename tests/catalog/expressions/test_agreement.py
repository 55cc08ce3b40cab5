"""Property: reads, deletes, the row evaluator and file statistics agree on every scalar type.

For random values of one field (of every supported scalar type), written as a few files
of a real dataset (Parquet and Avro), and random predicates on it (every operator;
literals equal to, near and between the values, outside the type's range, of other
types, NaN and nulls):

- ``read(P)`` holds exactly the rows for which the row evaluator says true;
- ``read(P)`` plus what ``delete(P)`` leaves is every row (as multisets);
- file pruning (partition projection, for some types through an identity partition,
  and statistics) never skips a file holding a match (``may_match``), and ``must_match``
  never claims a file holding a row that does not match;
- where Python itself compares the raw literal with the values exactly (integers,
  decimals, bytes, text, times), binding keeps the predicate's meaning.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import uuid
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.expressions import ALWAYS_TRUE, Not, Predicate, bind, evaluate
from cdkds.catalog.expressions.pruning import FileFilter
from cdkds.catalog.read.scan import FileScanTask, read_task

UTC = dt.timezone.utc
D = decimal.Decimal
NAN = float("nan")
T0 = dt.datetime(2020, 1, 1, 0, 0, 0)


def _millis(value):
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


_naive = st.builds(lambda ms: T0 + dt.timedelta(microseconds=ms), st.integers(-3_000, 3_000))
_aware = _naive.map(lambda d: d.replace(tzinfo=UTC))
_times = st.builds(lambda us: (dt.datetime(2000, 1, 1) + dt.timedelta(microseconds=us)).time(),
                   st.integers(0, 5_000) | st.integers(86_400_000_000 - 5_000, 86_400_000_000 - 1))
_small_ints = st.integers(-4, 4)
_text = st.text(alphabet="abB\u00e9", max_size=3)
_bytes = st.binary(max_size=3)


def _numbers(values):
    """Literals around numeric values: the values, halves, decimals, NaN, infinities."""
    return st.one_of(values, values.map(lambda v: v + 0.5), values.map(lambda v: D(v) + D("0.001")),
                     st.sampled_from([NAN, math.inf, -math.inf, 2 ** 40, -2 ** 40, 2 ** 70, -2 ** 70]))


# kind -> (Avro type, values, literals, Python compares raw literals with values exactly)
TYPES = {
    "int": ("int", _small_ints | st.sampled_from([-2 ** 31, 2 ** 31 - 1]), _numbers(_small_ints), True),
    "long": ("long", _small_ints | st.sampled_from([-2 ** 63, 2 ** 63 - 1]), _numbers(_small_ints), True),
    "float": ("float", st.floats(-4, 4, width=32) | st.sampled_from([NAN, -0.0, math.inf, 0.1]),
              _numbers(st.floats(-4, 4, width=16)) | st.floats(-4, 4) | st.just(0.1), False),
    "double": ("double", st.floats(-4, 4) | st.sampled_from([NAN, -0.0, -math.inf, 0.1]),
               _numbers(st.floats(-4, 4, width=16)) | st.floats(-4, 4) | st.just(0.1), False),
    "boolean": ("boolean", st.booleans(), st.booleans(), True),
    "string": ("string", _text, _text, True),
    "bytes": ("bytes", _bytes, _bytes, True),
    "fixed": ({"type": "fixed", "name": "F", "size": 2}, st.binary(min_size=2, max_size=2), _bytes, True),
    "enum": ({"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}, st.sampled_from("ABC"),
             st.sampled_from(["A", "B", "C", "Z", ""]), True),
    "uuid": ({"type": "string", "logicalType": "uuid"}, st.sampled_from([uuid.UUID(int=i) for i in (1, 2, 2 ** 127)])
             .map(str), st.sampled_from([uuid.UUID(int=i) for i in (0, 1, 2, 2 ** 127)]).map(lambda u: str(u).upper()),
             False),
    "decimal": ({"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
                st.decimals(-3, 3, places=2) | st.sampled_from([D("999.99"), D("-999.99")]),
                st.decimals(-3, 3, places=3) | st.sampled_from([D("1000"), D("-1000.001"), D("999.999")])
                | st.integers(-3, 3), True),
    "date": ({"type": "int", "logicalType": "date"}, st.dates(dt.date(2019, 12, 30), dt.date(2020, 1, 3)),
             st.dates(dt.date(2019, 12, 29), dt.date(2020, 1, 4))
             | st.datetimes(dt.datetime(2019, 12, 29), dt.datetime(2020, 1, 4)), False),
    "time-millis": ({"type": "int", "logicalType": "time-millis"}, _times.map(_millis), _times, True),
    "time-micros": ({"type": "long", "logicalType": "time-micros"}, _times, _times, True),
    "timestamp-millis": ({"type": "long", "logicalType": "timestamp-millis"}, _aware.map(_millis),
                         _aware | _aware.map(lambda d: d.isoformat()), False),
    "timestamp-micros": ({"type": "long", "logicalType": "timestamp-micros"}, _aware, _aware, True),
    "local-timestamp-millis": ({"type": "long", "logicalType": "local-timestamp-millis"}, _naive.map(_millis),
                               _naive, True),
    "local-timestamp-micros": ({"type": "long", "logicalType": "local-timestamp-micros"}, _naive,
                               _naive | _naive.map(lambda d: d.date()), False),
}
_PREFIXED = {"string", "bytes", "fixed", "enum", "uuid"}
_IDENTITY_PARTITIONED = {"int", "long", "string", "decimal", "date", "timestamp-micros", "uuid"}  # with projection


@st.composite
def cases(draw, kind):
    avro, values, literals, _ = TYPES[kind]
    files = draw(st.lists(st.lists(st.none() | values, min_size=1, max_size=6), min_size=1, max_size=3))
    data_values = [v for f in files for v in f if v is not None]
    near = literals
    if data_values:
        near = near | st.sampled_from(data_values)
        if kind in ("float", "double"):  # between a float32 and its double neighbours
            near = near | st.sampled_from(data_values).map(lambda v: math.nextafter(v, math.inf))
    ops = ["eq", "ne", "in", "not_in", "is_null", "not_null"]
    if kind != "boolean":
        ops += ["lt", "le", "gt", "ge"]
    if kind in _PREFIXED:
        ops += ["starts_with", "not_starts_with"]
        prefixes = (st.binary(max_size=2) if kind in ("bytes", "fixed")
                    else st.sampled_from(["", "a", "B", "0000", "A"]))

    def predicate():
        op = draw(st.sampled_from(ops))
        if op in ("is_null", "not_null"):
            return Predicate(op, "x")
        if op in ("in", "not_in"):
            return Predicate(op, "x", values=tuple(draw(st.lists(st.none() | near, max_size=3))))
        if op in ("starts_with", "not_starts_with"):
            return Predicate(op, "x", draw(prefixes))
        return Predicate(op, "x", draw(near))

    shape = draw(st.sampled_from(["one", "not", "and", "or"]))
    expr = {"one": lambda: predicate(), "not": lambda: Not(predicate()),
            "and": lambda: predicate() & predicate(), "or": lambda: predicate() | Not(predicate())}[shape]()
    return avro, files, expr


def _key(value):
    return repr(value)  # NaN, -0.0 and Decimal('1.00') each counted as themselves


def _records(batches):
    return [r["x"] for b in batches for r in b.to_pylist()]


def _has_unordered_literals(expr) -> bool:
    """Whether a literal is NaN or a null member of a list, where Python's own comparison
    is not SQL's (``2 in (1, None)`` is false, not unknown)."""
    if isinstance(expr, Not):
        return _has_unordered_literals(expr.child)
    if not isinstance(expr, Predicate):
        return any(_has_unordered_literals(term) for term in expr.terms)
    literals = expr.values if expr.op in ("in", "not_in") else (expr.value,)
    return any(v is None and expr.op in ("in", "not_in") or isinstance(v, float) and math.isnan(v) for v in literals)


_DATASETS = iter(range(10 ** 9))


@pytest.mark.parametrize("fmt", ["parquet", "avro"])
@pytest.mark.parametrize("kind", sorted(TYPES))
@settings(max_examples=max(12, settings.default.max_examples // 8))  # each example writes files
@given(data=st.data())
def test_reads_deletes_rows_and_statistics_agree(kind, fmt, data):
    avro, files, expr = data.draw(cases(kind))
    schema = {"type": "record", "name": "R", "fields": [{"name": "x", "type": ["null", avro]}]}
    partitioning = "identity(x) as p" if kind in _IDENTITY_PARTITIONED and data.draw(st.booleans()) else None
    repo = DatasetRepository(f"memory://agreement-{uuid.uuid4().hex}")
    ds = repo.create(f"d{next(_DATASETS)}", DatasetDescriptor(schema, partitioning, format=fmt))
    for values in files:
        with ds.writer() as w:
            for v in values:
                w.write({"x": v})
    descriptor = ds.descriptor
    bound = bind(expr, descriptor.fields)
    stored = {f.path: _records(read_task(ds.store, descriptor, ALWAYS_TRUE, ["x"], FileScanTask(f))) for f in ds.files}
    everything = [v for values in stored.values() for v in values]
    matches = lambda v: evaluate(bound, {"x": v}) is True  # noqa: E731

    read = _records(ds.scan(expr))
    assert Counter(map(_key, read)) == Counter(_key(v) for v in everything if matches(v))

    pruning = FileFilter.of(bound, descriptor)
    for f in ds.files:
        hits = [matches(v) for v in stored[f.path]]
        assert pruning.may_match(f) or not any(hits), (f.statistics, stored[f.path])
        assert not pruning.must_match(f) or all(hits), (f.statistics, stored[f.path])

    _, _, _, exact = TYPES[kind]
    if exact and not _has_unordered_literals(expr):
        assert [evaluate(expr, {"x": v}) is True for v in everything] == [matches(v) for v in everything]

    ds.delete(expr)
    left = _records(ds.scan())
    assert Counter(map(_key, read)) + Counter(map(_key, left)) == Counter(map(_key, everything))
