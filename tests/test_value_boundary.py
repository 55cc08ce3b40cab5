"""Every value in exactly, or refused (issue 26): random schemas (nested, nulls at every level)
and random values — each type's edges and values just outside them, in Arrow types wider or
finer than the field's — written through ``write()``, ``write_batch`` and ``cdkds import`` of a
Parquet file, into Parquet and Avro datasets. Each write either reads back exactly the values
given or is a ``CdkdsError`` naming the dataset and the field (and, for a file, the row), and
then nothing is committed and no file is left in ``data/``."""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdkds.catalog import CdkdsError, DatasetDescriptor, DatasetRepository
from cdkds.formats.conversion import FIRST_DAY, LAST_DAY
from tests.cli.running import run

D = decimal.Decimal
US_PER_DAY = 86_400 * 10**6
FIRST_US, LAST_US = FIRST_DAY * US_PER_DAY, (LAST_DAY + 1) * US_PER_DAY - 1
UUID = "0f8fad5b-d9cb-469f-a165-70867728950e"


@dataclass(frozen=True)
class Source:
    """Values of an Arrow type offered for a field: given as Python values, or as the raw
    numbers an Arrow type stores (``raw``: for values Python cannot hold, a date past 9999)."""

    type: pa.DataType
    values: tuple
    raw: pa.DataType | None = None

    def array(self, picks: list, mask: np.ndarray) -> pa.Array:
        if self.raw is not None:
            return pa.array(picks, self.raw, mask=mask).cast(self.type)
        return pa.array(picks, self.type, mask=mask)


def _raw(t: pa.DataType, storage: pa.DataType, *values: int) -> Source:
    return Source(t, values, storage)


TS = {"type": "long", "logicalType": "timestamp-micros"}
LEAVES: dict[str, tuple[object, list[Source]]] = {
    "int": ("int", [Source(pa.int64(), (0, -2**31, 2**31 - 1, -2**31 - 1, 2**31)), Source(pa.float64(), (2.0, 1.5))]),
    "long": ("long", [Source(pa.int64(), (2**63 - 1, -2**63, 7)), Source(pa.float64(), (1.9, -3.0, 1e19)),
                      Source(pa.uint64(), (2**64 - 1, 5))]),
    "float": ("float", [Source(pa.float64(), (3.4028234663852886e38, 1e39, -1e39, math.inf, -0.0, 1.5)),
                        Source(pa.float32(), (1.5, -math.inf))]),
    "double": ("double", [Source(pa.float64(), (1.7976931348623157e308, -math.inf, 5e-324)),
                          Source(pa.int64(), (2**53 + 1, 3))]),
    "boolean": ("boolean", [Source(pa.bool_(), (True, False))]),
    "string": ("string", [Source(pa.string(), ("", "\U0001F600", "a\x00b")), Source(pa.large_string(), ("x",))]),
    "bytes": ("bytes", [Source(pa.binary(), (b"", b"\x00\xff"))]),
    "fixed": ({"type": "fixed", "size": 4}, [Source(pa.binary(), (b"abcd", b"abc"))]),
    "enum": ({"type": "enum", "symbols": ["A", "B"]}, [Source(pa.string(), ("A", "B", "Z"))]),
    "uuid": ({"type": "string", "logicalType": "uuid"}, [Source(pa.string(), (UUID, "nope"))]),
    "date": ({"type": "int", "logicalType": "date"},
             [_raw(pa.date32(), pa.int32(), LAST_DAY, LAST_DAY + 1, FIRST_DAY, FIRST_DAY - 1, 0)]),
    "time-micros": ({"type": "long", "logicalType": "time-micros"},
                    [_raw(pa.time64("us"), pa.int64(), 0, US_PER_DAY - 1, US_PER_DAY, -1)]),
    "time-millis": ({"type": "int", "logicalType": "time-millis"},
                    [_raw(pa.time32("ms"), pa.int32(), 0, 86_399_999, 86_400_000),
                     _raw(pa.time64("us"), pa.int64(), 1000, 1001)]),
    "timestamp-micros": (TS, [_raw(pa.timestamp("us", "UTC"), pa.int64(), FIRST_US, LAST_US, LAST_US + 1, FIRST_US - 1),
                              _raw(pa.timestamp("ns", "UTC"), pa.int64(), 1000, 1001)]),
    "timestamp-millis": ({"type": "long", "logicalType": "timestamp-millis"},
                         [_raw(pa.timestamp("us", "UTC"), pa.int64(), 1000, 1001, LAST_US - 999)]),
    "local-timestamp-micros": ({"type": "long", "logicalType": "local-timestamp-micros"},
                               [_raw(pa.timestamp("us"), pa.int64(), FIRST_US, LAST_US + 1, 0)]),
    "decimal": ({"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
                [Source(pa.decimal128(9, 2), (D("9999999.99"), D("-0.01"))),
                 Source(pa.decimal128(12, 2), (D("10000000.00"), D("1.00"))),
                 Source(pa.decimal128(9, 3), (D("1.001"), D("1.010")))]),
}

# ---------------------------------------------------------------- random schemas and columns


@dataclass(frozen=True)
class Spec:
    """A field type: its kind, nullability, children and, for a leaf, the source of its values."""

    kind: str
    nullable: bool
    children: tuple = ()  # record: ((name, Spec), ...); array and map: (Spec,)
    source: Source | None = None
    extra: bool = False  # a record column carrying a field the schema lacks


_names = itertools.count()


def avro_of(spec: Spec) -> object:
    if spec.kind == "record":
        t = {"type": "record", "name": f"N{next(_names)}",
             "fields": [{"name": n, "type": avro_of(c), **({"default": None} if c.nullable else {})}
                        for n, c in spec.children]}
    elif spec.kind == "array":
        t = {"type": "array", "items": avro_of(spec.children[0])}
    elif spec.kind == "map":
        t = {"type": "map", "values": avro_of(spec.children[0])}
    else:
        t = LEAVES[spec.kind][0]
        if isinstance(t, dict) and t.get("type") in ("fixed", "enum"):
            t = {**t, "name": f"N{next(_names)}"}
    return ["null", t] if spec.nullable else t


def specs(depth: int = 2) -> st.SearchStrategy[Spec]:
    leaf = st.builds(lambda kind, i, nullable: Spec(kind, nullable, source=LEAVES[kind][1][i % len(LEAVES[kind][1])]),
                     st.sampled_from(sorted(LEAVES)), st.integers(0, 2), st.booleans())
    if depth == 0:
        return leaf
    inner = specs(depth - 1)
    record = st.builds(lambda cs, nullable, extra: Spec("record", nullable, tuple((f"f{i}", c) for i, c in enumerate(cs)),
                                                        extra=extra),
                       st.lists(inner, min_size=1, max_size=2), st.booleans(), st.integers(0, 5).map(lambda i: i == 0))
    nested = st.builds(lambda kind, c, nullable: Spec(kind, nullable, (c,)), st.sampled_from(["array", "map"]), inner,
                       st.booleans())
    return st.one_of(leaf, leaf, record, nested)


@st.composite
def columns(draw, spec: Spec, n: int) -> pa.Array:
    """``n`` values for ``spec``: nulls mostly where allowed, now and then where not."""
    may = spec.nullable or draw(st.integers(0, 9)) == 0
    mask = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)) if may else [False] * n, dtype=bool)
    if spec.source is not None:
        return spec.source.array(draw(st.lists(st.sampled_from(spec.source.values), min_size=n, max_size=n)), mask)
    if spec.kind == "record":
        children = [draw(columns(c, n)) for _, c in spec.children]
        names = [name for name, _ in spec.children]
        if spec.extra:
            children.append(pa.array(["s"] * n))
            names.append("secret")
        return pa.StructArray.from_arrays(children, names=names, mask=pa.array(mask))
    lengths = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    offsets = pa.array(np.concatenate(([0], np.cumsum(lengths))).astype(np.int32))
    items = draw(columns(spec.children[0], sum(lengths)))
    if spec.kind == "array":
        return pa.ListArray.from_arrays(offsets, items, mask=pa.array(mask))
    keys = pa.array(draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=sum(lengths), max_size=sum(lengths))),
                    pa.string())
    return pa.MapArray.from_arrays(offsets, keys, items, mask=pa.array(mask))


@st.composite
def cases(draw) -> tuple[Spec, pa.Array]:
    spec = draw(specs())
    return spec, draw(columns(spec, draw(st.integers(1, 3))))


# ---------------------------------------------------------------- the property

def _python(values: pa.Array) -> list | None:
    """The values as Python holds them (maps as dicts), ``None`` if Python cannot hold one."""
    if not _times_within_a_day(values):
        return None  # (Python would show them wrapped into the day)
    try:
        return values.to_pylist(maps_as_pydicts="strict")
    except (OverflowError, ValueError, KeyError):
        return None


def _times_within_a_day(values: pa.Array) -> bool:
    t = values.type
    if pa.types.is_time(t):
        ticks = values.cast(pa.int32() if pa.types.is_time32(t) else pa.int64()).drop_null().to_numpy()
        per_day = 86_400 * {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[t.unit]
        return bool(((ticks >= 0) & (ticks < per_day)).all())
    if pa.types.is_struct(t):
        return all(_times_within_a_day(child) for child in values.flatten())
    if pa.types.is_map(t):
        return _times_within_a_day(values.filter(values.is_valid()).items)
    if pa.types.is_list(t):
        return _times_within_a_day(values.flatten())
    return True


def _same(a: object, b: object) -> bool:
    a, b = (v.to_pydatetime() if hasattr(v, "to_pydatetime") else v for v in (a, b))  # pandas, for ns sources
    if isinstance(a, float) and isinstance(b, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list) or isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b and type(a) is type(b) or (isinstance(a, (int, float)) and not isinstance(a, bool)
                                             and isinstance(b, (int, float)) and not isinstance(b, bool) and a == b)


def _check(ds, given: list | None, error: Exception | str | None, before: int, row_named: bool = False) -> None:
    ds = ds.refresh()
    if error is None:
        rows = sorted(ds.to_table().to_pylist(maps_as_pydicts="strict"), key=lambda r: r["id"])
        stored = [r["x"] for r in rows]
        assert given is not None and _same(stored, given), (given, stored)
        return
    text = str(error)
    assert isinstance(error, str) or isinstance(error, CdkdsError), repr(error)
    assert "Traceback" not in text and f"dataset '{ds.name}'" in text and ("'x" in text or '"x' in text), text
    if row_named and ("value " in text or "null " in text):  # a value was refused: its row is named
        assert " row " in text, text
    assert ds.version == before
    assert [k for k, _ in ds.store.walk_files("data")] == []


_counter = itertools.count()


@pytest.mark.parametrize("fmt", ["parquet", "avro"])
# each example writes three datasets: a third of the profile's examples (33 in "ci", 666 in "thorough")
@settings(deadline=None, suppress_health_check=list(HealthCheck), max_examples=max(10, settings.default.max_examples // 3))
@given(case=cases())
def test_every_value_reads_back_exactly_or_is_refused_clearly(tmp_path_factory, fmt, case):
    spec, column = case
    folder = tmp_path_factory.mktemp("b")
    repo = DatasetRepository(f"file://{folder}/lake")
    schema = {"type": "record", "name": "T", "fields": [{"name": "id", "type": "long"},
                                                        {"name": "x", "type": avro_of(spec)}]}
    ids = pa.array(range(len(column)), pa.int64())
    given = _python(column)

    # Arrow batches
    ds = repo.create(f"b{next(_counter)}", DatasetDescriptor(schema, format=fmt))
    error = None
    try:
        with ds.writer() as w:
            w.write_batch(pa.RecordBatch.from_arrays([ids, column], names=["id", "x"]))
    except Exception as e:  # noqa: BLE001 - anything but a CdkdsError fails the check
        error = e
    _check(ds, given, error, 0)

    # records, where Python can hold the values
    if given is not None:
        ds = repo.create(f"r{next(_counter)}", DatasetDescriptor(schema, format=fmt))
        error = None
        try:
            with ds.writer() as w:
                for i, v in enumerate(given):
                    w.write({"id": i, "x": v})
        except Exception as e:  # noqa: BLE001
            error = e
        _check(ds, given, error, 0)

    # cdkds import of a Parquet file
    name = f"i{next(_counter)}"
    repo.create(name, DatasetDescriptor(schema, format=fmt))
    pq.write_table(pa.table({"id": ids, "x": column}), folder / "in.parquet")
    try:
        run("import", f"file://{folder}/lake/{name}", str(folder / "in.parquet"))
        error = None
    except AssertionError as e:  # the exit code was not 0: (args, code, stdout, stderr)
        error = e.args[0][3]
    _check(repo.load(name), given, error, 0, row_named=True)


def test_the_edges_are_reached():
    """The sources offer, for every kind, values just inside and just outside its range (a
    check that the property above is not vacuous)."""
    batch = pa.RecordBatch.from_arrays([pa.array([0, 1], pa.int64()),
                                        _raw(pa.date32(), pa.int32()).array([LAST_DAY, LAST_DAY + 1],
                                                                            np.zeros(2, bool))], names=["id", "x"])
    schema = {"type": "record", "name": "T", "fields": [{"name": "id", "type": "long"},
                                                        {"name": "x", "type": LEAVES["date"][0]}]}
    from cdkds.formats.records import batch_conformer
    with pytest.raises(CdkdsError, match=r"field 'x' \(row 1\): value '2932897 days since the epoch'"):
        batch_conformer(schema)(batch)
    assert batch_conformer(schema)(batch.slice(0, 1)).column(1).to_pylist() == [dt.date(9999, 12, 31)]
