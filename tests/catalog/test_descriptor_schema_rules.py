"""One rule for every way a schema arrives (issue 26.10): ``DatasetDescriptor``, ``create``,
``update``, ``alter`` and ``cdkds create`` refuse the same schemas with an
:class:`InvalidDescriptorError` naming the field, and commit nothing; a dataset recorded
before a rule existed stays readable and can be mended."""

from __future__ import annotations

import json

import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import InvalidDescriptorError, InvalidPartitionStrategyError
from tests.cli.running import run

BASE = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}


def with_field(field: dict) -> dict:
    return {**BASE, "fields": BASE["fields"] + [field]}


CASES = {  # the schemas of the issue: (schema, the field named, the words of the rule)
    "duplicate names": (with_field({"name": "id", "type": "string"}), "id", "two fields of this name"),
    "recursive record": (with_field({"name": "next", "type": ["null", "R"], "default": None}), "next",
                         "refers to type 'R' by name"),
    "null type": (with_field({"name": "n", "type": "null"}), "n", "a null type holds nothing"),
    "int default 2**40": (with_field({"name": "i", "type": "int", "default": 2**40}), "i",
                          "outside -2147483648..2147483647"),
    "decimal precision 0": (with_field({"name": "d", "type": {"type": "bytes", "logicalType": "decimal",
                                                              "precision": 0, "scale": 0}}), "d", "precision is 1"),
    "enum without symbols": (with_field({"name": "e", "type": {"type": "enum", "name": "E", "symbols": []}}), "e",
                             "has no symbols"),
    "fixed of size 0": (with_field({"name": "f", "type": {"type": "fixed", "name": "F", "size": 0}}), "f",
                        "a fixed needs a size of 1"),
    "enum default not a symbol": (with_field({"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]},
                                              "default": "B"}), "e", "not one of the symbols"),
    "date on a long": (with_field({"name": "d", "type": {"type": "long", "logicalType": "date"}}), "d",
                       "logical type date is on long"),
    "uuid on bytes": (with_field({"name": "u", "type": {"type": "bytes", "logicalType": "uuid"}}), "u",
                      "logical type uuid is on bytes"),
    "a-b": (with_field({"name": "a-b", "type": "long"}), "a-b", "not a field name"),
    "empty name": (with_field({"name": "", "type": "long"}), "", "not a field name"),
    "a.b": (with_field({"name": "a.b", "type": "long"}), "a.b", "not a field name"),
    "nested": ({**BASE, "fields": BASE["fields"] + [{"name": "r", "type": {"type": "record", "name": "In", "fields": [
        {"name": "x", "type": "int", "default": 2**40}]}}]}, "r.x", "outside"),
    "namespace a-b": (with_field({"name": "r", "type": {"type": "record", "name": "In", "namespace": "a-b",
                                                        "fields": [{"name": "x", "type": "int"}]}}), "r",
                      "namespace 'a-b' is not"),
}


@pytest.fixture
def repo(tmp_path):
    return DatasetRepository(f"file://{tmp_path}/lake")


@pytest.mark.parametrize("case", CASES)
def test_descriptor_create_and_update_refuse_the_schema_naming_the_field(repo, case):
    schema, field, words = CASES[case]
    message = f"field {field!r}: .*{words}"
    with pytest.raises(InvalidDescriptorError, match=message):
        DatasetDescriptor(schema)
    recorded = DatasetDescriptor.as_recorded({"schema": schema})  # as a log made before the rule holds it
    with pytest.raises(InvalidDescriptorError, match=message):
        repo.create("fresh", recorded)
    assert repo.list() == []
    ds = repo.create("d", DatasetDescriptor(BASE))
    with pytest.raises(InvalidDescriptorError, match=message):
        repo.update("d", recorded)
    assert repo.load("d").version == ds.version == 0


@pytest.mark.parametrize("buckets", [2**31, 10**12])
def test_hash_buckets_beyond_a_java_int_are_refused(repo, buckets):
    with pytest.raises(InvalidPartitionStrategyError, match=f"buckets must be at most {2**31 - 1}"):
        DatasetDescriptor(BASE, f"hash(id, {buckets})")
    assert DatasetDescriptor(BASE, f"hash(id, {2**31 - 1})").partition_strategy.functions[0].buckets == 2**31 - 1


@pytest.mark.parametrize("change, message", [
    (lambda a: a.add("e", {"type": "enum", "name": "E", "symbols": []}), "field 'e': enum 'E' has no symbols"),
    (lambda a: a.add("f", {"type": "fixed", "name": "F", "size": 0}), "field 'f': a fixed needs a size"),
    (lambda a: a.add("d", {"type": "long", "logicalType": "date"}), "field 'd': logical type date is on long"),
    (lambda a: a.add("d", "decimal(80, 2)"), "field 'd': a decimal's precision is 1 to 76"),
    (lambda a: a.add("r", {"type": "record", "name": "R", "fields": [{"name": "x", "type": "long"}]}),
     "field 'r': record name 'R' is already the name of another type"),
    (lambda a: a.add("a-b", "long"), "cannot add field 'a-b': a name is letters"),
    (lambda a: a.rename("id", "a.b"), "cannot rename field 'id' to 'a.b'"),
])
def test_alter_refuses_the_same_schemas(repo, change, message):
    ds = repo.create("d", DatasetDescriptor(BASE))
    with pytest.raises(InvalidDescriptorError, match=message):
        change(ds.alter()).commit()
    assert repo.load("d").version == 0


@pytest.mark.parametrize("case", ["int default 2**40", "a-b", "recursive record", "uuid on bytes"])
def test_the_command_refuses_the_same_schemas(tmp_path, case):
    schema, field, words = CASES[case]
    path = tmp_path / "bad.avsc"
    path.write_text(json.dumps(schema))
    done = run("create", f"file://{tmp_path}/lake/d", "--schema", str(path), code=1)
    assert done.stderr.startswith(f"error: dataset 'd': schema: field {field!r}: ") and words in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert DatasetRepository(f"file://{tmp_path}/lake").list() == []


def test_a_dataset_recorded_before_the_rules_stays_readable_and_can_be_mended(repo, monkeypatch):
    import cdkds.catalog.descriptor as descriptor_module

    schema = with_field({"name": "a-b", "type": ["null", "long"], "default": None})
    monkeypatch.setattr(descriptor_module, "check_schema", lambda schema: None)  # the code before the rule
    ds = repo.create("old", DatasetDescriptor(schema))
    with ds.writer() as w:
        w.write({"id": 1, "a-b": 2})
    monkeypatch.undo()
    old = repo.load("old")
    assert old.to_table().to_pylist() == [{"id": 1, "a-b": 2}]
    with pytest.raises(InvalidDescriptorError, match="field 'a-b': not a field name"):
        old.alter().add("x", "long").commit()  # a change must leave a schema that obeys the rules
    old.alter().rename("a-b", "a_b").commit()
    assert repo.load("old").to_table().to_pylist() == [{"id": 1, "a_b": 2}]
