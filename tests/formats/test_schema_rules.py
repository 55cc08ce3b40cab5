"""The rules every dataset schema obeys (issue 26.10): random valid schemas are accepted and
their defaults write and read back in both formats; the same schemas with one fault added
anywhere are refused, naming the field at fault."""

from __future__ import annotations

import copy
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import InvalidDescriptorError, InvalidSchemaError
from cdkds.formats.schema_rules import check_schema

NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,7}", fullmatch=True)
DEFAULTS = {  # kind -> valid defaults (values that read back as themselves)
    "boolean": st.booleans(),
    "int": st.integers(-(2**31), 2**31 - 1),
    "long": st.integers(-(2**63), 2**63 - 1),
    "double": st.floats(allow_nan=False, allow_infinity=False),
    "string": st.text(max_size=5),
}
_TYPE_NAMES = itertools.count()


@st.composite
def fields(draw, depth: int = 0) -> list[dict]:
    """Record fields, each with a default (so that ``write({})`` is a valid record)."""
    names = draw(st.lists(NAMES, min_size=1, max_size=4, unique_by=str.lower))
    out = []
    for name in names:
        shape = draw(st.sampled_from(["primitive", "nullable", "enum", "array", "map"] + ["record"] * (depth < 2)))
        if shape == "primitive":
            kind = draw(st.sampled_from(sorted(DEFAULTS)))
            out.append({"name": name, "type": kind, "default": draw(DEFAULTS[kind])})
        elif shape == "nullable":
            out.append({"name": name, "type": ["null", draw(st.sampled_from(sorted(DEFAULTS)))], "default": None})
        elif shape == "enum":
            symbols = draw(st.lists(NAMES, min_size=1, max_size=3, unique=True))
            out.append({"name": name, "type": {"type": "enum", "name": f"E{next(_TYPE_NAMES)}", "symbols": symbols},
                        "default": draw(st.sampled_from(symbols))})
        elif shape == "array":
            out.append({"name": name, "type": {"type": "array", "items": draw(st.sampled_from(sorted(DEFAULTS)))},
                        "default": []})
        elif shape == "map":
            out.append({"name": name, "type": {"type": "map", "values": "long"}, "default": {}})
        else:
            record = {"type": "record", "name": f"R{next(_TYPE_NAMES)}", "fields": draw(fields(depth + 1))}
            out.append({"name": name, "type": ["null", record], "default": None})
    return out


@st.composite
def schemas(draw) -> dict:
    return {"type": "record", "name": "Top", "fields": draw(fields())}


def _records(schema: dict) -> list[tuple[str, dict]]:
    """``(path, record)`` of the top record and every nested one."""
    out = [("", schema)]
    for f in schema["fields"]:
        inner = f["type"][1] if isinstance(f["type"], list) else f["type"]
        if isinstance(inner, dict) and inner["type"] == "record":
            out += [(f"{f['name']}." + p if p else f["name"], r) for p, r in _records(inner)]
    return out


FAULTS = {  # a field added to a record, or a change to it: (what it adds, the message)
    "a-b": ({"name": "a-b", "type": "long"}, "not a field name"),
    "empty name": ({"name": "", "type": "long"}, "not a field name"),
    "a.b": ({"name": "a.b", "type": "long"}, "not a field name"),
    "starts with a digit": ({"name": "1x", "type": "long"}, "not a field name"),
    "null": ({"name": "zz_fault", "type": "null"}, "a null type holds nothing"),
    "int default 2**40": ({"name": "zz_fault", "type": "int", "default": 2**40}, "outside -2147483648..2147483647"),
    "float default 1e39": ({"name": "zz_fault", "type": "float", "default": 1e39}, "beyond a float's range"),
    "required default null": ({"name": "zz_fault", "type": "long", "default": None}, "the field is required"),
    "string default 1": ({"name": "zz_fault", "type": "string", "default": 1}, "expected text"),
    "time outside a day": ({"name": "zz_fault", "type": {"type": "long", "logicalType": "time-micros"},
                            "default": 86_400_000_000}, "outside 0..86399999999"),
    "decimal precision 0": ({"name": "zz_fault", "type": {"type": "bytes", "logicalType": "decimal", "precision": 0}},
                            "precision is 1 to 76"),
    "decimal scale over precision": ({"name": "zz_fault", "type": {"type": "bytes", "logicalType": "decimal",
                                                                   "precision": 2, "scale": 3}}, "scale is 0 to"),
    "decimal too wide for its fixed": ({"name": "zz_fault", "type": {"type": "fixed", "name": "Fx", "size": 2,
                                                                     "logicalType": "decimal", "precision": 5}},
                                       "holds decimals of at most 4 digits"),
    "enum without symbols": ({"name": "zz_fault", "type": {"type": "enum", "name": "Ex", "symbols": []}},
                             "has no symbols"),
    "enum default not a symbol": ({"name": "zz_fault", "type": {"type": "enum", "name": "Ex", "symbols": ["A"]},
                                   "default": "B"}, "not one of the symbols"),
    "enum's own default not a symbol": ({"name": "zz_fault", "type": {"type": "enum", "name": "Ex", "symbols": ["A"],
                                                                      "default": "B"}}, "enum default 'B'"),
    "fixed of size 0": ({"name": "zz_fault", "type": {"type": "fixed", "name": "Fx", "size": 0}}, "size of 1 to"),
    "date on a long": ({"name": "zz_fault", "type": {"type": "long", "logicalType": "date"}},
                       "logical type date is on long"),
    "uuid on bytes": ({"name": "zz_fault", "type": {"type": "bytes", "logicalType": "uuid"}},
                      "logical type uuid is on bytes"),
    "recursive record": ({"name": "zz_fault", "type": ["null", "Top"], "default": None}, "refers to type 'Top'"),
    "record without fields": ({"name": "zz_fault", "type": {"type": "record", "name": "Rx", "fields": []}},
                              "has no fields"),
    "array of null": ({"name": "zz_fault", "type": {"type": "array", "items": "null"}}, "a null type"),
    "duplicate": (None, "the record has two fields of this name"),
}


@settings(max_examples=max(10, settings.default.max_examples // 4))
@given(schemas(), st.sampled_from(["parquet", "avro"]))
def test_valid_schemas_are_accepted_and_their_defaults_write_and_read_back(schema, fmt):
    check_schema(schema)
    repo = DatasetRepository(f"memory://rules-{next(_TYPE_NAMES)}")
    ds = repo.create("d", DatasetDescriptor(schema, format=fmt))
    with ds.writer() as w:
        w.write({})
    (row,) = ds.to_table().to_pylist()
    for f in schema["fields"]:
        expected = f["default"]
        got = row[f["name"]]
        assert (dict(got) if isinstance(expected, dict) and isinstance(got, list) else got) == expected, f["name"]


@given(schemas(), st.sampled_from(sorted(FAULTS)), st.data())
def test_a_fault_anywhere_is_refused_naming_its_field(schema, fault, data):
    bad = copy.deepcopy(schema)
    path, record = data.draw(st.sampled_from(_records(bad)))
    added, message = FAULTS[fault]
    if added is None:
        added = copy.deepcopy(data.draw(st.sampled_from(record["fields"])))
    record["fields"].append(copy.deepcopy(added))
    field_path = (f"{path}.{added['name']}" if path else added["name"]) + ("[]" if fault == "array of null" else "")
    with pytest.raises(InvalidDescriptorError) as raised:
        DatasetDescriptor(bad)
    assert isinstance(raised.value, InvalidSchemaError)  # also what it was before it was a descriptor's
    assert f"field {field_path!r}" in str(raised.value) and message in str(raised.value), str(raised.value)
