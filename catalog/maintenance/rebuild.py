"""Rebuilding a lost or corrupt log from the data files' own metadata (IOx's rebuildability).

Every data file names its dataset, partition values, the descriptor it was written with,
the commit (transaction) that added it with that commit's operation and the revision it was
planned on, the writer whose ``flush``-th commit it was (a :class:`DatasetWriter` spans
flushes; a Spark job is one flush) and, for compaction, the files it replaced.

Rebuilding groups files by transaction, orders transactions by the revision they were
planned on (a writer's next flush is planned on the revision its previous flush committed,
so one writer's history is totally ordered) and commits each again, at the revision after
the one it was planned on or later (empty ``unrecovered`` commits stand for commits that
left no file, so revisions keep their numbers and later writers' files sort after), with
the removals its write mode makes (:meth:`WriteMode.plan`, the writer's own rule): an overwrite's first
flush removes every live file and its later flushes only add; a partition overwrite's flush
removes the live files of its partitions except its writer's earlier files; a compaction
removes the files it replaced. Statistics are recomputed from the files.

What the files cannot tell is reported in a :class:`RebuildReport`, never guessed silently:

- commits that left no data file: deletes (whole-file removals and tombstones), descriptor
  changes, overwrites of nothing, and commits whose files were all vacuumed. They show as
  revisions no transaction was planned on, and at least that many commits are missing;
  such commits after the last file-writing one cannot be noticed at all;
- the order of transactions planned on the same revision (concurrent writers): all but one
  committed later, at places the files do not record; it is rebuilt in file time order and
  reported when any transaction from there on is neither an append nor a compaction;
- an overwrite whose first flush left no file (it was empty or vacuumed): rebuilt as
  removing everything live before its first surviving flush;
- a compaction whose replaced files are stored but not live at its place: it cannot have
  committed there (the log's conflict rules forbid it), so it is left out;
- files written before writer ids were recorded: each transaction is taken as a whole
  write, so a later flush of a multi-flush overwrite replaces its own earlier flushes;
- unreadable files, which are skipped.

Files of writers that crashed before committing and were not yet vacuumed look like
committed ones, and are rebuilt as such.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Mapping

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import CorruptLogWarning, DatasetNotFoundError, StorageError
from cdkds.catalog.log import LOG_FOLDER, TransactionLog
from cdkds.catalog.log.actions import (
    LAYOUT_PROTOCOL, Action, AddFile, SetMetadata, SetProtocol,
)
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.storage import ObjectStore, modified, store_failures
from cdkds.catalog.write.modes import Append, Overwrite, RewriteFiles, WriteMode, write_mode
from cdkds.catalog.write.writer import DATA_FOLDER
from cdkds.formats import values
from cdkds.formats.files import file_format
from cdkds.formats.statistics import StatisticsCollector

OPERATIONS = frozenset({"append", "overwrite", "overwrite_partitions", "compact", "upsert", "insert", "update", "delete"})
COMMUTING = frozenset({"append", "compact"})  # operations whose order among themselves does not matter
UNRECOVERED = "unrecovered"  # the operation of an empty commit standing for one that left no file


@dataclass(frozen=True)
class Unrecoverable:
    """One thing the data files cannot tell, the transactions (or files) it concerns, and
    what the rebuild did about it."""

    reason: str
    transactions: tuple[str, ...]
    detail: str

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}"


@dataclass(frozen=True)
class RebuildReport:
    """The transactions a rebuild committed, in order, and what it could not recover."""

    dataset: str
    transactions: tuple[str, ...]
    unrecoverable: tuple[Unrecoverable, ...]

    @property
    def complete(self) -> bool:
        """True when nothing the files cannot tell was found (see the module docstring for
        what cannot be found)."""
        return not self.unrecoverable

    def __str__(self) -> str:
        head = f"dataset {self.dataset!r}: rebuilt {len(self.transactions)} transactions"
        if self.complete:
            return head
        return head + "; not recoverable from the data files:\n" + "\n".join(f"- {u}" for u in self.unrecoverable)


class IncompleteRebuildWarning(CorruptLogWarning):
    """A rebuilt log that may differ from the lost one; ``report`` says where."""

    def __init__(self, report: RebuildReport):
        super().__init__(str(report))
        self.report = report


@dataclass(frozen=True)
class _StoredFile:
    key: str
    size: int
    partition: Mapping
    spec_id: int  # the partition spec of the descriptor it records (its current one)


@dataclass
class _Transaction:
    uuid: str
    operation: str
    base_revision: int
    descriptor: DatasetDescriptor
    writer: str
    flush: int
    recorded: bool  # written with a writer id and flush number
    written: float
    replaces: frozenset[str]
    files: list[_StoredFile] = field(default_factory=list)


def rebuild_log(store: ObjectStore, name: str) -> tuple[TransactionLog, RebuildReport]:
    """Write a new log for dataset ``name`` from its data files; the old ``_log/`` is kept
    as ``_log.broken-<time>/``. Returns the new log and the report of what it could not
    recover."""
    transactions, unreadable = _read_transactions(store)
    if not transactions:
        raise DatasetNotFoundError(f"dataset {name!r}: no readable data files to rebuild a log from at {store.url}")
    ordered = sorted(transactions, key=lambda t: (t.base_revision, t.written, t.uuid))
    findings = [*_lost_commits(ordered), *_concurrent(ordered), *_missing_first_flushes(ordered), *_unrecorded(ordered)]
    if unreadable:
        findings.append(Unrecoverable("unreadable files", tuple(unreadable),
                                      f"skipped {len(unreadable)} data files that cannot be read: {unreadable}"))
    if store.list(LOG_FOLDER):
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        store.move_tree(LOG_FOLDER, f"{LOG_FOLDER}.broken-{stamp}")
    log = TransactionLog(store, name)
    # created as any dataset is (past specs are not a new dataset's); the first commit with files
    # brings its descriptor, with its specs and the protocol they need
    snapshot = log.create(ordered[0].descriptor, {"rebuilt": True})
    stored = {f.key for t in ordered for f in t.files}
    own: dict[str, set[str]] = defaultdict(set)
    committed = []
    for txn in ordered:
        mode = _mode(txn, snapshot, stored)
        if mode is None:
            findings.append(Unrecoverable("compaction not committed there", (txn.uuid,), (
                f"compaction {txn.uuid} (planned on revision {txn.base_revision}) replaces stored files that are not "
                f"live at its place, so it cannot have committed there; left out")))
            continue
        while snapshot.version < txn.base_revision:  # keep revisions where the files say they were
            snapshot = log.commit(snapshot, UNRECOVERED, [], {"rebuilt": True})
        adds = [_add(store, f, txn.descriptor) for f in txn.files]
        first = not own[txn.writer]  # its writer's first flush, or the first one that left files
        removes, _ = mode.plan(snapshot, adds, own[txn.writer], first)
        actions: list[Action] = [*_protocol(txn.descriptor, snapshot), SetMetadata(txn.descriptor)] \
            if txn.descriptor != snapshot.descriptor else []
        snapshot = log.commit(snapshot, txn.operation, [*actions, *removes, *adds], {"rebuilt": True}, txn.uuid)
        own[txn.writer].update(a.path for a in adds)
        committed.append(txn.uuid)
    log.write_checkpoint(snapshot)
    keyed = [k for folder in ("_deletes", "_index") for k, _ in store.walk_files(folder)][:1]
    if keyed:
        findings.append(Unrecoverable(
            "deletion vectors and the record index", (),
            f"the dataset had some ({keyed[0]}); the data files cannot tell which rows were deleted by key, so "
            f"those rows are live again and a key may be live twice: delete them again and run "
            f"dataset.rebuild_index() (which refuses duplicate keys, naming them)"))
    return log, RebuildReport(name, tuple(committed), tuple(findings))


def _read_transactions(store: ObjectStore) -> tuple[list[_Transaction], list[str]]:
    transactions: dict[str, _Transaction] = {}
    unreadable = []
    for key, info in store.walk_files(DATA_FOLDER):
        try:
            with store_failures(f"reading data file {store.display(key)}", unclassified=False):
                meta = file_format(key.rsplit(".", 1)[-1]).metadata(store.fs, store.path(key))
            descriptor = DatasetDescriptor.as_recorded(meta["cdkds.descriptor"])
            uuid = meta["cdkds.transaction"]
            txn = transactions.setdefault(uuid, _Transaction(
                uuid, meta.get("cdkds.operation", "append"), int(meta.get("cdkds.base_revision", 0)), descriptor,
                meta.get("cdkds.writer", uuid), int(meta.get("cdkds.flush", 0)), "cdkds.writer" in meta,
                modified(info), frozenset()))
            txn.replaces |= frozenset(json.loads(meta.get("cdkds.replaces", "[]")))  # each file names its partition's
            if txn.operation not in OPERATIONS:
                raise ValueError(f"unknown operation {txn.operation!r}")
            txn.written = min(txn.written, modified(info))
            kinds = descriptor.partition_strategy.kinds(descriptor.fields) if descriptor.is_partitioned else {}
            partition = {k: values.from_json(v, kinds[k]) for k, v in json.loads(meta["cdkds.partition"]).items()}
            txn.files.append(_StoredFile(key, int(info.get("size", 0)), partition, descriptor.partition_spec_id))
        except StorageError:
            raise  # a failed connection says nothing of the file: skipping it would drop its rows from the log
        except Exception:  # noqa: BLE001 - an unreadable file is reported, not fatal
            unreadable.append(key)
    return list(transactions.values()), unreadable


def _protocol(descriptor: DatasetDescriptor, snapshot: Snapshot) -> list[Action]:
    """The protocol raise ``descriptor`` needs on ``snapshot``: partition specs need log protocol 5."""
    if descriptor.has_past_specs and snapshot.protocol.reader_version < LAYOUT_PROTOCOL:
        return [SetProtocol(LAYOUT_PROTOCOL, LAYOUT_PROTOCOL)]
    return []


def _mode(txn: _Transaction, snapshot: Snapshot, stored: set[str]) -> WriteMode | None:
    """The write mode that made ``txn``; ``None`` for a compaction that cannot have
    committed on ``snapshot`` (a stored file it replaces is not live)."""
    if txn.operation in ("upsert", "insert", "update", "delete"):
        return Append()  # a keyed write's files: its deletion vectors and index are not in the files
    if txn.operation != "compact":
        return write_mode(txn.operation, txn.descriptor)
    if any(p in stored and p not in snapshot.files for p in txn.replaces):
        return None
    return RewriteFiles([snapshot.files[p] for p in sorted(txn.replaces) if p in snapshot.files])


def _lost_commits(ordered: list[_Transaction]) -> list[Unrecoverable]:
    planned_on = {t.base_revision for t in ordered}
    last = max(planned_on)
    lost = last + 1 - len(ordered)  # revisions 1..last+1 at least, one per transaction
    if lost <= 0:
        return []
    gaps = sorted(set(range(last + 1)) - planned_on)
    return [Unrecoverable("commits without files", (), (
        f"at least {lost} commits up to revision {last + 1} left no data file (deletes, descriptor changes, "
        f"overwrites of nothing, or commits whose files were vacuumed); no transaction was planned on revision(s) "
        f"{gaps}, so the commits that followed them are missing from the rebuilt log"))]


def _concurrent(ordered: list[_Transaction]) -> list[Unrecoverable]:
    by_base: dict[int, list[_Transaction]] = defaultdict(list)
    for t in ordered:
        by_base[t.base_revision].append(t)
    found = []
    for base, group in sorted(by_base.items()):
        if len(group) < 2:
            continue
        later = [t for t in ordered if t.base_revision >= base]
        order_matters = [t for t in later if t.operation not in COMMUTING]
        if order_matters:
            found.append(Unrecoverable("order of concurrent transactions", tuple(t.uuid for t in group), (
                f"transactions {[t.uuid for t in group]} ({[t.operation for t in group]}) were all planned on "
                f"revision {base}; all but one committed later, at places the files do not record, and the order "
                f"matters for {[f'{t.uuid} ({t.operation})' for t in order_matters]}; rebuilt in file time order")))
    return found


def _missing_first_flushes(ordered: list[_Transaction]) -> list[Unrecoverable]:
    first: dict[str, _Transaction] = {}
    for t in ordered:
        first.setdefault(t.writer, t)
    return [Unrecoverable("overwrite without its first flush", (t.uuid,), (
        f"overwrite {t.uuid}: its writer's first {t.flush} flush(es) left no file (an overwrite of nothing, or "
        f"files since vacuumed); rebuilt as removing everything live before its flush {t.flush}, which also "
        f"removes what other writers committed between those flushes"))
        for t in first.values() if t.flush > 0 and isinstance(write_mode(t.operation, t.descriptor), Overwrite)]


def _unrecorded(ordered: list[_Transaction]) -> list[Unrecoverable]:
    found = []
    previous: dict[str, _Transaction] = {}
    for t in ordered:
        if not t.recorded and t.operation in previous:
            found.append(Unrecoverable("written without writer ids", (previous[t.operation].uuid, t.uuid), (
                f"transactions {previous[t.operation].uuid} and {t.uuid} ({t.operation}) were written before writer "
                f"ids and flush numbers were recorded: each is rebuilt as a whole write, so if the second was a later "
                f"flush of the first's writer, the rows of the first are missing from the rebuilt log")))
        if not t.recorded and t.operation not in COMMUTING:
            previous[t.operation] = t
    return found


def _add(store: ObjectStore, stored: _StoredFile, descriptor: DatasetDescriptor) -> AddFile:
    collector = StatisticsCollector(descriptor.arrow_schema)
    with store_failures(f"reading data file {store.display(stored.key)}", unclassified=False):
        for batch in file_format(descriptor.format).read(store.fs, store.path(stored.key), descriptor.projection()):
            collector.update(batch)
    # the descriptor it was written with is not known: readers open it to learn its columns
    return AddFile(stored.key, stored.partition, stored.size, collector.row_count, collector.result(),
                   schema_version=-1, spec_id=stored.spec_id)
