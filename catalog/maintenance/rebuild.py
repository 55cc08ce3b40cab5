"""Rebuilding a lost or corrupt log from the data files' own metadata (IOx's rebuildability).

Every data file names its dataset, partition values, the transaction that wrote it, that
transaction's operation and base revision, the descriptor it was written with, and (for
compaction) the files it replaced. Rebuilding groups files by transaction, orders the
transactions by base revision and age, and commits them again: appends add, overwrites
remove what was live, partition overwrites remove what was live in their partitions,
compactions remove what they replaced. Statistics are recomputed from the files.

What cannot be recovered: deletes that only wrote tombstones, descriptor changes that
wrote no files, and files already vacuumed.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field

from cdkds.catalog.log.actions import Action, AddFile, RemoveFile, SetMetadata
from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import DatasetNotFoundError
from cdkds.catalog.log import LOG_FOLDER, TransactionLog
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.storage import ObjectStore, modified
from cdkds.catalog.writer import DATA_FOLDER
from cdkds.formats import values
from cdkds.formats.files import conform, file_format
from cdkds.formats.statistics import StatisticsCollector


@dataclass
class _Transaction:
    uuid: str
    operation: str
    base_revision: int
    descriptor: DatasetDescriptor
    written: float
    files: list[tuple[str, int, dict, list[str]]] = field(default_factory=list)  # key, size, partition, replaces


def rebuild_log(store: ObjectStore, name: str) -> tuple[TransactionLog, list[str]]:
    """Write a new log for dataset ``name`` from its data files; the old ``_log/`` is kept
    as ``_log.broken-<time>/``. Returns the new log and the keys of files it skipped."""
    transactions: dict[str, _Transaction] = {}
    skipped = []
    for key, info in store.walk_files(DATA_FOLDER):
        try:
            fmt = file_format(key.rsplit(".", 1)[-1])
            meta = fmt.metadata(store.fs, store.path(key))
            descriptor = DatasetDescriptor.from_json(meta["cdkds.descriptor"])
            txn = transactions.setdefault(meta["cdkds.transaction"], _Transaction(
                meta["cdkds.transaction"], meta.get("cdkds.operation", "append"),
                int(meta.get("cdkds.base_revision", 0)), descriptor, modified(info)))
            txn.written = min(txn.written, modified(info))
            kinds = descriptor.partition_strategy.kinds(descriptor.fields) if descriptor.is_partitioned else {}
            partition = {k: values.from_json(v, kinds[k]) for k, v in json.loads(meta["cdkds.partition"]).items()}
            txn.files.append((key, int(info.get("size", 0)), partition, json.loads(meta.get("cdkds.replaces", "[]"))))
        except Exception:  # noqa: BLE001 - an unreadable file is reported, not fatal
            skipped.append(key)
    if not transactions:
        raise DatasetNotFoundError(f"dataset {name!r}: no readable data files to rebuild a log from at {store.url}")
    ordered = sorted(transactions.values(), key=lambda t: (t.base_revision, t.written))
    if store.list(LOG_FOLDER):
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        store.move_tree(LOG_FOLDER, f"{LOG_FOLDER}.broken-{stamp}")
    log = TransactionLog(store, name)
    snapshot = log.create(ordered[0].descriptor, {"rebuilt": True})
    for txn in ordered:
        snapshot = _recommit(log, store, snapshot, txn)
    log.write_checkpoint(snapshot)
    return log, skipped


def _recommit(log: TransactionLog, store: ObjectStore, snapshot: Snapshot, txn: _Transaction) -> Snapshot:
    actions: list[Action] = []
    if txn.descriptor != snapshot.descriptor:
        actions.append(SetMetadata(txn.descriptor))
    strategy = txn.descriptor.partition_strategy
    names = strategy.names if strategy is not None else []
    if txn.operation == "overwrite":
        actions += [RemoveFile(p) for p in snapshot.files]
    elif txn.operation == "overwrite_partitions":
        written = {tuple(partition.get(n) for n in names) for _, _, partition, _ in txn.files}
        actions += [RemoveFile(p) for p, f in snapshot.files.items()
                    if tuple(f.partition.get(n) for n in names) in written]
    elif txn.operation == "compact":
        replaced = {p for *_, replaces in txn.files for p in replaces}
        actions += [RemoveFile(p) for p in snapshot.files if p in replaced]
    for key, size, partition, _ in txn.files:
        actions.append(_add(store, key, size, partition, txn.descriptor))
    return log.commit(snapshot, txn.operation, actions, {"rebuilt": True}, txn.uuid)


def _add(store: ObjectStore, key: str, size: int, partition: dict, descriptor: DatasetDescriptor) -> AddFile:
    schema = descriptor.arrow_schema
    collector = StatisticsCollector(schema)
    for batch in file_format(descriptor.format).read(store.fs, store.path(key), schema):
        collector.update(conform(batch, schema, descriptor.defaults))
    return AddFile(key, partition, size, collector.row_count, collector.result())
