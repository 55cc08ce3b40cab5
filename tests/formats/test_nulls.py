"""Nulls inside nested values as writers accept them: a null a null record hides becomes a
placeholder; any other null is left for the writer to refuse."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdkds.formats.nulls import null_column, writable, writable_batch

GEO = pa.struct([pa.field("lat", pa.float64(), False)])
GEOS = pa.list_(pa.field("item", GEO, False))
ADDR = pa.struct([pa.field("city", pa.string(), False), pa.field("geo", GEO, False), pa.field("tags", GEOS, True)])


def _parquet_accepts(array: pa.Array) -> None:
    pq.write_table(pa.table({"c": array}, schema=pa.schema([pa.field("c", array.type)])), io.BytesIO())


def _hiding() -> pa.StructArray:
    """Rows 1-3 null records whose required children (and grandchild ``geo.lat``, under a
    non-null ``geo``) hold nulls; row 3's list of records holds a record with a null lat."""
    geo = pa.StructArray.from_arrays([pa.array([1.0, None, None, None])], fields=list(GEO))
    items = pa.StructArray.from_arrays([pa.array([2.0, None])], fields=list(GEO))
    tags = pa.ListArray.from_arrays(pa.array([0, 1, 1, 1, 2], pa.int32()), items, type=GEOS)
    return pa.StructArray.from_arrays([pa.array(["a", None, None, None]), geo, tags], fields=list(ADDR),
                                      mask=pa.array([False, True, True, True]))


def test_hidden_nulls_become_placeholders_at_every_depth():
    raw = _hiding()
    with pytest.raises(pa.ArrowInvalid, match="non-nullable but contains nulls"):
        _parquet_accepts(raw)
    fixed = writable(raw)
    _parquet_accepts(fixed)
    assert fixed.to_pylist() == raw.to_pylist() == [{"city": "a", "geo": {"lat": 1.0}, "tags": [{"lat": 2.0}]},
                                                   None, None, None]
    assert fixed.field(0).null_count == fixed.field(1).field(0).null_count == 0
    assert writable(raw.slice(1)).to_pylist() == [None] * 3
    _parquet_accepts(writable(raw.slice(1)))


def test_a_null_no_record_hides_is_left_for_the_writer_to_refuse():
    bad = pa.StructArray.from_arrays([pa.array([None, 1.0])], fields=list(GEO))
    assert writable(bad) is bad
    flat = pa.record_batch([pa.array([1, None])], names=["x"])
    assert writable_batch(flat) is flat  # nothing nested: the batch as it is


def test_null_columns_of_records_are_writable():
    column = null_column(ADDR, 3)
    assert column.to_pylist() == [None] * 3
    _parquet_accepts(column)
    assert null_column(pa.int64(), 2).to_pylist() == [None, None]
