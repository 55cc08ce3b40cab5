"""What reads of the record index keep between reads, all of immutable files and bounded
in bytes: index files' footers (with their row groups' hash ranges and Bloom filters) and
the deleted positions of data files."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow.parquet as pq

from cdkds.catalog.keyed.bloom import HashBloom
from cdkds.catalog.keyed.deletion import load_deletes
from cdkds.catalog.storage import ObjectStore
from cdkds.formats.cache import BoundedCache


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


# index files' footers, by path and size (Parquet metadata and Bloom filters)
FOOTERS: BoundedCache[IndexFooter] = BoundedCache(64 << 20, lambda f: f.nbytes)
# the deleted positions of data files, by their vectors' references (a read by key does not
# read a file's deletion vectors again)
DELETED: BoundedCache[np.ndarray] = BoundedCache(64 << 20, lambda p: p.nbytes)


def deleted_positions(store: ObjectStore, refs: tuple) -> np.ndarray:
    """The positions (sorted int64) the vectors ``refs`` delete."""
    key = (store.url, refs)
    found = DELETED.get(key)
    if found is None:
        found = load_deletes(store, refs).to_numpy().astype(np.int64)
        DELETED.put(key, found)
    return found
