"""The objects part of ``cdkds check``: every file the log references is present with its size,
and the contents the latest replayed state uses decode and agree with the log (index files,
deletion vectors, with ``read_data`` data files and record keys)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import CorruptIndexError, InvalidDescriptorError, StorageError
from cdkds.catalog.expressions import ALWAYS_TRUE
from cdkds.catalog.keyed.deletion import DeletionVectorRef
from cdkds.catalog.keyed.index import RecordIndex, index_column_key
from cdkds.catalog.keyed.reconcile import repeated_keys
from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.maintenance.problems import (
    Problem, Progress, Reference, References, detail, revisions, short,
)
from cdkds.catalog.read.scan import FileScanTask, read_task
from cdkds.catalog.storage import ObjectStore, store_failures
from cdkds.catalog.work_columns import COUNT, FILE, POSITION, ROW
from cdkds.formats.files import file_format
from cdkds.formats.statistics import StatisticsCollector


class FileCheck:
    """The objects the log references: present with their sizes, and the contents of those the
    latest replayed state uses."""

    def __init__(self, store: ObjectStore, name: str, refs: References, latest: int, progress: Progress):
        self.store = store
        self.name = name
        self.refs = refs
        self.latest = latest
        self.progress = progress
        self.problems: list[Problem] = []
        self.absent: set[str] = set()  # referenced objects found missing or of the wrong size

    def _problem(self, kind: str, key: str, message: str, cost: str) -> None:
        self.problems.append(Problem(kind, key, message, cost))

    def check_presence(self) -> None:
        """Every referenced object exists with the recorded size: one listing per top-level folder."""
        refs = sorted(self.refs.items.values(), key=lambda r: r.key)
        found: dict[str, int] = {}
        folders = sorted({r.key.split("/", 1)[0] for r in refs if "/" in r.key})
        for i, folder in enumerate(folders):
            self.progress("listing files", i, len(folders))
            self.store.fs.invalidate_cache(self.store.path(folder))
            found.update((key, int(info.get("size") or 0)) for key, info in self.store.walk_files(folder))
        for ref in refs:
            if "/" not in ref.key:
                try:
                    found[ref.key] = self.store.size(ref.key)
                except FileNotFoundError:
                    pass
        for i, ref in enumerate(refs):
            if i % 1000 == 0:
                self.progress("checking files", i, len(refs))
            size = found.get(ref.key)
            if size is None:
                self.absent.add(ref.key)
                self._problem("missing_file", ref.key, f"{what_is(ref)} is missing", self._missing_cost(ref))
            elif size != ref.size:
                self.absent.add(ref.key)
                self._problem("size_mismatch", ref.key, f"{what_is(ref)} has {size} bytes, the log says {ref.size}",
                              self._missing_cost(ref, damaged=True))
        self.progress("checking files", len(refs), len(refs))

    def _missing_cost(self, ref: Reference, damaged: bool = False) -> str:
        live = ref.last is None
        when = (f"from revision {ref.first} to the latest ({self.latest})" if live else
                f"at {revisions(ref.first, ref.last)} only (time travel; the latest does not use it)")
        fail = "fail or return wrong rows" if damaged else "fail"
        if ref.kind == "data":
            lost = f"; its {ref.rows} rows are lost unless the file is restored" if live and not damaged else ""
            return f"reads that include this file {fail} {when}{lost}"
        if ref.kind == "index":
            bucket = ref.key.split("/")[1] if ref.key.count("/") >= 2 else "?"
            fix = "; `cdkds rebuild-index` rebuilds the index from the data files" if live else ""
            return f"reads, upserts and deletes by key in bucket {bucket} fail {when}{fix}"
        return f"every read of {ref.owner} fails {when} (its deleted rows cannot be told apart)"

    def check_index(self, state: Snapshot) -> None:
        entries = [e for e in state.index.values() if e.path not in self.absent]
        if not entries:
            return
        try:
            index = RecordIndex(self.store, state, self.name)
        except StorageError:
            raise  # the store failed: nothing is known about the index
        except Exception as e:  # noqa: BLE001 - an unkeyed descriptor with index files, or bad properties
            self._problem("unreadable_index", entries[0].path, f"the record index cannot be opened ({detail(e)})",
                          "reads, upserts and deletes by key fail; `cdkds rebuild-index` rebuilds the index")
            return
        for i, entry in enumerate(entries):
            self.progress("reading index files", i, len(entries))
            try:
                rows = index.read_file(entry).num_rows
                message = None if rows == entry.rows else (f"index file {entry.path} of bucket {entry.bucket} holds "
                                                           f"{rows} entries, the log says {entry.rows}")
            except CorruptIndexError as e:
                message = short(e)
            if message is not None:
                self._problem("unreadable_index", entry.path, message,
                              f"reads, upserts and deletes by key in bucket {entry.bucket} fail from revision "
                              f"{state.version}; `cdkds rebuild-index` rebuilds the index from the data files")
        self.progress("reading index files", len(entries), len(entries))

    def check_vectors(self, state: Snapshot) -> None:
        files = state.files.with_deletion_vectors()
        for i, add in enumerate(files):
            if i % 100 == 0:
                self.progress("reading deletion vectors", i, len(files))
            for ref in add.deletes:
                if ref.path in self.absent:
                    continue
                problem = _vector_problem(self.store, ref, add)
                if problem is not None:
                    self._problem("unreadable_deletion_vector", ref.path or add.path,
                                  f"a deletion vector of {add.path} {problem}",
                                  f"every read of {add.path} fails at revision {state.version}"
                                  f"{' and earlier ones that use it' if add.revision < state.version else ''}")
        self.progress("reading deletion vectors", len(files), len(files))

    def read_data(self, state: Snapshot) -> None:
        descriptor = state.descriptor
        files = state.files.table().without(self.absent)
        total = int(pc.sum(files.table.column("size")).as_py() or 0)
        done = 0
        for add in files.files():  # an AddFile at a time, made batch by batch
            self.progress("reading data files", done, total)
            problem = _content_problem(self.store, descriptor, add)
            if problem is not None:
                kind, message = problem
                self._problem(kind, add.path, message,
                              f"reads that include this file fail or return wrong rows from revision {add.revision} "
                              f"to the latest ({self.latest})")
            done += add.size
        self.progress("reading data files", total, total)

    def check_keys(self, state: Snapshot) -> None:
        """Every live key of a keyed dataset is in one live row, and the index points at that row."""
        files = state.files.table().without(self.absent)
        try:
            index = RecordIndex(self.store, state, self.name)
        except InvalidDescriptorError as e:  # a key named like an index column (an old log): reported, not raised
            self._problem("unusable_key", str(index_column_key(state.descriptor)), str(e),
                          "keyed operations fail until the key field is renamed")
            return
        names = list(index.key.names)
        parts = []
        for i, add in enumerate(files.files()):
            self.progress("reading record keys", i, len(files))
            if not add.may_have_live_rows:
                continue
            task = FileScanTask(add, tuple(t.predicate for t in state.tombstones_for(add)))  # expired rows too
            try:
                for batch in read_task(self.store, state.descriptor, ALWAYS_TRUE, names, task, positions=True):
                    parts.append(pa.Table.from_batches([batch]).append_column(
                        FILE, pa.array([add.path] * batch.num_rows, pa.string())))
            except StorageError:
                raise
            except Exception:  # noqa: BLE001 - reported by read_data already
                return
        self.progress("reading record keys", len(files), len(files))
        if not parts:
            return
        live = pa.concat_tables(parts)
        twice = repeated_keys(live, names)
        for row in range(min(5, twice.num_rows)):
            self._problem("duplicate_key", index.key.describe(twice, row),
                          f"record key {index.key.describe(twice, row)} is live in {twice[COUNT][row]} rows",
                          "reads return the key more than once and `get` returns one of them; delete_keys and "
                          "upsert it to leave one row")
        found = index.lookup(live.select(names), index.key.hashes(live.select(names)))
        pointed = np.zeros(live.num_rows, dtype=bool)
        rows = found.column(ROW).to_numpy()
        same = np.asarray(pc.and_(
            pc.equal(found.column("_file").cast(pa.string()), live.column(FILE).take(found.column(ROW))),
            pc.equal(found.column("_pos"), live.column(POSITION).take(found.column(ROW)))).fill_null(False))
        pointed[rows[same]] = True
        missing = np.flatnonzero(~pointed)
        if len(missing):
            sample = ", ".join(index.key.describe(live, int(r)) for r in missing[:3])
            self._problem("index_mismatch", live.column(FILE)[int(missing[0])].as_py(),
                          f"{len(missing)} live rows are not where the record index points for their key, "
                          f"e.g. {sample}",
                          "get, upserts and deletes by key miss or duplicate these rows; `cdkds rebuild-index` "
                          "rebuilds the index from the data files")


def what_is(ref: Reference) -> str:
    return {"data": "data file", "index": "record-index file", "deletes": f"deletion vector of {ref.owner}"}[ref.kind]


def _vector_problem(store: ObjectStore, ref: DeletionVectorRef, add: AddFile) -> str | None:
    """What is wrong with one deletion vector of ``add``, ``None`` when nothing."""
    try:
        vector = ref.load(store)
    except CorruptIndexError as e:
        return f"cannot be loaded ({e})"
    except StorageError:
        raise
    except Exception as e:  # noqa: BLE001 - an undecodable inline vector
        return f"cannot be decoded ({type(e).__name__}: {e})"
    if len(vector) != ref.cardinality:
        return f"holds {len(vector)} positions, the log says {ref.cardinality}"
    if len(vector) and vector.positions.max() >= add.row_count:
        return f"deletes row {vector.positions.max()}, but the file has {add.row_count} rows"
    return None


def _content_problem(store: ObjectStore, descriptor: DatasetDescriptor, add: AddFile) -> tuple[str, str] | None:
    """Reads data file ``add`` whole with the scan's reader; what differs from the log, if anything."""
    projection = descriptor.projection(partition=add.partition, spec_id=add.spec_id)
    collector = StatisticsCollector(projection.arrow_schema)
    try:
        with store_failures(f"reading data file {store.display(add.path)}", unclassified=False):
            for batch in file_format(descriptor.format).read(store.fs, store.path(add.path), projection, size=add.size):
                collector.update(batch)
    except StorageError:
        raise  # the connection failed, not the file
    except Exception as e:  # noqa: BLE001 - whatever the reader raises, the file cannot be read
        return "unreadable_file", f"data file cannot be read whole ({type(e).__name__}: {e})"
    if collector.row_count != add.row_count:
        return "content_mismatch", f"data file holds {collector.row_count} rows, the log says {add.row_count}"
    found = collector.result()
    fields = descriptor.fields
    for name, recorded in add.statistics.items():
        actual = found.get(name)
        if actual is None or name not in fields:
            continue
        kind = fields[name].kind
        same = (actual.to_json(kind) == recorded.to_json(kind) if recorded.min is not None else
                actual.null_count == recorded.null_count)
        if not same:
            return "content_mismatch", (f"column {name} of the data file holds {actual.to_json(kind)}, the log "
                                        f"records {recorded.to_json(kind)}")
    return None
