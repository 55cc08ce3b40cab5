import dataclasses
import json

import pyarrow as pa
import pytest

from cdkds.formats.schema import assign_ids

from cdkds.catalog import DatasetDescriptor, PartitionStrategy
from cdkds.catalog.errors import IncompatibleDescriptorError, InvalidDescriptorError, InvalidPartitionStrategyError
from cdkds.catalog.work_columns import INDEX_COLUMNS
from tests.conftest import EVENT_SCHEMA, USER_SCHEMA


def test_descriptor_is_an_immutable_value_that_round_trips_json():
    d = DatasetDescriptor(EVENT_SCHEMA, "hash(userId, 16), day(ts)", format="avro", compression="deflate",
                          record_key="id", ordering_field="ts", properties={"owner": "data-eng"})
    again = DatasetDescriptor.from_json(d.to_json())
    assert again == d and hash(again) == hash(d)
    assert DatasetDescriptor.from_json(json.dumps(d.to_json())) == d
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.format = "parquet"
    with pytest.raises(TypeError):
        d.properties["x"] = "y"
    schema = d.schema
    schema["fields"].clear()
    assert d.schema == assign_ids(EVENT_SCHEMA)  # the caller's copy cannot change the descriptor
    assert [f["field-id"] for f in d.schema["fields"]] == [1, 2, 3, 4, 5]
    assert d.record_key == ("id",) and d.partition_strategy == PartitionStrategy.parse("hash(userId, 16), day(ts)")


def test_builder_and_replace():
    d = (DatasetDescriptor.builder().schema(USER_SCHEMA).partition_strategy("hash(userId, 53)")
         .format("parquet").compression("zstd").property("a", "b").build())
    assert d.compression == "zstd" and d.properties == {"a": "b"}
    assert d.replace(compression="gzip").compression == "gzip"
    assert DatasetDescriptor(USER_SCHEMA).compression == "snappy" and DatasetDescriptor(USER_SCHEMA).format == "parquet"


def test_from_arrow_and_spark_schemas():
    d = DatasetDescriptor.from_arrow(pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("s", pa.string())]))
    assert d.fields["id"].kind == "long" and d.fields["s"].nullable
    assert d.spark_schema_json()["fields"][0] == {"name": "id", "type": "long", "nullable": False, "metadata": {}}
    assert DatasetDescriptor.from_spark_json(d.spark_schema_json()).arrow_schema == d.arrow_schema


@pytest.mark.parametrize("kwargs, error, message", [
    ({"format": "orc"}, InvalidDescriptorError, "unknown file format 'orc'"),
    ({"format": "avro", "compression": "gzip"}, InvalidDescriptorError, "compression 'gzip' is not available for avro"),
    ({"partition_strategy": "hash(nope, 3)"}, InvalidPartitionStrategyError, "'nope' .* is not a field"),
    ({"partition_strategy": "year(username)"}, InvalidPartitionStrategyError, "field 'username' is string"),
    ({"partition_strategy": 42}, InvalidPartitionStrategyError, "must be a PartitionStrategy"),
    ({"record_key": "nope"}, InvalidDescriptorError, "record key field 'nope'"),
    ({"ordering_field": "nope"}, InvalidDescriptorError, "ordering field 'nope'"),
    ({"properties": {"a": 1}}, InvalidDescriptorError, "properties must map strings to strings"),
])
def test_bad_descriptors_are_rejected(kwargs, error, message):
    with pytest.raises(error, match=message):
        DatasetDescriptor(USER_SCHEMA, **kwargs)


@pytest.mark.parametrize("name", INDEX_COLUMNS)
def test_a_record_key_cannot_take_the_name_of_an_index_column(name):
    schema = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": name, "type": "long"}]}
    with pytest.raises(InvalidDescriptorError, match=f"record key field '{name}': the record index stores"):
        DatasetDescriptor(schema, record_key=["id", name])
    assert DatasetDescriptor(schema, record_key="id", ordering_field=name).record_key == ("id",)  # beside the key: fine
    recorded = DatasetDescriptor(schema, record_key=["id", name], _recorded=True)  # logs written before the rule load
    assert DatasetDescriptor.as_recorded(recorded.to_json()).record_key == ("id", name)


def test_the_reserved_names_are_the_index_entries_own_columns():
    from cdkds.catalog.keyed.index import entry_schema
    keyed = DatasetDescriptor(USER_SCHEMA, record_key="userId")
    assert entry_schema(keyed).names == ["_hash", "userId", *INDEX_COLUMNS[1:]] and INDEX_COLUMNS[0] == "_hash"


def test_update_rules():
    d = DatasetDescriptor(USER_SCHEMA, "hash(userId, 53)")
    added = {**USER_SCHEMA, "fields": USER_SCHEMA["fields"] + [{"name": "email", "type": ["null", "string"], "default": None}]}
    d.check_update(d.replace(schema=added, properties={"x": "y"}, compression="zstd"))
    with pytest.raises(IncompatibleDescriptorError, match="format cannot change"):
        d.check_update(d.replace(format="avro"))
    evolved = d.evolve(d.replace(partition_strategy="hash(userId, 16)"))  # a new partition spec; files keep theirs
    assert (evolved.partition_spec_id, evolved.strategy_of(0)) == (1, d.partition_strategy)
    assert evolved.partition_strategy.to_text() == "hash(userId, 16)"
    required = {**USER_SCHEMA, "fields": USER_SCHEMA["fields"] + [{"name": "email", "type": "string"}]}
    with pytest.raises(IncompatibleDescriptorError, match=r"'email' \(string\) is required and has no default"):
        d.check_update(d.replace(schema=required))
