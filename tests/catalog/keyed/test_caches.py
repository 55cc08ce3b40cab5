"""What the footer cache of index files holds and counts (catalog/keyed/caches.py): the
Parquet metadata without the Bloom filter's text, the filter decoded only for lookups that
probe it, and a size that counts what a parsed footer holds."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from cdkds.catalog.keyed import index as index_module
from cdkds.catalog.keyed.bloom import BLOOM_KEY, HashBloom
from cdkds.catalog.keyed.caches import PARSED, IndexFooter
from cdkds.catalog.keyed.index import RecordIndex
from cdkds.formats.parquet_footer import footer_of
from cdkds.formats.cache import BoundedCache
from tests.catalog.keyed.conftest import user, users_descriptor


def _footer(ds) -> bytes:
    (entry,) = ds.snapshot.index_files(0)
    with ds.store.fs.open(ds.store.path(entry.path), "rb") as f:
        return footer_of(f.read())


def test_a_cached_footer_holds_its_bloom_filter_once_and_only_when_asked(repo):
    ds = repo.create("footers", users_descriptor(**{"index.buckets": "1"}))
    ds.upsert([user("nz", i, 1) for i in range(2000)])
    footer = _footer(ds)
    metadata = pq.read_metadata(pa.BufferReader(footer))
    assert BLOOM_KEY in metadata.metadata
    plain = IndexFooter.of(footer, bloom=False)
    assert plain.has_bloom and plain.bloom is None
    assert BLOOM_KEY not in (plain.metadata.metadata or {})  # the filter's base64 text is not kept
    assert metadata.serialized_size - plain.metadata.serialized_size >= len(metadata.metadata[BLOOM_KEY])
    assert plain.metadata.to_dict()["row_groups"] == metadata.to_dict()["row_groups"]
    probed = IndexFooter.of(footer, bloom=True)
    assert probed.bloom == HashBloom.from_metadata(metadata.metadata)
    assert BLOOM_KEY not in (probed.metadata.metadata or {})
    # the size a cache counts: the parsed metadata (several times its serialized size) and the filter's bits
    assert plain.nbytes >= PARSED * plain.metadata.serialized_size
    assert probed.nbytes - plain.nbytes == len(probed.bloom.bits)


def test_a_large_lookup_keeps_no_filter_and_a_get_after_it_reads_the_one_it_probes(repo, monkeypatch):
    ds = repo.create("lazy", users_descriptor(**{"index.buckets": "1"}))
    ds.upsert([user("nz", i, 1, "a") for i in range(300)])
    ds.upsert([user("nz", i, 2, "b") for i in range(300, 310)])  # a second index file
    index_module.FOOTERS.clear()
    index = RecordIndex(ds.store, ds.snapshot, ds.name)
    keys = index.key.keys([("nz", i) for i in range(0, 300, 3)])
    assert index.lookup(keys, index.key.hashes(keys)).num_rows == 100
    cached = [index_module.FOOTERS.get((e.path, e.size)) for e in ds.snapshot.index_files(0)]
    assert cached[0].has_bloom and cached[0].bloom is None  # 100 keys: the first file's filter was not probed
    assert ds.get(("nz", 305))["email"] == "b" and ds.get(("nz", 7))["email"] == "a"
    assert all(index_module.FOOTERS.get((e.path, e.size)).bloom is not None for e in ds.snapshot.index_files(0))


def test_a_value_put_again_replaces_the_held_one_only_when_asked_and_its_size_is_counted_once():
    cache: BoundedCache[bytes] = BoundedCache(100, len)
    cache.put("a", b"x" * 10)
    cache.put("a", b"y" * 50)
    assert cache.get("a") == b"x" * 10 and cache._bytes == 10
    cache.put("a", b"y" * 50, replace=True)
    assert cache.get("a") == b"y" * 50 and cache._bytes == 50
    cache.put("b", b"z" * 60)  # over the capacity: the least recently used goes
    assert cache.get("a") is None and cache._bytes == 60


def test_the_footers_of_index_files_a_process_writes_are_cached_as_a_read_gives_them(repo, monkeypatch):
    """The writer's next lookup reads no index footer (an upsert after a load read every one)."""
    import numpy as np

    ds = repo.create("warm", users_descriptor(**{"index.buckets": "2"}))
    index_module.FOOTERS.clear()
    monkeypatch.setattr(RecordIndex, "_tail", lambda self, entry: (_ for _ in ()).throw(AssertionError("read")))
    ds.upsert([user("nz", i, 1, "a") for i in range(300)])
    ds.upsert([user("nz", i, 2, "b") for i in range(250, 310)])  # its lookup reads no footer
    index = RecordIndex(ds.store, ds.snapshot, ds.name)
    keys = index.key.keys([("nz", i) for i in range(0, 310, 7)])
    assert index.lookup(keys, index.key.hashes(keys)).num_rows == 45
    entries = list(ds.snapshot.index.values())
    cached = [index_module.FOOTERS.get((e.path, e.size)) for e in entries]
    assert len(entries) == 4 and all(c is not None and c.bloom is None for c in cached)
    monkeypatch.undo()
    index_module.FOOTERS.clear()
    read = [index._footer(e, bloom=False) for e in entries]
    for c, r in zip(cached, read):
        assert c.metadata.to_dict() == r.metadata.to_dict() and c.has_bloom == r.has_bloom
        assert all(np.array_equal(getattr(c, a), getattr(r, a)) for a in ("low", "high", "offsets"))
