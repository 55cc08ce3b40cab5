"""Files to import and export (cdkds.formats.inputs, outputs, text): schema inference (Kite's CSV rules and their
JSON lines counterpart), reading into a given schema with errors naming file, line, field and
value, every format, gzip, and export files that import back."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import gzip
import json
import math
import uuid

import fastavro
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdkds.formats import inputs
from cdkds.formats.inputs import InputError, infer_schema, input_format, open_input, read_batches
from cdkds.formats.outputs import OutputError, OutputFile, output_format
from cdkds.formats.text import type_name

UTC = dt.timezone.utc


def write(path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def rows(path: str, schema: pa.Schema, **kwargs) -> list[dict]:
    return [r for b in read_batches(path, schema, **kwargs) for r in b.to_pylist()]


def types(schema: pa.Schema) -> dict[str, str]:
    return {f.name: type_name(f.type) for f in schema}


# ---------------------------------------------------------------- inference

def test_csv_inference_follows_kites_order(tmp_path):
    path = write(tmp_path / "a.csv", "\n".join([
        "l,d,mixed,b,bits,day,ts,local,s,empty,spaced",
        "1,1.5,1,true,1,2026-03-01,2026-03-01T10:00:00Z,2026-03-01 10:00,x,, 7 ",
        "-2,2,1.5,FALSE,0,2026-03-02,2026-03-01 10:00:00.5+02:00,2026-03-01T10:00:01.25,,,8",
        ",nan,x,,,,,,\"\",,",
    ]) + "\n")
    schema = infer_schema([path])
    assert types(schema) == {"l": "long", "d": "double", "mixed": "string", "b": "boolean", "bits": "long",
                             "day": "date", "ts": "timestamp-micros", "local": "local-timestamp-micros",
                             "s": "string", "empty": "string", "spaced": "long"}
    assert all(f.nullable for f in schema)  # Kite's csv-import made every inferred field nullable
    got = rows(path, schema)
    assert got[0]["ts"] == dt.datetime(2026, 3, 1, 10, tzinfo=UTC)
    assert got[1]["ts"] == dt.datetime(2026, 3, 1, 8, 0, 0, 500000, tzinfo=UTC)
    assert got[1]["local"] == dt.datetime(2026, 3, 1, 10, 0, 1, 250000)
    assert [r["s"] for r in got] == ["x", None, ""]  # unquoted empty: null; quoted "": the empty string
    assert [r["spaced"] for r in got] == [7, 8, None]
    assert math.isnan(got[2]["d"]) and [r["b"] for r in got] == [True, False, None]


def test_inference_of_a_long_beyond_64_bits_keeps_its_digits_and_required_fields(tmp_path):
    path = write(tmp_path / "a.csv", "id,big,mixed\n1,9223372036854775808,1e30\n2,1,2\n")
    schema = infer_schema([path], required=["id"])
    assert types(schema) == {"id": "long", "big": "string", "mixed": "double"}
    assert rows(path, schema)[0]["big"] == "9223372036854775808"
    assert not schema.field("id").nullable and schema.field("big").nullable
    with pytest.raises(InputError, match=r"no column 'nope' in .*a.csv; columns are \['id', 'big', 'mixed'\]"):
        infer_schema([path], required=["nope"])


def test_inference_merges_files_and_can_sample(tmp_path):
    a = write(tmp_path / "a.csv", "id,v,w\n1,1,x\n")
    b = write(tmp_path / "b.csv", "id,v,extra\n2,2.5,3\n")
    assert types(infer_schema([a, b])) == {"id": "long", "v": "double", "w": "string", "extra": "long"}
    c = write(tmp_path / "c.csv", "v\n1\n2\nthree\n")
    assert types(infer_schema([c], max_rows=2)) == {"v": "long"}
    assert types(infer_schema([c])) == {"v": "string"}
    nested = write(tmp_path / "n.jsonl", '{"v": [1]}\n')
    with pytest.raises(InputError, match=r"field 'v' is a .*list.* and a long"):
        infer_schema([nested, a])


def test_inference_refuses_names_that_are_not_field_names(tmp_path):
    path = write(tmp_path / "a.csv", "id,user id\n1,2\n")
    with pytest.raises(InputError, match="column name 'user id' is not a valid field name"):
        infer_schema([path])


def test_json_lines_inference(tmp_path):
    path = write(tmp_path / "a.jsonl", "\n".join([
        '{"id": 1, "x": 1, "s": "a", "day": "2026-03-01", "ts": "2026-03-01T10:00:00Z", "ok": true,'
        ' "tags": ["a"], "o": {"p": 1}, "n": null}',
        "",
        '{"id": 2, "x": 2.5, "s": "2026-03-01", "day": null, "ts": "2026-03-01T11:00:00+01:00", "extra": "new",'
        ' "tags": [], "o": {"p": 2}}',
    ]) + "\n")
    schema = infer_schema([path])
    assert types(schema) == {"id": "long", "x": "double", "s": "string", "day": "date", "ts": "timestamp-micros",
                             "ok": "boolean", "tags": "list<item: string>", "o": "struct<p: int64>", "n": "string",
                             "extra": "string"}
    got = rows(path, schema)
    assert got[1]["ts"] == dt.datetime(2026, 3, 1, 10, tzinfo=UTC) and got[1]["extra"] == "new"
    assert got[0]["o"] == {"p": 1} and got[1]["tags"] == [] and got[0]["extra"] is None


def test_json_lines_inference_refuses_a_field_of_two_kinds(tmp_path):
    path = write(tmp_path / "a.jsonl", '{"v": 1}\n{"v": null}\n\n{"v": "one"}\n')
    with pytest.raises(InputError, match=r"a.jsonl: field 'v' holds a number \(line 1\) and a string \(line 4\)"):
        infer_schema([path])


def test_parquet_and_avro_carry_their_schema(tmp_path):
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32()), "s": pa.array(["a", None]).dictionary_encode(),
                             "ls": pa.array(["x", "y"], pa.large_string())}), tmp_path / "a.parquet")
    assert types(infer_schema([str(tmp_path / "a.parquet")])) == {"id": "int", "s": "string", "ls": "string"}
    avro = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "u", "type": ["null", {"type": "string", "logicalType": "uuid"}]},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
    u = uuid.uuid4()
    with open(tmp_path / "a.avro", "wb") as f:
        fastavro.writer(f, avro, [{"id": 1, "u": str(u), "ts": dt.datetime(2026, 3, 1, tzinfo=UTC)}])
    schema = infer_schema([str(tmp_path / "a.avro")])
    assert types(schema) == {"id": "long", "u": "string", "ts": "timestamp-millis"}
    assert not schema.field("id").nullable and schema.field("u").nullable
    assert rows(str(tmp_path / "a.avro"), schema) == [{"id": 1, "u": str(u), "ts": dt.datetime(2026, 3, 1, tzinfo=UTC)}]


# ---------------------------------------------------------------- formats and names

@pytest.mark.parametrize("name, expected", [
    ("a.csv", ("csv", None)), ("dir/A.CSV.GZ", ("csv", "gzip")), ("a.jsonl", ("jsonl", None)),
    ("s3://b/a.ndjson.gz", ("jsonl", "gzip")), ("a.json", ("jsonl", None)), ("a.parquet", ("parquet", None)),
    ("a.avro", ("avro", None)),
])
def test_formats_from_names(name, expected):
    assert input_format(name) == expected


def test_format_errors():
    with pytest.raises(InputError, match="a.txt: cannot tell its format"):
        input_format("a.txt")
    assert input_format("a.txt", "csv") == ("csv", None)
    with pytest.raises(InputError, match="unknown format 'xml'"):
        input_format("a.txt", "xml")
    with pytest.raises(InputError, match="a parquet file cannot be gzip-compressed"):
        input_format("a.parquet.gz")
    assert output_format("x.jsonl") == "jsonl" and output_format("x", "parquet") == "parquet"
    with pytest.raises(OutputError, match="cannot tell the format to write"):
        output_format("x.txt")


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(InputError, match="nope.csv: no such file"):
        open_input(str(tmp_path / "nope.csv"))
    (tmp_path / "d.csv").mkdir()
    with pytest.raises(InputError, match="is a folder"):
        open_input(str(tmp_path / "d.csv"))


def test_gzip_csv_and_json_lines(tmp_path):
    with gzip.open(tmp_path / "a.csv.gz", "wt") as f:
        f.write("id,s\n1,a\n2,b\n")
    with gzip.open(tmp_path / "a.jsonl.gz", "wt") as f:
        f.write('{"id": 3, "s": "c"}\n')
    schema = infer_schema([str(tmp_path / "a.csv.gz"), str(tmp_path / "a.jsonl.gz")])
    assert types(schema) == {"id": "long", "s": "string"}
    got = rows(str(tmp_path / "a.csv.gz"), schema) + rows(str(tmp_path / "a.jsonl.gz"), schema)
    assert got == [{"id": 1, "s": "a"}, {"id": 2, "s": "b"}, {"id": 3, "s": "c"}]
    f = open_input(str(tmp_path / "a.csv.gz"))
    list(f.read(schema))
    assert f.bytes_read == f.size  # progress counts the compressed bytes


# ---------------------------------------------------------------- a given schema

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("name", pa.string()),
                    pa.field("score", pa.float32()), pa.field("n", pa.int32(), False),
                    pa.field("ts", pa.timestamp("ms", tz="UTC"))])
DEFAULTS = {"n": 7}


def test_csv_into_a_given_schema_fills_missing_columns(tmp_path):
    path = write(tmp_path / "a.csv", "name,id\nx,1\n,2\n")
    assert rows(path, SCHEMA, defaults=DEFAULTS) == [
        {"id": 1, "name": "x", "score": None, "n": 7, "ts": None}, {"id": 2, "name": None, "score": None, "n": 7,
                                                                   "ts": None}]
    path = write(tmp_path / "b.csv", "id,n,ts,time,bytes,day,dec\n1,,2026-03-01 10:00:00,10:30,aGk=,2026-01-02,1.25\n")
    schema = pa.schema([("id", pa.int64()), pa.field("n", pa.int32(), False), ("ts", pa.timestamp("ms", tz="UTC")),
                        ("time", pa.time64("us")), ("bytes", pa.binary()), ("day", pa.date32()),
                        ("dec", pa.decimal128(5, 2))])
    assert rows(path, schema, defaults=DEFAULTS) == [{  # a null in a required field with a default: the default
        "id": 1, "n": 7, "ts": dt.datetime(2026, 3, 1, 10, tzinfo=UTC), "time": dt.time(10, 30), "bytes": b"hi",
        "day": dt.date(2026, 1, 2), "dec": decimal.Decimal("1.25")}]  # a timestamp without a zone is UTC


@pytest.mark.parametrize("text, message", [
    ("id,name\n1,a\n2,b\nabc,c\n", r"a.csv line 4: field 'id': 'abc' is not a long"),
    ('id,name\n1,"two\nlines"\n\n3,c\n,d\n', r"a.csv line 6: field 'id' is required, but the value is empty"),
    ("id,name,score\n1,a,0.5\n2,b,high\n", r"a.csv line 3: field 'score': 'high' is not a float"),
    ("id,ts\n1,2026-03-01T10:00:00Z\n2,yesterday\n", r"a.csv line 3: field 'ts': 'yesterday' is not a timestamp-millis"),
    ("id,n\n1,99999999999\n", r"a.csv line 2: field 'n': '99999999999' is not a int"),
    ("id,name,zz,yy\n1,a,3,4\n", r"a.csv: unknown columns 'zz', 'yy'; the fields are \['id', 'name', 'score', 'n', 'ts'\]"),
    ("name\nx\n", r"a.csv: no column for the required field 'id' \(it has no default\)"),
    ("id,name\n1,a\n\n2\n", r"a.csv line 4: 1 value where the header has 2 columns"),
    ("id,id\n1,2\n", r"a.csv: column 'id' appears twice in the header"),
    ("", r"a.csv: the file is empty; a CSV file needs a header row"),
])
def test_csv_errors_name_file_line_field_and_value(tmp_path, text, message):
    path = write(tmp_path / "a.csv", text)
    with pytest.raises(InputError, match=message):
        rows(path, SCHEMA, defaults=DEFAULTS)


def test_csv_error_lines_across_batches(tmp_path, monkeypatch):
    monkeypatch.setattr(inputs.base, "BLOCK_BYTES", 256)  # many batches
    lines = ["id,name"] + [f'{i},"row\n{i}"' if i % 7 == 0 else f"{i},r{i}" for i in range(500)]
    lines[400] = "4x,bad"
    path = write(tmp_path / "a.csv", "\n".join(lines) + "\n")
    physical = 1 + sum(1 + (i % 7 == 0) for i in range(399))  # lines before it (quoted values span two)
    with pytest.raises(InputError) as e:
        rows(path, SCHEMA, defaults=DEFAULTS)
    assert (e.value.line, e.value.field, e.value.value) == (physical + 1, "id", "4x")
    assert f"line {physical + 1}: field 'id': '4x'" in str(e.value)


def test_csv_delimiter(tmp_path):
    path = write(tmp_path / "a.csv", "id;name\n1;a,b\n")
    assert rows(path, SCHEMA, defaults=DEFAULTS, delimiter=";")[0]["name"] == "a,b"
    assert types(infer_schema([path], delimiter=";")) == {"id": "long", "name": "string"}


@pytest.mark.parametrize("text, message", [
    ('{"id": 1}\n{"id": "2"}\n', r"a.jsonl line 2: field 'id': '2' is not a long"),
    ('{"id": 1}\n\n{"id": 2, "zz": 1}\n', r"a.jsonl line 3: unknown field 'zz'"),
    ('{"id": 1}\n{"name": "x"}\n', r"a.jsonl line 2: field 'id' is required, but the value is null or missing"),
    ('{"id": 1}\n{"id": 2\n', r"a.jsonl line 2: not valid JSON"),
    ('{"id": 1}\n[1]\n', r"a.jsonl line 2: not a JSON object"),
    ('{"id": 1, "ts": "2026-03-01T00:00:00Z"}\n{"id": 2, "ts": "soon"}\n', r"line 2: field 'ts': 'soon' is not a "),
    ('{"id": true}\n', r"line 1: field 'id': True is not a long"),
])
def test_json_lines_errors_name_file_line_field_and_value(tmp_path, text, message):
    path = write(tmp_path / "a.jsonl", text)
    with pytest.raises(InputError, match=message):
        rows(path, SCHEMA, defaults=DEFAULTS)


def test_json_lines_error_after_the_first_batch(tmp_path, monkeypatch):
    monkeypatch.setattr(inputs.base, "BLOCK_BYTES", 256)
    lines = [json.dumps({"id": i, "name": f"r{i}"}) for i in range(300)]
    lines[250] = '{"id": 250, "name": 250}'
    path = write(tmp_path / "a.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"a.jsonl line 251: field 'name': 250 is not a string"):
        rows(path, SCHEMA, defaults=DEFAULTS)


def test_json_lines_types_pyarrow_cannot_parse(tmp_path):
    schema = pa.schema([("m", pa.map_(pa.string(), pa.int64())), ("d", pa.date32()), ("b", pa.binary()),
                        ("x", pa.float64())])
    path = write(tmp_path / "a.jsonl", '{"m": {"a": 1}, "d": "2026-03-01", "b": "aGk=", "x": NaN}\n{}\n')
    got = rows(path, schema)
    assert got[0]["m"] == [("a", 1)] and got[0]["d"] == dt.date(2026, 3, 1) and got[0]["b"] == b"hi"
    assert math.isnan(got[0]["x"]) and got[1] == {"m": None, "d": None, "b": None, "x": None}
    assert rows(write(tmp_path / "e.jsonl", ""), schema) == []


def test_parquet_into_a_given_schema_names_the_row(tmp_path):
    pq.write_table(pa.table({"id": [1, 2, 3], "n": [1, 2, 2**40], "ts": ["2026-03-01T00:00:00Z", None, None]}),
                   tmp_path / "a.parquet")
    with pytest.raises(InputError, match=r"a.parquet row 3: field 'n': value 1099511627776 is not a int"):
        rows(str(tmp_path / "a.parquet"), SCHEMA)
    pq.write_table(pa.table({"id": [1], "other": [1]}), tmp_path / "b.parquet")
    with pytest.raises(InputError, match=r"b.parquet: unknown column 'other'"):
        open_input(str(tmp_path / "b.parquet")).check(SCHEMA, DEFAULTS)
    pq.write_table(pa.table({"id": [1], "ts": ["2026-03-01T00:00:00Z"]}), tmp_path / "c.parquet")
    assert rows(str(tmp_path / "c.parquet"), SCHEMA, defaults=DEFAULTS) == [
        {"id": 1, "name": None, "score": None, "n": 7, "ts": dt.datetime(2026, 3, 1, tzinfo=UTC)}]


def test_avro_into_a_given_schema(tmp_path):
    avro = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "name",
                                                                                        "type": ["null", "string"]}]}
    with open(tmp_path / "a.avro", "wb") as f:
        fastavro.writer(f, avro, [{"id": i, "name": None if i % 2 else f"r{i}"} for i in range(70_000)])
    got = rows(str(tmp_path / "a.avro"), SCHEMA, defaults=DEFAULTS)
    assert len(got) == 70_000 and got[2] == {"id": 2, "name": "r2", "score": None, "n": 7, "ts": None}


# ---------------------------------------------------------------- export files import back

EXPORTED = pa.schema([
    pa.field("id", pa.int64(), False), ("s", pa.string()), ("d", pa.float64()), ("b", pa.bool_()),
    ("day", pa.date32()), ("ts", pa.timestamp("us", tz="UTC")), ("local", pa.timestamp("us")),
    ("t", pa.time64("us")), ("dec", pa.decimal128(6, 2)), ("raw", pa.binary()),
    ("tags", pa.list_(pa.string())), ("o", pa.struct([("p", pa.int64()), ("q", pa.string())])),
])
EXPORTED_ROWS = [
    {"id": 1, "s": "a,\"b\"\nc", "d": 1.5, "b": True, "day": dt.date(2026, 3, 1),
     "ts": dt.datetime(2026, 3, 1, 10, 0, 0, 123456, tzinfo=UTC), "local": dt.datetime(2026, 3, 1, 10),
     "t": dt.time(10, 30, 0, 5), "dec": decimal.Decimal("12.50"), "raw": b"\x00\xff", "tags": ["x", "y,z"],
     "o": {"p": 1, "q": None}},
    {"id": 2, "s": "", "d": None, "b": None, "day": None, "ts": None, "local": None, "t": None, "dec": None,
     "raw": None, "tags": None, "o": None},
]


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet", "avro"])
def test_exported_files_import_back(tmp_path, fmt):
    path = str(tmp_path / f"out.{fmt}")
    out = OutputFile(path, EXPORTED)
    out.write(pa.RecordBatch.from_pylist(EXPORTED_ROWS, schema=EXPORTED))
    assert out.close() > 0 and out.rows == 2
    assert rows(path, EXPORTED) == EXPORTED_ROWS
    with pytest.raises(OutputError, match="exists"):
        OutputFile(path, EXPORTED)
    if fmt == "csv":
        assert base64.b64encode(b"\x00\xff").decode() in open(path).read()


def test_an_aborted_export_leaves_no_file(tmp_path):
    out = OutputFile(str(tmp_path / "out.parquet"), EXPORTED)
    out.write(pa.RecordBatch.from_pylist(EXPORTED_ROWS, schema=EXPORTED))
    out.abort()
    assert not (tmp_path / "out.parquet").exists()


# ---------------------------------------------------------------- property: CSV written by pyarrow

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
_COLUMNS = {
    "long": (pa.int64(), st.integers(-2**63, 2**63 - 1)),
    "double": (pa.float64(), st.floats(width=64)),
    "boolean": (pa.bool_(), st.booleans()),
    "string": (pa.string(), st.just("") | _text.map(lambda s: "s" + s)),  # 's': never a number or a date
}


@st.composite
def tables(draw) -> tuple[pa.Table, dict[str, str]]:
    n = draw(st.integers(0, 12))
    kinds = draw(st.lists(st.sampled_from(sorted(_COLUMNS)), min_size=1, max_size=5))
    columns, expected = {}, {}
    for i, kind in enumerate(kinds):
        t, values = _COLUMNS[kind]
        column = draw(st.lists(st.none() | values, min_size=n, max_size=n))
        if kind == "double" and n and all(v is None or (math.isfinite(v) and v == int(v)) for v in column):
            column[0] = 0.5  # integral doubles are written as "1": a column of them reads as a long
        present = [v for v in column if v is not None]
        if kind == "string":
            expected[f"c{i}"] = "string"
        else:
            expected[f"c{i}"] = kind if any(v is not None for v in present) else "string"
        columns[f"c{i}"] = pa.array(column, t)
    return pa.table(columns), expected


@given(tables())
def test_csv_written_by_pyarrow_infers_and_reads_back(tmp_path_factory, case):
    table, expected = case
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    pacsv.write_csv(table, path)
    schema = infer_schema([str(path)])
    assert types(schema) == expected
    back = pa.Table.from_batches(list(read_batches(str(path), schema)), schema=schema)
    for name in table.column_names:
        want = table.column(name).to_pylist()
        got = back.column(name).to_pylist()
        if expected[name] == "string" and table.column(name).type != pa.string():
            assert all(v is None for v in got) and all(v is None for v in want)
            continue
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g == w or (isinstance(w, float) and math.isnan(w) and math.isnan(g)), (name, g, w)


# ---------------------------------------------------------------- properties: two parsers, one answer

@given(st.lists(st.fixed_dictionaries({}, optional={
    "id": st.none() | st.integers(-2**63, 2**63 - 1), "x": st.none() | st.floats(allow_nan=False) | st.integers(-9, 9),
    "ok": st.none() | st.booleans(), "s": st.none() | _text,
    "day": st.none() | st.dates().map(dt.date.isoformat),
    "ts": st.none() | st.datetimes(timezones=st.just(UTC)).map(lambda t: t.isoformat())}), max_size=30))
def test_json_lines_pyarrow_and_python_parsers_agree(tmp_path_factory, records):
    """JSON lines are parsed by pyarrow, and by Python where pyarrow cannot say where a problem is:
    both give the same rows."""
    path = tmp_path_factory.mktemp("jsonl") / "a.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    schema = pa.schema([("id", pa.int64()), ("x", pa.float64()), ("ok", pa.bool_()), ("s", pa.string()),
                        ("day", pa.date32()), ("ts", pa.timestamp("us", tz="UTC"))])
    f = open_input(str(path))
    fast = pa.Table.from_batches(list(f._read(schema, {})), schema=schema)
    slow = pa.Table.from_batches(list(f._read_python(schema, {})), schema=schema)
    assert fast.to_pylist() == slow.to_pylist()
    assert fast.num_rows == len(records)


@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"), max_size=6),
                min_size=1, max_size=40), st.data())
def test_csv_error_line_counts_lines_inside_quoted_values(tmp_path_factory, texts, data):
    """pyarrow finds a bad value's row; Python's csv module finds its line: they agree on where
    records start, newlines inside quoted values included."""
    bad = data.draw(st.integers(0, len(texts) - 1))
    ids = [str(i) if i != bad else "bad" for i in range(len(texts))]
    path = tmp_path_factory.mktemp("csv") / "a.csv"
    pacsv.write_csv(pa.table({"id": ids, "name": texts}), path)
    line = 2 + bad + sum(t.count("\n") for t in texts[:bad])
    with pytest.raises(InputError) as e:
        rows(str(path), SCHEMA, defaults=DEFAULTS)
    assert (e.value.line, e.value.field, e.value.value) == (line, "id", "bad")


@pytest.mark.parametrize("name, content", [
    ("a.csv", "id,f\n1,2.5\n2,1e300\n"),
    ("a.jsonl", '{"id": 1, "f": 2.5}\n{"id": 2, "f": 1e300}\n'),
    ("a.parquet", None),
])
def test_a_number_too_large_for_a_float_is_refused_not_stored_as_infinity(tmp_path, name, content):
    path = tmp_path / name
    if content is None:
        pq.write_table(pa.table({"id": [1, 2], "f": [2.5, 1e300]}), path)
    else:
        path.write_text(content)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("f", pa.float32())])
    with pytest.raises(InputError, match=r"(line|row) [23]: field 'f': (value )?'?1e\+?300'? (is not a float|is beyond the range of a float)"):
        rows(str(path), schema)


def test_nested_dates_timestamps_and_decimals_read_from_text(tmp_path):
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("days", pa.list_(pa.date32())),
                        ("prices", pa.map_(pa.string(), pa.decimal128(10, 2))),
                        ("at", pa.struct([("t", pa.timestamp("us", tz="UTC"))]))])
    expected = [{"id": 1, "days": [dt.date(2026, 1, 2)], "prices": [("a", decimal.Decimal("1.50"))],
                 "at": {"t": dt.datetime(2026, 1, 1, tzinfo=UTC)}}]
    jsonl = write(tmp_path / "a.jsonl", '{"id": 1, "days": ["2026-01-02"], "prices": {"a": 1.5}, '
                                        '"at": {"t": "2026-01-01T00:00:00Z"}}\n')
    csv = write(tmp_path / "a.csv", 'id,days,prices,at\n1,"[""2026-01-02""]","{""a"": ""1.50""}",'
                                    '"{""t"": ""2026-01-01T00:00:00Z""}"\n')
    assert rows(jsonl, schema) == expected and rows(csv, schema) == expected


# ---------------------------------------------------------------- issue 26: every value in exactly, or refused

NESTED = pa.schema([pa.field("id", pa.int64(), nullable=False),
                    ("arr", pa.list_(pa.field("element", pa.int64(), nullable=False))),
                    ("r", pa.struct([pa.field("a", pa.int64(), nullable=False)])),
                    ("m", pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False)))])


@pytest.mark.parametrize("name, content, field", [
    ("a.jsonl", '{"id": 1}\n{"id": 2, "arr": [1.9, 2.5]}\n', r"'arr\[0\]': 1.9 is not a long"),
    ("a.jsonl", '{"id": 1}\n{"id": 2, "r": {"a": 1.7}}\n', r"'r.a': 1.7 is not a long"),
    ("a.jsonl", '{"id": 1}\n{"id": 2, "m": {"k": 2.9}}\n', r"\"m\['k'\]\": 2.9 is not a long"),
    ("a.csv", 'id,arr\n1,\n2,"[1.9,2.5]"\n', r"'arr\[0\]': 1.9 is not a long"),
    ("a.csv", 'id,r\n1,\n2,"{""a"": 1.7}"\n', r"'r.a': 1.7 is not a long"),
])
def test_fractions_inside_nested_values_are_refused_not_truncated(tmp_path, name, content, field):  # 26.1
    (tmp_path / name).write_text(content)
    with pytest.raises(InputError, match=rf"line [23]: field {field}"):
        list(open_input(str(tmp_path / name)).read(NESTED))


def test_parquet_nested_fields_the_schema_lacks_and_nulls_in_required_ones_are_refused(tmp_path):  # 26.2, 26.7
    pq.write_table(pa.table({"id": [1, 2], "r": [{"a": 1, "secret": "x"}, {"a": 2, "secret": "y"}]}), tmp_path / "a.parquet")
    with pytest.raises(InputError, match=r"a.parquet row 1: field 'r.secret': value 'x' is in no field"):
        list(open_input(str(tmp_path / "a.parquet")).read(NESTED))
    pq.write_table(pa.table({"id": [1, 2], "arr": [[1], [1, None]]}), tmp_path / "b.parquet")
    with pytest.raises(InputError, match=r"b.parquet row 2: field 'arr\[1\]': null in a required field"):
        list(open_input(str(tmp_path / "b.parquet")).read(NESTED))


@pytest.mark.parametrize("name, content", [
    ("a.jsonl", '{"id": 1, "f": 1.5}\n{"id": 2, "f": 1e400}\n'),
    ("a.jsonl", '{"id": 1, "f": 1.5}\n{"id": 2, "f": -1e999}\n'),
    ("a.csv", "id,f\n1,1.5\n2,1e400\n"),
])
def test_a_number_beyond_a_double_is_refused_not_stored_as_infinity(tmp_path, name, content):  # 26.5
    (tmp_path / name).write_text(content)
    schema = pa.schema([("id", pa.int64()), ("f", pa.float64())])
    with pytest.raises(InputError, match=r"line [23]: field 'f': '?-?1e[49]"):
        list(open_input(str(tmp_path / name)).read(schema))
    (tmp_path / "inf.csv").write_text("id,f\n1,inf\n2,-Infinity\n")
    assert pa.Table.from_batches(open_input(str(tmp_path / "inf.csv")).read(schema))["f"].to_pylist() == \
        [float("inf"), float("-inf")]


def test_a_zone_in_a_local_timestamp_is_refused_in_json_lines_as_in_csv(tmp_path):  # 26.12
    schema = pa.schema([("id", pa.int64()), ("t", pa.timestamp("us"))])
    (tmp_path / "a.jsonl").write_text('{"id": 1, "t": "2026-01-01T10:00:00+05:00"}\n')
    (tmp_path / "a.csv").write_text("id,t\n1,2026-01-01T10:00:00+05:00\n")
    for name in ("a.jsonl", "a.csv"):
        with pytest.raises(InputError, match="is not a local-timestamp-micros"):
            list(open_input(str(tmp_path / name)).read(schema))


def test_enum_and_uuid_errors_name_the_line(tmp_path):  # 26.12
    avro = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "u", "type": ["null", {"type": "string", "logicalType": "uuid"}], "default": None}]}
    from cdkds.formats.schema import to_arrow
    (tmp_path / "a.csv").write_text("id,e,u\n1,A,\n2,C,\n")
    with pytest.raises(InputError, match=r"a.csv line 3: field 'e': value 'C' is not one of the enum symbols"):
        list(open_input(str(tmp_path / "a.csv")).read(to_arrow(avro), None, avro))
    (tmp_path / "b.jsonl").write_text('{"id": 1, "e": "A"}\n\n{"id": 2, "e": "B", "u": "nope"}\n')
    with pytest.raises(InputError, match=r"b.jsonl line 3: field 'u': value 'nope' is not a UUID"):
        list(open_input(str(tmp_path / "b.jsonl")).read(to_arrow(avro), None, avro))


def test_a_parquet_file_with_a_column_twice_is_refused(tmp_path):  # 26.3
    pq.write_table(pa.Table.from_arrays([pa.array([1]), pa.array(["a"]), pa.array(["b"])], names=["id", "s", "s"]),
                   tmp_path / "a.parquet")
    for use in (lambda f: f.infer(), lambda f: list(f.read(pa.schema([("id", pa.int64()), ("s", pa.string())])))):
        with pytest.raises(InputError, match="a.parquet: column 's' appears twice in the file"):
            use(open_input(str(tmp_path / "a.parquet")))


@pytest.mark.parametrize("content", ['id,s\n1,a\n2,"unterminated\n', 'id,s\n1,a\n2,"unterminated'])
def test_a_csv_file_ending_inside_a_quoted_value_is_refused(tmp_path, content):  # 26.6
    (tmp_path / "a.csv").write_text(content)
    with pytest.raises(InputError, match=r"a.csv line 3: the file ends inside a quoted value"):
        list(open_input(str(tmp_path / "a.csv")).read(pa.schema([("id", pa.int64()), ("s", pa.string())])))
    (tmp_path / "b.csv").write_text('id,s\n1,ab"c\n2,"x""y"\n')  # a stray quote in an unquoted value is text
    assert pa.Table.from_batches(open_input(str(tmp_path / "b.csv")).read(
        pa.schema([("id", pa.int64()), ("s", pa.string())])))["s"].to_pylist() == ['ab"c', 'x"y']


def test_a_csv_row_longer_than_a_block_imports(tmp_path, monkeypatch):  # 26.11
    from cdkds.formats.inputs import base
    monkeypatch.setattr(base, "BLOCK_BYTES", 1024)
    long = "x" * 5000
    (tmp_path / "a.csv").write_text("id,s\n" + "".join(f"{i},b\n" for i in range(300)) + f'300,"{long}"\n301,c\n')
    table = pa.Table.from_batches(open_input(str(tmp_path / "a.csv")).read(pa.schema([("id", pa.int64()), ("s", pa.string())])))
    assert table["id"].to_pylist() == list(range(302)) and table["s"][300].as_py() == long


def test_avro_unions_of_several_types_and_truncated_files_are_refused(tmp_path):  # 26.11
    import io
    import fastavro
    union = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"},
                                                       {"name": "s", "type": ["string", "int"]}]}
    with open(tmp_path / "u.avro", "wb") as f:
        fastavro.writer(f, union, [{"id": 1, "s": "a"}, {"id": 2, "s": 3}])
    with pytest.raises(InputError, match=r"u.avro: its Avro schema has no Arrow form: .*only unions of null and one"):
        list(open_input(str(tmp_path / "u.avro")).read(pa.schema([("id", pa.int64()), ("s", pa.string())])))
    plain = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}
    buf = io.BytesIO()
    fastavro.writer(buf, plain, [{"id": i} for i in range(3000)], sync_interval=100, codec="null")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    for cut in range(150, len(buf.getvalue()), 211):
        (tmp_path / "t.avro").write_bytes(buf.getvalue()[:cut])
        try:
            rows = sum(b.num_rows for b in open_input(str(tmp_path / "t.avro")).read(schema))
        except InputError as e:
            assert "t.avro" in str(e)
        else:
            assert rows < 3000  # cut at a block's end: the blocks before it are whole


def test_a_nullable_field_without_a_default_must_have_a_column_as_in_write_batch(tmp_path):  # 26.12
    from cdkds.formats.errors import SchemaMismatchError
    from cdkds.formats.records import batch_conformer
    from cdkds.formats.schema import to_arrow
    avro = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"},
                                                     {"name": "n", "type": ["null", "string"]},
                                                     {"name": "d", "type": ["null", "string"], "default": None}]}
    (tmp_path / "a.csv").write_text("id\n1\n")
    with pytest.raises(SchemaMismatchError, match="required column 'n' is missing"):
        batch_conformer(avro)(pa.record_batch({"id": [1]}))
    f = open_input(str(tmp_path / "a.csv"))
    with pytest.raises(InputError, match=r"a.csv: no column for the field 'n' \(it has no default\) \(a nullable field "
                                         r"needs \"default\": null to be left out\)"):
        f.check(to_arrow(avro), {"d": None}, avro)
    (tmp_path / "b.csv").write_text("id,n\n1,x\n")
    assert pa.Table.from_batches(open_input(str(tmp_path / "b.csv")).read(to_arrow(avro), {"d": None}, avro)).to_pylist() \
        == [{"id": 1, "n": "x", "d": None}]


@pytest.mark.parametrize("text, message", [
    ('{"id": 1}\n{"id": 2, "id": 3}\n', r"a.jsonl line 2: not valid JSON \(key 'id' given twice in one object"),
    ('{"id": 1, "m": {"k": 1, "k": 2}}\n', r"a.jsonl line 1: not valid JSON \(key 'k' given twice in one object"),
])
def test_json_lines_key_given_twice_is_refused(tmp_path, text, message):  # review: the last one was kept
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("m", pa.map_(pa.string(), pa.int64()))])
    with pytest.raises(InputError, match=message):
        rows(write(tmp_path / "a.jsonl", text), schema)
