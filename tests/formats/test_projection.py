import pyarrow as pa
import pytest

from cdkds.formats.errors import DataFileError
from cdkds.formats.projection import NameMapping, Projection
from cdkds.formats.schema import assign_ids, to_arrow

SCHEMA = assign_ids({"type": "record", "name": "R", "fields": [
    {"name": "a", "type": "int"},
    {"name": "m", "type": {"type": "map", "values": {"type": "record", "name": "V", "fields": [
        {"name": "q", "type": "int"}]}}},
    {"name": "l", "type": ["null", {"type": "array", "items": "int"}], "default": None}]})


def batch(schema, rows):
    return pa.RecordBatch.from_pylist(rows, schema=to_arrow(schema))


ROWS = [{"a": 1, "m": [("k", {"q": 1})], "l": [1]}, {"a": 2, "m": [("x", {"q": 2}), ("y", {"q": 3})], "l": None},
        {"a": 3, "m": [], "l": [4, 5]}]


def test_sliced_nested_columns_are_converted_row_for_row():
    reader = {**SCHEMA, "fields": [
        {**SCHEMA["fields"][0], "name": "a2", "type": "long"},
        {**SCHEMA["fields"][1], "type": {"type": "map", "values": {"type": "record", "name": "V", "fields": [
            {**SCHEMA["fields"][1]["type"]["values"]["fields"][0], "type": "long"},
            {"name": "new", "type": "string", "default": "d", "field-id": 9}]}}},
        {**SCHEMA["fields"][2], "type": ["null", {"type": "array", "items": "double"}]}]}
    resolved = Projection(reader, ["l", "m", "a2"]).resolve(to_arrow(SCHEMA, ids=True), "f")
    out = resolved.apply(batch(SCHEMA, ROWS).slice(1, 2))
    assert out.schema.names == ["l", "m", "a2"]
    assert out.to_pylist() == [{"l": None, "m": [("x", {"q": 2, "new": "d"}), ("y", {"q": 3, "new": "d"})], "a2": 2},
                               {"l": [4.0, 5.0], "m": [], "a2": 3}]


def test_files_without_ids_are_read_by_the_mapped_names():
    plain = to_arrow(SCHEMA)  # no ids: a file written before them
    renamed = {**SCHEMA, "fields": [{**SCHEMA["fields"][0], "name": "b"}, *SCHEMA["fields"][1:]],
               "cdkds.name-mapping": NameMapping.of_schema(SCHEMA).to_json()}
    resolved = Projection(renamed, ["b"]).resolve(plain, "f")
    assert resolved.read_columns == ["a"]
    assert resolved.apply(batch(SCHEMA, ROWS)).column("b").to_pylist() == [1, 2, 3]
    unmapped = Projection(renamed, ["b"]).resolve(pa.schema([pa.field("zz", pa.int32())]), "f")
    assert unmapped.read_columns == ["zz"]  # only to count rows: the field reads null
    assert unmapped.apply(pa.record_batch([pa.array([7], pa.int32())], names=["zz"])).column("b").to_pylist() == [None]


def test_a_column_of_another_kind_is_a_clear_error():
    other = {**SCHEMA, "fields": [{**SCHEMA["fields"][1], "type": "string"}]}
    with pytest.raises(DataFileError, match="column 'm'"):
        Projection(SCHEMA, ["m"]).resolve(to_arrow(other, ids=True), "f")


NESTED = assign_ids({"type": "record", "name": "N", "fields": [
    {"name": "id", "type": "long"},
    {"name": "addr", "type": ["null", {"type": "record", "name": "A", "fields": [
        {"name": "city", "type": "string"}]}], "default": None}]})


def test_a_record_read_through_a_mapping_is_one_a_parquet_writer_accepts():
    """Under a null record a required child is not null in the Arrow column (writers check
    each column's own nulls), whether the child is renamed, or the record missing."""
    import io

    import pyarrow.parquet as pq

    addr = NESTED["fields"][1]
    inner = addr["type"][1]
    reader = {**NESTED, "fields": [NESTED["fields"][0],
                                   {**addr, "type": ["null", {**inner, "fields": [{**inner["fields"][0], "name": "town"}]}]},
                                   {**addr, "name": "other", "field-id": 9}]}
    rows = [{"id": 1, "addr": {"city": "a"}}, {"id": 2, "addr": None}, {"id": 3, "addr": None}]
    out = Projection(reader, ["id", "addr", "other"]).resolve(to_arrow(NESTED, ids=True), "f") \
        .apply(batch(NESTED, rows).slice(1))
    pq.write_table(pa.Table.from_batches([out]), io.BytesIO())
    assert out.to_pylist() == [{"id": 2, "addr": None, "other": None}, {"id": 3, "addr": None, "other": None}]
