"""Nested schema changes over optional records holding nulls: whatever a read produces,
every writer of ours accepts (compaction, Parquet export, pyarrow's own writer), and the
rows survive compaction, export and re-import unchanged."""

from __future__ import annotations

import io

import pyarrow.parquet as pq
import pytest

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
