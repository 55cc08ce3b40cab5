"""How index files store entries (catalog/keyed/index_encoding.py): key strings of few values
dictionary-encoded and read back as codes, others as strings; damaged codes refused."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.keyed.index_encoding import SAMPLE_ENTRIES, checked_codes, coded_columns, dictionary_keys

SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "tenant", "type": "string"}, {"name": "name", "type": "string"}, {"name": "v", "type": "long"}]}


def entries(tenants, names):
    n = len(tenants)
    return pa.table({"_hash": pa.array(range(n), pa.uint64()), "tenant": tenants, "name": names,
                     "_file": pa.array(["f"] * n).dictionary_encode(), "_pos": pa.array(range(n), pa.int64())})


def test_only_key_strings_of_few_values_are_dictionary_encoded():
    names = [f"n{i}" for i in range(16)]
    assert dictionary_keys(entries(["a", "b"] * 8, names)) == ["tenant"]
    assert dictionary_keys(entries(["a", "b", "c"] * 5 + ["a"], names)) == []  # 3 values in 16: too many
    assert dictionary_keys(entries(["a"] * 16, ["w"] * 16)) == ["tenant", "name"]


def test_the_rule_looks_at_a_row_group_sized_run_of_entries():
    twice = [f"u{i // 2}" for i in range(2 * SAMPLE_ENTRIES)]  # each value twice: half as many values as entries
    tenants = [f"t{i % 16}" for i in range(2 * SAMPLE_ENTRIES)]
    assert dictionary_keys(entries(tenants, twice)) == ["tenant"]
    late = ["a"] * SAMPLE_ENTRIES + [f"z{i}" for i in range(SAMPLE_ENTRIES)]  # past the sample: not looked at
    assert dictionary_keys(entries(late, twice)) == ["tenant"]
    distinct = [f"id{i}" for i in range(2 * SAMPLE_ENTRIES)]  # told from the first tenth of the sample
    assert dictionary_keys(entries(distinct, distinct)) == []


def test_damaged_codes_are_refused():
    good = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int32()), pa.array(["a", "b"]))
    assert checked_codes(pa.table({"tenant": good})).num_rows == 3
    bad = pa.DictionaryArray.from_arrays(pa.array([0, 5, 0], pa.int32()), pa.array(["a", "b"]), safe=False)
    with pytest.raises(pa.ArrowInvalid):
        checked_codes(pa.table({"tenant": bad}))


def test_a_keyed_write_stores_its_few_tenants_as_codes_and_reads_them_back(tmp_path):
    ds = DatasetRepository(f"file://{tmp_path}").create("r", DatasetDescriptor(
        SCHEMA, record_key=["tenant", "name"], properties={"index.buckets": "1"}))
    ds.upsert([{"tenant": "ab"[i % 2], "name": f"n{i}", "v": i} for i in range(100)])
    (index_file,) = ds.snapshot.index_files(0)
    metadata = pq.read_metadata(ds.store.path(index_file.path))
    assert coded_columns(metadata) == ["tenant"]  # the names are all distinct: strings
    assert ds.get({"tenant": "b", "name": "n7"})["v"] == 7
    ds.upsert([{"tenant": "b", "name": "n7", "v": 70}])
    assert ds.get({"tenant": "b", "name": "n7"})["v"] == 70
    assert ds.to_table().num_rows == 100
