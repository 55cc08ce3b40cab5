"""What reads of the record index keep between reads, all of immutable files and bounded
in bytes: index files' footers (with their row groups' hash ranges and Bloom filters) and
the deleted positions of data files."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cdkds.catalog.keyed.bloom import BLOOM_KEY, HashBloom
from cdkds.catalog.keyed.deletion import load_deletes
from cdkds.catalog.storage import ObjectStore
from cdkds.formats.cache import BoundedCache
from cdkds.formats.parquet_footer import without_keys


@dataclass(frozen=True)
class IndexFooter:
    """What a lookup needs of an index file's footer: the Parquet metadata (without the
    Bloom filter's text), each row group's hash range and first row, whether the file has a
    Bloom filter (``has_bloom``: files written before filters were have none) and the
    filter, decoded only for the lookups that probe it (``bloom``: ``None`` until then).
    A filter takes 10 bits a key: kept for every footer a large upsert reads, the filters
    would grow a process by the size of the dataset's index."""

    metadata: pq.FileMetaData
    low: np.ndarray  # uint64, per row group
    high: np.ndarray
    offsets: np.ndarray  # int64, num_row_groups + 1
    bloom: HashBloom | None
    has_bloom: bool = False

    @classmethod
    def of(cls, footer: bytes, bloom: bool = True) -> "IndexFooter":
        """The footer of an index file (its last bytes: the footer, its length, ``PAR1``),
        parsed without its Bloom filter's entries; the filter decoded if ``bloom``.
        :class:`ValueError` (or pyarrow's error) when it is not a footer, or its filter is
        damaged."""
        kept, taken = without_keys(footer, lambda key: key.startswith(BLOOM_KEY))
        metadata = pq.read_metadata(pa.BufferReader(kept))
        column = metadata.schema.to_arrow_schema().get_field_index("_hash")
        groups = metadata.num_row_groups
        low, high = np.zeros(groups, np.uint64), np.full(groups, np.iinfo(np.uint64).max, np.uint64)
        for g in range(groups):
            stats = metadata.row_group(g).column(column).statistics
            if stats is not None and stats.has_min_max:
                low[g], high[g] = stats.min, stats.max
        sizes = [metadata.row_group(g).num_rows for g in range(groups)]
        offsets = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))).astype(np.int64)
        has_bloom = BLOOM_KEY in taken
        return cls(metadata, low, high, offsets, HashBloom.from_metadata(taken) if bloom and has_bloom else None,
                   has_bloom)

    @property
    def nbytes(self) -> int:
        """About the memory it holds: parsed Parquet metadata holds 2-4 times its serialized
        size (measured: 192 footers of index files, 0.74 MiB serialized, hold 2.7 MiB)."""
        return PARSED * self.metadata.serialized_size + (len(self.bloom.bits) if self.bloom else 0) + 24 * len(self.low)

    def groups_for(self, wanted: np.ndarray) -> np.ndarray:
        """The row groups whose hash range holds one of ``wanted`` (sorted, unique)."""
        first = np.searchsorted(wanted, self.low, "left")
        last = np.searchsorted(wanted, self.high, "right")
        return np.flatnonzero(first < last)


PARSED = 4  # bytes a parsed Parquet footer holds per byte of its serialized form, at most


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
