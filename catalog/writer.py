"""The writer stream of a dataset (CDK's ``DatasetWriter``), and its write modes.

Records (dicts) and Arrow batches are checked against the schema, routed to their
partitions, and written to a bounded number of open files, each rolled at a target
size. ``flush()`` commits what was written so far as one commit; ``close()`` commits
the rest; leaving a ``with`` block by an exception commits nothing and deletes the
files written since the last commit.

The :class:`WriteMode` decides what else a commit does: nothing (append), remove every
live file (overwrite), remove the live files of the partitions written (dynamic
partition overwrite), or remove the files a compaction rewrote.
"""

from __future__ import annotations

import json
import uuid
from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import pyarrow as pa

from cdkds.catalog.actions import Action, AddFile, RemoveFile
from cdkds.catalog.conflicts import BlindAppend, ConflictRule, ReadPartitions, ReplacePartitions, Rewrite
from cdkds.catalog.errors import CdkdsError, InvalidRecordError
from cdkds.catalog.snapshot import Snapshot
from cdkds.catalog.partitioning.functions import IdentityFunction
from cdkds.catalog.partitioning.layout import partition_path
from cdkds.formats import values
from cdkds.formats.errors import SchemaMismatchError
from cdkds.formats.files import DataFileWriter, WrittenFile, file_format
from cdkds.formats.schema import record_validator

if TYPE_CHECKING:
    from cdkds.catalog.dataset import Dataset

DATA_FOLDER = "data"
DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024
DEFAULT_MAX_OPEN_FILES = 32
RECORD_BUFFER_ROWS = 8192


class WriteMode(ABC):
    """What a writer's commit removes besides adding its files, and what it assumes."""

    operation: str

    @abstractmethod
    def plan(self, base: Snapshot, adds: list[AddFile], own: set[str], first: bool) -> tuple[list[Action], ConflictRule]:
        """The removals for a commit of ``adds`` on ``base``; ``own`` holds the files this writer
        committed before, ``first`` says whether this is its first commit."""


class Append(WriteMode):
    operation = "append"

    def plan(self, base: Snapshot, adds: list[AddFile], own: set[str], first: bool) -> tuple[list[Action], ConflictRule]:
        return [], BlindAppend()


class Overwrite(WriteMode):
    """Replace the whole dataset, atomically: the first commit removes every live file."""

    operation = "overwrite"

    def plan(self, base: Snapshot, adds: list[AddFile], own: set[str], first: bool) -> tuple[list[Action], ConflictRule]:
        if not first:
            return [], BlindAppend()  # a later flush of the same overwrite only adds
        return [RemoveFile(p) for p in base.files], ReadPartitions()


class PartitionOverwrite(WriteMode):
    """Replace only the partitions written (Spark's dynamic partition overwrite)."""

    operation = "overwrite_partitions"

    def __init__(self, names: list[str]):
        self.names = tuple(names)

    def plan(self, base: Snapshot, adds: list[AddFile], own: set[str], first: bool) -> tuple[list[Action], ConflictRule]:
        key = lambda f: tuple(f.partition.get(n) for n in self.names)  # noqa: E731
        written = frozenset(key(a) for a in adds)
        removes = [RemoveFile(p) for p, f in base.files.items() if p not in own and key(f) in written]
        return removes, ReplacePartitions(written, self.names)


class RewriteFiles(WriteMode):
    """Compaction: the new files replace ``files``, whose rows (less tombstoned ones) they hold."""

    operation = "compact"

    def __init__(self, files: list[AddFile]):
        self.files = tuple(files)

    def plan(self, base: Snapshot, adds: list[AddFile], own: set[str], first: bool) -> tuple[list[Action], ConflictRule]:
        return [RemoveFile(f.path) for f in self.files], Rewrite(self.files)


def write_mode(mode: "str | WriteMode", names: list[str]) -> WriteMode:
    if isinstance(mode, WriteMode):
        return mode
    modes = {"append": Append, "overwrite": Overwrite}
    if mode in modes:
        return modes[mode]()
    if mode in ("overwrite_partitions", "dynamic"):
        return PartitionOverwrite(names)
    raise CdkdsError(f"unknown write mode {mode!r}; use 'append', 'overwrite' or 'overwrite_partitions'")


class DatasetWriter:
    """Writes records and batches to a dataset; see the module docstring."""

    def __init__(self, dataset: "Dataset", mode: "str | WriteMode" = "append",
                 target_file_size: int = DEFAULT_TARGET_FILE_SIZE, max_open_files: int = DEFAULT_MAX_OPEN_FILES):
        if not isinstance(target_file_size, int) or target_file_size < 1:
            raise ValueError(f"target_file_size must be a positive number of bytes, got {target_file_size!r}")
        if not isinstance(max_open_files, int) or max_open_files < 1:
            raise ValueError(f"max_open_files must be a positive integer, got {max_open_files!r}")
        self.dataset = dataset
        self.descriptor = dataset.descriptor
        self.target_file_size = target_file_size
        self.max_open_files = max_open_files
        self.mode = write_mode(mode, dataset.descriptor.partition_strategy.names if dataset.descriptor.is_partitioned else [])
        self._format = file_format(self.descriptor.format)
        self._schema = self.descriptor.arrow_schema
        self._validate = record_validator(self.descriptor.schema)
        self._strategy = self.descriptor.partition_strategy
        self._fields = self.descriptor.fields
        self._records: list[dict] = []
        self._open: OrderedDict[tuple, tuple[DataFileWriter, dict]] = OrderedDict()
        self._written: list[tuple[WrittenFile, dict]] = []
        self._transaction = uuid.uuid4().hex
        self._own: set[str] = set()
        self._committed = False
        self._closed = False

    # ---------------------------------------------------------------- context

    def __enter__(self) -> "DatasetWriter":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    # ---------------------------------------------------------------- input

    def write(self, record: Mapping[str, Any]) -> None:
        """Check one record and queue it for its partition."""
        self._check_open()
        try:
            checked = self._validate(record)
            if self._strategy is not None:
                for f in self._strategy.functions:
                    value = checked[f.source]
                    if value is None and not isinstance(f, IdentityFunction):
                        raise SchemaMismatchError(f"partition source {f.source!r} of {f.to_text()} is null")
                    if value is not None:
                        f.apply(value, self._fields[f.source].kind)
        except SchemaMismatchError as e:
            raise self._error(e) from None
        self._records.append(checked)
        if len(self._records) >= RECORD_BUFFER_ROWS:
            self._drain_records()

    def write_batch(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Check an Arrow batch (or table) against the schema and write its rows."""
        self._check_open()
        self._drain_records()
        if isinstance(batch, pa.Table):
            for b in batch.to_batches():
                self._write_checked(self._conform(b))
            return
        if not isinstance(batch, pa.RecordBatch):
            raise InvalidRecordError(f"dataset {self.dataset.name!r}: write_batch takes a pyarrow RecordBatch or "
                                     f"Table, not {type(batch).__name__}")
        self._write_checked(self._conform(batch))

    def flush(self) -> int | None:
        """Commit everything written so far as one commit; returns its revision (``None``
        when there was nothing to commit)."""
        self._check_open()
        self._drain_records()
        for key in list(self._open):
            self._close_file(key)
        if not self._written and not (isinstance(self.mode, Overwrite) and not self._committed):
            return None  # an overwrite with no rows still empties the dataset
        version = self.dataset.descriptor_version
        adds = [AddFile(w.path, partition, w.size, w.row_count, w.statistics, version) for w, partition in self._written]
        removes, rule = self.mode.plan(self.dataset.snapshot, adds, self._own, not self._committed)
        info = {"rows": sum(a.row_count for a in adds), "files": len(adds)}
        self.dataset._commit(self.mode.operation, [*removes, *adds], info, self._transaction, rule)
        self._own.update(a.path for a in adds)
        self._committed = True
        self._written = []
        self._transaction = uuid.uuid4().hex
        return self.dataset.version

    def close(self) -> int | None:
        """Commit the rest and close; returns the revision committed, if any."""
        if self._closed:
            return None
        try:
            version = self.flush()
        except BaseException:
            self.abort()
            raise
        self._closed = True
        return version

    def abort(self) -> None:
        """Commit nothing more and delete the files written since the last commit."""
        if self._closed:
            return
        self._closed = True
        self._records = []
        for writer, _ in self._open.values():
            try:
                writer.abort()
            except Exception:  # noqa: BLE001 - best effort: vacuum collects what is left
                pass
        self._open.clear()
        for written, _ in self._written:
            try:
                self.dataset.store.delete(self._relative(written.path))
            except Exception:  # noqa: BLE001 - best effort: vacuum collects what is left
                pass
        self._written = []

    # ---------------------------------------------------------------- internals

    def _check_open(self) -> None:
        if self._closed:
            raise CdkdsError(f"the writer of dataset {self.dataset.name!r} is closed")

    def _error(self, e: Exception) -> InvalidRecordError:
        return InvalidRecordError(f"dataset {self.dataset.name!r}: {e}")

    def _drain_records(self) -> None:
        if self._records:
            batch = pa.RecordBatch.from_pylist(self._records, schema=self._schema)
            self._records = []
            self._write_checked(batch)

    def _conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        names = set(batch.schema.names)
        unknown = [n for n in batch.schema.names if self._schema.get_field_index(n) < 0]
        if unknown:
            raise self._error(f"unknown column {unknown[0]!r}; the schema has {self._schema.names}")
        columns = []
        for f in self._schema:
            if f.name not in names:
                if f.name not in self.descriptor.defaults:
                    raise self._error(f"required column {f.name!r} is missing from the batch")
                columns.append(pa.array([self.descriptor.defaults[f.name]] * batch.num_rows, type=f.type))
                continue
            column = batch.column(f.name)
            if not column.type.equals(f.type):
                try:
                    column = column.cast(f.type, safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise self._error(f"column {f.name!r} of type {column.type} cannot be written as "
                                      f"{self._fields[f.name].kind} ({f.type}): {e}") from None
            if not f.nullable and column.null_count:
                row = column.is_null().to_pylist().index(True)
                raise self._error(f"field {f.name!r} is required but row {row} of the batch is null")
            columns.append(column)
        return pa.RecordBatch.from_arrays(columns, schema=self._schema)

    def _write_checked(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if self._strategy is None:
            self._write_partition(batch, ())
            return
        arrays = []
        for f in self._strategy.functions:
            source = batch.column(f.source)
            if source.null_count and not isinstance(f, IdentityFunction):
                raise self._error(f"partition source {f.source!r} of {f.to_text()} is null")
            try:
                arrays.append(f.apply_array(source, self._fields[f.source].kind))
            except SchemaMismatchError as e:
                raise self._error(e) from None
        for indices, values_ in _group(arrays):
            self._write_partition(batch if indices is None else batch.take(indices), tuple(values_))

    def _write_partition(self, batch: pa.RecordBatch, key: tuple) -> None:
        if key in self._open:
            self._open.move_to_end(key)
        else:
            while len(self._open) >= self.max_open_files:
                self._close_file(next(iter(self._open)))
            self._open[key] = self._open_file(key)
        writer, _ = self._open[key]
        writer.write(batch)
        if writer.bytes_written >= self.target_file_size:
            self._close_file(key)

    def _open_file(self, key: tuple) -> tuple[DataFileWriter, dict]:
        strategy = self._strategy
        partition = dict(zip(strategy.names, key)) if strategy is not None else {}
        folder = partition_path(strategy.names, key) if strategy is not None else ""
        name = f"part-{uuid.uuid4().hex}.{self._format.extension}"
        relative = "/".join(p for p in (DATA_FOLDER, folder, name) if p)
        kinds = strategy.kinds(self._fields) if strategy is not None else {}
        metadata = {
            "cdkds.dataset": self.dataset.name,
            "cdkds.partition": json.dumps({k: values.to_json(v, kinds[k]) for k, v in partition.items()}),
            "cdkds.transaction": self._transaction,
            "cdkds.operation": self.mode.operation,
            "cdkds.base_revision": str(self.dataset.version),
            "cdkds.descriptor": json.dumps(self.descriptor.to_json()),
        }
        if isinstance(self.mode, RewriteFiles):
            metadata["cdkds.replaces"] = json.dumps([f.path for f in self.mode.files])
        path = self.dataset.store.open_output(relative)
        writer = self._format.open_writer(self.dataset.store.fs, path, self.descriptor.schema, self._schema,
                                          self.descriptor.compression, metadata)
        return writer, partition

    def _close_file(self, key: tuple) -> None:
        writer, partition = self._open.pop(key)
        written = writer.close()
        self._written.append((WrittenFile(self._relative(written.path), written.size, written.row_count,
                                          written.statistics), partition))

    def _relative(self, path: str) -> str:
        root = self.dataset.store.root + "/"
        return path[len(root):] if path.startswith(root) else path


def _group(arrays: list[pa.Array]) -> list[tuple[np.ndarray | None, list[Any]]]:
    """Row indices and partition values of each distinct combination of partition values."""
    n = len(arrays[0])
    codes = np.zeros(n, dtype=np.int64)
    for array in arrays:
        encoded = array.dictionary_encode(null_encoding="encode")
        indices = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        codes = np.unique(codes * len(encoded.dictionary) + indices, return_inverse=True)[1].reshape(-1)
    if n and codes.max() == codes.min():
        return [(None, [a[0].as_py() for a in arrays])]
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(sorted_codes)) + 1))
    ends = np.concatenate((starts[1:], [n]))
    groups = []
    for start, end in zip(starts, ends):
        indices = order[start:end]
        first = int(indices[0])
        groups.append((pa.array(indices), [a[first].as_py() for a in arrays]))
    return groups
