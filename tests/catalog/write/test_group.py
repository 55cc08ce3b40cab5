"""Routing rows to partitions (catalog/write/writer.py ``_group``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings, strategies as st

from cdkds.catalog.write.writer import _group


@settings(max_examples=60)
@given(columns=st.integers(1, 3).flatmap(lambda k: st.lists(
    st.tuples(*[st.sampled_from(["a", "b", "c", None])] * k), min_size=1, max_size=40)))
def test_each_distinct_combination_of_partition_values_is_one_group_of_its_rows(columns):
    """Several partition columns (their combined codes renumbered when they outgrow the rows)."""
    arrays = [pa.array([row[i] for row in columns], pa.string()) for i in range(len(columns[0]))]
    expected: dict[tuple, list[int]] = {}
    for r, row in enumerate(columns):
        expected.setdefault(tuple(row), []).append(r)
    got = {tuple(values): (list(range(len(columns))) if rows is None else np.asarray(rows).tolist())
           for rows, values in _group(arrays)}
    assert got == expected
