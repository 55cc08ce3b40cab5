"""How the live files of two states differ (a checkpoint against the replay of the commits),
found column-wise: only the files whose columns differ become :class:`AddFile` objects, to
be judged by the comparison the caller gives."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.log.files import FileTable


def differing_files(a: FileTable, b: FileTable, same: Callable[[AddFile, AddFile], bool]
                    ) -> tuple[list[str], list[str], list[str]]:
    """The paths only in ``a`` (the stored files), only in ``b`` (the replayed ones), and
    in both but recorded differently (``same`` false), each sorted. A file of ``a``
    without a commit time (``timestamp`` 0) may differ from ``b``'s in it alone: ``same``
    decides."""
    at = pc.index_in(a.paths, value_set=b.paths)  # the row of b of each file of a
    in_both = pc.is_valid(at).to_numpy(zero_copy_only=False)
    only_stored = sorted(np.asarray(a.paths.to_pylist(), dtype=object)[~in_both]) if not in_both.all() else []
    only_replayed = sorted(b.paths.filter(pc.invert(pc.is_in(b.paths, value_set=a.paths))).to_pylist())
    rows_a = np.flatnonzero(in_both)
    rows_b = pc.drop_null(at).to_numpy(zero_copy_only=False)
    left, right = a.table.take(pa.array(rows_a, pa.int64())), b.table.take(pa.array(rows_b, pa.int64()))
    if left.schema.equals(right.schema):
        doubtful = np.flatnonzero(_differ(left, right))
    else:  # another descriptor: every file is compared whole
        doubtful = np.arange(len(rows_a))
    changed = []
    if len(doubtful):
        take = pa.array(doubtful, pa.int64())
        pairs = zip(FileTable(left.take(take), a.descriptor).files(), FileTable(right.take(take), b.descriptor).files())
        for x, y in pairs:
            if not same(x, y):
                changed.append(x.path)
    return only_stored, only_replayed, sorted(changed)


def _differ(left: pa.Table, right: pa.Table) -> np.ndarray:
    """Rows where some column of ``left`` may differ from ``right``'s (equal rows are never
    flagged; some flagged ones may be equal, as NaN bounds)."""
    out = np.zeros(left.num_rows, dtype=bool)
    for name in left.column_names:
        x, y = left.column(name).combine_chunks(), right.column(name).combine_chunks()
        if name == "timestamp":  # a checkpoint written before files carried their commit time has 0
            y = pc.if_else(pc.equal(x, 0), x, y)
        out |= _differ_array(x, y)
    return out


def _differ_array(x: pa.Array, y: pa.Array) -> np.ndarray:
    valid_x = x.is_valid().to_numpy(zero_copy_only=False)
    out = valid_x != y.is_valid().to_numpy(zero_copy_only=False)
    if pa.types.is_struct(x.type):
        for i in range(x.type.num_fields):
            out |= valid_x & _differ_array(x.field(i), y.field(i))
        return out
    equal = pc.equal(x, y).fill_null(True).to_numpy(zero_copy_only=False)
    return out | ~equal
