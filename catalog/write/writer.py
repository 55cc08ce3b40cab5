"""The writer stream of a dataset (CDK's ``DatasetWriter``), and its write modes.

Records (dicts) and Arrow batches are checked against the schema, routed to their
partitions, and written to a bounded number of open files, each rolled at a target
size. ``flush()`` commits what was written so far as one commit; ``close()`` commits
the rest; leaving a ``with`` block by an exception commits nothing and deletes the
files written since the last commit. A commit's files are deleted only when it is known
not to have landed (:class:`CommitFailedError`); when its outcome is unknown they stay.

The :class:`WriteMode` (:mod:`.modes`) decides what else a commit does.

Each file's rows are sorted when the dataset says so (property ``sort.by``, a keyed
dataset's record key by default) or the writer's ``sort_by`` option does; a sorted file's
rows are held in memory until it closes (see :class:`PartitionedWriter`).
"""

from __future__ import annotations

import json
import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.log.conflicts import replanned
from cdkds.catalog.errors import CdkdsError, CommitFailedError, InvalidRecordError
from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.storage import ObjectStore, store_failures
from cdkds.catalog.partitioning.functions import IdentityFunction
from cdkds.catalog.partitioning.layout import partition_path
from cdkds.catalog.write.modes import RewriteFiles, WriteMode, write_mode
from cdkds.catalog.write.sorting import sort_order, write_sort
from cdkds.formats import values
from cdkds.formats.conversion import RefusedValue
from cdkds.formats.errors import SchemaMismatchError
from cdkds.formats.files import DataFileWriter, WrittenFile, file_format
from cdkds.formats.records import batch_conformer, record_validator
from cdkds.formats.threads import WORKERS

if TYPE_CHECKING:
    from cdkds.catalog.dataset import Dataset

DATA_FOLDER = "data"
STAGING_FOLDER = "_staging"  # rows a Spark keyed write stages for its driver (never in the log)
DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024
DEFAULT_MAX_OPEN_FILES = 256
DEFAULT_MEMORY_BUDGET = 256 * 1024 * 1024
COMBINE_TABLE_BYTES = 1024 * 1024 * 1024  # tables up to this size are routed as one batch  # bytes all open files may hold before the largest is flushed
RECORD_BUFFER_ROWS = 8192
MAX_SORT_RATIO = 4.0  # a sorted file rolls at no more than this many times target_file_size of Arrow bytes
SORTED_BATCH_ROWS = 65_536  # a sorted file's rows reach its file writer in batches of this many
_ENCODERS = WORKERS  # sorted files closed together, on the threads that read the index (memory they keep)


class _OpenFile:
    """A data file being written: its writer (opened on the first batch, or when a sorted
    file's held rows are written at close), its rows so far and, when the file is sorted,
    the rows held until it closes."""

    __slots__ = ("token", "partition", "writer", "rows", "held", "held_bytes")

    def __init__(self, token: int, partition: dict, writer: DataFileWriter | None):
        self.token = token
        self.partition = partition
        self.writer = writer
        self.rows = 0
        self.held: list[_Held] = []
        self.held_bytes = 0


class _Held:
    """Rows of a batch held for a sorted file: taken out of it only as the file is sorted,
    on the thread encoding it (one take of the rows in sorted order, not one to route them
    and one to sort them)."""

    __slots__ = ("batch", "rows")

    def __init__(self, batch: pa.RecordBatch, rows: np.ndarray | None):
        self.batch, self.rows = batch, rows  # ``rows``: of ``batch``, in order; ``None``: all of them

    @property
    def num_rows(self) -> int:
        return self.batch.num_rows if self.rows is None else len(self.rows)

    @property
    def nbytes(self) -> int:
        whole = self.batch.nbytes
        return whole if self.rows is None else whole * len(self.rows) // max(self.batch.num_rows, 1)

    def slice(self, start: int, stop: int | None = None) -> "_Held":
        stop = self.num_rows if stop is None else stop
        if self.rows is None:
            return _Held(self.batch.slice(start, stop - start), None)
        return _Held(self.batch, self.rows[start:stop])

    def columns(self, names: Sequence[str]) -> pa.Table:
        """The held rows of ``names`` only."""
        picked = pa.Table.from_batches([self.batch]).select(list(names))
        return picked if self.rows is None else picked.take(pa.array(self.rows))

    def taken(self, order: np.ndarray | None = None) -> pa.Table:
        """The held rows (in ``order`` of them, when given)."""
        table = pa.Table.from_batches([self.batch])  # a table's take: a record batch's is slower (pyarrow 26)
        if self.rows is None:
            return table if order is None else table.take(pa.array(order))
        return table.take(pa.array(self.rows if order is None else self.rows[order]))


class PartitionedWriter:
    """Checks Arrow batches against a descriptor and writes them into partitioned data
    files; it never commits. Spark executors use it directly and send the
    :class:`AddFile` descriptions it returns to the driver, which commits them.

    Each file's metadata names what a rebuild of the log needs: the commit (``transaction``)
    and its ``operation``, the revision it was planned on, and the ``writer`` whose
    ``flush``-th commit it is (a writer that commits once is its own transaction).

    Sorted files (``sort_by``, by default the descriptor's, see :mod:`cdkds.catalog.write.sorting`)
    hold their rows as Arrow batches until the file closes, then sort them and write them
    in row groups: a file rolls when its held Arrow bytes reach ``target_file_size`` times
    the ratio of Arrow bytes to file bytes of the files this writer closed so far (1 until
    one closed; at most :data:`MAX_SORT_RATIO`), and when all open files hold more than
    ``max(DEFAULT_MEMORY_BUDGET, that roll size)`` the largest is closed early. So a sorted
    write holds up to about that many Arrow bytes, plus a sorted copy of each file being
    encoded (at ``close()``, one per encoding thread)."""

    def __init__(self, store: ObjectStore, dataset: str, descriptor: DatasetDescriptor, descriptor_version: int,
                 base_revision: int, transaction: str, operation: str = "append",
                 replaces: Sequence[str] = (), target_file_size: int = DEFAULT_TARGET_FILE_SIZE,
                 max_open_files: int = DEFAULT_MAX_OPEN_FILES, writer: str | None = None, flush: int = 0,
                 sort_by: "str | Sequence[str] | None" = None):
        check_file_options(dataset, target_file_size, max_open_files)
        self.store = store
        self.dataset = dataset
        self.descriptor = descriptor
        self.descriptor_version = descriptor_version
        self.transaction = transaction
        self.target_file_size = target_file_size
        self.max_open_files = max_open_files
        self.sort_by = write_sort(dataset, descriptor, sort_by)
        self._format = file_format(descriptor.format)
        self._schema = descriptor.arrow_schema
        self._strategy = descriptor.partition_strategy
        self._fields = descriptor.fields
        self._conform = batch_conformer(descriptor.schema)
        self._open: OrderedDict[tuple, _OpenFile] = OrderedDict()
        self._written: list[AddFile] = []
        self._rows_seen = 0  # rows routed so far: where each went is tracked for the record index
        self._placed: list[tuple[np.ndarray, int, int]] = []  # (input rows, file token, first position)
        self._tokens = 0
        self._paths: dict[int, str] = {}
        self._ranks: dict[int, np.ndarray] = {}  # a sorted file's token: each held row's position in the file
        self._arrow_bytes = 0  # of the sorted files closed: their Arrow bytes and file bytes
        self._file_bytes = 0
        self._kinds = self._strategy.kinds(self._fields) if self._strategy is not None else {}
        self._metadata = {
            "cdkds.dataset": dataset,
            "cdkds.transaction": transaction,
            "cdkds.operation": operation,
            "cdkds.base_revision": str(base_revision),
            "cdkds.writer": writer or transaction,
            "cdkds.flush": str(flush),
            "cdkds.descriptor": json.dumps(descriptor.to_json()),
        }
        self._replaces = tuple(replaces)
        if self.sort_by:
            self._metadata["cdkds.sort_by"] = json.dumps(list(self.sort_by))

    def _writing(self) -> str:
        return f"writing data files of dataset {self.dataset!r} at {self.store.url}"

    def error(self, e: Exception | str) -> InvalidRecordError:
        """The error for a refused batch; a refused value stays as ``refused`` (its row lets an
        import name the line)."""
        error = InvalidRecordError(f"dataset {self.dataset!r}: {e}")
        error.refused = e if isinstance(e, RefusedValue) else None
        return error

    def write_batch(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Check a batch (or table) against the schema and write its rows to their partitions."""
        if isinstance(batch, pa.Table):
            if batch.num_rows and batch.nbytes <= COMBINE_TABLE_BYTES:
                batch = batch.combine_chunks()  # route the table at once: one file per partition, not per chunk
            for b in batch.to_batches():
                self.write_batch(b)
            return
        if not isinstance(batch, pa.RecordBatch):
            raise self.error(f"batches must be pyarrow RecordBatches or Tables, not {type(batch).__name__}")
        try:
            batch = self._conform(batch)
        except SchemaMismatchError as e:
            raise self.error(e) from None
        with store_failures(self._writing()):
            self._route(batch)

    def close(self) -> list[AddFile]:
        """Close every open file; the files written since the last call. Sorted files are
        sorted and encoded on threads of their own (pyarrow does both without Python's lock)."""
        with store_failures(self._writing()):
            keys = list(self._open)
            if len(keys) < 2 or not self.sort_by:
                for key in keys:
                    self._close_file(key)
            else:
                finishing = [(k, _ENCODERS.get().submit(self._finish, k, self._open[k])) for k in keys]
                failure = None
                for key, done in finishing:  # every file finished (or failed) before the first failure is raised
                    try:
                        self._close_file(key, done.result)
                    except BaseException as e:  # noqa: BLE001 - raised below, once the others are closed
                        failure = failure or e
                if failure is not None:
                    raise failure
        written, self._written = self._written, []
        return written

    def abort(self) -> None:
        """Delete every file written (committed ones are not this writer's to delete)."""
        for entry in self._open.values():
            if entry.writer is not None:
                try:
                    entry.writer.abort()
                except Exception:  # noqa: BLE001 - best effort: vacuum collects what is left
                    pass
        self._open.clear()
        delete_files(self.store, [a.path for a in self._written])
        self._written = []

    def placements(self) -> tuple[np.ndarray, pa.DictionaryArray, np.ndarray]:
        """Where the rows written so far went, for the files already closed: the input row
        numbers (in write order across calls), each row's file (dictionary-encoded: a file
        path per row would be a Python string each) and position in it (in a sorted file,
        its position after sorting)."""
        rows, codes, positions, paths = [], [], [], {}
        for input_rows, token, start in self._placed:
            if token in self._paths:
                rows.append(input_rows)
                codes.append(np.full(len(input_rows), paths.setdefault(self._paths[token], len(paths)), np.int32))
                rank = self._ranks.get(token)
                positions.append(np.arange(start, start + len(input_rows), dtype=np.int64) if rank is None
                                 else rank[start:start + len(input_rows)])
        if not rows:
            return np.zeros(0, np.int64), pa.DictionaryArray.from_arrays(pa.array([], pa.int32()), pa.array([], pa.string())), \
                np.zeros(0, np.int64)
        files = pa.DictionaryArray.from_arrays(pa.array(np.concatenate(codes)), pa.array(list(paths), pa.string()))
        return np.concatenate(rows), files, np.concatenate(positions)

    def _route(self, batch: pa.RecordBatch) -> None:
        base = self._rows_seen
        self._rows_seen += batch.num_rows
        if batch.num_rows == 0:
            return
        if self._strategy is None:
            self._write_partition(_Held(batch, None), (), np.arange(base, base + batch.num_rows))
            return
        arrays = []
        for f in self._strategy.functions:
            source = batch.column(f.source)
            kind = self._fields[f.source].kind
            if source.null_count and not isinstance(f, IdentityFunction):
                raise self.error(RefusedValue(f.source, pc.index(source.is_null(), True).as_py(), None,
                                              f"is not a partition value: partition source {f.source!r} of "
                                              f"{f.to_text()} is null"))
            try:
                arrays.append(f.apply_array(source, kind))
            except SchemaMismatchError as e:
                raise self.error(_outside(f, source, kind, e)) from None
        for indices, values_ in _group(arrays):
            rows = base + (np.arange(batch.num_rows) if indices is None else indices)
            self._write_partition(_Held(batch, indices), tuple(values_), rows)

    def _entry(self, key: tuple) -> _OpenFile:
        if key in self._open:
            self._open.move_to_end(key)
        else:
            while len(self._open) >= self.max_open_files:
                self._close_file(next(iter(self._open)))
            self._open[key] = self._open_file(key)
        return self._open[key]

    def _write_partition(self, held: _Held, key: tuple, rows: np.ndarray) -> None:
        if self.sort_by:
            self._hold(held, key, rows)
            return
        batch = held.batch if held.rows is None else held.batch.take(pa.array(held.rows))
        entry = self._entry(key)
        writer = entry.writer
        self._placed.append((rows, entry.token, entry.rows))
        entry.rows += batch.num_rows
        writer.write(batch)
        if writer.bytes_written >= self.target_file_size:
            self._close_file(key)
        elif len(self._open) > 1 and sum(e.writer.buffered_bytes for e in self._open.values()) > DEFAULT_MEMORY_BUDGET:
            max(self._open.values(), key=lambda e: e.writer.buffered_bytes).writer.flush_buffer()

    def _roll_bytes(self) -> int:
        """The Arrow bytes at which a sorted file closes (see the class docstring)."""
        ratio = self._arrow_bytes / self._file_bytes if self._file_bytes else 1.0
        return max(1, int(self.target_file_size * min(max(ratio, 1.0), MAX_SORT_RATIO)))

    def _hold(self, batch: _Held, key: tuple, rows: np.ndarray) -> None:
        """Hold rows for their sorted file, rolling the file (and splitting the rows) at
        the roll size."""
        while batch.num_rows:
            entry = self._entry(key)
            limit = self._roll_bytes()
            take = batch.num_rows
            if entry.held_bytes + batch.nbytes > limit and batch.num_rows > 1:
                per_row = max(batch.nbytes / batch.num_rows, 1.0)
                take = min(batch.num_rows, max(1, int((limit - entry.held_bytes) / per_row)))
            piece = batch if take == batch.num_rows else batch.slice(0, take)
            self._placed.append((rows[:take], entry.token, entry.rows))
            entry.rows += take
            entry.held.append(piece)
            entry.held_bytes += piece.nbytes
            batch, rows = batch.slice(take), rows[take:]
            if entry.held_bytes >= limit:
                self._close_file(key)
        budget = max(DEFAULT_MEMORY_BUDGET, self._roll_bytes())
        if len(self._open) > 1 and sum(e.held_bytes for e in self._open.values()) > budget:
            largest = max(self._open, key=lambda k: self._open[k].held_bytes)
            self._close_file(largest)

    def _open_file(self, key: tuple) -> _OpenFile:
        strategy = self._strategy
        partition = dict(zip(strategy.names, key, strict=True)) if strategy is not None else {}
        self._tokens += 1
        entry = _OpenFile(self._tokens, partition, None)
        if not self.sort_by:
            entry.writer = self._new_writer(key, partition)
        return entry

    def _new_writer(self, key: tuple, partition: dict) -> DataFileWriter:
        strategy = self._strategy
        folder = partition_path(strategy.names, key) if strategy is not None else ""
        name = f"part-{uuid.uuid4().hex}.{self._format.extension}"
        relative = "/".join(p for p in (DATA_FOLDER, folder, name) if p)
        metadata = {**self._metadata, "cdkds.partition": json.dumps(
            {k: values.to_json(v, self._kinds[k]) for k, v in partition.items()})}
        replaced = [p for p in self._replaces if p.rsplit("/", 1)[0] == relative.rsplit("/", 1)[0]]
        if replaced:  # the replaced files of this file's partition (a rebuild takes the union of a transaction's)
            metadata["cdkds.replaces"] = json.dumps(replaced)
        return self._format.open_writer(self.store.fs, self.store.open_output(relative), self.descriptor.schema, self._schema,
                                        self.descriptor.compression, metadata, keyed=bool(self.descriptor.record_key))

    def _close_file(self, key: tuple, finished: "Callable[[], WrittenFile] | None" = None) -> None:
        """Close the file of ``key`` (``finished``: its writer's close, done elsewhere)."""
        entry = self._open[key]
        try:
            written = finished() if finished is not None else self._finish(key, entry)
        except BaseException:
            # the file leaves the open list only now, so that an abort after a failed close
            # still finds what was written of it
            self._open.pop(key, None)
            if entry.writer is not None:
                try:
                    entry.writer.abort()
                except Exception:  # noqa: BLE001 - best effort: vacuum collects what is left
                    pass
            raise
        self._open.pop(key)
        root = self.store.root + "/"
        path = written.path[len(root):] if written.path.startswith(root) else written.path
        self._paths[entry.token] = path
        if entry.token in self._ranks:  # a sorted file
            self._arrow_bytes += entry.held_bytes
            self._file_bytes += written.size
        self._written.append(AddFile(path, entry.partition, written.size, written.row_count,
                                     dict(written.statistics), self.descriptor_version,
                                     spec_id=self.descriptor.partition_spec_id))

    def _finish(self, key: tuple, entry: _OpenFile) -> WrittenFile:
        """Close a file's writer (first writing a sorted file's held rows, sorted)."""
        if entry.writer is None:  # a sorted file: sort its held rows, then write them
            held, entry.held = entry.held, []
            if len(held) == 1:  # the usual case (a batch's rows): sorted by its sort columns, taken once
                order = sort_order(held[0].columns(self.sort_by), self.sort_by)
                table = held[0].taken(order)
            else:
                table = pa.concat_tables([h.taken() for h in held])
                order = sort_order(table, self.sort_by)
                table = table.take(pa.array(order))
            rank = np.empty(len(order), dtype=np.int64)
            rank[order] = np.arange(len(order), dtype=np.int64)
            del held
            entry.writer = self._new_writer(key, entry.partition)
            for batch in table.to_batches(max_chunksize=SORTED_BATCH_ROWS):
                entry.writer.write(batch)
            written = entry.writer.close()
            self._ranks[entry.token] = rank
            return written
        return entry.writer.close()


def check_file_options(dataset: str, target_file_size: object, max_open_files: object) -> None:
    """:class:`CdkdsError` unless ``target_file_size`` is a positive number of bytes and
    ``max_open_files`` a positive integer."""
    check_target_file_size(dataset, target_file_size)
    if isinstance(max_open_files, bool) or not isinstance(max_open_files, int) or max_open_files < 1:
        raise CdkdsError(f"dataset {dataset!r}: max_open_files must be a positive integer, got {max_open_files!r}")


def check_target_file_size(dataset: str, target_file_size: object) -> None:
    """:class:`CdkdsError` unless ``target_file_size`` is a positive number of bytes."""
    if isinstance(target_file_size, bool) or not isinstance(target_file_size, int) or target_file_size < 1:
        raise CdkdsError(f"dataset {dataset!r}: target_file_size must be a positive number of bytes, "
                         f"got {target_file_size!r}")


def delete_files(store: ObjectStore, keys: Iterable[str]) -> None:
    """Best-effort removal of uncommitted files (vacuum collects whatever is left)."""
    for key in keys:
        try:
            store.delete(key)
        except Exception:  # noqa: BLE001
            pass


class DatasetWriter:
    """Writes records and batches to a dataset and commits them; see the module docstring."""

    def __init__(self, dataset: "Dataset", mode: "str | WriteMode" = "append",
                 target_file_size: int = DEFAULT_TARGET_FILE_SIZE, max_open_files: int = DEFAULT_MAX_OPEN_FILES,
                 sort_by: "str | Sequence[str] | None" = None):
        self.dataset = dataset
        self.descriptor = dataset.descriptor
        # the revision of the descriptor its files are written with, stamped on them (readers trust it
        # for their layout): after a flush rebased over a schema change the dataset's is newer
        self.descriptor_version = dataset.descriptor_version
        self.target_file_size = target_file_size
        self.max_open_files = max_open_files
        self.sort_by = write_sort(dataset.name, self.descriptor, sort_by)  # checked before anything is written
        self.mode = write_mode(mode, dataset.descriptor, dataset.name)
        self._schema = self.descriptor.arrow_schema
        self._validate = record_validator(self.descriptor.schema)
        self._strategy = self.descriptor.partition_strategy
        self._fields = self.descriptor.fields
        self._records: list[dict] = []
        self._own: set[str] = set()
        self._commits = 0
        self._id = uuid.uuid4().hex  # spans this writer's flushes, each its own commit
        self._closed = False
        self._planned_on = dataset.version  # what the files of the next commit are written on
        self._files = self._new_files()

    def _new_files(self) -> PartitionedWriter:
        ds = self.dataset
        replaces = [f.path for f in self.mode.files] if isinstance(self.mode, RewriteFiles) else ()
        return PartitionedWriter(ds.store, ds.name, self.descriptor, self.descriptor_version, ds.version,
                                 uuid.uuid4().hex, self.mode.operation, replaces, self.target_file_size,
                                 self.max_open_files, self._id, self._commits, list(self.sort_by))

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
                        f.check(value, self._fields[f.source].kind)
        except SchemaMismatchError as e:
            raise self._files.error(e) from None
        self._records.append(checked)
        if len(self._records) >= RECORD_BUFFER_ROWS:
            self._drain_records()

    def write_batch(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Check an Arrow batch (or table) against the schema and write its rows."""
        self._check_open()
        self._drain_records()
        self._files.write_batch(batch)

    def flush(self) -> int | None:
        """Commit everything written so far as one commit; returns its revision (``None``
        when there was nothing to commit)."""
        self._check_open()
        self._drain_records()
        adds = self._files.close()
        if not adds and not self.mode.commits_without_files(self._commits == 0):
            return None
        info = {"rows": sum(a.row_count for a in adds), "files": len(adds)}

        def commit() -> None:  # a compaction that committed first changed no row: removals are planned again
            removes, rule = self.mode.plan(self.dataset.snapshot, adds, self._own, self._commits == 0)
            self.dataset._commit(self.mode.operation, [*removes, *adds], info, self._files.transaction, rule,
                                 planned_on=self._planned_on)
        try:
            replanned(self.dataset, commit)
        except CommitFailedError:  # known not to have landed; on any other error the files may be committed
            delete_files(self.dataset.store, [a.path for a in adds])
            raise
        self._own.update(a.path for a in adds)
        self._commits += 1
        self._planned_on = self.dataset.version
        self._files = self._new_files()
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
        if self._commits:
            self.dataset._after_write()
        return version

    def abort(self) -> None:
        """Commit nothing more and delete the files written since the last commit."""
        if self._closed:
            return
        self._closed = True
        self._records = []
        self._files.abort()

    # ---------------------------------------------------------------- internals

    def _check_open(self) -> None:
        if self._closed:
            raise CdkdsError(f"the writer of dataset {self.dataset.name!r} is closed")

    def _drain_records(self) -> None:
        if self._records:
            batch = pa.RecordBatch.from_pylist(self._records, schema=self._schema)
            self._records = []
            self._files.write_batch(batch)


def _outside(f: Any, source: pa.Array, kind: str, error: SchemaMismatchError) -> SchemaMismatchError:
    """A source value outside what partition function ``f`` maps, refused with its row."""
    try:
        value = f.domain(kind).first_outside(source)
        row = pc.index(source, value).as_py() if value is not None else -1
    except (pa.ArrowException, TypeError, ValueError):
        row = -1
    return RefusedValue(f.source, row, value, f.outside_reason(kind)) if row >= 0 else error


def _group(arrays: list[pa.Array]) -> list[tuple[np.ndarray | None, list[Any]]]:
    """Row indices and partition values of each distinct combination of partition values."""
    n = len(arrays[0])
    codes, distinct = np.zeros(n, dtype=np.int64), 1
    for array in arrays:
        encoded = array.dictionary_encode(null_encoding="encode")
        indices = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        codes, distinct = codes * len(encoded.dictionary) + indices, distinct * len(encoded.dictionary)
        if distinct > n:  # kept below the row count: codes of distinct combinations, renumbered
            codes = np.unique(codes, return_inverse=True)[1].reshape(-1)
            distinct = int(codes.max()) + 1 if n else 1
    if n and codes.max() == codes.min():
        return [(None, [a[0].as_py() for a in arrays])]
    order = np.argsort(codes.astype(np.int16) if distinct < 2**15 else codes, kind="stable")  # a radix sort when few
    sorted_codes = codes[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(sorted_codes)) + 1))
    ends = np.concatenate((starts[1:], [n]))
    groups = []
    for start, end in zip(starts, ends):
        indices = order[start:end]
        first = int(indices[0])
        groups.append((indices, [a[first].as_py() for a in arrays]))
    return groups
