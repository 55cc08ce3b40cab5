"""Where keys looked up meet index entries (catalog/keyed/matching.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from cdkds.catalog.keyed.matching import distinct_sorted, matches


@settings(max_examples=60)
@given(stored=st.lists(st.integers(0, 40), max_size=60), wanted=st.sets(st.integers(0, 45), max_size=30))
def test_matching_hashes_are_every_row_of_a_wanted_hash_duplicates_included(stored, wanted):
    hashes = np.array(sorted(stored), dtype=np.uint64)
    want = np.array(sorted(wanted), dtype=np.uint64)
    expected = [i for i, h in enumerate(hashes.tolist()) if h in wanted]
    assert matches(hashes, want).tolist() == expected


@given(values=st.lists(st.integers(0, 2**64 - 1), max_size=40))
def test_distinct_sorted_is_numpys_unique(values):
    array = np.array(values, dtype=np.uint64)
    assert distinct_sorted(array).tolist() == np.unique(array).tolist()


_PATHS = st.sampled_from(["a.parquet", "b.parquet", "c.parquet", None])


@settings(max_examples=60)
@given(chunks=st.lists(st.lists(_PATHS, max_size=12), min_size=1, max_size=4), unused=st.booleans())
def test_by_file_groups_dictionary_encoded_paths_as_it_groups_the_strings(chunks, unused):
    """Entries carry ``_file`` dictionary-encoded (codes as read and written): chunks with
    dictionaries of their own, null paths (tombstones), dictionary values no row uses and
    a dictionary holding a path twice group exactly as the decoded strings do."""
    import pyarrow as pa

    from cdkds.catalog.keyed.index import by_file

    def groups(paths):
        return sorted((p or "", rows.tolist()) for p, rows in by_file(paths))

    strings = pa.chunked_array([pa.array(c, pa.string()) for c in chunks])
    expected = groups(strings)
    coded = []
    for c in chunks:
        values = ["a.parquet", "b.parquet", "c.parquet"] + (["a.parquet", "z.parquet"] if unused else [])
        codes = [None if p is None else (values.index(p) + (3 if unused and p == "a.parquet" and i % 2 else 0))
                 for i, p in enumerate(c)]
        coded.append(pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(values)))
    assert groups(pa.chunked_array(coded, pa.dictionary(pa.int32(), pa.string()))) == expected
    assert groups(pa.chunked_array([a.cast(pa.string()).dictionary_encode() for a in coded]).combine_chunks()) == expected


@settings(max_examples=80)
@given(rows=st.integers(1, 300), deleted=st.sets(st.integers(0, 320), max_size=60),
       positions=st.lists(st.integers(-2, 330), max_size=200))
def test_deleted_at_is_a_binary_search_in_the_deleted_positions(rows, deleted, positions):
    """A mask of the file's rows for many positions, a search for few: the same answer,
    positions past the file's rows or the vector's included."""
    from cdkds.catalog.keyed.matching import deleted_at, in_sorted

    members = np.array(sorted(deleted), dtype=np.int64)
    at = np.array(positions, dtype=np.int64)
    assert deleted_at(at, members, rows).tolist() == in_sorted(at, members).tolist()


# an entry: (hash, key); few hashes and keys, so that keys repeat and two keys share a hash (a collision)
_ENTRY = st.tuples(st.integers(0, 6), st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 3))


@settings(max_examples=200)
@given(pieces=st.lists(st.lists(_ENTRY, max_size=15), min_size=1, max_size=4))
def test_the_latest_entry_of_each_key_is_the_last_given_whatever_shares_its_hash(pieces):
    """``latest_per_key`` (the merge of a bucket's files, a write's own entries, the held
    tombstones) against a model: each (hash, key) once, its last row, in hash order. A key is
    two columns (a string and an int) and files are chunks of their own; equal hashes of
    other keys (collisions) are kept, each by its own last row."""
    import pyarrow as pa

    from cdkds.catalog.keyed.matching import latest_per_key

    tables = [pa.table({"_hash": pa.array([h for h, _, _ in p], pa.uint64()), "k": pa.array([k for _, k, _ in p], pa.string()),
                        "n": pa.array([n for _, _, n in p], pa.int64())}) for p in pieces]
    entries = pa.concat_tables(tables)
    rows = [(h, k, n) for p in pieces for h, k, n in p]
    last = {}
    for i, (h, k, n) in enumerate(rows):
        last[(h, k, n)] = i
    chosen = latest_per_key(entries, ["k", "n"]).tolist()
    assert sorted(chosen) == sorted(last.values())
    assert [rows[i][0] for i in chosen] == sorted(rows[i][0] for i in chosen)  # in hash order
    for a, b in zip(chosen, chosen[1:]):  # one hash's keys (a collision) in the order given
        if rows[a][0] == rows[b][0]:
            assert a < b
