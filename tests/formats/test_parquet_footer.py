"""formats/parquet_footer.py: a Parquet footer cut without some key-value entries is the
footer pyarrow writes, minus those entries, and reads the file as before."""

from __future__ import annotations

import io
import signal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st

from cdkds.formats.parquet_footer import without_keys

KEYS = st.text(alphabet="abcdefg.:", min_size=1, max_size=12).map(str.encode)
VALUES = st.one_of(st.binary(max_size=40), st.binary(min_size=200, max_size=3000))


def _file(table: pa.Table, metadata: dict[bytes, bytes], row_group: int) -> bytes:
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, table.schema) as writer:
        writer.add_key_value_metadata({k.decode(): v for k, v in metadata.items()} if metadata else {})
        writer.write_table(table, row_group_size=row_group)
    return sink.getvalue()


def _footer(data: bytes) -> bytes:
    length = int.from_bytes(data[-8:-4], "little")
    return data[-8 - length:]


@settings(max_examples=max(10, settings.default.max_examples // 2))
@given(rows=st.integers(0, 60), row_group=st.integers(1, 25), metadata=st.dictionaries(KEYS, VALUES, max_size=20),
       prefix=st.sampled_from([b"a", b"b.", b"zz", b""]))
def test_a_footer_without_some_entries_is_the_footer_minus_them(rows, row_group, metadata, prefix):
    table = pa.table({"i": pa.array(range(rows), pa.int64()), "s": pa.array([str(i) * (i % 4) for i in range(rows)]),
                      "b": pa.array([i % 3 == 0 for i in range(rows)])})
    data = _file(table, metadata, row_group)
    original = pq.read_metadata(pa.BufferReader(data))
    kept, dropped = without_keys(_footer(data), lambda key: key.startswith(prefix))
    stripped = pq.read_metadata(pa.BufferReader(kept))
    every = dict(original.metadata or {})
    assert dropped == {k: v for k, v in every.items() if k.startswith(prefix)}
    assert dict(stripped.metadata or {}) == {k: v for k, v in every.items() if not k.startswith(prefix)}
    assert stripped.to_dict()["row_groups"] == original.to_dict()["row_groups"]
    assert stripped.schema.equals(original.schema) and stripped.num_rows == original.num_rows
    assert pq.ParquetFile(pa.BufferReader(data), metadata=stripped).read().equals(table)
    if not dropped:
        assert kept == _footer(data)


def test_what_is_not_a_footer_is_a_value_error():
    data = _file(pa.table({"i": [1, 2]}), {b"k": b"v"}, 1)
    footer = _footer(data)
    for broken in (b"", b"PAR1", footer[:-1], footer[:5] + b"\xff" * 4 + footer[-8:], footer[-12:]):
        with pytest.raises(ValueError):
            without_keys(broken, lambda key: True)


@pytest.mark.parametrize("element", [0x07, 0x0D, 0x01, 0x03])  # double, UUID, bool, byte: fixed widths
def test_a_damaged_count_of_fixed_width_values_is_a_value_error_at_once(element):
    # FileMetaData{1: i32 2, 2: list of 2**63-1 values} in 17 bytes: a walk that skips the
    # values by their width without reading them would take centuries to end
    thrift = bytes([0x15, 0x04, 0x19, 0xF0 | element]) + b"\xff" * 8 + b"\x7f" + b"\x00"
    footer = thrift + len(thrift).to_bytes(4, "little") + b"PAR1"

    def too_long(*_):
        raise TimeoutError("without_keys walked a 17-byte footer for 5 seconds")
    previous = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(5)
    try:
        with pytest.raises(ValueError):
            without_keys(footer, lambda key: True)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)

