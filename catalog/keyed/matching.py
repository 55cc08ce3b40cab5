"""Where keys looked up meet index entries: the entries of wanted hashes in a sorted file
(binary searches), and the pairs of entry and key whose values are equal — two keys may
share a hash (a collision), so a hash alone never makes an entry a key's."""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.work_columns import ROW


def matches(hashes: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The rows of sorted ``hashes`` whose value is one of sorted, unique ``wanted``, in order."""
    if not len(hashes) or not len(wanted):
        return np.zeros(0, dtype=np.int64)
    # only the wanted hashes within the range of ``hashes`` are searched for
    lo, hi = int(np.searchsorted(wanted, hashes[0], "left")), int(np.searchsorted(wanted, hashes[-1], "right"))
    wanted = wanted[lo:hi]
    left = np.searchsorted(hashes, wanted, "left")
    if not (hashes[1:] == hashes[:-1]).any():  # distinct hashes (the usual case): one search each
        at = left[left < len(hashes)]
        return at[hashes[at] == wanted[:len(at)]].astype(np.int64)
    counts = np.searchsorted(hashes, wanted, "right") - left
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    return (np.repeat(left - (ends - counts), counts) + np.arange(total)).astype(np.int64)


def distinct_sorted(values: np.ndarray) -> np.ndarray:
    """``values`` sorted, each once: ``np.unique`` without its hash table (slower here, numpy 2.4)."""
    values = np.sort(values)
    return values[np.r_[True, values[1:] != values[:-1]]] if len(values) else values


def in_sorted(values: np.ndarray, members: np.ndarray) -> np.ndarray:
    """For each value, whether it is one of ``members`` (sorted): a binary search each."""
    if not len(members):
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(members, values), len(members) - 1)
    return members[at] == values


def deleted_at(positions: np.ndarray, deleted: np.ndarray, rows: int) -> np.ndarray:
    """For each row position of a file of ``rows`` rows, whether it is one of ``deleted``
    (sorted): a binary search each for a few positions, a mask of the file's rows for many
    (random positions search a large vector slowly)."""
    if len(positions) * 256 < rows or not len(positions) or positions.dtype.kind != "i":  # floats: _pos held nulls
        return in_sorted(positions, deleted)
    size = max(rows, int(deleted[-1]) + 1 if len(deleted) else 0)
    mask = np.zeros(size, dtype=bool)
    mask[deleted] = True
    inside = (positions >= 0) & (positions < size)  # a position outside is none of them
    return mask[np.where(inside, positions, 0)] & inside


def with_key_rows(entries: pa.Table, wanted: np.ndarray, key_rows: np.ndarray | None, hashes: np.ndarray) -> pa.Table:
    """``entries`` (of ``hashes``, each one of sorted, distinct ``wanted``) with :data:`ROW`: the
    key row of each one's hash (``key_rows`` holds wanted's); as they are without ``key_rows``."""
    if key_rows is None:
        return entries
    return entries.append_column(ROW, pa.array(key_rows[np.searchsorted(wanted, hashes)], pa.int64()))


def same_keys(found: pa.Table, keys: pa.Table, entry_rows: np.ndarray | None, key_rows: np.ndarray,
               names: Iterable[str]) -> np.ndarray:
    """Whether each entry of ``found`` at ``entry_rows`` (default: each entry) holds the key
    of ``keys`` at ``key_rows`` (the same hash may be of another key: a collision)."""
    same = np.ones(len(key_rows), dtype=bool)
    for name in names:
        stored = found.column(name) if entry_rows is None else found.column(name).take(pa.array(entry_rows))
        given = keys.column(name).take(pa.array(key_rows))
        same &= pc.fill_null(pc.equal(stored, given), False).to_numpy(zero_copy_only=False)
    return same


def join(found: pa.Table, keys: pa.Table, hashes: np.ndarray, names: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
    """The pairs (row of ``found``, row of ``keys``) of equal hash and equal key values."""
    order = np.argsort(hashes, kind="stable")
    ordered = hashes[order]
    wanted = found.column("_hash").to_numpy()
    left = np.searchsorted(ordered, wanted, "left")
    counts = np.searchsorted(ordered, wanted, "right") - left
    ends = np.cumsum(counts)
    entry_rows = np.repeat(np.arange(len(wanted), dtype=np.int64), counts)
    key_rows = order[np.repeat(left - (ends - counts), counts) + np.arange(int(ends[-1]) if len(ends) else 0)]
    same = same_keys(found, keys, entry_rows, key_rows, names)
    return entry_rows[same], key_rows[same].astype(np.int64)


def latest_per_key(entries: pa.Table, names: Iterable[str]) -> np.ndarray:
    """The rows of ``entries`` (with ``_hash``, listed in the order they apply: a later row
    supersedes an earlier one of its key) that hold the latest entry of their key, ordered by
    hash (entries of one hash, a collision, in the order given)."""
    names = list(names)
    hashes = entries.column("_hash").to_numpy()
    order = np.argsort(hashes, kind="stable")  # merges the sorted runs that files and deltas are
    ordered = hashes[order]
    dup = np.flatnonzero(ordered[1:] == ordered[:-1])  # sorted positions followed by one of their hash
    if not len(dup):
        return order
    equal = np.ones(len(dup), dtype=bool)
    first, second = pa.array(order[dup]), pa.array(order[dup + 1])
    for name in names:
        column = entries.column(name)
        equal &= pc.fill_null(pc.equal(column.take(first), column.take(second)), False).to_numpy(zero_copy_only=False)
    superseded = np.zeros(len(order), dtype=bool)
    superseded[dup[equal]] = True
    # a run of one hash holding several keys (a collision, rare): settled by the keys' values
    for start, end in _runs_with(ordered, dup[~equal]):
        rows = order[start:end + 1]
        values = list(zip(*(entries.column(n).take(pa.array(rows)).to_pylist() for n in names)))
        last = {value: i for i, value in enumerate(values)}
        superseded[start:end + 1] = [last[value] != i for i, value in enumerate(values)]
    return order[~superseded]


def _runs_with(ordered: np.ndarray, positions: np.ndarray) -> list[tuple[int, int]]:
    """The (first, last) sorted positions of each run of equal values in ``ordered`` that
    holds one of ``positions``."""
    runs = {}
    for p in positions.tolist():
        value = ordered[p]
        start = int(np.searchsorted(ordered, value, "left"))
        runs[start] = int(np.searchsorted(ordered, value, "right")) - 1
    return sorted(runs.items())
