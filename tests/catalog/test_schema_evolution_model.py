"""Random sequences of schema changes, writes, deletes and compactions against a model:
every revision reads back exactly what the model says, in both formats."""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile

import hypothesis.strategies as st
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import CdkdsError

NAMES = ["a", "b", "c", "d", "e", "f", "g"]
WIDER = {"int": ["long", "double"], "long": ["double"]}


class Field:
    """A model field: its id stands for the field, whatever its name."""

    def __init__(self, fid: int, name: str, kind: str, default=None, children: list | None = None,
                 nullable: bool = True):
        self.id, self.name, self.kind, self.default, self.children = fid, name, kind, default, children
        self.nullable = nullable

    def draw(self, data):
        """A value to write (as stored: ints stay ints in a double field)."""
        values = st.sampled_from(["x", "y", "z"]) if self.kind == "string" else st.integers(-5, 5)
        return data.draw(st.one_of(st.none(), values) if self.nullable else values)

    def written(self, value):
        return float(value) if value is not None and self.kind == "double" else value

    def value(self, stored: dict):
        if self.children is not None:
            inner = stored.get(self.id)
            return None if inner is None else {c.name: c.value(inner) for c in self.children}
        raw = stored.get(self.id, self.default)
        return float(raw) if raw is not None and self.kind == "double" else raw


class SchemaEvolution(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.tmp = tempfile.mkdtemp()
        self.url = f"file://{self.tmp}/lake"
        self.history: dict[int, list] = {}  # revision -> the rows it must read

    def teardown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    @initialize(fmt=st.sampled_from(["parquet", "avro"]))
    def create(self, fmt):
        self.repo = DatasetRepository(self.url)
        schema = {"type": "record", "name": "R", "fields": [
            {"name": "k", "type": "long"}, {"name": "p", "type": "int"},
            {"name": "a", "type": ["null", "int"], "default": None},
            {"name": "r", "type": {"type": "record", "name": "N", "fields": [
                {"name": "x", "type": ["null", "int"], "default": None}]}}]}
        self.ds = self.repo.create("m", DatasetDescriptor(schema, partition_strategy="identity(p)", format=fmt,
                                                          properties={"checkpoint.interval": "3"}))
        self.fields = [Field(1, "k", "long", nullable=False), Field(2, "p", "int", nullable=False), Field(3, "a", "int"),
                       Field(4, "r", "record", children=[Field(5, "x", "int")], nullable=False)]
        self.next_id, self.rows, self.next_k = 6, [], 0
        self.history[self.ds.version] = []

    # ---------------------------------------------------------------- helpers

    def expected(self) -> list:
        return [{f.name: f.value(row) for f in self.fields} for row in self.rows]

    def record(self) -> Field:
        return next(f for f in self.fields if f.children is not None)

    def free_name(self, taken) -> str | None:
        names = [n for n in NAMES if n not in {f.name for f in taken}]
        return names[0] if names else None

    def committed(self):
        self.history[self.ds.version] = copy.deepcopy(self.expected())

    # ---------------------------------------------------------------- rules

    @rule(n=st.integers(1, 4), data=st.data())
    def append(self, n, data):
        records, stored = [], []
        for _ in range(n):
            row, values = {}, {}
            for f in self.fields:
                if f.id == 1:
                    v = self.next_k
                    self.next_k += 1
                elif f.id == 2:
                    v = data.draw(st.integers(0, 2))
                elif f.children is not None:
                    inner = {c.id: c.draw(data) for c in f.children}
                    row[f.name] = {c.name: c.written(inner[c.id]) for c in f.children}
                    values[f.id] = inner
                    continue
                else:
                    v = f.draw(data)
                row[f.name] = f.written(v)
                values[f.id] = v
            records.append(row)
            stored.append(values)
        with self.ds.writer() as w:
            for r in records:
                w.write(r)
        self.rows.extend(stored)
        self.committed()

    @rule(data=st.data())
    def alter(self, data):
        saved = (copy.deepcopy(self.fields), self.next_id)
        update = self.ds.alter()
        for _ in range(data.draw(st.integers(1, 3))):
            choice = data.draw(st.sampled_from(["rename", "nested_rename", "drop", "nested_drop", "add",
                                                "nested_add", "widen", "move"]))
            rec = self.record()
            plain = [f for f in self.fields if f.id > 2 and f.children is None]
            if choice == "rename":
                f = data.draw(st.sampled_from(self.fields))
                name = self.free_name(self.fields)
                if name:
                    update.rename(f.name, name)
                    f.name = name
            elif choice == "nested_rename":
                f = data.draw(st.sampled_from(rec.children))
                name = self.free_name(rec.children)
                if name:
                    update.rename(f"{rec.name}.{f.name}", name)
                    f.name = name
            elif choice == "drop" and plain:
                f = data.draw(st.sampled_from(plain))
                update.drop(f.name)
                self.fields.remove(f)
            elif choice == "nested_drop" and len(rec.children) > 1:
                f = data.draw(st.sampled_from(rec.children))
                update.drop(f"{rec.name}.{f.name}")
                rec.children.remove(f)
            elif choice in ("add", "nested_add"):
                where = self.fields if choice == "add" else rec.children
                name = data.draw(st.sampled_from(NAMES + [f.name for f in where if f.id > 2 and f.children is None]))
                if any(f.name == name for f in where):
                    continue  # the same name again: drop it first, in this alter
                kind = data.draw(st.sampled_from(["int", "long", "string"]))
                default = data.draw(st.one_of(st.none(), st.sampled_from({"string": ["dflt"]}.get(kind, [7]))))
                path = name if choice == "add" else f"{rec.name}.{name}"
                update.add(path, kind, default=default) if default is not None else update.add(path, kind)
                where.append(Field(self.next_id, name, kind, default, nullable=default is None))
                self.next_id += 1
            elif choice == "widen":
                candidates = [f for f in plain + rec.children if f.kind in WIDER]
                if candidates:
                    f = data.draw(st.sampled_from(candidates))
                    kind = data.draw(st.sampled_from(WIDER[f.kind]))
                    update.widen(f.name if f in self.fields else f"{rec.name}.{f.name}", kind)
                    f.kind = kind
            elif choice == "move" and len(self.fields) > 1:
                f = data.draw(st.sampled_from(self.fields))
                others = [o for o in self.fields if o is not f]
                after = data.draw(st.sampled_from(others))
                update.move(f.name, after=after.name)
                self.fields.remove(f)
                self.fields.insert(self.fields.index(after) + 1, f)
        if not update._changes:
            return
        version = self.ds.version
        try:
            update.commit()
        except CdkdsError as e:
            assert "live delete" in str(e), e  # a drop of a field a tombstone still reads: refused
            self.fields, self.next_id = saved
            assert self.ds.refresh().version == version
            return
        self.committed()

    @rule(data=st.data())
    def bad_alter(self, data):
        before = self.ds.version
        plain = [f for f in self.fields if f.id > 2 and f.children is None]
        change = data.draw(st.sampled_from(["drop_partition_source", "rename_onto", "required", "narrow"]))
        update = self.ds.alter()
        source = next(f for f in self.fields if f.id == 2)
        with pytest.raises(CdkdsError):
            if change == "drop_partition_source":
                update.drop(source.name).commit()
            elif change == "rename_onto":
                update.rename(source.name, self.fields[0].name if self.fields[0] is not source else self.fields[1].name)
            elif change == "required":
                update.add(self.free_name(self.fields) or "zz", "int", nullable=False)
            else:
                wide = [f for f in plain if f.kind in ("long", "double")]
                target = wide[0] if wide else next(f for f in self.fields if f.id == 1)
                update.widen(target.name, "int").commit()
        assert DatasetRepository(self.url).load("m").version == before

    @precondition(lambda self: self.rows)
    @rule(data=st.data())
    def delete(self, data):
        candidates = [f for f in self.fields if f.children is None and f.kind in ("int", "long") and f.id != 1]
        f = data.draw(st.sampled_from(candidates))
        value = data.draw(st.integers(-2, 2))
        self.ds.delete(f"{f.name} = {value}")
        self.rows = [r for r in self.rows if f.value(r) != value]
        self.committed()

    @rule()
    def compact(self):
        if self.ds.compact() is not None:
            self.committed()

    @rule()
    def reopen(self):
        self.ds = DatasetRepository(self.url).load("m")

    # ---------------------------------------------------------------- what must hold

    @invariant()
    def reads_match_the_model(self):
        if not hasattr(self, "ds"):
            return
        assert self.ds.descriptor.arrow_schema.names == [f.name for f in self.fields]
        assert canon(self.ds.to_table().to_pylist()) == canon(self.expected())

    @invariant()
    def old_revisions_read_with_their_own_schema(self):
        if not hasattr(self, "ds") or len(self.history) < 2:
            return
        version = sorted(self.history)[len(self.history) // 2]
        old = DatasetRepository(self.url).load("m", version=version)
        assert canon(old.to_table().to_pylist()) == canon(self.history[version])


def canon(rows: list) -> list:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


SchemaEvolution.TestCase.settings = settings(max_examples=int(os.environ.get("CDKDS_MODEL_EXAMPLES", "25")), stateful_step_count=12, deadline=None)
test_schema_evolution_against_a_model = SchemaEvolution.TestCase
