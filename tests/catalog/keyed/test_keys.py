"""Record keys: checks naming dataset, field and value; a stable hash; buckets."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, strategies as st

from cdkds.catalog import DatasetDescriptor, InvalidKeyError, KeyExistsError
from cdkds.catalog.keyed.keys import RecordKey, _bytes_hash, _column_hash, _splitmix

SCHEMA = {"type": "record", "name": "u", "fields": [
    {"name": "tenant", "type": "string"}, {"name": "userId", "type": "long"},
    {"name": "email", "type": ["null", "string"], "default": None}]}
KEY = RecordKey.of(DatasetDescriptor(SCHEMA, record_key=["tenant", "userId"]), "users")


def test_keys_from_dicts_tuples_and_arrow_are_the_same_table():
    a = KEY.keys([{"tenant": "nz", "userId": 1}, {"tenant": "au", "userId": 2}])
    b = KEY.keys([("nz", 1), ["au", 2]])
    c = KEY.keys(pa.table({"userId": [1, 2], "tenant": ["nz", "au"]}))
    assert a.equals(b) and a.equals(c)
    assert a.schema.names == ["tenant", "userId"] and a.schema.field("userId").type == pa.int64()
    assert KEY.keys({"tenant": "nz", "userId": 1}).num_rows == 1


@pytest.mark.parametrize("keys, message", [
    ([{"tenant": "nz"}], "key 0 ({'tenant': 'nz'}) has no field 'userId'"),
    ([{"tenant": "nz", "userId": 1, "email": "x"}], "has 'email', not a key field"),
    ([("nz",)], "has 1 value(s); the key is ['tenant', 'userId']"),
    ([("nz", 1, 2)], "has 3 value(s)"),
    ([("nz", "one")], "record key field 'userId': value 'one' (str) is not an integer"),
    ([("nz", None)], "record key field 'userId' is null in key 0"),
    (pa.table({"tenant": ["nz"]}), "have no record key field 'userId'"),
    (pa.table({"tenant": ["nz"], "userId": [1], "email": ["x"]}), "'email' is not a record key field"),
])
def test_bad_keys_name_dataset_field_and_value(keys, message):
    with pytest.raises(InvalidKeyError) as e:
        KEY.keys(keys)
    assert "dataset 'users'" in str(e.value) and message in str(e.value)


def test_check_names_the_null_key_row():
    rows = pa.table({"tenant": ["nz", None], "userId": [1, 2], "email": ["a", "b"]})
    with pytest.raises(InvalidKeyError, match=r"'tenant' is null in row 1 .*'userId': 2"):
        KEY.check(rows)


def test_a_dataset_without_a_key_has_no_record_key():
    with pytest.raises(Exception, match="has no record key"):
        RecordKey.of(DatasetDescriptor(SCHEMA), "plain")


@given(st.lists(st.tuples(st.text(max_size=20), st.integers(-2**63, 2**63 - 1)), max_size=50))
def test_hash_is_a_function_of_the_values_not_the_batching(rows):
    table = KEY.keys(rows) if rows else KEY.keys(pa.table({"tenant": pa.array([], pa.string()),
                                                             "userId": pa.array([], pa.int64())}))
    whole = KEY.hashes(table)
    one_by_one = [KEY.hashes(KEY.keys([r]))[0] for r in rows]
    assert list(whole) == one_by_one
    buckets = KEY.buckets(whole, 64)
    assert ((buckets >= 0) & (buckets < 64)).all()


@given(st.lists(st.integers(-2**31, 2**31 - 1), min_size=1, max_size=30))
def test_an_int_key_promoted_to_long_keeps_its_hash(values):
    int_key = RecordKey.of(DatasetDescriptor({"type": "record", "name": "r", "fields": [
        {"name": "k", "type": "int"}]}, record_key="k"), "d")
    long_key = RecordKey.of(DatasetDescriptor({"type": "record", "name": "r", "fields": [
        {"name": "k", "type": "long"}]}, record_key="k"), "d")
    assert list(int_key.hashes(int_key.keys(values))) == list(long_key.hashes(long_key.keys(values)))


@given(st.lists(st.binary(max_size=40), max_size=40))
def test_bytes_hash_is_fnv1a(values):
    def fnv(data: bytes) -> int:
        h = 0xCBF29CE484222325
        for b in data:
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        return h
    assert [int(h) for h in _bytes_hash(pa.array(values, pa.binary()))] == [fnv(v) for v in values]


@given(st.lists(st.sampled_from(["nz", "au", "", "ü", "a longer value"]), max_size=12), st.integers(0, 700),
       st.lists(st.text(max_size=12), max_size=3000), st.integers(0, 20), st.booleans())
def test_a_string_column_hashes_the_same_plain_dictionary_encoded_or_sliced(few, repeats, many, offset, binary):
    """Few distinct values are hashed once each (sampled, then dictionary-encoded), and a
    dictionary column by its dictionary: the hashes are those of each value's bytes."""
    kind = pa.binary() if binary else pa.string()
    few = few * repeats  # past the sample (2,048 values): the dictionary path
    for values in (few, many, few + many):
        column = pa.array([v.encode() for v in values] if binary else values, kind)
        expected = _splitmix(_bytes_hash(column))  # each value's bytes, hashed one by one
        assert list(_column_hash(column)) == list(expected)
        assert list(_column_hash(column.dictionary_encode())) == list(expected)
        assert list(_column_hash(pa.chunked_array([column[:len(values) // 2], column[len(values) // 2:]], kind))) \
            == list(expected)
        assert list(_column_hash(column[offset:])) == list(expected[offset:])
        assert list(_column_hash(column.dictionary_encode()[offset:])) == list(expected[offset:])


def test_hash_is_pinned():
    """The hash decides buckets on storage: it must never change between versions."""
    table = KEY.keys([("nz", 1234), ("", 0), ("ü", -1)])
    assert [int(h) for h in KEY.hashes(table)] == [656981153745169944, 5953329980922935170, 17895135063441277267]


def test_other_key_kinds_hash():
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "d", "type": {"type": "int", "logicalType": "date"}},
        {"name": "t", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "m", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "b", "type": "boolean"}, {"name": "x", "type": "bytes"}]}
    key = RecordKey.of(DatasetDescriptor(schema, record_key=["d", "t", "m", "b", "x"]), "d")
    table = key.keys([(dt.date(2026, 1, 1), dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), Decimal("1.50"), True, b"\x00")])
    assert key.hashes(table).dtype == np.uint64



# ---------------------------------------------------------------- one path for every keyed entry point

UUIDS = {"type": "record", "name": "doc", "fields": [
    {"name": "id", "type": {"type": "string", "logicalType": "uuid"}}, {"name": "t", "type": "long"},
    {"name": "ref", "type": ["null", {"type": "string", "logicalType": "uuid"}], "default": None},
    {"name": "v", "type": ["null", "string"], "default": None}]}
UPPER = "ABCDEF00-1234-5678-9ABC-DEF012345678"
LOWER = UPPER.lower()


def clean(ds) -> None:
    report = ds.check(read_data=True)
    assert report.ok, report.to_json()


@pytest.fixture
def docs(repo):
    return repo.create("docs", DatasetDescriptor(UUIDS, record_key="id", ordering_field="t",
                                                 properties={"index.buckets": "4"}))


def test_a_uuid_key_in_any_spelling_finds_the_stored_row(docs):
    import uuid
    docs.upsert([{"id": UPPER, "t": 1, "v": "a"}])
    assert docs.to_table().column("id").to_pylist() == [LOWER]
    for spelling in (UPPER, LOWER, uuid.UUID(UPPER), f"{{{UPPER}}}", UPPER.replace("-", "")):
        assert docs.get(spelling)["v"] == "a", spelling
        assert docs.get({"id": spelling}, columns=["id"]) == {"id": LOWER}
    assert docs.get_many([UPPER, LOWER, uuid.UUID(UPPER)]).column("id").to_pylist() == [LOWER] * 3
    assert docs.get_many(pa.table({"id": [UPPER]})).num_rows == 1
    with pytest.raises(KeyExistsError):
        docs.insert([{"id": UPPER, "t": 2}])
    r = docs.update([{"id": UPPER, "v": "b", "ref": UPPER}])
    assert r.updated == 1 and docs.get(LOWER)["ref"] == LOWER  # a uuid field an update sets is canonical too
    r = docs.update(pa.table({"id": [UPPER], "v": ["c"]}))
    assert r.updated == 1 and docs.get(LOWER)["v"] == "c"
    assert docs.update([{"id": uuid.UUID(UPPER), "t": 2}]).updated == 1  # a key as get takes it, update takes it
    feed = docs.changes(docs.version).read_all()  # the update pairs with the stored row by its key
    assert sorted(feed.column("_change_type").to_pylist()) == ["update_postimage", "update_preimage"]
    assert docs.delete_keys([UPPER]).deleted == 1
    assert docs.get(LOWER) is None and docs.to_table().num_rows == 0
    assert docs.upsert([{"id": UPPER.replace("-", ""), "t": 0}]).unchanged == 1  # the tombstone holds the key
    clean(docs)


BIG = 2 ** 70


@pytest.mark.parametrize("call, field, value", [
    (lambda d: d.get({"k": BIG}), "record key field 'k'", repr(BIG)),
    (lambda d: d.get(-2 ** 63 - 1), "record key field 'k'", repr(-2 ** 63 - 1)),
    (lambda d: d.get_many(pa.table({"k": [str(BIG)]})), "record key field 'k'", repr(str(BIG))),
    (lambda d: d.delete_keys([{"k": 2 ** 63}]), "record key field 'k'", repr(2 ** 63)),
    (lambda d: d.delete_keys([{"k": 1, "t": 2 ** 64}]), "ordering field 't'", repr(2 ** 64)),
    (lambda d: d.delete_keys([{"k": 1, "t": "late"}]), "ordering field 't'", "'late'"),
    (lambda d: d.delete_keys(pa.table({"k": [1], "t": [2.5]})), "ordering field 't'", "2.5"),
    (lambda d: d.get_many([("nz", 1)]), "has 2 value(s)", "('nz', 1)"),
])
def test_bad_keys_on_reads_and_deletes_name_dataset_field_and_value(repo, call, field, value):
    ds = repo.create("nums", DatasetDescriptor({"type": "record", "name": "n", "fields": [
        {"name": "k", "type": "long"}, {"name": "t", "type": "long"}]}, record_key="k", ordering_field="t"))
    ds.upsert([{"k": 1, "t": 5}])
    version = ds.version
    with pytest.raises(InvalidKeyError) as e:
        call(ds)
    assert "dataset 'nums'" in str(e.value) and field in str(e.value) and value in str(e.value), str(e.value)
    assert ds.refresh().version == version and ds.get(1) == {"k": 1, "t": 5}
    clean(ds)


@pytest.mark.parametrize("key", ["\udc80", "ok\ud800", ("\udfff",)])
def test_a_lone_surrogate_key_is_an_invalid_key(repo, key):
    ds = repo.create("names", DatasetDescriptor({"type": "record", "name": "n", "fields": [
        {"name": "name", "type": "string"}]}, record_key="name"))
    ds.upsert([{"name": "ok"}])
    for call in (ds.get, lambda k: ds.get_many([k]), lambda k: ds.delete_keys([k])):
        with pytest.raises(InvalidKeyError, match=r"dataset 'names': key 0: record key field 'name': .* lone surrogate"):
            call(key)
    assert ds.to_table().num_rows == 1
    clean(ds)
