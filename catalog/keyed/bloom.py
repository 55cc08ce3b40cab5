"""A Bloom filter of the key hashes of one index file, kept in the file's footer, so a
lookup skips the files of a bucket that cannot hold its keys (a ``get`` reads one index
file, not every delta of its bucket).

The filter is built from the 64-bit key hashes (:mod:`.keys`), remixed so that the hashes
of one bucket, which share their residue modulo the bucket count, spread over every bit:
``h = splitmix64(hash ^ SALT)``, ``h1 = h & 0xffffffff``, ``h2 = (h >> 32) | 1``, bit
``(h1 + i * h2) mod m`` for ``i < hashes``. ``m`` is the filter's length in bits (a
multiple of 64), about ``BITS_PER_KEY`` bits a key: about 1% false positives. Stored as
footer metadata ``cdkds.index.bloom`` (base64 of the bits, least significant bit first)
``cdkds.index.bloom.hashes`` and ``cdkds.index.bloom.crc32`` (of the bits; docs/FORMAT.md).
"""

from __future__ import annotations

import base64
import zlib
from dataclasses import dataclass
from typing import Mapping

import numpy as np

BITS_PER_KEY = 10
HASHES = 7
BLOOM_KEY = b"cdkds.index.bloom"
HASHES_KEY = b"cdkds.index.bloom.hashes"
CRC_KEY = b"cdkds.index.bloom.crc32"
_SALT = np.uint64(0x5BD1E9955BD1E995)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _remix(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(over="ignore"):
        h = (np.asarray(hashes, dtype=np.uint64) ^ _SALT) + _GOLDEN
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        h = h ^ (h >> np.uint64(31))
    return h & np.uint64(0xFFFFFFFF), (h >> np.uint64(32)) | np.uint64(1)


@dataclass(frozen=True)
class HashBloom:
    """Which key hashes an index file may hold: no false negatives."""

    bits: bytes
    hashes: int = HASHES

    @property
    def size(self) -> int:
        return len(self.bits) * 8

    @classmethod
    def of(cls, hashes: np.ndarray) -> "HashBloom":
        """The filter of ``hashes`` (uint64)."""
        size = max(64, -(-len(hashes) * BITS_PER_KEY // 64) * 64)
        flags = np.zeros(size, dtype=bool)
        for position in cls._positions(hashes, size, HASHES):
            flags[position] = True
        return cls(np.packbits(flags, bitorder="little").tobytes(), HASHES)

    @staticmethod
    def _positions(hashes: np.ndarray, size: int, count: int) -> list[np.ndarray]:
        h1, h2 = _remix(hashes)
        m = np.uint64(size)
        with np.errstate(over="ignore"):
            return [((h1 + np.uint64(i) * h2) % m).astype(np.int64) for i in range(count)]

    def might_hold(self, hashes: np.ndarray) -> np.ndarray:
        """For each hash, False when the file cannot hold it."""
        bits = np.frombuffer(self.bits, dtype=np.uint8)
        out = np.ones(len(hashes), dtype=bool)
        for position in self._positions(hashes, self.size, self.hashes):
            out &= ((bits[position >> 3] >> (position & 7).astype(np.uint8)) & 1).astype(bool)
        return out

    def metadata(self) -> dict[bytes, bytes]:
        """The footer metadata that stores the filter."""
        return {BLOOM_KEY: base64.b64encode(self.bits), HASHES_KEY: str(self.hashes).encode(),
                CRC_KEY: str(zlib.crc32(self.bits)).encode()}

    @classmethod
    def from_metadata(cls, metadata: Mapping[bytes, bytes] | None) -> "HashBloom | None":
        """The filter a footer stores; ``None`` for an index file written without one;
        :class:`ValueError` when it is damaged (a footer has no page checksums, and a wrong
        filter would hide keys)."""
        if not metadata or BLOOM_KEY not in metadata:
            return None
        bits = base64.b64decode(metadata[BLOOM_KEY], validate=True)
        if CRC_KEY not in metadata or int(metadata[CRC_KEY]) != zlib.crc32(bits) or not bits:
            raise ValueError("its Bloom filter is damaged (CRC-32 differs)")
        return cls(bits, int(metadata.get(HASHES_KEY, str(HASHES).encode())))
