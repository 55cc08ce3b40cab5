"""Datasets written before field ids (tests/fixtures/legacy, made by tests/fixtures/make_legacy.py
with the code of commit 51f88b4): read as they were, then changed by id without rewriting a file."""

import json
import shutil
from pathlib import Path

import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import IncompatibleDescriptorError

FIXTURE = Path(__file__).parent.parent / "fixtures" / "legacy"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())


@pytest.fixture
def lake(tmp_path):
    shutil.copytree(FIXTURE / "lake", tmp_path / "lake")
    return f"file://{tmp_path}/lake"


def rows(ds, **kwargs):
    return sorted(ds.to_table(**kwargs).to_pylist(), key=lambda r: r["id"])


def files(ds):
    return sorted((key, size) for key, size in ds.store.walk_files("data"))


@pytest.mark.parametrize("name", ["pq", "av"])
def test_every_revision_reads_as_the_old_code_read_it(lake, name):
    repo = DatasetRepository(lake)
    for version, expected in EXPECTED[name].items():
        assert rows(repo.load(name, version=int(version))) == expected
    d = repo.load(name).descriptor
    assert [f["field-id"] for f in d.schema["fields"]] == [1, 2, 3, 4, 5, 6]  # given on load: top level first
    assert "cdkds.name-mapping" not in d.schema  # nothing is written until the first change


@pytest.mark.parametrize("name", ["pq", "av"])
def test_the_first_change_records_a_name_mapping_and_rewrites_no_file(lake, name):
    repo = DatasetRepository(lake)
    ds = repo.load(name)
    before, latest = files(ds), EXPECTED[name][str(ds.version)]
    with pytest.raises(IncompatibleDescriptorError, match="live delete 'amount = 3'"):
        ds.alter().drop("amount").commit()
    ds.alter().rename("region", "area").rename("addr.city", "town").rename("amount", "total") \
        .widen("total", "long").drop("note").commit()
    assert files(ds) == before
    commit = json.loads(ds.store.read(f"_log/{ds.version:020d}.json"))
    (schema,) = [a["metadata"]["descriptor"]["schema"] for a in commit["actions"] if "metadata" in a]
    assert schema["cdkds.name-mapping"][0] == {"field-id": 1, "names": ["id"]}
    assert {"field-id": 7, "names": ["city"]} in schema["cdkds.name-mapping"][3]["fields"]

    def renamed(r):
        return {"id": r["id"], "area": r["region"], "total": r["amount"],
                "addr": {"town": r["addr"]["city"], "zip": r["addr"]["zip"]}, "items": r["items"]}

    expected = [renamed(r) for r in latest]
    for d in (ds, DatasetRepository(lake).load(name)):
        assert rows(d) == expected
        assert [r["id"] for r in rows(d, where="total = 3")] == [23]  # the tombstone follows the rename; 23 came after it
        assert [r["id"] for r in rows(d, where="area = 'eu' and total >= 4")] == \
            [r["id"] for r in expected if r["area"] == "eu" and r["total"] >= 4]
    ds.alter().add("note", "string").commit()  # a new field: the dropped notes stay hidden
    assert {r["note"] for r in rows(ds)} == {None}
    with ds.writer() as w:
        w.write({"id": 99, "area": "eu", "total": 2**40, "addr": {"town": "t"}, "items": [], "note": "new"})
    assert rows(ds, where="note is not null") == [
        {"id": 99, "area": "eu", "total": 2**40, "addr": {"town": "t", "zip": None}, "items": [], "note": "new"}]
    ds.compact()
    ds.checkpoint()
    fresh = DatasetRepository(lake).load(name)
    assert len(rows(fresh)) == len(latest) + 1 and [r["id"] for r in rows(fresh, where="total = 3")] == [23]
    for version, old in EXPECTED[name].items():  # time travel still reads each revision with its own schema
        assert rows(fresh.repository.load(name, version=int(version))) == old


def test_update_by_name_on_a_legacy_dataset(lake):
    repo = DatasetRepository(lake)
    ds = repo.load("pq")
    schema = json.loads(json.dumps(ds.descriptor.schema))
    for f in schema["fields"]:  # a schema written by hand: no ids, matched by name
        f.pop("field-id")
    schema.pop("cdkds.last-field-id")
    schema["fields"].append({"name": "extra", "type": ["null", "long"], "default": None})
    repo.update("pq", DatasetDescriptor(schema, partition_strategy="identity(region)"))
    d = repo.load("pq")
    assert d.descriptor.field_ids["extra"] == 11 and d.descriptor.field_ids["amount"] == 3
    assert rows(d) == [{**r, "extra": None} for r in EXPECTED["pq"][str(d.version - 1)]]


@pytest.mark.parametrize("name", ["pq", "av"])
def test_files_written_by_this_code_before_the_first_change_carry_the_same_ids(lake, name):
    repo = DatasetRepository(lake)
    ds = repo.load(name)
    with ds.writer() as w:  # ids given on load, written into the file
        w.write({"id": 50, "region": "us", "amount": 1, "addr": {"city": "x"}, "items": [], "note": "mid"})
    appended = ds.version
    ds.alter().rename("note", "comment").rename("addr.city", "town").commit()
    for d in (ds, DatasetRepository(lake).load(name)):
        assert [(r["id"], r["addr"]["town"], r["comment"]) for r in rows(d, where="id >= 23")] == \
            [(23, "c23", "n23"), (50, "x", "mid")]
    assert [r["note"] for r in rows(repo.load(name, version=appended), where="id >= 23")] == ["n23", "mid"]


@pytest.mark.parametrize("name", ["pq", "av"])
def test_a_checkpoint_before_the_first_change_keeps_old_files_readable_by_name(lake, name):
    """A checkpoint writes the descriptor back; it must load as one whose ids were given on load
    (not as one that came with ids), or the first rename loses the renamed column's values."""
    repo = DatasetRepository(lake)
    ds = repo.load(name)
    expected = EXPECTED[name][str(ds.version)]
    ds.checkpoint()
    ds = repo.load(name)
    assert "cdkds.name-mapping" not in ds.descriptor.schema and rows(ds) == expected
    ds.alter().rename("amount", "total").commit()
    assert rows(repo.load(name)) == [{("total" if k == "amount" else k): v for k, v in r.items()} for r in expected]
