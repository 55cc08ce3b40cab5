"""The writer stream of a keyed dataset: every commit is an insert, so a key stays unique.

``append`` inserts (:class:`KeyExistsError` for a key already live; use
``Dataset.upsert`` to replace rows); ``overwrite`` replaces every row and the whole index.
Rows are buffered until ``flush()``/``close()``, each a commit. Option ``sort_by``
overrides the fields the data files are sorted by (by default property ``sort.by``, else
the record key; see :mod:`cdkds.catalog.write.sorting`); ``target_file_size`` and
``max_open_files`` are those of :class:`~cdkds.catalog.write.writer.DatasetWriter`.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pyarrow as pa

from cdkds.catalog.errors import CdkdsError
from cdkds.catalog.keyed.operations import UpsertResult, commit, prepare, run
from cdkds.catalog.keyed.rows import full_rows
from cdkds.catalog.log.actions import Action, RemoveFile, RemoveIndex
from cdkds.catalog.log.conflicts import ReadPartitions, replanned
from cdkds.catalog.write.sorting import write_sort
from cdkds.catalog.write.writer import DEFAULT_MAX_OPEN_FILES, DEFAULT_TARGET_FILE_SIZE, check_file_options

if TYPE_CHECKING:
    from cdkds.catalog.dataset import Dataset


class KeyedWriter:
    """Buffers rows and inserts them at each ``flush()``/``close()``."""

    def __init__(self, dataset: "Dataset", mode: Any = "append", commit_uuid: str | None = None,
                 extra_actions: Sequence[Action] = (), sort_by: "str | Sequence[str] | None" = None,
                 target_file_size: int = DEFAULT_TARGET_FILE_SIZE, max_open_files: int = DEFAULT_MAX_OPEN_FILES):
        if mode not in ("append", "overwrite"):
            raise CdkdsError(f"dataset {dataset.name!r} has a record key: its writer appends (inserts) or overwrites; "
                             f"mode {mode!r} is not possible (a key may live in any partition)")
        self.dataset = dataset
        self.mode = mode
        self.sort_by = write_sort(dataset.name, dataset.descriptor, sort_by)  # checked before anything is written
        check_file_options(dataset.name, target_file_size, max_open_files)
        self._layout = MappingProxyType({"sort_by": list(self.sort_by), "target_file_size": target_file_size,
                                         "max_open_files": max_open_files})  # of the data files, for prepare
        self.commit_uuid = commit_uuid  # of the first commit (Spark's job)
        self.extra_actions = tuple(extra_actions)  # into the first commit too (a streaming batch's SetTransaction)
        self._pending: list = []
        self._records: list = []
        self._first = True
        self._open = True
        self.results: list[UpsertResult] = []

    def __enter__(self) -> "KeyedWriter":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def _check_open(self) -> None:
        if not self._open:
            raise CdkdsError(f"the writer of dataset {self.dataset.name!r} is closed")

    def write(self, record: Mapping[str, Any]) -> None:
        self._check_open()
        self._records.append(record)

    def write_batch(self, batch: pa.RecordBatch | pa.Table) -> None:
        self._check_open()
        if self._records:
            self._pending.append(full_rows(self.dataset, self._records, "write"))
            self._records = []
        self._pending.append(full_rows(self.dataset, batch, "write"))

    def flush(self) -> int | None:
        """Insert what was written since the last flush, as one commit; returns its revision
        (``None`` if there was nothing to commit), as :meth:`DatasetWriter.flush` does."""
        self._check_open()
        if self._records:
            self._pending.append(full_rows(self.dataset, self._records, "write"))
            self._records = []
        rows = pa.concat_tables(self._pending) if self._pending else None
        self._pending = []
        if rows is None and not ((self.mode == "overwrite" or self.extra_actions) and self._first):
            return None
        rows = rows if rows is not None else self.dataset.descriptor.arrow_schema.empty_table()
        ds = self.dataset
        if self.mode == "overwrite" and self._first:
            def overwrite() -> UpsertResult:
                snapshot = ds.snapshot
                empty = dataclasses.replace(snapshot, files=MappingProxyType({}), index=MappingProxyType({}))
                change = prepare(ds, "insert", rows, snapshot=empty, **self._layout)
                removes = [*(RemoveFile(p) for p in snapshot.files), *(RemoveIndex(p) for p in snapshot.index)]
                return commit(ds, [change], removes=removes, rule=ReadPartitions(), operation="overwrite",
                              commit_uuid=self.commit_uuid, extra_actions=self.extra_actions)
            self.results.append(replanned(ds, overwrite))
        elif self._first and self.extra_actions:
            def insert() -> UpsertResult:
                return commit(ds, [prepare(ds, "insert", rows, **self._layout)], operation="insert",
                              commit_uuid=self.commit_uuid, extra_actions=self.extra_actions)
            self.results.append(replanned(ds, insert))
        else:
            self.results.append(run(ds, "insert", rows, **self._layout))
        self._first = False
        return self.results[-1].revision

    def close(self) -> int | None:
        """Commit the rest; returns the revision of that commit (``None`` if nothing was left)."""
        if not self._open:
            return None
        revision = self.flush()
        self._open = False
        if any(r.revision is not None for r in self.results):
            self.dataset._after_write()
        return revision

    def abort(self) -> None:
        """Drop what was not committed yet (nothing was written for it)."""
        self._pending, self._records, self._open = [], [], False

    def is_open(self) -> bool:
        return self._open
