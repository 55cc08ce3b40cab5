import datetime as dt
import decimal
import json

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.types import StructType

from cdkds.formats import schema as schemas
from cdkds.formats.errors import InvalidSchemaError, SchemaMismatchError
from cdkds.formats.records import record_validator

ALL_TYPES = {"type": "record", "name": "All", "fields": [
    {"name": "b", "type": "boolean"},
    {"name": "i", "type": "int"},
    {"name": "l", "type": "long"},
    {"name": "f", "type": "float"},
    {"name": "d", "type": "double"},
    {"name": "s", "type": "string"},
    {"name": "y", "type": "bytes"},
    {"name": "date", "type": {"type": "int", "logicalType": "date"}},
    {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "opt", "type": ["null", "string"], "default": None},
    {"name": "arr", "type": {"type": "array", "items": "long"}},
    {"name": "m", "type": {"type": "map", "values": ["null", "double"]}},
    {"name": "rec", "type": {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": "int"}]}},
]}


def test_arrow_types_of_every_kind():
    arrow = schemas.to_arrow(ALL_TYPES)
    assert arrow.field("i").type == pa.int32()
    assert arrow.field("tsm").type == pa.timestamp("ms", tz="UTC")
    assert arrow.field("tsu").type == pa.timestamp("us", tz="UTC")
    assert arrow.field("lts").type == pa.timestamp("us")
    assert arrow.field("dec").type == pa.decimal128(10, 2)
    assert arrow.field("date").type == pa.date32()
    assert arrow.field("opt").nullable and not arrow.field("s").nullable
    assert arrow.field("u").metadata == {b"cdkds.logicalType": b"uuid"}


def test_avro_arrow_avro_round_trip_keeps_every_kind():
    back = schemas.from_arrow(schemas.to_arrow(ALL_TYPES), "All")
    assert [schemas.type_kind(f["type"]) for f in back["fields"]] == \
        [schemas.type_kind(f["type"]) for f in ALL_TYPES["fields"]]
    assert schemas.to_arrow(back) == schemas.to_arrow(ALL_TYPES)


def test_spark_json_is_read_by_pyspark_and_round_trips():
    without_uuid = {**ALL_TYPES, "fields": [f for f in ALL_TYPES["fields"] if f["name"] != "u"]}
    spark = schemas.to_spark_json(without_uuid)
    struct = StructType.fromJson(spark)
    assert struct["tsu"].dataType.simpleString() == "timestamp"
    assert struct["lts"].dataType.simpleString() == "timestamp_ntz"
    assert struct["dec"].dataType.simpleString() == "decimal(10,2)"
    assert struct["i"].dataType.simpleString() == "int"
    back = schemas.from_spark_json(struct.jsonValue(), "All")
    assert schemas.to_spark_json(back) == spark


def test_schema_from_text_and_file(tmp_path):
    path = tmp_path / "user.avsc"
    path.write_text(json.dumps(ALL_TYPES))
    assert schemas.load_schema(str(path)) == ALL_TYPES
    assert schemas.load_schema(json.dumps(ALL_TYPES)) == ALL_TYPES


@pytest.mark.parametrize("bad, message", [
    ({"type": "string"}, "must be an Avro record"),
    ("{not json", "not valid JSON"),
    ("/no/such/file.avsc", "neither Avro JSON nor an existing"),
    ({"type": "record", "name": "R", "fields": [{"name": "x", "type": "nosuchtype"}]}, "invalid Avro schema"),
    ({"type": "record", "name": "R", "fields": [{"name": "x", "type": ["int", "string"]}]}, "only unions of null"),
    (42, "must be an Avro dict"),
])
def test_bad_schemas_are_rejected_clearly(bad, message):
    with pytest.raises(InvalidSchemaError, match=message):
        schemas.load_schema(bad)


def test_record_validator_names_field_and_value():
    validate = record_validator(ALL_TYPES)
    good = {"b": True, "i": 1, "l": 2, "f": 1.5, "d": 2, "s": "x", "y": b"\x00",
            "date": dt.date(2026, 1, 1), "tsm": dt.datetime(2026, 1, 1), "tsu": dt.datetime(2026, 1, 1),
            "lts": dt.datetime(2026, 1, 1), "dec": decimal.Decimal("12.34"),
            "u": "12345678-1234-5678-1234-567812345678", "arr": [1, 2], "m": {"a": None}, "rec": {"x": 1}}
    out = validate(good)
    assert out["opt"] is None and out["d"] == 2.0
    cases = [
        ({"i": "1"}, "field 'i': value '1'"),
        ({"i": 2**40}, "within the range of an Avro int"),
        ({"b": 1}, "is not a boolean"),
        ({"s": None}, "field 's' is required"),
        ({"date": dt.datetime(2026, 1, 1)}, "is not a datetime.date"),
        ({"dec": decimal.Decimal("1.234")}, "decimal\\(10,2\\)"),
        ({"u": "not-a-uuid"}, "is not a UUID"),
        ({"arr": [1, "x"]}, "field 'arr\\[1\\]'"),
        ({"rec": {"x": "y"}}, "in field 'rec'"),
        ({"nope": 1}, "unknown field 'nope'"),
    ]
    for change, message in cases:
        with pytest.raises(SchemaMismatchError, match=message):
            validate({**good, **change})
    missing = dict(good)
    del missing["s"]
    with pytest.raises(SchemaMismatchError, match="'s' is required and missing"):
        validate(missing)


# ---------------------------------------------------------------- properties

_PRIMITIVE = st.sampled_from([
    "boolean", "int", "long", "float", "double", "string", "bytes",
    {"type": "int", "logicalType": "date"},
    {"type": "long", "logicalType": "timestamp-millis"},
    {"type": "long", "logicalType": "timestamp-micros"},
    {"type": "long", "logicalType": "local-timestamp-micros"},
    {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3},
])


def _types(depth: int = 2):
    base = st.one_of(_PRIMITIVE, _PRIMITIVE.map(lambda t: ["null", t]))
    if depth == 0:
        return base
    inner = _types(depth - 1)
    return st.one_of(
        base,
        inner.map(lambda t: {"type": "array", "items": t}),
        inner.map(lambda t: {"type": "map", "values": t}),
    )


@st.composite
def avro_records(draw):
    names = draw(st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), min_size=1, max_size=6, unique=True))
    return {"type": "record", "name": "R", "fields": [{"name": n, "type": draw(_types())} for n in names]}


@given(avro_records())
def test_property_avro_arrow_round_trip(schema):
    arrow = schemas.to_arrow(schemas.load_schema(schema))
    again = schemas.to_arrow(schemas.from_arrow(arrow, "R"))
    assert again == arrow


@given(avro_records())
def test_property_avro_spark_round_trip(schema):
    spark = schemas.to_spark_json(schema)
    assert StructType.fromJson(spark).jsonValue() == spark
    assert schemas.to_spark_json(schemas.from_spark_json(spark)) == spark
