"""A Parquet footer without some of its key-value metadata, cut from its bytes before it is
parsed: the footer (Thrift compact protocol, ``FileMetaData``) is walked field by field,
and the ``key_value_metadata`` list (field 5) is written again without the entries a
caller takes out, which it gets back as bytes. Every other byte is kept as it is, so the
footer still describes the file's row groups exactly; pyarrow then parses only what is
kept (an index file's Bloom filter is 1.6 bytes of base64 a key, parsed and held twice
by a parsed footer)."""

from __future__ import annotations

import struct
from typing import Callable

MAGIC = b"PAR1"
_KEY_VALUES = 5  # FileMetaData.key_value_metadata
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT, _UUID = range(14)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _varint_end(data: bytes, at: int) -> int:
    """Where the varint starting at ``at`` ends (its value unread)."""
    while data[at] & 0x80:
        at += 1
    return at + 1


def _skip(data: bytes, at: int, kind: int, in_container: bool = False) -> int:
    """Where the value of Thrift compact ``kind`` starting at ``at`` ends."""
    if kind == _STRUCT:
        return _skip_struct(data, at)
    if kind in (_I16, _I32, _I64):
        return _varint_end(data, at)
    if kind == _BINARY:
        length, at = _varint(data, at)
        return at + length
    if kind in (_TRUE, _FALSE):
        return at + 1 if in_container else at  # a struct field's bool is in its header
    if kind == _BYTE:
        return at + 1
    if kind == _DOUBLE:
        return at + 8
    if kind == _UUID:
        return at + 16
    if kind in (_LIST, _SET):
        return _skip_list(data, at)
    if kind == _MAP:
        size, at = _varint(data, at)
        _check_count(data, at, size)
        if size:
            kinds = data[at]
            at += 1
            for _ in range(size):
                at = _skip(data, _skip(data, at, kinds >> 4, True), kinds & 0x0F, True)
        return at
    raise ValueError(f"not a Parquet footer: Thrift type {kind}")


def _skip_struct(data: bytes, at: int) -> int:
    """Where the struct starting at ``at`` ends: :func:`_walk` without collecting its fields,
    the common field types inlined (a footer holds thousands of them: a row group's
    column chunks each have a dozen)."""
    while True:
        header = data[at]
        at += 1
        if header == _STOP:
            return at
        if not header >> 4:  # the field id follows as a varint
            at = _varint_end(data, at)
        kind = header & 0x0F
        if kind == _I32 or kind == _I64 or kind == _I16:
            while data[at] & 0x80:
                at += 1
            at += 1
        elif kind == _BINARY:
            length, at = _varint(data, at)
            at += length
        elif kind == _STRUCT:
            at = _skip_struct(data, at)
        elif kind == _LIST:
            at = _skip_list(data, at)
        elif kind != _TRUE and kind != _FALSE:
            at = _skip(data, at, kind)


def _skip_list(data: bytes, at: int) -> int:
    """Where the list or set starting at ``at`` ends, its common element types inlined."""
    size, element, at = _list_header(data, at)
    if element == _STRUCT:
        for _ in range(size):
            at = _skip_struct(data, at)
    elif element == _I32 or element == _I64 or element == _I16:
        for _ in range(size):
            while data[at] & 0x80:
                at += 1
            at += 1
    elif element == _BINARY:
        for _ in range(size):
            length, at = _varint(data, at)
            at += length
    else:
        for _ in range(size):
            at = _skip(data, at, element, True)
    return at


def _list_header(data: bytes, at: int) -> tuple[int, int, int]:
    header = data[at]
    size, element = header >> 4, header & 0x0F
    at += 1
    if size == 15:
        size, at = _varint(data, at)
    _check_count(data, at, size)
    return size, element, at


def _check_count(data: bytes, at: int, size: int) -> None:
    """Raise if ``size`` values, a byte each at least, cannot start at ``at``: a damaged
    count would otherwise have fixed-width values skipped (never read) for ages."""
    if size > len(data) - at:
        raise ValueError(f"not a Parquet footer: a container of {size} values in {len(data) - at} bytes")


def _walk(data: bytes, at: int) -> tuple[list[tuple[int, int, int, int]], int]:
    """The fields of the struct at ``at`` (id, type, where its value starts and ends) and
    where the struct ends."""
    fields = []
    last = 0
    while data[at] != _STOP:
        header = data[at]
        at += 1
        if header >> 4:
            field = last + (header >> 4)
        else:
            zigzag, at = _varint(data, at)
            field = (zigzag >> 1) ^ -(zigzag & 1)
        last = field
        end = _skip(data, at, header & 0x0F)
        fields.append((field, header & 0x0F, at, end))
        at = end
    return fields, at + 1


def _binary(data: bytes, at: int) -> bytes:
    length, at = _varint(data, at)
    return bytes(data[at:at + length])


def without_keys(footer: bytes, drop: Callable[[bytes], bool]) -> tuple[bytes, dict[bytes, bytes]]:
    """``footer`` (a Parquet file's end: the footer, its length, ``PAR1``) without the
    key-value entries whose key ``drop`` holds true for, and those entries.
    :class:`ValueError` if it is not a Parquet footer."""
    if len(footer) < 8 or footer[-4:] != MAGIC:
        raise ValueError("not a Parquet footer: no PAR1 at its end")
    (length,) = struct.unpack("<I", footer[-8:-4])
    if length + 8 > len(footer):
        raise ValueError("not a Parquet footer: shorter than its length says")
    data = footer[-8 - length:-8]
    try:
        for field, kind, start, end in _walk(data, 0)[0]:
            if field == _KEY_VALUES and kind == _LIST:
                kept, dropped = _split_entries(data, start, drop)
                if not dropped:
                    return footer, {}
                entries = b"".join(kept)
                count = len(kept)
                header = bytes([(count << 4) | _STRUCT]) if count < 15 else bytes([0xF0 | _STRUCT]) + _encode_varint(count)
                thrift = data[:start] + header + entries + data[end:]
                return thrift + struct.pack("<I", len(thrift)) + MAGIC, dropped
    except (IndexError, RecursionError):
        raise ValueError("not a Parquet footer: it ends inside a value, or nests without end") from None
    return footer, {}


def _split_entries(data: bytes, at: int, drop: Callable[[bytes], bool]) -> tuple[list[bytes], dict[bytes, bytes]]:
    """The ``KeyValue`` structs (1: key, 2: value) of the list at ``at``: the bytes of those
    kept, and the key and value of those ``drop`` takes out."""
    size, element, at = _list_header(data, at)
    if element != _STRUCT:
        raise ValueError("not a Parquet footer: key-value metadata is not a list of structs")
    kept: list[bytes] = []
    dropped: dict[bytes, bytes] = {}
    for _ in range(size):
        fields, end = _walk(data, at)
        values = {field: _binary(data, start) for field, kind, start, _ in fields if kind == _BINARY}
        key = values.get(1)
        if key is not None and drop(key):
            dropped[key] = values.get(2, b"")
        else:
            kept.append(bytes(data[at:end]))
        at = end
    return kept, dropped


def footer_length(data: bytes) -> int:
    """The length of the Parquet footer that ``data`` (a file, or its end) ends with."""
    if len(data) < 12 or data[-4:] != b"PAR1":
        raise ValueError("it does not end as a Parquet file does")
    return int.from_bytes(data[-8:-4], "little")


def footer_of(data: bytes) -> bytes:
    """The Parquet footer that ``data`` ends with, its length and magic included: what an
    index file's ``footer_crc32`` is of."""
    length = footer_length(data)
    if length + 8 > len(data):
        raise ValueError(f"its footer length {length} is more than the file holds")
    return bytes(data[len(data) - length - 8:])
