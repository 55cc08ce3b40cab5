"""A keyed dataset's deletion vectors as a filter on its record key, for readers that cannot
drop rows by their position in a file (a lazy ``pyarrow.dataset``, and the engines that
scan one: DuckDB, Polars).

A deletion vector names rows by position; the rows it names hold keys. Keeping only the
rows whose key columns do not all take values among those of the deleted rows
(``~(is_in(c1, v1) & is_in(c2, v2) ...)``) drops the deleted rows, and drops no other row
of a file in which exactly as many rows match as its deletion vectors delete. The columns
tried, in turn: the key column with the most distinct deleted values, then the key columns
an identity partition does not fix in each file, then the whole key. Each is checked on
every file the filter is to read, newest first, by reading its key columns, before the
filter is used: a key deleted in one file and written again in another (an update), or
values two keys share, make the check fail, and with every try failed there is no filter.
A check holds the deleted rows' values and at most :data:`HELD_KEY_BYTES` of key columns.

Only key columns of types whose row-group statistics pyarrow prunes with exactly take part
(integers, strings, binaries, decimals, temporal values: no floating point, whose
statistics leave NaN out), and only values that are not null.
"""

from __future__ import annotations

import functools
import operator
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Mapping, Sequence, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from cdkds.catalog.errors import DataFileError
from cdkds.catalog.keyed.deletion import load_deletes
from cdkds.catalog.read.native import FOOTER_READERS
from cdkds.catalog.read.scan import FileScanTask, ScanPlan, reading_error
from cdkds.catalog.storage import ObjectStore

_PARQUET = ds.ParquetFileFormat()
_T = TypeVar("_T")


def _exact(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
            or pa.types.is_decimal(t) or pa.types.is_temporal(t))


def filter_key(plan: ScanPlan) -> tuple[str, ...]:
    """The record key columns a filter of ``plan``'s deleted rows can read: all of them
    among the output columns, each of a type it can filter exactly; ``()``: none."""
    key = plan.snapshot.descriptor.record_key
    schema = plan.output_schema
    if not key or not all(c in schema.names and _exact(schema.field(c).type) for c in key):
        return ()
    return tuple(key)


def deleted_keys_filter(plan: ScanPlan, store: ObjectStore, tasks: Sequence[FileScanTask], key: Sequence[str],
                        filesystem: pafs.FileSystem) -> pc.Expression | None:
    """A filter that keeps every row of ``tasks``' files (of ``plan``) but those their deletion
    vectors delete, on the ``key`` columns (stored as they are in every one of those files),
    or ``None`` if no filter on them does (see the module's docstring). Holds the deleted rows'
    values and at most :data:`HELD_KEY_BYTES` of key columns while it checks; the answer for the last few sets of files is
    kept (data files and deletion vectors never change), so scans of one snapshot check once."""
    files = tuple((store.path(t.file.path), t.file.size, t.file.deletes) for t in tasks)
    identity = (files, tuple(key))
    with _ANSWERS_LOCK:
        if identity in _ANSWERS:
            _ANSWERS.move_to_end(identity)
            return _ANSWERS[identity]
    answer = _checked_filter(plan, store, tasks, key, filesystem)
    with _ANSWERS_LOCK:
        _ANSWERS[identity] = answer
        while len(_ANSWERS) > _ANSWERED:
            _ANSWERS.popitem(last=False)
    return answer


_ANSWERED = 8
_ANSWERS: OrderedDict[tuple, pc.Expression | None] = OrderedDict()
_ANSWERS_LOCK = threading.Lock()


def _checked_filter(plan: ScanPlan, store: ObjectStore, tasks: Sequence[FileScanTask], key: Sequence[str],
                    filesystem: pafs.FileSystem) -> pc.Expression | None:
    descriptor = plan.snapshot.descriptor
    fixed = {name for t in tasks for name in descriptor.source_values(t.file.partition, t.file.spec_id)}
    varying = tuple(c for c in key if c not in fixed) or tuple(key)  # values fixed in a file seldom tell keys apart
    vectors = {t.file.path: v.to_numpy() for t in tasks if (v := load_deletes(store, t.file.deletes)) is not None}
    deleting = [t for t in tasks if t.file.path in vectors]
    # newest first: a key deleted and written again, or updated, lives in a file written after the deletion
    newest = sorted(tasks, key=lambda t: -t.file.revision)
    with ThreadPoolExecutor(min(FOOTER_READERS, len(tasks))) as pool:
        stored = _StoredKeys(store, filesystem, pool)
        values: dict[str, pa.Array] = {}

        def learned(columns: tuple[str, ...]) -> bool:
            """Learns the values the deleted rows hold in ``columns``; ``False``: some are null."""
            missing = [c for c in columns if c not in values]
            if missing:
                rows = pa.concat_tables(stored.read(deleting, missing,
                                                    lambda t, table: _taken(table, vectors[t.file.path])))
                if any(rows.column(c).null_count for c in missing):
                    return False
                values.update({c: pc.unique(rows.column(c).combine_chunks()) for c in missing})
            return True

        if not learned(varying):
            return None
        ranked = sorted(varying, key=lambda c: -len(values[c]))
        for columns in dict.fromkeys([(ranked[0],), varying, tuple(key)]):
            if not learned(columns):
                return None
            among = {c: values[c] for c in columns}

            def wrong(task: FileScanTask, matching: int) -> bool:
                return matching != len(vectors.get(task.file.path, ()))
            counts = stored.read(newest, list(columns), lambda t, table: matching_rows(table, among), until=wrong)
            if len(counts) == len(newest) and not any(wrong(t, n) for t, n in zip(newest, counts)):
                return ~functools.reduce(operator.and_, [pc.field(c).isin(among[c]) for c in columns])
    return None


HELD_KEY_BYTES = 64 << 20  # key columns kept for a second look while the check runs; the rest are read again


class _StoredKeys:
    """Reads the key columns of data files for the check, a pool's width of files at a
    time, and keeps what it read while that fits in :data:`HELD_KEY_BYTES`."""

    def __init__(self, store: ObjectStore, filesystem: pafs.FileSystem, pool: ThreadPoolExecutor):
        self.store, self.filesystem, self.pool = store, filesystem, pool
        self.held: dict[tuple[str, str], pa.ChunkedArray] = {}
        self.held_bytes = 0
        self.lock = threading.Lock()

    def _table(self, task: FileScanTask, columns: list[str]) -> pa.Table:
        path = task.file.path
        with self.lock:
            found = {c: self.held[(path, c)] for c in columns if (path, c) in self.held}
        missing = [c for c in columns if c not in found]
        if missing:
            fragment = _PARQUET.make_fragment(self.store.path(path), self.filesystem, file_size=task.file.size)
            read = _reading(self.store, task, lambda: fragment.to_table(columns=missing))
            with self.lock:
                for c in missing:
                    found[c] = read.column(c)
                    if self.held_bytes + found[c].nbytes <= HELD_KEY_BYTES:
                        self.held[(path, c)] = found[c]
                        self.held_bytes += found[c].nbytes
        return pa.table({c: found[c] for c in columns})

    def read(self, tasks: Sequence[FileScanTask], columns: list[str], then: Callable[[FileScanTask, pa.Table], _T],
             until: Callable[[FileScanTask, _T], bool] | None = None) -> list[_T]:
        """``then`` of each of ``tasks`` and its ``columns``, in order; stops after the first
        answer ``until`` holds true for."""
        answers: list[_T] = []
        width = FOOTER_READERS
        for start in range(0, len(tasks), width):
            chunk = tasks[start:start + width]
            for task, answer in zip(chunk, self.pool.map(lambda t: then(t, self._table(t, columns)), chunk)):
                answers.append(answer)
                if until is not None and until(task, answer):
                    return answers
        return answers


def _taken(table: pa.Table, positions: np.ndarray) -> pa.Table:
    if len(positions) and int(positions.max()) >= table.num_rows:
        raise DataFileError(f"a deletion vector deletes row {int(positions.max())} of a data file of "
                            f"{table.num_rows} rows")
    return table.take(pa.array(positions))


def matching_rows(table: pa.Table, values: Mapping[str, pa.Array]) -> int:
    """How many rows of ``table`` hold, in each column of ``values``, one of its values
    (``is_in``); a single integer or temporal column stored in order is counted by binary
    search, a property test holds the two ways to one count."""
    if len(values) == 1:
        (name, among), = values.items()
        ordered = _ordered_integers(table.column(name))
        if ordered is not None:
            wanted = np.sort(_as_int64(among))
            return int((np.searchsorted(ordered, wanted, "right") - np.searchsorted(ordered, wanted, "left")).sum())
    matches = np.ones(table.num_rows, dtype=bool)
    for name, among in values.items():
        matches &= pc.is_in(table.column(name), value_set=among).to_numpy(zero_copy_only=False)
    return int(matches.sum())


def _as_int64(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if pa.types.is_temporal(array.type):
        array = array.cast(pa.int64()) if array.type.bit_width == 64 else array.cast(pa.int32()).cast(pa.int64())
    return np.asarray(array.cast(pa.int64()) if array.type != pa.int64() else array)


def _ordered_integers(column: pa.ChunkedArray) -> np.ndarray | None:
    """``column`` as int64 values, if it is of an integer or temporal type (no nulls, which
    the deleted values never hold) and in ascending order; else ``None``."""
    t = column.type
    if column.null_count or not (pa.types.is_integer(t) or pa.types.is_temporal(t)) or t == pa.uint64():
        return None
    stored = _as_int64(column.combine_chunks())
    return stored if len(stored) < 2 or bool((stored[1:] >= stored[:-1]).all()) else None


def _reading(store: ObjectStore, task: FileScanTask, read: Callable[[], _T]) -> _T:
    try:
        return read()
    except Exception as e:  # noqa: BLE001 - named by reading_error
        raise reading_error(e, store.display(task.file.path), task.file) from None
