"""Nested schema changes over optional records holding nulls: whatever a read produces,
every writer of ours accepts (compaction, Parquet export, pyarrow's own writer), and the
rows survive compaction, export and re-import unchanged."""

from __future__ import annotations

import io
import tempfile
from typing import Iterator

import hypothesis.strategies as st
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, note, settings

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from tests.cli.running import run

ADDR = {"type": "record", "name": "Addr", "fields": [
    {"name": "city", "type": "string"},
    {"name": "geo", "type": ["null", {"type": "record", "name": "Geo", "fields": [
        {"name": "lat", "type": "double"}]}], "default": None}]}
SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"},
    {"name": "addr", "type": ["null", ADDR], "default": None}]}
ROWS = [{"id": 1, "addr": {"city": "a", "geo": {"lat": 1.5}}}, {"id": 2, "addr": None},
        {"id": 3, "addr": {"city": "b", "geo": None}}]

CHANGES = {
    "rename": (lambda a: a.rename("addr.city", "town"),
               lambda r: {**r, "addr": r["addr"] and {"town": r["addr"]["city"], "geo": r["addr"]["geo"]}}),
    "add": (lambda a: a.add("addr.zip", "long"),
            lambda r: {**r, "addr": r["addr"] and {**r["addr"], "zip": None}}),
    "add nested record": (lambda a: a.add("addr.geo.alt", "double"),
                          lambda r: {**r, "addr": r["addr"] and {
                              **r["addr"], "geo": r["addr"]["geo"] and {**r["addr"]["geo"], "alt": None}}}),
    "drop": (lambda a: a.drop("addr.geo"), lambda r: {**r, "addr": r["addr"] and {"city": r["addr"]["city"]}}),
}


def _accepted_by_pyarrow(table) -> None:
    pq.write_table(table, io.BytesIO())


@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "keyed"])
@pytest.mark.parametrize("change", list(CHANGES))
def test_a_nested_change_in_an_optional_record_keeps_compaction_and_export_working(tmp_path, change, keyed):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("x", DatasetDescriptor(schema=SCHEMA, record_key=["id"] if keyed else []))
    for row in ROWS:  # a file per row: compaction has files to merge
        if keyed:
            ds.upsert([row])
        else:
            with ds.writer() as w:
                w.write(row)
    alter, expect = CHANGES[change]
    alter(repo.load("x").alter()).commit()
    ds = repo.load("x")
    want = [expect(r) for r in ROWS]

    table = ds.to_table()
    _accepted_by_pyarrow(table)
    assert sorted(table.to_pylist(), key=lambda r: r["id"]) == want
    run("export", f"file://{tmp_path}/lake/x", str(tmp_path / "out.parquet"))
    assert sorted(pq.read_table(tmp_path / "out.parquet").to_pylist(), key=lambda r: r["id"]) == want

    assert ds.compact() is not None
    ds = repo.load("x")
    _accepted_by_pyarrow(ds.to_table())
    assert sorted(ds.to_table().to_pylist(), key=lambda r: r["id"]) == want
    assert ds.check(read_data=True).ok


# ---------------------------------------------------------------- property: random nested schemas

class Node:
    """A model field: identity is the object (names change by renames); values are stored
    by node, so a rename reads the old value under the new name and a drop hides it."""

    def __init__(self, name: str, kind: str, nullable: bool, children: list["Node"] | None = None):
        self.name, self.kind, self.nullable, self.children = name, kind, nullable, children

    def avro(self, names: Iterator[str]) -> dict:
        if self.kind == "record":
            t = {"type": "record", "name": next(names), "fields": [c.avro(names) for c in self.children]}
        elif self.kind == "array":  # of records
            t = {"type": "array", "items": {"type": "record", "name": next(names),
                                            "fields": [c.avro(names) for c in self.children]}}
        else:
            t = self.kind
        return {"name": self.name, "type": ["null", t], "default": None} if self.nullable else \
            {"name": self.name, "type": t}

    def named(self, stored):
        """A stored value as written or read under the current names."""
        if stored is None:
            return None
        if self.kind == "record":
            return {c.name: c.named(stored.get(c)) for c in self.children}
        if self.kind == "array":
            return [{c.name: c.named(item.get(c)) for c in self.children} for item in stored]
        return stored


LEAVES = {"long": st.integers(-3, 3), "string": st.sampled_from(["", "x", "yz"]),
          "double": st.integers(-3, 3).map(float)}


def _nodes(depth: int):
    leaf = st.builds(Node, st.just(""), st.sampled_from(list(LEAVES)), st.sampled_from([False, False, True]))
    if depth == 0:
        return leaf
    children = st.lists(_nodes(depth - 1), min_size=1, max_size=3)
    nested = st.builds(Node, st.just(""), st.sampled_from(["record", "record", "array"]), st.booleans(), children)
    return st.one_of(leaf, nested)


def _fields():
    """Top-level fields, the first an optional record (the case that matters most), the
    rest anything; leaves required more often than not, so required children of null
    records are common."""
    optional_record = st.builds(Node, st.just(""), st.just("record"), st.just(True),
                                st.lists(_nodes(1), min_size=1, max_size=3))
    return st.tuples(optional_record, st.lists(_nodes(2), max_size=2)).map(lambda t: _named([t[0], *t[1]]))


def _named(nodes: list[Node], prefix: str = "f") -> list[Node]:
    for i, n in enumerate(nodes):
        n.name = f"{prefix}{i}"
        if n.children:
            _named(n.children, f"{n.name}_")
    return nodes


def _value(data, node: Node):
    if node.nullable and data.draw(st.integers(0, 2)) == 0:
        return None
    if node.kind == "record":
        return {c: _value(data, c) for c in node.children}
    if node.kind == "array":
        return [{c: _value(data, c) for c in node.children} for _ in range(data.draw(st.integers(0, 2)))]
    return data.draw(LEAVES[node.kind])


class Model:
    def __init__(self, fields: list[Node]):
        self.key = Node("id", "long", False)
        self.root = Node("", "record", False, [self.key, *fields])
        self.rows: list[dict] = []
        self.fresh = 0

    def schema(self) -> dict:
        names = (f"T{i}" for i in range(10**6))
        return {**self.root.avro(names)["type"], "name": "Row"}

    def write(self, data, count: int) -> list[dict]:
        rows = []
        for _ in range(count):
            row = {c: _value(data, c) for c in self.root.children[1:]}
            row[self.key] = len(self.rows)
            self.rows.append(row)
            rows.append(self.root.named(row))
        return rows

    def expected(self) -> list[dict]:
        return [self.root.named(r) for r in self.rows]

    def places(self) -> list[tuple[str, Node, Node | None]]:
        """``(path, node, parent)`` of every field but the key, parents first."""
        out = []

        def walk(parent: Node, prefix: str) -> None:
            for c in parent.children:
                if c is not self.key:
                    out.append((prefix + c.name, c, parent))
                if c.children:
                    walk(c, f"{prefix}{c.name}.")
        walk(self.root, "")
        return out

    def alter(self, data, update) -> str:
        """One random nested change, on the update and on the model."""
        self.fresh += 1
        places = self.places()
        if data.draw(st.integers(0, 3)) and any("." in p for p, _, _ in places):  # mostly nested changes
            places = [(p, n, parent) for p, n, parent in places if "." in p]
        records = [(p, n) for p, n, _ in places if n.children] or [("", self.root)]
        op = data.draw(st.sampled_from(["add", "rename", "drop"]))
        droppable = [(p, n, parent) for p, n, parent in places if len(parent.children) > 1]
        if op == "drop" and droppable:
            path, node, parent = data.draw(st.sampled_from(droppable))
            update.drop(path)
            parent.children.remove(node)
            return f"drop {path}"
        if op == "rename" and places:
            path, node, _ = data.draw(st.sampled_from(places))
            node.name = f"r{self.fresh}"
            update.rename(path, node.name)
            return f"rename {path} to {node.name}"
        path, parent = data.draw(st.sampled_from(records))
        kind = data.draw(st.sampled_from(list(LEAVES)))
        node = Node(f"n{self.fresh}", kind, True)
        update.add(f"{path}.{node.name}" if path else node.name, kind)
        parent.children.append(node)
        return f"add {path + '.' if path else ''}{node.name} {kind}"


def _by_id(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: r["id"])


@settings(max_examples=max(10, settings.default.max_examples // 5), deadline=None)
@given(fields=_fields(), fmt=st.sampled_from(["parquet", "avro"]),
       keyed=st.booleans(), data=st.data())
def test_random_nested_changes_keep_compaction_export_and_import_exact(fields, fmt, keyed, data):
    model = Model(fields)
    with tempfile.TemporaryDirectory() as tmp:
        repo = DatasetRepository(f"file://{tmp}/lake")
        ds = repo.create("x", DatasetDescriptor(schema=model.schema(), format=fmt,
                                                record_key=["id"] if keyed else []))

        def write(count: int) -> None:
            rows = model.write(data, count)
            if keyed:
                repo.load("x").upsert(rows)
            else:
                with repo.load("x").writer() as w:
                    for r in rows:
                        w.write(r)

        write(data.draw(st.integers(2, 5)))
        changes = []
        for _ in range(data.draw(st.integers(1, 4))):
            update = repo.load("x").alter()
            changes.append(model.alter(data, update))
            update.commit()
            if data.draw(st.booleans()):
                write(data.draw(st.integers(1, 3)))
        note(f"changes: {changes}")
        want = model.expected()

        ds = repo.load("x")
        assert _by_id(ds.to_table().to_pylist()) == want
        ds.compact()
        ds = repo.load("x")
        assert _by_id(ds.to_table().to_pylist()) == want
        assert ds.check(read_data=True).ok

        out = f"{tmp}/out.parquet"
        run("export", f"file://{tmp}/lake/x", out)
        repo.create("y", DatasetDescriptor(schema=model.schema()))
        run("import", f"file://{tmp}/lake/y", out)
        assert _by_id(repo.load("y").to_table().to_pylist()) == want


def test_a_batch_with_nulls_its_null_records_hide_is_written(tmp_path):
    """A required child's nulls under null records (as Arrow allows) are no nulls to the
    Parquet writer: written, read back and compacted as the rows they are."""
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("x", DatasetDescriptor(schema=SCHEMA))
    addr = ds.descriptor.arrow_schema.field("addr").type
    geo = addr.field("geo").type
    city = pa.array(["a", None, None])
    geos = pa.StructArray.from_arrays([pa.array([1.0, None, None])], fields=list(geo), mask=pa.array([False, False, True]))
    batch = pa.table({"id": pa.array([1, 2, 3], pa.int64()),
                      "addr": pa.StructArray.from_arrays([city, geos], fields=list(addr),
                                                         mask=pa.array([False, True, True]))})
    for _ in range(2):
        with repo.load("x").writer() as w:
            w.write_batch(batch)
    want = [{"id": 1, "addr": {"city": "a", "geo": {"lat": 1.0}}}, {"id": 2, "addr": None}, {"id": 3, "addr": None}]
    assert repo.load("x").to_table().to_pylist() == want * 2
    repo.load("x").compact()
    assert sorted(repo.load("x").to_table().to_pylist(), key=lambda r: r["id"]) == sorted(want * 2, key=lambda r: r["id"])
