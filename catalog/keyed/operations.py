"""Upsert, insert, update and delete by key: planning a change against a snapshot
(:func:`prepare`) and committing one or more changes as one commit (:func:`commit`).

A change resolves its keys through the record index, reconciles them with what is stored
(:mod:`.reconcile`), writes the winning rows as new data files, and records the positions
of the rows they replace or delete; :func:`commit` turns those into deletion vectors,
writes the index entries, and commits everything at once under :class:`KeyedWrite`, which
conflicts with a concurrent commit only when it wrote an entry for one of the same keys.
Spark executors run :func:`prepare` on whole buckets and the driver runs :func:`commit`.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.errors import (
    CdkdsError, CommitConflictError, CommitFailedError, CommitStateUnknownError, InvalidRecordError,
    KeyExistsError,
)
from cdkds.catalog.keyed.deletion import DeletionVector, DeletionVectorRef
from cdkds.catalog.keyed.caches import deleted_positions
from cdkds.catalog.keyed.index import RecordIndex, by_file
from cdkds.catalog.keyed.keys import RecordKey, arrow_table
from cdkds.catalog.keyed.matching import distinct_sorted, in_sorted
from cdkds.catalog.keyed.placing import DataFiles, Speculation, place, written_paths
from cdkds.catalog.keyed.reconcile import compare_orders, greater_rows, reduce_delete, reduce_write
from cdkds.catalog.keyed.rows import full_rows, partial_rows
from cdkds.catalog.log.actions import KEYED_PROTOCOL, Action, AddFile, AddIndex, DeleteRows, SetProtocol
from cdkds.catalog.log.commit import clock
from cdkds.catalog.log.conflicts import BlindAppend, ConflictRule, Exclusive
from cdkds.catalog.read.columns import select_columns
from cdkds.catalog.read.scan import read_rows
from cdkds.catalog.write.sorting import write_sort
from cdkds.catalog.write.writer import (
    DEFAULT_MAX_OPEN_FILES, DEFAULT_TARGET_FILE_SIZE, check_file_options, delete_files,
)
from cdkds.catalog.work_columns import POSITION, ROW
from cdkds.formats.errors import SchemaMismatchError
from cdkds.formats.records import batch_conformer

if TYPE_CHECKING:
    from cdkds.catalog.services.runner import ServiceReport
    from cdkds.catalog.dataset import Dataset
    from cdkds.catalog.log.commit import Commit
    from cdkds.catalog.log.snapshot import Snapshot

OPERATIONS = ("upsert", "insert", "update", "delete")
MAX_ATTEMPTS = 10


@dataclass(frozen=True)
class UpsertResult:
    """What a keyed write did: rows inserted, updated (replaced), deleted, and given but left
    unchanged (they lost reconciliation, or an update of a key that does not exist); the
    revision of its commit (``None`` when nothing needed committing); what the table
    services did after it (``services``, when they ran inline)."""

    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    revision: int | None = None
    services: "ServiceReport | None" = None


@dataclass
class KeyedChange:
    """A keyed write planned on ``base_revision``: data files written, row positions to
    delete per data file, index entries to write (a delete's tombstones), and the keys touched (with hashes);
    ``buckets``: the index buckets it owns, when it was planned on whole buckets."""

    operation: str
    base_revision: int
    buckets: frozenset[int] | None = None
    adds: list[AddFile] = field(default_factory=list)
    deletes: dict[str, np.ndarray] = field(default_factory=dict)
    entries: pa.Table | None = None
    keys: pa.Table | None = None
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    index: list[Action] = field(default_factory=list)  # its entries as index files, once written (write_index)

    @property
    def written(self) -> list[str]:
        """The files this change wrote: data files and index files."""
        return written_paths(self.adds, self.index)

    def discard(self, dataset: "Dataset") -> None:
        """Delete the files this change wrote (it is known not to be committed)."""
        delete_files(dataset.store, self.written)


def write_index(dataset: "Dataset", change: KeyedChange, now_ms: int | None = None) -> KeyedChange:
    """``change`` with its entries written as index files, which :func:`commit` then commits
    as they are: for a change of whole buckets no other change of the same commit touches
    (a Spark task's), so the writer's process encodes them and the committer is sent
    actions instead of entries. On the snapshot the change was planned on."""
    snapshot = dataset.snapshot
    if snapshot.version != change.base_revision:
        raise CdkdsError(f"dataset {dataset.name!r}: a change planned on revision {change.base_revision} cannot "
                         f"write its index on revision {snapshot.version}; plan it again")
    if change.entries is None or not change.entries.num_rows:
        return dataclasses.replace(change, entries=None)
    index = RecordIndex(dataset.store, snapshot, dataset.name).write(change.entries, clock() if now_ms is None else now_ms)
    return dataclasses.replace(change, entries=None, index=[*change.index, *index])


# ---------------------------------------------------------------- planning

def prepare(dataset: "Dataset", operation: str, rows: Any, buckets: frozenset[int] | None = None,
            whole_buckets: bool = False, now_ms: int | None = None, snapshot: "Snapshot | None" = None,
            sort_by: "str | Sequence[str] | None" = None, target_file_size: int = DEFAULT_TARGET_FILE_SIZE,
            max_open_files: int = DEFAULT_MAX_OPEN_FILES) -> KeyedChange:
    """Plan a keyed write of ``rows`` against ``snapshot`` (default: the dataset's) and
    write its data files and index files (a delete's tombstones are written by
    :func:`commit`). ``buckets``: the rows must all hash to those index buckets.
    ``whole_buckets`` (without ``buckets``): the rows are all of the commit's rows in each
    bucket they hash to (a task of a clustered Spark job), so the change owns those buckets.
    ``sort_by``: the fields the data files are sorted by, instead of the descriptor's
    (property ``sort.by``, by default the record key); the index records each row's
    position in its file after sorting. ``target_file_size`` and ``max_open_files`` as
    for :class:`DatasetWriter`."""
    if operation not in OPERATIONS:
        raise CdkdsError(f"dataset {dataset.name!r}: unknown keyed operation {operation!r}; use one of {list(OPERATIONS)}")
    snapshot = snapshot or dataset.snapshot
    descriptor = snapshot.descriptor
    key = RecordKey.of(descriptor, dataset.name)
    sort = write_sort(dataset.name, descriptor, sort_by)  # checked before anything is written
    check_file_options(dataset.name, target_file_size, max_open_files)
    now = clock() if now_ms is None else now_ms
    ordering = descriptor.ordering_field
    masks: dict[str, np.ndarray] = {}
    if operation == "delete":
        table = key.keys(rows, ordering=True)  # the ordering field a last column, null where not given
    elif operation == "update":
        table, masks = partial_rows(dataset, rows)
        table = key.conform(table)
    else:
        table = key.conform(full_rows(dataset, rows, operation))
    change = KeyedChange(operation, snapshot.version, buckets)
    if table.num_rows == 0:
        change.keys = key.schema.append(pa.field("_hash", pa.uint64())).empty_table()
        return change
    bare = np.zeros(table.num_rows, dtype=bool)
    hashes = key.hashes(table)
    if whole_buckets and buckets is None:
        counts = np.bincount(key.buckets(hashes, descriptor.keyed.buckets), minlength=descriptor.keyed.buckets)
        change.buckets = frozenset(np.flatnonzero(counts).tolist())
    if operation == "delete":
        keep, bare = reduce_delete(table, key)
    elif operation == "update" and ordering is not None and ordering not in table.schema.names:
        keep = reduce_write(table.select(list(key.names)), key, None, "update", hashes)  # no order to reconcile by
    else:
        keep = reduce_write(table, key, ordering if ordering in table.schema.names else None, operation, hashes)
    if len(keep) < table.num_rows:
        table = table.take(pa.array(keep))
        masks = {n: m[keep] for n, m in masks.items()}
        hashes = hashes[keep]
    if buckets is not None:
        outside = ~np.isin(key.buckets(hashes, descriptor.keyed.buckets), np.array(sorted(buckets)))
        if outside.any():
            raise CdkdsError(f"dataset {dataset.name!r}: key {key.describe(table, int(np.flatnonzero(outside)[0]))} "
                             f"is not in the buckets this change owns")
    index = RecordIndex(dataset.store, snapshot, dataset.name)
    keys = table.select(list(key.names))
    change.keys = keys.append_column("_hash", pa.array(hashes, pa.uint64()))
    files = DataFiles(tuple(sort), target_file_size, max_open_files)
    speculation = Speculation.start(dataset, snapshot, index, operation, table, hashes, files, now)
    try:
        stored = _Stored(index, index.lookup(keys, hashes), table.num_rows, now)
        if operation == "delete":
            _plan_delete(change, index, table, bare, hashes, stored, ordering, now)
        else:
            _plan_write(dataset, snapshot, change, index, key, table, hashes, stored, masks, now, files, speculation)
    except BaseException:
        if speculation is not None:
            speculation.discard()
        raise
    return change


class _Stored:
    """What the index holds for each incoming row: live row, tombstone, neither."""

    def __init__(self, index: RecordIndex, found: pa.Table, n: int, now: int):
        self.found = found = found.combine_chunks()  # a lookup's entries come in a piece per index file read
        rows = found.column(ROW).to_numpy(zero_copy_only=False)
        self.slot = np.full(n, -1, dtype=np.int64)
        self.slot[rows] = np.arange(found.num_rows)
        live = index.live(found, now)
        tomb = index.tombstone_alive(found, now)
        self.live = np.zeros(n, dtype=bool)
        self.live[rows] = live
        self.tombstone = np.zeros(n, dtype=bool)
        self.tombstone[rows] = tomb
        # an expired (TTL) row still in its file: its position is deleted by the write that replaces it
        deleted = found.column("_deleted").to_numpy(zero_copy_only=False)
        present = np.zeros(found.num_rows, dtype=bool)
        for path, slots in by_file(found.column("_file")):
            present[slots] = path in index.snapshot.files
        self.dead_row = np.zeros(n, dtype=bool)
        self.dead_row[rows] = ~live & ~deleted & present

    def column(self, name: str, rows: np.ndarray) -> pa.Array:
        slots = self.slot[rows]
        return self.found.column(name).take(pa.array(np.maximum(slots, 0), mask=slots < 0)).combine_chunks()


def _mark(change: KeyedChange, stored: _Stored, rows: np.ndarray) -> None:
    """Delete the stored rows (by position) behind incoming ``rows``."""
    if not len(rows):
        return
    positions = stored.column("_pos", rows).to_numpy(zero_copy_only=False)
    for f, slots in by_file(stored.column("_file", rows)):
        previous = change.deletes.get(f)
        new = positions[slots].astype(np.int64)
        change.deletes[f] = new if previous is None else np.concatenate([previous, new])


def _plan_delete(change: KeyedChange, index: RecordIndex, table: pa.Table, bare: np.ndarray, hashes: np.ndarray,
                 stored: _Stored, ordering: str | None, now: int) -> None:
    """Delete the live rows of the keys of ``table``. With an ordering field, a key with an
    ordering value deletes a row whose value is not greater (a tie: the delete wins) and
    leaves a tombstone keeping the greatest value seen; a ``bare`` key (given without one,
    too) deletes the stored row whatever its value — as if given the stored value."""
    n = table.num_rows
    rows = np.arange(n)
    if ordering is None:
        applies = stored.live.copy()
        tomb_needed = np.zeros(n, dtype=bool)
        orders = pa.nulls(n)
    else:
        incoming = table.column(ordering).combine_chunks()
        held = stored.live | stored.tombstone
        stored_order = stored.column("_order", rows).cast(incoming.type)
        known = pc.if_else(pa.array(held), stored_order, pa.nulls(n, incoming.type))
        greater = compare_orders(known, incoming) > 0
        orders = pc.if_else(pa.array(bare & greater), known, incoming)  # a bare key: the greater of both
        against = compare_orders(orders, stored_order)
        wins = against >= 0  # on a tie the delete wins
        applies = stored.live & wins
        # a tombstone keeps the greatest ordering value seen for the key; a bare key of no
        # stored row leaves none
        unknown = bare & ~held & ~orders.is_valid().to_numpy(zero_copy_only=False)
        tomb_needed = ~(stored.tombstone & (against <= 0)) & ~(stored.live & ~wins) & ~unknown
    _mark(change, stored, np.flatnonzero(applies | stored.dead_row))
    change.deleted = int(applies.sum())
    change.unchanged = n - change.deleted
    if ordering is not None and tomb_needed.any():
        pick = np.flatnonzero(tomb_needed)
        keys = table.select(list(index.key.names)).take(pa.array(pick))
        change.entries = index.tombstones(keys, hashes[pick], orders.take(pa.array(pick)), now)


def _plan_write(dataset: "Dataset", snapshot: "Snapshot", change: KeyedChange, index: RecordIndex, key: RecordKey,
                table: pa.Table, hashes: np.ndarray, stored: _Stored, masks: dict[str, np.ndarray], now: int,
                files: DataFiles, speculation: Speculation | None = None) -> None:
    """Decide which rows win against the stored ones and place the winners (``speculation``:
    all of ``table`` being placed already; taken when every row wins, else discarded)."""
    ordering = snapshot.descriptor.ordering_field
    n = table.num_rows
    rows = np.arange(n)
    if change.operation == "insert" and stored.live.any():
        first = int(np.flatnonzero(stored.live)[0])
        raise KeyExistsError(f"dataset {dataset.name!r}: key {key.describe(table, first)} already exists "
                             f"({int(stored.live.sum())} of the {n} keys inserted do); nothing was written")
    # an update row without an ordering value applies to the stored row whatever its order
    unordered = np.zeros(n, dtype=bool)
    if change.operation == "update":
        if ordering is not None:
            unordered = ~masks.get(ordering, np.full(n, ordering in table.schema.names))
        table = _merge_update(dataset, snapshot, table, masks, stored)
    wins = np.ones(n, dtype=bool)
    if ordering is not None and ordering in table.schema.names:
        incoming = table.column(ordering).combine_chunks()
        against = compare_orders(incoming, stored.column("_order", rows).cast(incoming.type))
        over_live = np.where(against > 0, True, np.where(against < 0, False, _ties(dataset, snapshot, table, stored, against)))
        over_tomb = against > 0  # a tie with a tombstone: the delete wins
        wins = np.where(stored.live, over_live | unordered, np.where(stored.tombstone, over_tomb, True))
    if change.operation == "update":
        wins &= stored.live  # an update of a key that does not exist adds nothing
    winners = np.flatnonzero(wins)
    change.updated = int((wins & stored.live).sum())
    change.inserted = int((wins & ~stored.live).sum())
    change.unchanged = n - len(winners)
    _mark(change, stored, np.flatnonzero(wins & (stored.live | stored.dead_row)))
    if speculation is not None and len(winners) == n:
        placed = speculation.take()
    else:
        if speculation is not None:
            speculation.discard()
        if not len(winners):
            return
        written = table if len(winners) == n else table.take(pa.array(winners))
        placed = place(dataset, snapshot, index, change.operation, written, hashes[winners], files, now)
    change.adds, change.index = placed.adds, placed.index


def _ties(dataset: "Dataset", snapshot: "Snapshot", table: pa.Table, stored: _Stored, against: np.ndarray) -> np.ndarray:
    """For rows whose ordering value equals the stored live row's: whether the incoming row
    is the greater (so replaces it); False elsewhere."""
    out = np.zeros(table.num_rows, dtype=bool)
    tied = np.flatnonzero((against == 0) & stored.live)
    if not len(tied):
        return out
    current = stored_rows(dataset, snapshot, stored, tied, table.schema.names)
    out[tied] = greater_rows(table.take(pa.array(tied)), current)
    return out


def stored_rows(dataset: "Dataset", snapshot: "Snapshot", stored: _Stored, rows: np.ndarray,
                columns: Sequence[str]) -> pa.Table:
    """The stored rows behind incoming ``rows`` (which must be live), in ``columns``, in the
    order of ``rows``."""
    positions = stored.column("_pos", rows).to_numpy(zero_copy_only=False)
    parts, where = [], []
    for f, slots in by_file(stored.column("_file", rows)):
        wanted = positions[slots]
        unique = np.unique(wanted)
        got = read_rows(dataset.store, snapshot.descriptor, snapshot.files[f], unique, columns)
        parts.append(got.take(pa.array(np.searchsorted(unique, wanted))).drop_columns([POSITION]))
        where.extend(slots)
    table = pa.concat_tables(parts)
    return table.take(pa.array(np.argsort(np.array(where), kind="stable")))


def _merge_update(dataset: "Dataset", snapshot: "Snapshot", table: pa.Table, masks: dict[str, np.ndarray],
                  stored: _Stored) -> pa.Table:
    """Full rows for an update: the stored row with the given columns replaced (rows of keys
    that are not live keep their given columns only; they are not written)."""
    schema = snapshot.descriptor.arrow_schema
    live = np.flatnonzero(stored.live)
    full = stored_rows(dataset, snapshot, stored, live, schema.names) if len(live) else schema.empty_table()
    n = table.num_rows
    slot = np.full(n, 0, dtype=np.int64)
    slot[live] = np.arange(len(live))
    columns = []
    for f in schema:
        base = full.column(f.name).combine_chunks().take(pa.array(slot)) if len(live) else pa.nulls(n, f.type)
        if f.name in table.schema.names:
            given = masks.get(f.name, np.ones(n, dtype=bool))
            base = pc.if_else(pa.array(given), table.column(f.name).combine_chunks(), base)
        columns.append(base)
    merged = pa.Table.from_arrays(columns, schema=schema)
    conform = batch_conformer(snapshot.descriptor.schema)
    try:  # the merged rows must be valid rows (required fields), their values normalised (UUIDs...)
        valid = [conform(b) for b in merged.filter(pa.array(stored.live)).to_batches()]
    except SchemaMismatchError as e:
        raise InvalidRecordError(f"dataset {dataset.name!r}: update: {e}") from None
    rows = np.arange(n)
    rows[live] = n + np.arange(len(live))
    return pa.concat_tables([merged, pa.Table.from_batches(valid, schema=schema)]).take(pa.array(rows))


# ---------------------------------------------------------------- committing

@dataclass(frozen=True)
class KeyedWrite(ConflictRule):
    """A keyed write assumed that nobody else wrote its keys: a concurrent commit whose index
    delta holds one of them conflicts (a concurrent new base of a bucket it touched
    conflicts at bucket granularity)."""

    dataset: "Dataset"
    keys: pa.Table  # key columns and _hash

    def specific_conflict(self, theirs: "Commit", base: "Snapshot") -> str | None:
        added = [a for a in theirs.actions if isinstance(a, AddIndex)]
        if not added or self.keys.num_rows == 0:
            return None
        key = RecordKey.of(base.descriptor, self.dataset.name)
        hashes = self.keys.column("_hash").to_numpy(zero_copy_only=False)
        ours = set(np.unique(key.buckets(hashes, base.descriptor.keyed.buckets)).tolist())
        index = RecordIndex(self.dataset.store, base, self.dataset.name)
        for entry in added:
            if entry.bucket not in ours:
                continue
            if entry.base:
                return f"it rewrote index bucket {entry.bucket}, which this commit writes"
            written = index.read_file(entry.at(theirs.revision))
            both = written.select(["_hash", *key.names]).join(self.keys, keys=["_hash", *key.names], join_type="inner")
            if both.num_rows:
                return f"it wrote the key {key.describe(both, 0)} too"
        return None


def check_disjoint(name: str, changes: Sequence[KeyedChange]) -> None:
    """Changes planned apart commit together only when each owns whole index buckets that no
    other one touches: each looked its keys up without seeing the others', so a key in two of
    them would be written twice (two live rows)."""
    touching = [c for c in changes if c.keys is not None and c.keys.num_rows]
    if len(touching) < 2:
        return
    owner: dict[int, int] = {}
    for i, c in enumerate(touching):
        if c.buckets is None:
            raise CdkdsError(f"dataset {name!r}: {len(touching)} keyed changes planned apart can commit together "
                             f"only when each was planned on whole index buckets (prepare(buckets=...))")
        for b in sorted(c.buckets):
            if owner.setdefault(b, i) != i:
                raise CdkdsError(f"dataset {name!r}: two changes of one commit were both planned on index bucket "
                                 f"{b}, so a key in both would be written twice; nothing was committed. Plan rows "
                                 f"of one bucket together (in Spark: cdkds.connector.upsert clusters them so; "
                                 f"do not set the internal option cdkds.clustered yourself)")


def commit(dataset: "Dataset", changes: Sequence[KeyedChange], info: Mapping[str, Any] | None = None,
           now_ms: int | None = None, removes: Sequence[Action] = (), rule: ConflictRule | None = None,
           operation: str | None = None, commit_uuid: str | None = None,
           extra_actions: Sequence[Action] = (), planned_on: int | None = None) -> UpsertResult:
    """Commit ``changes`` (planned on the dataset's current snapshot) as one commit: deleted
    positions become deletion vectors, entries become index files; ``removes`` and
    ``extra_actions`` (such as a :class:`SetTransaction`) go into the same commit, which is
    made even without changes when they are given. Raises :class:`CommitConflictError`
    naming a key when a concurrent commit wrote one of them; files of a commit known not to
    have landed are deleted. ``planned_on``: the revision files of ``changes`` were written
    on, when earlier than the current snapshot (see :meth:`TransactionLog.commit`)."""
    snapshot = dataset.snapshot
    now = clock() if now_ms is None else now_ms
    operations = sorted({c.operation for c in changes}) or ["upsert"]
    result = UpsertResult(sum(c.inserted for c in changes), sum(c.updated for c in changes),
                          sum(c.deleted for c in changes), sum(c.unchanged for c in changes))
    stale = [c for c in changes if c.base_revision != snapshot.version]
    if stale:
        raise CdkdsError(f"dataset {dataset.name!r}: a change planned on revision {stale[0].base_revision} cannot be "
                         f"committed on revision {snapshot.version}; plan it again")
    adds = [a for c in changes for a in c.adds]
    positions: dict[str, list[np.ndarray]] = defaultdict(list)
    for c in changes:
        for path, ps in c.deletes.items():
            positions[path].append(ps)
    entries = [c.entries for c in changes if c.entries is not None and c.entries.num_rows]
    written_ahead = [a for c in changes for a in c.index]
    if not adds and not positions and not entries and not written_ahead and not removes and not extra_actions:
        return result
    written: list[str] = []
    try:
        check_disjoint(dataset.name, changes)
        actions: list[Action] = []
        if snapshot.protocol.reader_version < KEYED_PROTOCOL:
            actions.append(SetProtocol(KEYED_PROTOCOL, KEYED_PROTOCOL))
        actions.extend(removes)
        actions.extend(adds)
        sidecars: dict[str, bytes] = {}
        for path, parts in positions.items():
            deleted = distinct_sorted(np.concatenate(parts))
            if path in snapshot.files and snapshot.files[path].deletes:
                # vectors of one file are disjoint: its deleted rows are their cardinalities' sum;
                # its deleted positions as the lookup read them (cached, sorted)
                deleted = deleted[~in_sorted(deleted, deleted_positions(dataset.store, snapshot.files[path].deletes))]
            if not len(deleted):
                continue
            ref, sidecar = DeletionVectorRef.planned(DeletionVector.of(deleted))
            if sidecar is not None:
                sidecars[ref.path] = sidecar
                written.append(ref.path)
            actions.append(DeleteRows(path, ref))
        dataset.store.put_all(sidecars)  # together: their syncs overlap
        if entries:
            index_actions = RecordIndex(dataset.store, snapshot, dataset.name).write(pa.concat_tables(entries), now)
            written.extend(a.path for a in index_actions if isinstance(a, AddIndex))
            actions.extend(index_actions)
        actions.extend(written_ahead)
        actions.extend(extra_actions)
        keys = pa.concat_tables([c.keys for c in changes if c.keys is not None]) if changes else None
        operation = operation or (operations[0] if len(operations) == 1 else "keyed")
        if rule is None:
            rule = KeyedWrite(dataset, keys) if keys is not None else BlindAppend()
        dataset._commit(operation, actions, {**result_info(result), **(info or {})}, commit_uuid, rule=rule,
                        planned_on=planned_on)
    except CommitFailedError:
        delete_files(dataset.store, written)
        for c in changes:
            c.discard(dataset)
        raise
    except CommitStateUnknownError:
        raise  # it may have landed: its files must stay
    except BaseException:
        delete_files(dataset.store, written)
        for c in changes:
            c.discard(dataset)
        raise
    return dataclasses.replace(result, revision=dataset.version)


def result_info(result: UpsertResult) -> dict:
    return {"inserted": result.inserted, "updated": result.updated, "deleted": result.deleted,
            "unchanged": result.unchanged}


# ---------------------------------------------------------------- the Python entry points

def run(dataset: "Dataset", operation: str, rows: Any, sort_by: "str | Sequence[str] | None" = None,
        target_file_size: int = DEFAULT_TARGET_FILE_SIZE, max_open_files: int = DEFAULT_MAX_OPEN_FILES) -> UpsertResult:
    """Prepare and commit a keyed write, re-planning on the new snapshot when a concurrent
    commit wrote the same keys (bounded, with exponential backoff and jitter); ``sort_by``,
    ``target_file_size`` and ``max_open_files`` as for :func:`prepare`."""
    table = arrow_table(rows)
    if table is not None:
        rows = table
    elif isinstance(rows, Iterable) and not isinstance(rows, (Mapping, list, tuple, str, bytes)):
        rows = list(rows)  # an iterator is read once; a retry needs the rows again
    for attempt in range(MAX_ATTEMPTS):
        change = prepare(dataset, operation, rows, sort_by=sort_by, target_file_size=target_file_size,
                         max_open_files=max_open_files)
        try:
            return commit(dataset, [change])
        except CommitConflictError:
            if attempt == MAX_ATTEMPTS - 1:
                raise
            time.sleep(min(2.0, 0.01 * 2 ** attempt) * (0.5 + random.random()))
            dataset.refresh()
    raise AssertionError("unreachable")


def get_many(dataset: "Dataset", keys: Any, columns: Sequence[str] | None = None,
             now_ms: int | None = None) -> pa.Table:
    """The live rows of ``keys`` in key order (missing keys left out)."""
    snapshot = dataset.snapshot
    descriptor = snapshot.descriptor
    schema = descriptor.arrow_schema
    columns = select_columns(dataset.name, descriptor, columns)
    key = RecordKey.of(descriptor, dataset.name)
    table = key.keys(keys)
    out_schema = pa.schema([schema.field(c) for c in dict.fromkeys(columns)])
    if table.num_rows == 0:
        return out_schema.empty_table()
    index = RecordIndex(dataset.store, snapshot, dataset.name)
    hashes = key.hashes(table)
    stored = _Stored(index, index.lookup(table, hashes), table.num_rows, clock() if now_ms is None else now_ms)
    live = np.flatnonzero(stored.live)
    if not len(live):
        return out_schema.empty_table()
    return stored_rows(dataset, snapshot, stored, live, list(dict.fromkeys(columns))).cast(out_schema)


def rebuild_index(dataset: "Dataset") -> int:
    """Replace the record index by one built from the data files, in one commit."""
    snapshot = dataset.snapshot
    actions: list[Action] = []
    if snapshot.protocol.reader_version < KEYED_PROTOCOL:
        actions.append(SetProtocol(KEYED_PROTOCOL, KEYED_PROTOCOL))
    index_actions = RecordIndex(dataset.store, snapshot, dataset.name).rebuild(clock())
    try:
        dataset._commit("rebuild_index", [*actions, *index_actions], rule=Exclusive())
    except CommitFailedError:
        delete_files(dataset.store, [a.path for a in index_actions if isinstance(a, AddIndex)])
        raise
    return dataset.version
