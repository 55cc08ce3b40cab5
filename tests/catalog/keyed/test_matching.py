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
