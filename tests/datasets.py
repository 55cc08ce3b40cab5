"""Random datasets for agreement tests: a random descriptor (nested records, arrays, maps,
nullable and required fields of every kind, NaN and -0.0, every partition function, both
formats, keyed or not, TTL by field, by ordering value and by commit time) and a random
sequence of operations applied through the public Python API (appends, overwrites,
partition overwrites, predicate deletes, upserts, partial updates and deletes by key,
renames, drops, adds, widenings and moves — nested ones too —, compactions, checkpoints).

Values are drawn from the dataset's schema as it is when each operation runs, so they
follow renames and widenings. An operation cdkds refuses (a drop of a field a live delete
reads, an insert of an existing key...) is recorded in ``Built.refused`` and left out:
it commits nothing. Data is small (at most a dozen rows per write) so examples are fast.

Use inside a hypothesis test with ``st.data()``::

    built = build(data, f"file://{tmp}/lake")
    for ds in built.revisions(data):  # the latest and an earlier revision
        where, columns = data.draw(reads(ds.descriptor))
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
from hypothesis import note

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import CdkdsError
from cdkds.catalog.expressions import Expression, Not, Predicate

UTC = dt.timezone.utc
NOW = dt.datetime.now(UTC).replace(microsecond=0)  # TTL counts back from the real clock
T0 = dt.datetime(2020, 1, 1)
D = decimal.Decimal
NAN = float("nan")

TS_MICROS = {"type": "long", "logicalType": "timestamp-micros"}
TS_MILLIS = {"type": "long", "logicalType": "timestamp-millis"}
LOCAL_MICROS = {"type": "long", "logicalType": "local-timestamp-micros"}
DATE = {"type": "int", "logicalType": "date"}
DECIMAL = {"type": "bytes", "logicalType": "decimal", "precision": 7, "scale": 2}


def nullable(avro: Any) -> list:
    return ["null", avro]


# Columns a dataset may have beside its key, partition source and TTL fields: name -> Avro type.
OPTIONAL_COLUMNS = {
    "i": nullable("int"),
    "ri": "int",  # required
    "l": nullable("long"),
    "f": nullable("float"),
    "d": nullable("double"),
    "rd": "double",  # required, NaN and -0.0 included
    "s": nullable("string"),
    "bin": nullable("bytes"),
    "dec": nullable(DECIMAL),
    "dt": nullable(DATE),
    "tz": nullable(TS_MILLIS),
    "tm": nullable({"type": "long", "logicalType": "time-micros"}),  # no Spark type: SPARK_LESS
    "fx": nullable({"type": "fixed", "name": "Two", "size": 2}),
    "ntz": nullable(LOCAL_MICROS),
    "flag": nullable("boolean"),
    "r": nullable({"type": "record", "name": "Inner", "fields": [
        {"name": "x", "type": nullable("int"), "default": None},
        {"name": "y", "type": "string"},
        {"name": "z", "type": nullable({"type": "record", "name": "Deep", "fields": [
            {"name": "q", "type": nullable("double"), "default": None}]}), "default": None}]}),
    "arr": nullable({"type": "array", "items": nullable("long")}),
    "items": {"type": "array", "items": {"type": "record", "name": "Item", "fields": [
        {"name": "qty", "type": "int"}, {"name": "note", "type": nullable("string"), "default": None}]}},
    "m": nullable({"type": "map", "values": nullable("string")}),
}

SPARK_LESS = ("tm",)  # columns of types Spark has none for

# ---------------------------------------------------------------- values of Arrow types

_SPECIAL_FLOATS = [0.0, -0.0, 1.5, -2.5, NAN, math.inf, -math.inf]


@functools.lru_cache(maxsize=None)  # strategies are costly to build per draw
def values_of(arrow_type: pa.DataType) -> st.SearchStrategy:
    """Non-null values of ``arrow_type`` as ``writer.write`` takes them: few distinct ones
    (so predicates, keys and partitions hit), extremes and NaN/-0.0 among them."""
    t = arrow_type
    if pa.types.is_int32(t):
        return st.integers(-3, 3) | st.sampled_from([-2 ** 31, 2 ** 31 - 1])
    if pa.types.is_int64(t):
        return st.integers(-3, 3) | st.sampled_from([-2 ** 63, 2 ** 63 - 1])
    if pa.types.is_float32(t):
        return st.sampled_from(_SPECIAL_FLOATS) | st.floats(-4, 4, width=32)
    if pa.types.is_floating(t):
        return st.sampled_from(_SPECIAL_FLOATS) | st.floats(-4, 4)
    if pa.types.is_boolean(t):
        return st.booleans()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return st.text(alphabet="ab\u00e9", max_size=3)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return st.binary(max_size=3)
    if pa.types.is_fixed_size_binary(t):
        return st.binary(min_size=t.byte_width, max_size=t.byte_width)
    if pa.types.is_time(t):
        return st.sampled_from([dt.time(0), dt.time(0, 0, 1, 5), dt.time(12), dt.time(23, 59, 59, 999999)])
    if pa.types.is_decimal(t):
        bound = D(10) ** (t.precision - t.scale) - 1
        return st.decimals(-3, 3, places=t.scale) | st.sampled_from([bound, -bound])
    if pa.types.is_date32(t):
        return st.dates(dt.date(2019, 12, 30), dt.date(2020, 1, 3))
    if pa.types.is_timestamp(t):
        step = 1000 if t.unit == "ms" else 1
        naive = st.integers(-3_000, 3_000).map(lambda n: T0 + dt.timedelta(microseconds=n * step))
        return naive if t.tz is None else naive.map(lambda d: d.replace(tzinfo=UTC))
    if pa.types.is_struct(t):
        return st.fixed_dictionaries({t.field(i).name: cell(t.field(i)) for i in range(t.num_fields)})
    if pa.types.is_map(t):
        return st.dictionaries(st.sampled_from(["k", "v", "w"]), cell(t.item_field), max_size=2)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return st.lists(cell(t.value_field), max_size=3)
    raise NotImplementedError(f"no values for {t}")


def cell(f: pa.Field) -> st.SearchStrategy:
    """A value of field ``f``: null too when it is nullable."""
    return st.none() | values_of(f.type) if f.nullable else values_of(f.type)


# ---------------------------------------------------------------- descriptors


@dataclass(frozen=True)
class Partitioning:
    """A partition strategy on the source field ``p`` (or on the key ``id``): ``p``'s Avro
    type and the values it may take (a strategy refuses values outside its functions' domains)."""

    text: str | None
    avro: Any = None
    values: st.SearchStrategy | None = None


_STAMPS = st.integers(-40_000, 40_000).map(lambda h: T0 + dt.timedelta(hours=h, microseconds=h * 7919 % 10 ** 6))
PARTITIONINGS = [
    Partitioning(None),
    Partitioning("identity(p)", nullable("string"), st.sampled_from(["a", "b", None])),
    Partitioning("identity(p)", "int", st.integers(-2, 2)),
    Partitioning("hash(p, 3)", "long", st.integers(-9, 9)),
    Partitioning("hash(id, 2) as bucket", None, None),
    Partitioning("hash(id, 2) as bucket, identity(p)", "boolean", st.booleans()),
    Partitioning("range(p, 10)", "int", st.integers(-25, 25)),
    Partitioning("range(p, [0, 10, 100])", "long", st.integers(-5, 100)),
    Partitioning("list(p, [['a', 'b'], ['c']])", "string", st.sampled_from("abc")),
    Partitioning("identity(p) as pc", DECIMAL, st.sampled_from([D("1.50"), D("-2.00")])),
    *[Partitioning(f"{fn}(p)", TS_MICROS, _STAMPS.map(lambda d: d.replace(tzinfo=UTC)))
      for fn in ("year", "month", "day", "hour", "minute")],
    Partitioning("year(p), month(p), day(p)", DATE, _STAMPS.map(lambda d: d.date())),
    Partitioning("dateFormat(p, 'yyyy-MM-dd') as pd", LOCAL_MICROS, _STAMPS),
    Partitioning("identity(p), hour(p)", TS_MILLIS,
                 _STAMPS.map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000, tzinfo=UTC))),
]

# TTL of 1 day against the real clock: a row's ordering value (or expiry) is hours from the
# boundary, never near it, so two reads a moment apart see the same rows.
_ORDERING = (st.integers(0, 6).map(lambda h: NOW - dt.timedelta(hours=h))
             | st.integers(3, 20).map(lambda d: NOW - dt.timedelta(days=d)))
_EXPIRY = st.none() | st.sampled_from([NOW - dt.timedelta(days=5), NOW + dt.timedelta(days=5)])
TTLS = ["none", "ordering", "field", "commit time"]


@dataclass(frozen=True)
class Spec:
    """A random descriptor with the roles of its special fields."""

    descriptor: DatasetDescriptor
    partitioning: Partitioning
    keyed: bool
    ttl: str


@st.composite
def specs(draw, formats=("parquet", "avro"), keyed: bool | None = None, ttls=TTLS, without=(), including=()) -> Spec:
    """A random descriptor: a long ``id`` (the record key of a keyed dataset; ``keyed``:
    always, never, or ``None``: either), a partition source ``p``, an ordering field ``ts``
    and a TTL field ``exp`` where those apply, and a random subset of :data:`OPTIONAL_COLUMNS`
    but those named in ``without``, with those named in ``including``."""
    partitioning = draw(st.sampled_from(PARTITIONINGS))
    keyed = draw(st.booleans()) if keyed is None else keyed
    ttl = draw(st.sampled_from(ttls))
    columns = draw(st.lists(st.sampled_from(sorted(set(OPTIONAL_COLUMNS) - set(without))), min_size=1, max_size=5,
                            unique=True))
    columns += [c for c in including if c not in columns]
    fields: list[dict] = [{"name": "id", "type": "long"}]
    if partitioning.avro is not None:
        fields.append({"name": "p", "type": partitioning.avro})
    ordered = ttl == "ordering" or keyed and draw(st.booleans())
    if ordered:
        fields.append({"name": "ts", "type": TS_MICROS})
    if ttl == "field":
        fields.append({"name": "exp", "type": nullable(TS_MICROS), "default": None})
    for name in columns:
        avro = OPTIONAL_COLUMNS[name]
        fields.append({"name": name, "type": avro, **({"default": None} if isinstance(avro, list) else {})})
    properties = {"checkpoint.interval": str(draw(st.integers(2, 10)))}
    if ttl in ("ordering", "commit time"):
        properties["ttl"] = "1 day"
    elif ttl == "field":
        properties["ttl.field"] = "exp"
    descriptor = DatasetDescriptor(
        {"type": "record", "name": "Row", "fields": fields}, partitioning.text,
        format=draw(st.sampled_from(formats)), record_key=["id"] if keyed else None,
        ordering_field="ts" if ordered else None,
        properties=properties)
    return Spec(descriptor, partitioning, keyed, ttl)


# ---------------------------------------------------------------- building a dataset

KEYS = 20  # ids are drawn from 0..KEYS-1, so upserts and deletes by key hit rows
NEW_NAMES = ["n1", "n2", "n3", "n4"]
# long -> double is left out: a long beyond 2^53 (written here: -2^63) makes every read of the
# older files fail (test_a_long_beyond_2_53_widened_to_double_reads in test_native_agreement.py)
WIDENINGS = {"int32": ["long", "double"], "float": ["double"]}


@dataclass
class Built:
    """A dataset built by :func:`build`: its repository and name, the revisions its
    operations committed, what they were and what cdkds refused."""

    repo: DatasetRepository
    name: str
    spec: Spec
    roles: dict  # role ("id", "p", "ts", "exp") -> the field's current name
    operations: list = field(default_factory=list)
    refused: list = field(default_factory=list)
    committed: list = field(default_factory=list)  # revisions after each successful operation

    @property
    def dataset(self):
        return self.repo.load(self.name)

    def all_revisions(self) -> list:
        """The revision after each operation that committed, latest first, as loaded datasets."""
        return [self.repo.load(self.name, version=v) for v in reversed(self.committed)]

    def revisions(self, data) -> list:
        """The latest revision and an earlier one (drawn), as loaded datasets."""
        latest = self.dataset
        earlier = [v for v in self.committed if v < latest.version] or [latest.version]
        return [latest, self.repo.load(self.name, version=data.draw(st.sampled_from(earlier), label="earlier"))]


@dataclass(frozen=True)
class Focus:
    """Which datasets and operations to draw: all of them, or those that make one rule apply
    often (hypothesis leans towards the first choices: the operations that make rules come first)."""

    name: str
    keyed: bool | None = None
    ttls: tuple = tuple(TTLS)
    operations: tuple = ()  # none: every operation the dataset takes
    columns: tuple = ()  # optional columns every dataset has

    def kinds(self, keyed: bool) -> list[str]:
        if self.operations:
            return [k for k in self.operations if k in (KEYED_ONLY if keyed else PLAIN_ONLY) or
                    k not in KEYED_ONLY + PLAIN_ONLY]
        return ["delete", "append"] + (["upsert", "alter", "delete_keys", "update"] if keyed else
                                       ["alter", "overwrite_partitions"]) + \
            ["append", "overwrite", "compact", "delete", "alter", "checkpoint"]


KEYED_ONLY = ("upsert", "update", "delete_keys")
PLAIN_ONLY = ("overwrite_partitions",)
FOCUSES = {f.name: f for f in [
    Focus("everything"),
    Focus("tombstones", keyed=False, operations=("delete", "append", "delete", "overwrite_partitions", "alter")),
    Focus("deletion vectors", keyed=True, operations=("upsert", "delete", "delete_keys", "update", "append")),
    Focus("schema changes", operations=("alter", "append", "delete", "upsert", "compact"), columns=("r", "items")),
    Focus("ttl", ttls=("ordering", "field", "commit time"),
          operations=("append", "upsert", "delete", "overwrite", "alter", "compact")),
]}


def build(data, url: str, name: str = "d", formats=("parquet", "avro"), max_operations: int = 8,
          focus: Focus = FOCUSES["everything"], without=()) -> Built:
    """A dataset at ``url`` made by a random descriptor and random operations (see the module);
    ``without``: optional columns it never has."""
    spec = data.draw(specs(formats, focus.keyed, focus.ttls, without, focus.columns), label="spec")
    note(f"descriptor: {spec.descriptor.to_json()}")
    repo = DatasetRepository(url)
    repo.create(name, spec.descriptor)
    roles = {r: r for r in ("id", "p", "ts", "exp") if r in spec.descriptor.fields}
    built = Built(repo, name, spec, roles)
    kinds = focus.kinds(spec.keyed)
    count = data.draw(st.integers(min(3, max_operations), max_operations), label="operations")
    for i in range(count):
        kind = "append" if i == 0 else data.draw(st.sampled_from(kinds), label="operation")
        ds = repo.load(name)
        before = ds.version
        try:
            what = OPERATIONS[kind](data, built, ds)
        except CdkdsError as e:
            built.refused.append((kind, f"{type(e).__name__}: {e}"))
            note(f"refused {kind}: {type(e).__name__}: {e}")
            continue
        built.operations.append((kind, what))
        note(f"{kind}: {what!r:.600}")
        after = repo.load(name).version
        if after != before:
            built.committed.append(after)
    return built


def rows(data, built: Built, ds, at_most: int = 16) -> list[dict]:
    """Random rows for ``ds``'s schema now; key, partition source and TTL fields drawn from
    their own domains (a keyed dataset's keys unique in one write)."""
    schema = ds.descriptor.arrow_schema
    own = {"id": st.integers(0, KEYS - 1), "ts": _ORDERING, "exp": _EXPIRY, "p": built.spec.partitioning.values}
    special = {name: own[role] for role, name in built.roles.items()}
    row = st.fixed_dictionaries({f.name: special[f.name] if f.name in special else cell(f) for f in schema})
    unique = (lambda r: r[built.roles["id"]]) if built.spec.keyed else None
    return data.draw(st.lists(row, min_size=min(4, at_most), max_size=at_most, unique_by=unique), label="rows")


def _write(data, built: Built, ds, mode: str) -> list[dict]:
    written = rows(data, built, ds)
    cut = data.draw(st.integers(0, len(written)), label="flush after")
    with ds.writer(mode=mode) as w:
        for i, r in enumerate(written):
            if i == cut and i and mode == "append":
                w.flush()  # two commits, two files
            w.write(r)
    return written


def _delete(data, built: Built, ds) -> str:
    where = str(data.draw(predicates(ds.descriptor), label="delete where"))
    ds.delete(where)
    return where


def _keys(data, built: Built, ds) -> list:
    keys = data.draw(st.lists(st.integers(0, KEYS - 1), min_size=1, max_size=4), label="keys")
    return [{built.roles["id"]: k} for k in keys]


def _update(data, built: Built, ds) -> list:
    full = rows(data, built, ds, at_most=4)
    kept = data.draw(st.sets(st.sampled_from(sorted(full[0]))), label="columns updated")
    protected = {built.roles["id"], built.roles.get("ts")}
    partial = [{k: v for k, v in r.items() if k in kept or k in protected} for r in full]
    ds.update(partial)
    return partial


def _alter(data, built: Built, ds) -> list:
    update = ds.alter()
    changes = []
    schema = ds.descriptor.arrow_schema
    names = list(schema.names)
    for _ in range(data.draw(st.integers(1, 3), label="changes")):
        choice = data.draw(st.sampled_from(["rename", "nested", "add", "drop", "rename", "widen", "add", "move"]))
        free = [n for n in NEW_NAMES if n not in names]
        if choice == "rename" and free:
            old, new = data.draw(st.sampled_from(names)), free[0]
            update.rename(old, new)
            names[names.index(old)] = new
            for role, current in built.roles.items():
                if current == old:
                    built.roles[role] = new
            changes.append(("rename", old, new))
        elif choice == "drop":
            droppable = [n for n in names if n not in built.roles.values()]
            if len(droppable) > 1:
                victim = data.draw(st.sampled_from(droppable))
                update.drop(victim)
                names.remove(victim)
                changes.append(("drop", victim))
        elif choice == "add" and free:
            kind = data.draw(st.sampled_from(["int", "long", "string", "double"]))
            default = data.draw(st.none() | st.just({"string": "dflt", "double": -0.0}.get(kind, 7)))
            if default is None:
                update.add(free[0], kind)
            else:
                update.add(free[0], kind, default=default)
            names.append(free[0])
            changes.append(("add", free[0], kind, default))
        elif choice == "widen":
            widenable = [(n, w) for n in names if n not in (built.roles.get("id"), built.roles.get("ts"))
                         and n in schema.names for w in WIDENINGS.get(str(schema.field(n).type), [])]
            if widenable:
                name, wider = data.draw(st.sampled_from(widenable))
                update.widen(name, wider)
                changes.append(("widen", name, wider))
                break  # the schema read above no longer holds
        elif choice == "move" and len(names) > 1:
            moved = data.draw(st.sampled_from(names))
            after = data.draw(st.sampled_from([n for n in names if n != moved]))
            update.move(moved, after=after)
            names.remove(moved)
            names.insert(names.index(after) + 1, moved)
            changes.append(("move", moved, after))
        elif choice == "nested":
            change = _nested_change(data, schema, names)
            if change is not None:
                getattr(update, change[0])(*change[1:])
                changes.append(change)
                break  # nested names may have changed
    if changes:
        update.commit()
    return changes


def _nested_change(data, schema: pa.Schema, names: list) -> tuple | None:
    """A rename, drop or add inside a record (``r.x``, ``r.z.q``, ``items.qty``) of the schema."""
    paths = []
    for name in names:
        if name not in schema.names:
            continue
        t = schema.field(name).type
        if pa.types.is_list(t) and pa.types.is_struct(t.value_type):
            t = t.value_type
        if pa.types.is_struct(t):
            paths.append((name, t))
            for i in range(t.num_fields):
                if pa.types.is_struct(t.field(i).type):
                    paths.append((f"{name}.{t.field(i).name}", t.field(i).type))
    if not paths:
        return None
    path, struct = data.draw(st.sampled_from(paths))
    children = [struct.field(i).name for i in range(struct.num_fields)]
    kind = data.draw(st.sampled_from(["rename", "drop", "add"]))
    if kind == "rename":
        child = data.draw(st.sampled_from(children))
        return ("rename", f"{path}.{child}", f"{child}2")
    if kind == "drop" and len(children) > 1:
        return ("drop", f"{path}.{data.draw(st.sampled_from(children))}")
    added = next(n for n in ("w1", "w2", "w3", "w4") if n not in children)
    return ("add", f"{path}.{added}", data.draw(st.sampled_from(["long", "string"])))


OPERATIONS = {
    "append": lambda data, b, ds: _write(data, b, ds, "append"),
    "overwrite": lambda data, b, ds: _write(data, b, ds, "overwrite"),
    "overwrite_partitions": lambda data, b, ds: _write(data, b, ds, "overwrite_partitions"),
    "delete": _delete,
    "upsert": lambda data, b, ds: ds.upsert(rows(data, b, ds)) and None,
    "update": _update,
    "delete_keys": lambda data, b, ds: ds.delete_keys(_keys(data, b, ds)) and None,
    "alter": _alter,
    "compact": lambda data, b, ds: ds.compact(),
    "checkpoint": lambda data, b, ds: ds.checkpoint(),
}

# ---------------------------------------------------------------- reads


def _scalar(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_map(t))


@st.composite
def predicates(draw, descriptor: DatasetDescriptor, depth: int = 2) -> Expression:
    """A random predicate on the top-level scalar fields of ``descriptor``: every operator,
    literals among the values written (no NaN or infinite literal, no bytes: the text form,
    which has none of these, is what Spark's ``where`` option takes)."""
    schema = descriptor.arrow_schema
    usable = [f for f in reversed(schema) if _scalar(f.type)]  # hypothesis leans to the first: the key last
    f = draw(st.sampled_from(usable))
    ops = []
    if not (pa.types.is_binary(f.type) or pa.types.is_fixed_size_binary(f.type)):
        ops += ([] if pa.types.is_boolean(f.type) else ["lt", "ge"]) + ["eq", "in", "ne", "not_in"]
        ops += [] if pa.types.is_boolean(f.type) else ["le", "gt"]
        if pa.types.is_string(f.type):
            ops += ["starts_with", "not_starts_with"]
    ops += ["is_null", "not_null"]
    op = draw(st.sampled_from(ops))
    literal = values_of(f.type).filter(lambda v: not (isinstance(v, float) and not math.isfinite(v)))
    if f.name == "id":
        literal = st.integers(0, KEYS - 1)
    if op in ("is_null", "not_null"):
        leaf: Expression = Predicate(op, f.name)
    elif op in ("in", "not_in"):
        leaf = Predicate(op, f.name, values=tuple(draw(st.lists(literal, min_size=1, max_size=3))))
    else:
        leaf = Predicate(op, f.name, draw(literal))
    if depth <= 1:
        return leaf
    shape = draw(st.sampled_from(["leaf", "leaf", "not", "and", "or"]))
    if shape == "not":
        return Not(leaf)
    if shape == "and":
        return leaf & draw(predicates(descriptor, depth - 1))
    if shape == "or":
        return leaf | draw(predicates(descriptor, depth - 1))
    return leaf


@st.composite
def reads(draw, descriptor: DatasetDescriptor) -> tuple[str | None, list[str] | None]:
    """A random ``where`` (text form, or None) and ``columns`` (a subset of the top-level
    fields in any order, or None) for a read of a dataset with ``descriptor``."""
    where = draw(st.none() | predicates(descriptor).map(str), label="where")
    names = descriptor.arrow_schema.names
    columns = draw(st.none() | st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True),
                   label="columns")
    return where, columns


# ---------------------------------------------------------------- comparing rows


def canonical(value: Any) -> Any:
    """A hashable value equal for equal cells: NaN equals NaN, -0.0 differs from 0.0."""
    if isinstance(value, float):
        return ("nan",) if math.isnan(value) else ("float", value, math.copysign(1.0, value))
    if isinstance(value, dict):  # a map's entries in any order (a record's fields are checked by the schema)
        return tuple(sorted(((k, canonical(v)) for k, v in value.items()), key=repr))
    if isinstance(value, (list, tuple)):
        return tuple(canonical(v) for v in value)
    if isinstance(value, decimal.Decimal):
        return ("decimal", str(value))
    return value


def multiset(rows: list[dict] | pa.Table) -> Counter:
    """The rows as a multiset of canonical tuples (in column order)."""
    if isinstance(rows, pa.Table):
        rows = rows.to_pylist()
    return Counter(tuple((k, canonical(v)) for k, v in r.items()) for r in rows)


def difference(got: Counter, want: Counter, at_most: int = 5) -> str:
    """The rows one multiset has beyond the other, a few of each."""
    return f"extra rows {list((got - want).elements())[:at_most]}, missing rows {list((want - got).elements())[:at_most]}"


def assert_same_rows(got: pa.Table, want: pa.Table, what: str) -> None:
    """``got`` has ``want``'s schema and rows (as multisets); the difference is named."""
    assert got.schema.names == want.schema.names, f"{what}: columns {got.schema.names} != {want.schema.names}"
    assert got.schema.types == want.schema.types, f"{what}: types {got.schema} != {want.schema}"
    g, w = multiset(got), multiset(want)
    assert g == w, f"{what}: {difference(g, w)}"


# ---------------------------------------------------------------- a dataset of rules random ones reach rarely

RARE_SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "i", "type": nullable("int"), "default": None},
    {"name": "r", "type": nullable({"type": "record", "name": "In", "fields": [
        {"name": "x", "type": nullable("int"), "default": None}, {"name": "y", "type": "string"}]}),
     "default": None}]}


def rare_rules_dataset(url: str, name: str = "rare") -> DatasetRepository:
    """A Parquet dataset at ``url`` whose one file has a tombstone that is null on some rows
    (``i < 2`` where ``i`` is null: kept), then a nested rename (``r.x`` -> ``x2``) and a
    nested add with a default: revision 1 is before the tombstone, 3 after all of it."""
    repo = DatasetRepository(url)
    ds = repo.create(name, DatasetDescriptor(RARE_SCHEMA))
    with ds.writer() as w:
        for k, i in enumerate([None, 1, 5, None, 2, 0]):
            w.write({"id": k, "i": i, "r": {"x": i, "y": "s"} if k % 2 else None})
    ds.delete("i < 2")
    repo.load(name).alter().rename("r.x", "x2").add("r.z", "long", default=7).commit()
    return repo
