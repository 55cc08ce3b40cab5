"""A damaged footer of an index file (row-group hash ranges, the Bloom filter's hash count,
column types) is a CorruptIndexError: a lookup trusts the footer to skip row groups and
files, so damage there would otherwise hide keys silently (or abort the process)."""

from __future__ import annotations

import struct

import pyarrow.parquet as pq
import pytest

from cdkds.catalog import DatasetRepository
from cdkds.catalog.errors import CorruptIndexError
from cdkds.catalog.keyed import index as index_module
from cdkds.catalog.keyed.bloom import HASHES_KEY
from tests.catalog.keyed.conftest import user, users_descriptor

KEYS = 2000


@pytest.fixture
def indexed(tmp_path, monkeypatch):
    """A one-bucket dataset whose index is one base of four row groups; its path and bytes."""
    monkeypatch.setattr(index_module, "ROW_GROUP_ENTRIES", 500)
    ds = DatasetRepository(f"file://{tmp_path}").create("d", users_descriptor(**{"index.buckets": "1"}))
    ds.upsert([user("nz", i, 1) for i in range(KEYS)])
    (entry,) = ds.snapshot.index_files(0)
    path = tmp_path / "d" / entry.path
    return ds, path, path.read_bytes()


def _footer_start(data: bytes) -> int:
    return len(data) - 8 - struct.unpack("<i", data[-8:-4])[0]


def _damaged(ds, path, data: bytes) -> None:
    path.write_bytes(data)
    index_module.FOOTERS.clear()  # as a fresh process reads it
    with pytest.raises(CorruptIndexError, match="footer"):
        ds.get_many([("nz", i) for i in range(0, KEYS, 7)])


def test_a_flipped_byte_in_a_row_groups_hash_range_is_a_corrupt_index(indexed):
    ds, path, data = indexed
    low = pq.read_metadata(path).row_group(1).column(0).statistics.min
    at = data.index(struct.pack("<Q", low), _footer_start(data)) + 7
    _damaged(ds, path, data[:at] + bytes([data[at] ^ 0x80]) + data[at + 1:])


def test_a_damaged_bloom_hash_count_is_a_corrupt_index(indexed):
    ds, path, data = indexed
    at = data.index(HASHES_KEY, _footer_start(data)) + len(HASHES_KEY) + 2  # the value, after its Thrift header
    assert data[at:at + 1] == b"7"
    _damaged(ds, path, data[:at] + b"9" + data[at + 1:])


def test_a_flipped_column_type_in_the_footer_is_a_corrupt_index_not_an_abort(indexed):
    ds, path, data = indexed
    # the schema's type of _hash (SchemaElement: field 1, i32 INT64 = zigzag 4, then its name):
    # made BYTE_ARRAY, pyarrow aborts the process when it reads the column's statistics
    at = data.index(b"\x15\x04\x25\x00\x18\x05_hash", _footer_start(data)) + 1
    _damaged(ds, path, data[:at] + b"\x0c" + data[at + 1:])


@pytest.mark.parametrize("first_read", [20, 64 << 10])
def test_lookups_read_footers_longer_than_the_first_read_on_every_store(repo, monkeypatch, first_read):
    monkeypatch.setattr(index_module, "FOOTER_READ", first_read)
    index_module.FOOTERS.clear()
    ds = repo.create("footers", users_descriptor(**{"index.buckets": "2"}))
    ds.upsert([user("nz", i, 1, f"a{i}") for i in range(300)])
    ds.upsert([user("nz", i, 2, f"b{i}") for i in range(0, 300, 2)])
    ds.delete_keys([("nz", 3)])
    got = ds.get_many([("nz", i) for i in range(305)], columns=["userId", "email"]).to_pylist()
    assert got == [{"userId": i, "email": f"{'b' if i % 2 == 0 else 'a'}{i}"} for i in range(300) if i != 3]
    assert ds.get(("nz", 8))["email"] == "b8" and ds.get(("nz", 3)) is None


@pytest.mark.parametrize("name", ["_file", "tenant"])
def test_a_damaged_page_header_of_a_dictionary_column_is_a_corrupt_index(indexed, name):
    """Page checksums cover a page's data, not its header: a damaged header of the ``_file``
    dictionary (or of a key column's, read as codes) decoded indices out of its range (an
    ArrowIndexError escaped)."""
    ds, path, data = indexed
    metadata = pq.read_metadata(path)
    column = metadata.schema.to_arrow_schema().get_field_index(name)
    assert metadata.row_group(0).column(column).has_dictionary_page
    at = metadata.row_group(0).column(column).dictionary_page_offset + 8
    path.write_bytes(data[:at] + bytes([data[at] ^ 0x80]) + data[at + 1:])
    index_module.FOOTERS.clear()
    with pytest.raises(CorruptIndexError, match="is damaged"):
        ds.get_many([("nz", i) for i in range(KEYS)])


def test_index_files_logged_before_footer_checksums_are_read_as_before(tmp_path, monkeypatch):
    from cdkds.catalog.log.actions import AddIndex

    logged = AddIndex.to_json

    def as_before(self, descriptor):  # a writer from before footerCrc32
        body = logged(self, descriptor)
        body["addIndex"].pop("footerCrc32", None)
        return body

    with monkeypatch.context() as patch:
        patch.setattr(AddIndex, "to_json", as_before)
        ds = DatasetRepository(f"file://{tmp_path}").create("old", users_descriptor(**{"index.buckets": "2"}))
        ds.upsert([user("nz", i, 1, f"a{i}") for i in range(100)])
        ds.upsert([user("nz", i, 2, f"b{i}") for i in range(0, 100, 2)])
    index_module.FOOTERS.clear()
    old = DatasetRepository(f"file://{tmp_path}").load("old")
    assert old.snapshot.index and all(e.footer_crc32 is None for e in old.snapshot.index.values())
    got = old.get_many([("nz", i) for i in range(100)], columns=["email"]).column("email").to_pylist()
    assert got == [f"{'b' if i % 2 == 0 else 'a'}{i}" for i in range(100)]
    old.upsert([user("nz", 1, 3, "c1")])  # a new file beside the old ones: both read
    assert old.get(("nz", 1))["email"] == "c1" and old.get(("nz", 2))["email"] == "b2"
