"""Delta Lake deletion vectors (``PROTOCOL.md``, Deletion Vectors): the rows of a data file a
reader skips, as a 64-bit roaring bitmap (``RoaringTreemap``, portable format) behind a magic
number, stored in a deletion-vector file under the table root.

A version's vectors go in one file, ``_delta_dv/deletion_vector_<uuid>.bin``: a version byte
(1), then per vector its size (big-endian int32), the magic number (little-endian) with the
bitmap, and the CRC-32 of those (big-endian). The uuid is derived from the table id and the
version, so two processes mirroring the same revision write the same object.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass

import numpy as np
import pyroaring

VECTOR_PREFIX = "_delta_dv"
_MAGIC = 1681511377  # RoaringBitmapArray, portable serialisation
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85(data: bytes) -> str:
    """ZeroMQ's Base85 (Z85) of ``data`` (a multiple of 4 bytes long)."""
    out = []
    for i in range(0, len(data), 4):
        word = int.from_bytes(data[i:i + 4], "big")
        out.append("".join(_Z85[word // 85 ** k % 85] for k in (4, 3, 2, 1, 0)))
    return "".join(out)


def from_z85(text: str) -> bytes:
    out = bytearray()
    for i in range(0, len(text), 5):
        word = 0
        for c in text[i:i + 5]:
            word = word * 85 + _Z85.index(c)
        out += word.to_bytes(4, "big")
    return bytes(out)


def serialize(positions: np.ndarray) -> bytes:
    """The magic number and the portable ``RoaringTreemap`` of ``positions`` (sorted int64)."""
    highs = np.unique(positions >> 32) if len(positions) else np.empty(0, np.int64)
    out = [struct.pack("<I", _MAGIC), struct.pack("<Q", len(highs))]
    for high in highs:
        low = positions[(positions >> 32) == high] & 0xFFFFFFFF
        out += [struct.pack("<I", int(high)), pyroaring.BitMap(low.astype(np.uint32)).serialize()]
    return b"".join(out)


def deserialize(data: bytes) -> np.ndarray:
    """The positions a serialised vector (:func:`serialize`) holds."""
    if struct.unpack_from("<I", data)[0] != _MAGIC:
        raise ValueError("not a portable roaring deletion vector (bad magic number)")
    count = struct.unpack_from("<Q", data, 4)[0]
    offset, parts = 12, []
    for _ in range(count):
        high = struct.unpack_from("<I", data, offset)[0]
        bitmap = pyroaring.BitMap.deserialize(data[offset + 4:])
        offset += 4 + len(bitmap.serialize())
        parts.append(np.asarray(bitmap.to_array(), dtype=np.int64) | (high << 32))
    return np.concatenate(parts) if parts else np.empty(0, np.int64)


@dataclass(frozen=True)
class VectorFile:
    """The deletion vectors one mirror version writes, and where they go."""

    key: str
    encoded_path: str
    data: bytes
    descriptors: dict[str, dict]  # data file path -> its Delta ``deletionVector``

    @staticmethod
    def of(table_id: str, version: int, positions: dict[str, np.ndarray]) -> "VectorFile":
        """The vectors of ``positions`` (data file path -> deleted positions, none empty)."""
        data, descriptors = bytearray(b"\x01"), {}
        encoded = _encoded_path(table_id, version)
        for path in sorted(positions):
            vector = serialize(positions[path])
            descriptors[path] = {"storageType": "u", "pathOrInlineDv": encoded, "offset": len(data),
                                 "sizeInBytes": len(vector), "cardinality": int(len(positions[path]))}
            data += struct.pack(">I", len(vector)) + vector + struct.pack(">I", zlib.crc32(vector))
        return VectorFile(vector_key(encoded), encoded, bytes(data), descriptors)


def _encoded_path(table_id: str, version: int) -> str:
    return VECTOR_PREFIX + z85(uuid.uuid5(uuid.UUID(table_id), f"deletion vectors of version {version}").bytes)


def version_vectors_key(table_id: str, version: int) -> str:
    """The key of the deletion-vector file of a version (whether it has one or not)."""
    return vector_key(_encoded_path(table_id, version))


def vector_key(encoded_path: str) -> str:
    """The table-relative key of a ``u`` deletion vector's file (prefix, then the z85 uuid)."""
    prefix, id_text = encoded_path[:-20], encoded_path[-20:]
    name = f"deletion_vector_{uuid.UUID(bytes=from_z85(id_text))}.bin"
    return f"{prefix}/{name}" if prefix else name


def read_vector(file_bytes: bytes, descriptor: dict) -> np.ndarray:
    """The positions of one ``u`` vector read out of its file's bytes, its CRC checked."""
    offset, size = int(descriptor["offset"]), int(descriptor["sizeInBytes"])
    stored = struct.unpack_from(">I", file_bytes, offset)[0]
    data = file_bytes[offset + 4:offset + 4 + size]
    crc = struct.unpack_from(">I", file_bytes, offset + 4 + size)[0]
    if stored != size or zlib.crc32(data) != crc:
        raise ValueError(f"deletion vector at offset {offset} of {vector_key(descriptor['pathOrInlineDv'])} "
                         f"is damaged (size or CRC-32 differs)")
    return deserialize(data)
