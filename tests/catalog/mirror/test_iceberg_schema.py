"""The Iceberg forms of a descriptor, checked against pyiceberg's own: the schema parses as
pyiceberg's, and column bounds are serialised as pyiceberg serialises those values."""

from __future__ import annotations

import decimal

import pytest
from hypothesis import given, settings, strategies as st

from cdkds.catalog import DatasetDescriptor
from cdkds.catalog.mirror.iceberg_schema import bound, iceberg_schema, promotion_refusal
from tests.datasets import values_of

conversions = pytest.importorskip("pyiceberg.conversions")
from pyiceberg.schema import Schema  # noqa: E402

KINDS = {
    "flag": "boolean", "i": "int", "l": "long", "f": "float", "d": "double", "s": "string", "b": "bytes",
    "fx": {"type": "fixed", "name": "Three", "size": 3},
    "dec": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 3},
    "day": {"type": "int", "logicalType": "date"},
    "tm": {"type": "long", "logicalType": "time-micros"},
    "ms": {"type": "long", "logicalType": "timestamp-millis"},
    "us": {"type": "long", "logicalType": "timestamp-micros"},
    "local": {"type": "long", "logicalType": "local-timestamp-micros"},
    "u": {"type": "string", "logicalType": "uuid"},
    "e": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]},
}
DESCRIPTOR = DatasetDescriptor({"type": "record", "name": "R", "fields": [
    {"name": n, "type": t} for n, t in KINDS.items()]})
SCHEMA = Schema.model_validate(iceberg_schema(DESCRIPTOR, 0))


def test_the_schema_is_pyicebergs_with_cdkds_field_ids():
    assert [(f.field_id, f.name) for f in SCHEMA.fields] == [(i, n) for n, i in DESCRIPTOR.field_ids.items()]
    assert [str(f.field_type) for f in SCHEMA.fields] == [
        "boolean", "int", "long", "float", "double", "string", "binary", "fixed[3]", "decimal(9, 3)", "date", "time",
        "timestamptz", "timestamptz", "timestamp", "string", "string"]


@settings(max_examples=50)
@given(data=st.data())
def test_bounds_are_serialised_as_pyiceberg_serialises_them(data):
    arrow = DESCRIPTOR.arrow_schema
    for f in SCHEMA.fields:
        value = data.draw(values_of(arrow.field(f.name).type), label=f.name)
        if f.name == "dec":
            value = value.quantize(decimal.Decimal("0.001"))
        if isinstance(value, float) and value != value:
            continue  # NaN: cdkds keeps no bound
        assert bound(value, DESCRIPTOR.fields[f.name].avro) == conversions.to_bytes(f.field_type, value), f.name


def test_only_icebergs_promotions_pass():
    def schema(t: object) -> dict:
        return {"fields": [{"id": 1, "name": "x", "required": True, "type": t}]}
    for was, now in [("int", "long"), ("float", "double"), ("decimal(5, 2)", "decimal(9, 2)")]:
        assert promotion_refusal(schema(was), schema(now)) is None
    for was, now in [("int", "double"), ("long", "double"), ("string", "binary"), ("decimal(5, 2)", "decimal(9, 3)")]:
        assert "not an Iceberg type promotion" in promotion_refusal(schema(was), schema(now))
