import datetime as dt
import decimal

import fsspec
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdkds.formats import schema as schemas
from cdkds.formats.errors import DataFileError
from cdkds.formats.files import file_format
from cdkds.formats.projection import Projection

UTC = dt.timezone.utc
SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"},
    {"name": "name", "type": ["null", "string"], "default": None},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "price", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}],
     "default": None},
    {"name": "tags", "type": {"type": "map", "values": "long"}},
    {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
]}
SCHEMA = schemas.assign_ids(SCHEMA)
ARROW = schemas.to_arrow(SCHEMA)
ALL = Projection(SCHEMA, ARROW.names)


def rows(n):
    return [{"id": i, "name": None if i % 3 == 0 else f"n{i}", "ts": dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(hours=i),
             "price": decimal.Decimal(i) / 4 if i % 2 else None, "tags": [("a", i)],
             "u": "12345678-1234-5678-1234-%012d" % i} for i in range(n)]


@pytest.mark.parametrize("name, compression", [
    ("parquet", "snappy"), ("parquet", "zstd"), ("parquet", "gzip"),
    ("avro", "snappy"), ("avro", "deflate"), ("avro", "zstd"), ("avro", "null")])
def test_write_read_round_trip_with_statistics_and_metadata(tmp_path, name, compression):
    fs = fsspec.filesystem("file")
    fmt = file_format(name)
    path = f"{tmp_path}/f.{fmt.extension}"
    writer = fmt.open_writer(fs, path, SCHEMA, ARROW, compression, {"cdkds.dataset": "d", "cdkds.transaction": "t1"})
    data = rows(250)
    for start in range(0, 250, 100):
        writer.write(pa.RecordBatch.from_pylist(data[start:start + 100], schema=ARROW))
    written = writer.close()
    assert written.row_count == 250 and written.size == fs.size(path)
    stats = written.statistics
    assert (stats["id"].min, stats["id"].max, stats["id"].null_count) == (0, 249, 0)
    assert stats["name"].null_count == 84 and stats["name"].min == "n1"
    assert stats["ts"].max == dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(hours=249)
    assert stats["tags"].min is None
    batches = list(fmt.read(fs, path, ALL, batch_rows=64))
    assert max(b.num_rows for b in batches) <= 64
    table = pa.Table.from_batches(batches)
    assert table.to_pylist() == pa.Table.from_pylist(data, schema=ARROW).to_pylist()
    assert fmt.metadata(fs, path) == {"cdkds.dataset": "d", "cdkds.transaction": "t1"}


@pytest.mark.parametrize("name", ["parquet", "avro"])
def test_read_selected_columns_only(tmp_path, name):
    fs = fsspec.filesystem("file")
    fmt = file_format(name)
    path = f"{tmp_path}/f.{fmt.extension}"
    writer = fmt.open_writer(fs, path, SCHEMA, ARROW, "snappy", {})
    writer.write(pa.RecordBatch.from_pylist(rows(10), schema=ARROW))
    writer.close()
    batch = pa.Table.from_batches(list(fmt.read(fs, path, Projection(SCHEMA, ["name", "id"]))))
    assert batch.column_names == ["name", "id"]


@pytest.mark.parametrize("name", ["parquet", "avro"])
def test_garbage_file_is_a_clear_error(tmp_path, name):
    fs = fsspec.filesystem("file")
    path = f"{tmp_path}/bad"
    fs.pipe_file(path, b"this is not a data file")
    with pytest.raises(DataFileError, match="not a readable"):
        list(file_format(name).read(fs, path, ALL))


@given(st.lists(st.one_of(st.none(), st.floats(allow_nan=True, width=32)), min_size=1, max_size=50))
def test_property_float_statistics_bound_every_value(items):
    from cdkds.formats.statistics import StatisticsCollector
    schema = pa.schema([pa.field("x", pa.float64())])
    collector = StatisticsCollector(schema)
    collector.update(pa.RecordBatch.from_pylist([{"x": v} for v in items], schema=schema))
    s = collector.result()["x"]
    assert s.null_count == sum(v is None for v in items)
    if s.min is not None:
        assert all(s.min <= v <= s.max for v in items if v is not None)


def test_a_parquet_file_in_memory_is_copied_into_arrow_memory():
    """Arrow must hold no reference to a Python object it could free on its own threads
    at interpreter exit (issue 25.8): the bytes are Arrow's own copy."""
    import io

    import pyarrow.parquet as pq

    from cdkds.formats.parquet import parquet_in_memory

    sink = io.BytesIO()
    pq.write_table(pa.table({"x": list(range(1000))}), sink)
    data = bytearray(sink.getvalue())
    parquet = parquet_in_memory(data)
    data[:] = bytes(len(data))  # the Python bytes no longer hold a Parquet file
    data.extend(b"resized")  # refused while anything still exports the bytearray's buffer
    assert parquet.read().column("x").to_pylist() == list(range(1000))


def test_the_cache_of_data_file_footers_is_bounded_in_bytes(tmp_path):
    """Reads by position keep data files' footers; a wide file's footer is megabytes, so the
    cache is bounded by their size, not only by their count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cdkds.formats.cache import BoundedCache

    wide = pa.table({f"c{i}": pa.array(range(10)) for i in range(400)})
    pq.write_table(wide, tmp_path / "wide.parquet", row_group_size=1)
    footer = pq.read_metadata(tmp_path / "wide.parquet")
    cache = BoundedCache(3 * footer.serialized_size, lambda m: m.serialized_size)
    for i in range(10):
        cache.put((str(i), 1), footer)
    assert cache.get(("9", 1)) is footer and cache.get(("0", 1)) is None
    assert cache._bytes <= 3 * footer.serialized_size


def test_parquet_columns_of_many_values_fall_back_to_plain_encoding_and_of_few_keep_their_dictionary(tmp_path):
    import pyarrow.parquet as pq

    from cdkds.formats.parquet import DICTIONARY_PAGE_BYTES

    fs = fsspec.filesystem("file")
    path = f"{tmp_path}/f.parquet"
    n = 4 * DICTIONARY_PAGE_BYTES // 8  # distinct ids: a dictionary of all of them is four times the limit
    data = [{**r, "id": i, "name": f"n{i % 7}"} for i, r in zip(range(n), rows(1) * n)]
    writer = file_format("parquet").open_writer(fs, path, SCHEMA, ARROW, "none", {})
    writer.write(pa.RecordBatch.from_pylist(data, schema=ARROW))
    writer.close()
    group = pq.ParquetFile(path).metadata.row_group(0)
    ids, names = group.column(0), group.column(1)

    def dictionary_bytes(column):
        return column.data_page_offset - column.dictionary_page_offset if column.has_dictionary_page else 0

    assert dictionary_bytes(ids) <= DICTIONARY_PAGE_BYTES + 1024  # stopped at the limit: the rest plain
    assert 0 < dictionary_bytes(names) < 1024 and names.total_uncompressed_size < n  # a few values: a dictionary
    assert pa.Table.from_batches(list(file_format("parquet").read(fs, path, ALL))).column("id").to_pylist() == list(range(n))
