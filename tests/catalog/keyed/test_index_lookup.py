"""The record index's fast lookup (Bloom filters in index footers, hash-first reads, buckets
read in parallel) finds exactly what a plain read of every index file finds, for index
files written with a filter and without one (before filters were written)."""

from __future__ import annotations

import base64
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st

from cdkds.catalog import DatasetRepository
from cdkds.catalog.keyed import index as index_module
from cdkds.catalog.keyed.bloom import BLOOM_KEY, HashBloom
from cdkds.catalog.keyed.index import RecordIndex, _file_rank
from cdkds.catalog.keyed.index_encoding import dictionary_keys
from cdkds.catalog.keyed.keys import RecordKey
from cdkds.catalog.work_columns import ROW
from tests.catalog.keyed.conftest import user, users_descriptor


def test_a_bloom_filter_has_no_false_negatives_and_few_false_positives():
    rng = np.random.default_rng(3)
    held = rng.integers(0, 2**63, 20_000, dtype=np.int64).astype(np.uint64) * np.uint64(2)
    bloom = HashBloom.of(held)
    assert bloom.might_hold(held).all()
    others = held + np.uint64(1)
    assert bloom.might_hold(others).mean() < 0.03
    assert HashBloom.from_metadata(bloom.metadata()) == bloom
    assert HashBloom.from_metadata({}) is None


def _index(ds) -> RecordIndex:
    return RecordIndex(ds.store, ds.snapshot, ds.name)


def _several_files(repo, name: str):
    """A one-bucket dataset whose bucket is a base and three deltas, each of other keys."""
    ds = repo.create(name, users_descriptor(**{"index.buckets": "1"}))
    for batch in range(4):
        ds.upsert([user("nz", batch * 100 + i, 1, f"e{batch}") for i in range(50)])
    assert len(ds.snapshot.index_files(0)) == 4
    return ds


def test_index_files_carry_a_bloom_filter_and_a_lookup_reads_only_the_file_of_its_key(repo, monkeypatch):
    ds = _several_files(repo, "bloomed")
    for entry in ds.snapshot.index_files(0):
        with ds.store.fs.open(ds.store.path(entry.path), "rb") as f:
            assert BLOOM_KEY in pq.read_metadata(f).metadata
    reads = []
    real = index_module._CheckedFile._opened

    def counting(self):
        reads.append(self.entry.path)
        return real(self)

    monkeypatch.setattr(index_module._CheckedFile, "_opened", counting)
    assert ds.get(("nz", 205))["email"] == "e2"
    assert len(set(reads)) == 1  # the bucket's three other files were never read
    reads.clear()
    assert ds.get(("nz", 999)) is None
    assert len(reads) <= 1  # a false positive at most


def _plain_lookup(index: RecordIndex, keys: pa.Table, hashes: np.ndarray) -> dict:
    """Key -> (file, position, deleted) of the latest entry, from whole index files."""
    pieces = []
    for bucket in sorted({e.bucket for e in index.snapshot.index.values()}):
        for seq, entry in enumerate(index.snapshot.index_files(bucket)):
            table = index.read_file(entry)
            ranks = (_file_rank(bucket, seq) << 32) + np.arange(table.num_rows)
            pieces.append(table.append_column("_rank", pa.array(ranks, pa.int64())))
    if not pieces:
        return {}
    probe = keys.append_column("_hash", pa.array(hashes, pa.uint64()))
    joined = pa.concat_tables(pieces).join(probe, keys=["_hash", *index.key.names], join_type="inner")
    best: dict = {}
    for row in joined.to_pylist():
        key = tuple(row[n] for n in index.key.names)
        if key not in best or row["_rank"] > best[key]["_rank"]:
            best[key] = row
    return {k: (r["_file"], r["_pos"], r["_deleted"]) for k, r in best.items()}


def _fast_lookup(index: RecordIndex, keys: pa.Table, hashes: np.ndarray) -> dict:
    found = index.lookup(keys, hashes)
    out = {}
    for row in found.to_pylist():
        key = tuple(keys.column(n)[row[ROW]].as_py() for n in index.key.names)
        assert key == tuple(row[n] for n in index.key.names)
        out[key] = (row["_file"], row["_pos"], row["_deleted"])
    return out


WRITE = st.tuples(st.sampled_from(["upsert", "delete"]),
                  st.lists(st.tuples(st.sampled_from(["nz", "au"]), st.integers(0, 60)), min_size=1, max_size=25))


@settings(max_examples=15)
@given(writes=st.lists(WRITE, min_size=1, max_size=6), probes=st.lists(st.integers(0, 70), max_size=40),
       filters=st.booleans(), buckets=st.sampled_from(["1", "3"]), plain=st.sets(st.integers(0, 5)))
def test_the_fast_lookup_finds_what_a_plain_read_of_every_index_file_finds(tmp_path_factory, writes, probes,
                                                                            filters, buckets, plain):
    """``plain``: the writes whose index files store the tenant as strings, as before key
    dictionaries were written (a lookup reads the others' tenants as codes)."""
    repo = DatasetRepository(f"file://{tmp_path_factory.mktemp('lookup')}")
    ds = repo.create(f"u{uuid.uuid4().hex[:8]}", users_descriptor(**{"index.buckets": buckets,
                                                                      "index.compaction.deltas": "4"}))
    with pytest.MonkeyPatch.context() as patch:
        if not filters:  # index files as written before filters were
            patch.setattr(HashBloom, "metadata", lambda self: {})
        for t, (operation, keys) in enumerate(writes):
            keys = list(dict.fromkeys(keys))
            patch.setattr(index_module, "dictionary_keys", (lambda rows: []) if t in plain else dictionary_keys)
            if operation == "upsert":
                ds.upsert([user(tenant, i, t + 1, f"v{t}") for tenant, i in keys])
            else:
                ds.delete_keys([{"tenant": tenant, "userId": i, "updatedAt": user("x", 0, t + 1)["updatedAt"]}
                                for tenant, i in keys])
    index_module.FOOTERS.clear()  # footers as a fresh process reads them
    key = RecordKey.of(ds.descriptor, ds.name)
    wanted = list(dict.fromkeys((tenant, i) for i in probes for tenant in ("nz", "au")))
    if not wanted:
        return
    unique = key.keys(wanted)
    hashes = key.hashes(unique)
    index = _index(ds)
    assert _fast_lookup(index, unique, hashes) == _plain_lookup(index, unique, hashes)


def test_keys_of_equal_hash_are_told_apart_by_their_values(repo, monkeypatch):
    from cdkds.catalog.keyed import keys as keys_module

    real = keys_module.RecordKey.hashes
    monkeypatch.setattr(keys_module.RecordKey, "hashes", lambda self, table: real(self, table) % np.uint64(3))
    ds = repo.create("collide", users_descriptor())
    ds.upsert([user("nz", i, 1, f"a{i}") for i in range(20)])
    ds.upsert([user("nz", i, 2, f"b{i}") for i in range(0, 20, 2)])
    assert [ds.get(("nz", i))["email"] for i in range(20)] == [f"{'b' if i % 2 == 0 else 'a'}{i}" for i in range(20)]
    assert ds.get(("au", 1)) is None
    assert ds.get_many([("nz", 3), ("nz", 4), ("nz", 3)]).column("email").to_pylist() == ["a3", "b4", "a3"]


def test_the_footer_cache_is_bounded_in_bytes(repo):
    from cdkds.formats.cache import BoundedCache

    ds = _several_files(repo, "bounded")
    index = _index(ds)
    footers = [index._footer(e) for e in ds.snapshot.index_files(0)]
    cache = BoundedCache(2 * max(f.nbytes for f in footers), lambda f: f.nbytes)
    for i, footer in enumerate(footers):
        cache.put((str(i), 1), footer)
    assert cache.get(("0", 1)) is None and cache.get((str(len(footers) - 1), 1)) is footers[-1]
    assert cache._bytes <= cache._capacity


def test_a_damaged_bloom_filter_is_a_corrupt_index_not_missing_keys(tmp_path):
    from cdkds.catalog.errors import CorruptIndexError

    repo = DatasetRepository(f"file://{tmp_path}")
    ds = repo.create("damaged", users_descriptor(**{"index.buckets": "1"}))
    ds.upsert([user("nz", i, 1) for i in range(50)])
    (entry,) = ds.snapshot.index_files(0)
    path = tmp_path / "damaged" / entry.path
    data = path.read_bytes()
    bits = base64.b64encode(HashBloom.from_metadata(pq.read_metadata(path).metadata).bits)
    at = data.index(bits)
    flipped = b"A" if bits[:1] != b"A" else b"B"  # still valid base64, same size: only the CRC tells
    path.write_bytes(data[:at] + flipped + data[at + 1:])
    index_module.FOOTERS.clear()
    with pytest.raises(CorruptIndexError, match="damaged"):  # the footer, by its CRC-32 in the log
        ds.get(("nz", 3))


@pytest.mark.slow
def test_a_forked_child_looks_up_with_threads_of_its_own(tmp_path):
    import multiprocessing

    ds = _several_files(DatasetRepository(f"file://{tmp_path}"), "forked")
    key = RecordKey.of(ds.descriptor, ds.name)
    keys = key.keys([("nz", i) for i in range(0, 400, 3)])  # more than INLINE_KEYS: on the pool
    assert _index(ds).lookup(keys, key.hashes(keys)).num_rows  # the parent's pool now has threads
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply_async(_lookup_rows, (str(tmp_path),)).get(timeout=30) == 67


def _lookup_rows(root: str) -> int:
    ds = DatasetRepository(f"file://{root}").load("forked")
    key = RecordKey.of(ds.descriptor, ds.name)
    keys = key.keys([("nz", i) for i in range(0, 400, 3)])  # more than INLINE_KEYS: on the pool
    return _index(ds).lookup(keys, key.hashes(keys)).num_rows


def test_a_lookup_of_many_keys_decodes_one_row_group_at_a_time(repo, monkeypatch):
    """What a lookup holds is a row group's entries, whatever the size of the file (a
    bucket's base grows with the dataset): the memory of an upsert must not."""
    monkeypatch.setattr(index_module, "ROW_GROUP_ENTRIES", 16)
    ds = repo.create("grouped", users_descriptor(**{"index.buckets": "1"}))
    ds.upsert([user("nz", i, 1, f"a{i}") for i in range(200)])
    index_module.FOOTERS.clear()
    reads = []
    real = index_module._CheckedFile.batches

    def counting(self, groups):
        for batch in real(self, groups):
            reads.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(index_module._CheckedFile, "batches", counting)
    monkeypatch.setattr(index_module._CheckedFile, "read_row_groups", None)  # no file read whole
    found = ds.get_many([("nz", i) for i in range(0, 220, 2)])
    assert found.column("email").to_pylist() == [f"a{i}" for i in range(0, 200, 2)]
    assert sum(reads) == 200 and max(reads) == 16  # 13 row groups' worth, one at a time



def test_a_new_key_of_the_hash_of_a_stored_key_is_inserted_not_an_update_of_it(repo, monkeypatch):
    from cdkds.catalog.keyed import keys as keys_module

    real = keys_module.RecordKey.hashes
    monkeypatch.setattr(keys_module.RecordKey, "hashes", lambda self, table: real(self, table) % np.uint64(3))
    ds = repo.create("collide_one", users_descriptor())
    ds.upsert([user("nz", i, 1, f"a{i}") for i in range(20)])
    for new in (("au", 1), ("au", 2), ("au", 3)):  # one key a write: its hash is one of the stored keys'
        result = ds.upsert([user(*new, 2, "new")])
        assert (result.inserted, result.updated) == (1, 0)
    assert [ds.get(("nz", i))["email"] for i in range(20)] == [f"a{i}" for i in range(20)]
    assert [ds.get(("au", i))["email"] for i in (1, 2, 3)] == ["new"] * 3


def test_a_key_named_like_an_index_column_from_an_old_log_points_to_a_rename(tmp_path):
    """Create refuses such keys; a log written before that rule still loads, reads, and
    tells a keyed operation how to become usable (a rename) instead of failing in Arrow."""
    import glob
    import json

    from cdkds.catalog import DatasetDescriptor
    from cdkds.catalog.errors import InvalidDescriptorError
    from cdkds.catalog.log.commit import _checksum

    repo = DatasetRepository(f"file://{tmp_path}")
    schema = {"type": "record", "name": "R", "fields": [{"name": "kk", "type": "long"}, {"name": "v", "type": "string"}]}
    repo.create("old", DatasetDescriptor(schema, record_key=["kk"]))
    (first,) = glob.glob(f"{tmp_path}/old/_log/*.json")
    raw = json.loads(open(first).read().replace('"kk"', '"_pos"'))  # the log as the old rules let it be written
    raw.pop("checksum")
    open(first, "w").write(json.dumps({**raw, "checksum": _checksum(raw)}))
    ds = repo.load("old")
    assert ds.descriptor.record_key == ("_pos",) and ds.to_table().num_rows == 0
    for operation in (lambda: ds.upsert([{"_pos": 1, "v": "a"}]), lambda: ds.get(1)):
        with pytest.raises(InvalidDescriptorError, match=r"dataset 'old': record key field '_pos' is named like a "
                                                         r"column the record index stores.*alter\(\)\.rename\('_pos'"):
            operation()
    assert ds.version == 0
    # reads and checks still work: check reports the key instead of raising
    report = ds.check(read_data=True)
    assert [(p.kind, p.object) for p in report.problems] == [("unusable_key", "_pos")] and "rename" in report.problems[0].message
    ds.alter().rename("_pos", "id").commit()
    ds.upsert([{"id": 2, "v": "b"}])
    assert ds.get(2) == {"id": 2, "v": "b"}
