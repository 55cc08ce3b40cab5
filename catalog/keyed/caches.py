"""What reads of the record index keep between reads, all of immutable files and bounded
in bytes: index files' footers (with their row groups' hash ranges and Bloom filters) and
the deleted positions of data files."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pyarrow.parquet as pq

from cdkds.catalog.keyed.bloom import HashBloom
from cdkds.catalog.keyed.deletion import load_deletes
from cdkds.catalog.storage import ObjectStore


@dataclass(frozen=True)
class IndexFooter:
    """What a lookup needs of an index file's footer: the Parquet metadata, each row group's
    hash range and first row, and the file's Bloom filter (``None`` for files written
    before filters were)."""

    metadata: pq.FileMetaData
    low: np.ndarray  # uint64, per row group
    high: np.ndarray
    offsets: np.ndarray  # int64, num_row_groups + 1
    bloom: HashBloom | None

    @classmethod
    def of(cls, metadata: pq.FileMetaData) -> "IndexFooter":
        column = metadata.schema.to_arrow_schema().get_field_index("_hash")
        groups = metadata.num_row_groups
        low, high = np.zeros(groups, np.uint64), np.full(groups, np.iinfo(np.uint64).max, np.uint64)
        for g in range(groups):
            stats = metadata.row_group(g).column(column).statistics
            if stats is not None and stats.has_min_max:
                low[g], high[g] = stats.min, stats.max
        sizes = [metadata.row_group(g).num_rows for g in range(groups)]
        offsets = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))).astype(np.int64)
        return cls(metadata, low, high, offsets, HashBloom.from_metadata(metadata.metadata))

    @property
    def nbytes(self) -> int:
        """About the memory it holds."""
        return self.metadata.serialized_size + (len(self.bloom.bits) if self.bloom else 0) + 24 * len(self.low)

    def groups_for(self, wanted: np.ndarray) -> np.ndarray:
        """The row groups whose hash range holds one of ``wanted`` (sorted, unique)."""
        first = np.searchsorted(wanted, self.low, "left")
        last = np.searchsorted(wanted, self.high, "right")
        return np.flatnonzero(first < last)


class _Footers:
    """Footers of index files, by path and size (the files are immutable), at most
    ``capacity`` bytes of them (Parquet metadata and Bloom filters), least recently used out."""

    def __init__(self, capacity: int = 64 << 20):
        self._items: OrderedDict[tuple[str, int], IndexFooter] = OrderedDict()
        self._bytes = 0
        self._capacity = capacity
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int]) -> IndexFooter | None:
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item

    def put(self, key: tuple[str, int], value: IndexFooter) -> None:
        with self._lock:
            if key in self._items:
                return
            self._items[key] = value
            self._bytes += value.nbytes
            while self._bytes > self._capacity and len(self._items) > 1:
                self._bytes -= self._items.popitem(last=False)[1].nbytes


FOOTERS = _Footers()


class _DeletedPositions:
    """The deleted positions of data files (their vectors are immutable), by their vectors'
    references, at most ``capacity`` bytes of them: a read by key does not read a file's
    deletion vectors again."""

    def __init__(self, capacity: int = 64 << 20):
        self._items: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._bytes = 0
        self._capacity = capacity
        self._lock = threading.Lock()

    def of(self, store: ObjectStore, refs: tuple) -> np.ndarray:
        """The positions (sorted int64) the vectors ``refs`` delete."""
        key = (store.url, refs)
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                return found
        positions = load_deletes(store, refs).to_numpy().astype(np.int64)
        with self._lock:
            if key not in self._items:
                self._items[key] = positions
                self._bytes += positions.nbytes
            while self._bytes > self._capacity and len(self._items) > 1:
                self._bytes -= self._items.popitem(last=False)[1].nbytes
        return positions


DELETED = _DeletedPositions()


def _after_fork() -> None:
    """In a forked child: a lock a parent's thread held at the fork stays held (that thread
    is not in the child), so the caches take new ones; what they hold stays valid."""
    for cache in (FOOTERS, DELETED):
        cache._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
