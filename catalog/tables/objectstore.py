"""Keyed tables over the object store (file, memory, S3): every table of one root in one
dataset and one transaction log, as a log-structured merge tree of sorted runs.

- **One log.** The tables of a root live in dataset ``tables`` under it, whose files are
  sorted runs (:mod:`.runs`): entries ``key -> value`` where the key is a namespace (the
  table, an index of it, or the specifications) followed by the encoded primary key. A
  transaction, whatever tables it touched, is one run and one commit: its rows, its index
  entries and its table specifications land together or not at all.
- **Last write wins by commit order.** A later run's entry for a key replaces an earlier
  one's; a null value is a tombstone. A run's order is the revision that committed it.
- **Snapshot isolation.** A transaction reads the runs of the snapshot it began at, with
  its own writes over them, and records the keys it read and wrote and the key ranges it
  scanned. At commit, a concurrent transaction that wrote any of those keys, or into any
  of those ranges, is a conflict (:class:`TransactionConflictError`; the runner retries).
  Read-only transactions commit nothing and never conflict.
- **Compaction by policy.** After a commit, when the newest runs are many and small next to
  the data below them (size-tiered, as RocksDB's universal compaction), they are merged
  into one run that takes the newest one's order, in a commit of its own; the merge drops
  the rows of dropped tables and, when it reaches the oldest run, tombstones.
- **Caching.** A process keeps the latest snapshot, run footers and row groups read; each
  transaction catches up by reading only the commits after the cached snapshot.
"""

from __future__ import annotations

import heapq
from itertools import islice
import json
import base64
import threading
import time
import uuid
import warnings
from typing import Any, Iterator, Sequence

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import (
    CommitConflictError, CommitFailedError, DatasetExistsError, DatasetNotFoundError, TransactionConflictError,
)
from cdkds.catalog.expressions import ALWAYS_TRUE, Expression, evaluate
from cdkds.catalog.log.actions import AddFile, RemoveFile
from cdkds.catalog.log.commit import Commit
from cdkds.catalog.log.conflicts import ConflictRule, Rewrite
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.repository import DatasetRepository
from cdkds.catalog.tables.keys import Range, after_prefix, decode_text, encode_text, encode_value
from cdkds.catalog.tables.runs import Entry, Run, RunCache, run_key, write_run
from cdkds.catalog.tables.spec import TableSpecification
from cdkds.catalog.tables.table import StructuredTable
from cdkds.catalog.write.writer import delete_files

DATASET = "tables"
DESCRIPTOR = DatasetDescriptor({
    "type": "record", "name": "TableEntry", "doc": "Keyed tables: one sorted run per commit (see cdkds.catalog.tables)",
    "fields": [{"name": "k", "type": "bytes"}, {"name": "row", "type": ["null", "string"], "default": None}]},
    format="parquet", compression="zstd")
SPECS = encode_text("#specs")  # names are letters, digits and _: no table's namespace starts so
MERGE_WIDTH = 4  # runs merged at once, at least
MERGE_RATIO = 2  # an older run joins a merge while it is at most this times the newer runs' rows
FULL_REFRESH_SECONDS = 30.0  # how often catching up also lists the log (to rule out a hole)


class ObjectTableStore:
    """The keyed tables under one object-store root."""

    def __init__(self, url: str, storage_options: dict | None = None):
        repository = DatasetRepository(url, storage_options)
        try:
            dataset = repository.load(DATASET)
        except DatasetNotFoundError:
            try:
                dataset = repository.create(DATASET, DESCRIPTOR)
            except DatasetExistsError:  # another process created it first
                dataset = repository.load(DATASET)
        self.url = repository.url
        self.store, self.log = dataset.store, dataset.log
        self.cache = RunCache()
        self._snapshot = dataset.snapshot
        self._listed = time.monotonic()
        self._runs: tuple[int, list[Run]] = (-1, [])
        self._lock = threading.RLock()

    # ---------------------------------------------------------------- snapshots and runs

    def current(self) -> Snapshot:
        """The latest snapshot: the cached one moved forward by the commits made since."""
        with self._lock:
            full = time.monotonic() - self._listed > FULL_REFRESH_SECONDS
            self._snapshot = self.log.replay.forward(self._snapshot, confirm_end=full)
            if full:
                self._listed = time.monotonic()
            return self._snapshot

    def advance(self, snapshot: Snapshot) -> None:
        with self._lock:
            if snapshot.version > self._snapshot.version:
                self._snapshot = snapshot

    def runs(self, snapshot: Snapshot) -> list[Run]:
        """The snapshot's runs, newest first."""
        with self._lock:
            if self._runs[0] == snapshot.version:
                return self._runs[1]
        runs = sorted((self.run(add) for add in snapshot.files.values()), key=lambda r: -r.order)
        with self._lock:
            self._runs = (snapshot.version, runs)
        return runs

    def run(self, add: AddFile) -> Run:
        return self.cache.run(self.store, add)

    # ---------------------------------------------------------------- the admin's backend

    def transaction(self, write: bool) -> "_Scope":
        return _Scope(self)

    def specification(self, txn: "Transaction", name: str) -> TableSpecification | None:
        table = self.table(txn, name)
        return None if table is None else table.spec

    def names(self, txn: "Transaction") -> list[str]:
        return [json.loads(v)["spec"]["name"] for _, v in txn.entries(SPECS, after_prefix(SPECS))]

    def table(self, txn: "Transaction", name: str) -> "ObjectTable | None":
        found = txn.get(SPECS + encode_text(name))
        if found is None:
            return None
        data = json.loads(found)
        return ObjectTable(TableSpecification.from_json(data["spec"]), data["id"], txn)

    def create(self, txn: "Transaction", spec: TableSpecification) -> None:
        txn.put(SPECS + encode_text(spec.name), json.dumps({"spec": spec.to_json(), "id": uuid.uuid4().hex}))

    def update(self, txn: "Transaction", old: TableSpecification, new: TableSpecification) -> None:
        """Record ``new`` for the table; build its new indexes from the table's rows."""
        table = self.table(txn, old.name)
        txn.put(SPECS + encode_text(new.name), json.dumps({"spec": new.to_json(), "id": table.ident}))
        added = [i for i in new.indexes if i not in old.indexes]
        if added:
            rebuilt = ObjectTable(new, table.ident, txn)
            for row in rebuilt._scan([Range.all()], ALWAYS_TRUE, None, "asc"):
                rebuilt._reindex(None, row)

    def drop(self, txn: "Transaction", name: str) -> None:
        """Forget the table; compaction drops its rows (a table created again is new)."""
        txn.put(SPECS + encode_text(name), None)

    def live_namespaces(self, txn: "Transaction") -> set[str]:
        out = set()
        for _, v in txn.entries(SPECS, after_prefix(SPECS)):
            data = json.loads(v)
            table = ObjectTable(TableSpecification.from_json(data["spec"]), data["id"], txn)
            out.add(table.namespace)
            out.update(table.index_namespaces.values())
        return out

    # ---------------------------------------------------------------- compaction

    def compact(self, snapshot: Snapshot) -> Snapshot:
        """Merge the newest runs when the policy says so (see the module docstring); the
        snapshot after, or ``snapshot`` when there was nothing to do or a concurrent
        compaction won."""
        runs = self.runs(snapshot)
        chosen = merge_choice([r.add.row_count for r in runs])
        if not chosen:
            return snapshot
        merged = runs[:chosen]
        live = self.live_namespaces(Transaction(self, snapshot))
        entries = _merged(merged, drop_tombstones=chosen == len(runs), live=live)
        written = write_run(self.store, run_key(merged[0].order), entries, sum(r.add.row_count for r in merged))
        actions = [RemoveFile(r.add.path) for r in merged]
        if written.rows:
            actions.append(AddFile(written.key, {}, written.size, written.rows))
        else:
            delete_files(self.store, [written.key])
        try:
            after = self.log.commit(snapshot, "compact", actions, {"runs": chosen},
                                    rule=Rewrite(tuple(r.add for r in merged)))
        except CommitFailedError:  # a concurrent compaction took some of these runs
            delete_files(self.store, [written.key])
            return snapshot
        self.advance(after)
        return after


def merge_choice(rows: Sequence[int]) -> int:
    """How many of the newest runs (row counts ``rows``, newest first) to merge: a run joins
    while it holds at most :data:`MERGE_RATIO` times the rows of the newer ones; fewer than
    :data:`MERGE_WIDTH` is no merge (0)."""
    if len(rows) < MERGE_WIDTH:
        return 0
    total, n = rows[0], 1
    while n < len(rows) and rows[n] <= MERGE_RATIO * total:
        total += rows[n]
        n += 1
    return n if n >= MERGE_WIDTH else 0


def _merged(runs: Sequence[Run], drop_tombstones: bool, live: set[str]) -> Iterator[Entry]:
    """The runs' entries (newest first) merged: each key's newest entry."""
    for k, value in _newest(runs, [], b"", None, False):
        if value is None and drop_tombstones:
            continue
        if k.startswith(SPECS) or decode_text(k)[0] in live:
            yield k, value


def _newest(runs: Sequence[Run], overlay: list[Entry], low: bytes, high: bytes | None,
            reverse: bool) -> Iterator[Entry]:
    """Each key's newest entry in ``[low, high)``: the overlay's, else the newest run's."""
    sources = [iter(overlay)] + [r.entries(low, high, reverse) for r in runs]
    last = None
    for k, value in heapq.merge(*sources, key=lambda e: e[0], reverse=reverse):  # stable: earlier sources first
        if k != last:
            last = k
            yield k, value


class Transaction:
    """Reads at one snapshot with this transaction's writes over it; what it read, wrote and
    scanned, for the conflict check at commit."""

    def __init__(self, store: ObjectTableStore, snapshot: Snapshot):
        self.store, self.snapshot = store, snapshot
        self.runs = store.runs(snapshot)
        self.writes: dict[bytes, str | None] = {}
        self.reads: set[bytes] = set()
        self.ranges: list[tuple[bytes, bytes | None]] = []
        self._seen: dict[bytes, str | None] = {}

    def get(self, k: bytes) -> str | None:
        if k in self.writes:
            return self.writes[k]
        self.reads.add(k)
        if k not in self._seen:
            self._seen[k] = self._lookup(k)
        return self._seen[k]

    def _lookup(self, k: bytes) -> str | None:
        for run in self.runs:
            found, value = run.get(k)
            if found:
                return value
        return None

    def put(self, k: bytes, value: str | None) -> None:
        self.writes[k] = value

    def entries(self, low: bytes, high: bytes | None, reverse: bool = False) -> Iterator[tuple[bytes, str]]:
        """Live entries in ``[low, high)`` in key order (or reversed)."""
        self.ranges.append((low, high))
        overlay = sorted(((k, v) for k, v in self.writes.items() if low <= k and (high is None or k < high)),
                         reverse=reverse)
        for k, value in _newest(self.runs, overlay, low, high, reverse):
            if value is not None:
                yield k, value

    def commit(self) -> None:
        """One run and one commit of every write; nothing when nothing was written."""
        if not self.writes:
            return
        store = self.store
        written = write_run(store.store, run_key(), sorted(self.writes.items()), len(self.writes))
        rule = _Conflicts(store, frozenset(self.reads | self.writes.keys()), tuple(self.ranges))
        try:
            snapshot = store.log.commit(self.snapshot, "transaction", [AddFile(written.key, {}, written.size, written.rows)],
                                        rule=rule)
        except CommitConflictError as e:
            delete_files(store.store, [written.key])
            raise TransactionConflictError(f"keyed tables at {store.url}: {e}") from None
        except CommitFailedError:
            delete_files(store.store, [written.key])
            raise
        store.advance(snapshot)
        try:
            store.compact(snapshot)
        except Exception as e:  # noqa: BLE001 - the transaction committed; the next commit compacts
            warnings.warn(f"keyed tables at {store.url}: compaction after revision {snapshot.version} failed: {e}",
                          RuntimeWarning, stacklevel=2)


class _Scope:
    """``with store.transaction(...) as txn``: commits on a normal exit, discards on an exception."""

    def __init__(self, store: ObjectTableStore):
        self.store = store

    def __enter__(self) -> Transaction:
        self.txn = Transaction(self.store, self.store.current())
        return self.txn

    def __exit__(self, kind, error, tb) -> None:
        if kind is None:
            self.txn.commit()


class _Conflicts(ConflictRule):
    """A transaction conflicts with a concurrent one that wrote a key it read or wrote, or a
    key inside a range it scanned (compactions change no entry: they never conflict)."""

    def __init__(self, store: ObjectTableStore, touched: frozenset[bytes], ranges: tuple[tuple[bytes, bytes | None], ...]):
        self.store, self.touched, self.ranges = store, touched, ranges

    def specific_conflict(self, theirs: Commit, base: Snapshot) -> str | None:
        if theirs.operation != "transaction":
            return None
        for add in (a for a in theirs.actions if isinstance(a, AddFile)):
            run = self.store.run(add.landed(theirs.revision, theirs.timestamp))
            for k in run.keys():
                if k in self.touched:
                    return f"it wrote {_describe(k)}, which this transaction read or wrote"
            for low, high in self.ranges:
                for k, _ in run.entries(low, high):
                    return f"it wrote {_describe(k)}, in a range this transaction scanned"
        return None


def _describe(k: bytes) -> str:
    if k.startswith(SPECS):
        return f"the specification of table {decode_text(k, len(SPECS))[0]!r}"
    namespace = decode_text(k)[0].split("/")
    what = f"an entry of the index on {namespace[2]!r} of" if len(namespace) > 2 else "a row of"
    return f"{what} table {namespace[0]!r}"


class ObjectTable(StructuredTable):
    """One keyed table inside an object-store transaction."""

    def __init__(self, spec: TableSpecification, ident: str, txn: Transaction):
        super().__init__(spec)
        self.ident, self.txn = ident, txn
        self.namespace = f"{spec.name}/{ident}"
        self.prefix = encode_text(self.namespace)
        self.index_namespaces = {f: f"{self.namespace}/{f}" for f in spec.indexes}
        self._index_prefixes = {f: encode_text(n) for f, n in self.index_namespaces.items()}

    def _k(self, key: dict) -> bytes:
        return self.prefix + self.codec.encode(key)

    def _get(self, key: dict) -> dict | None:
        found = self.txn.get(self._k(key))
        return None if found is None else self._decode(found)

    def _put(self, row: dict) -> None:
        old = self._get(self._key_of(row))
        self._reindex(old, row)
        self.txn.put(self._k(self._key_of(row)), self._encode(row))

    def _remove(self, key: dict) -> None:
        old = self._get(key)
        if old is not None:
            self._reindex(old, None)
            self.txn.put(self._k(key), None)

    def _reindex(self, old: dict | None, new: dict | None) -> None:
        """Index entries follow a row's change: the old value's goes, the new value's comes."""
        pk = self.codec.encode(self._key_of(old if old is not None else new))
        for column, prefix in self._index_prefixes.items():
            kind = self.spec.kinds[column]
            before = None if old is None or old[column] is None else encode_value(old[column], kind)
            after = None if new is None or new[column] is None else encode_value(new[column], kind)
            if before == after:
                continue
            if before is not None:
                self.txn.put(prefix + before + pk, None)
            if after is not None:
                self.txn.put(prefix + after + pk, "")

    def _scan(self, ranges: Sequence[Range], filter: Expression, limit: int | None, order: str) -> Iterator[dict]:
        spans = []
        for r in ranges:
            low, high = self.codec.bounds(r)
            spans.append((self.prefix + (low or b""), self.prefix + high if high is not None else after_prefix(self.prefix)))
        # read now, as SQL does: the rows are the snapshot's and this transaction's at the call,
        # and the ranges are recorded before the transaction can commit
        return iter(list(islice(self._rows(_union(spans), order == "desc", filter), limit)))

    def _rows(self, spans: list[tuple[bytes, bytes | None]], reverse: bool, filter: Expression) -> Iterator[dict]:
        for low, high in (reversed(spans) if reverse else spans):
            for _, value in self.txn.entries(low, high, reverse):
                row = self._decode(value)
                if evaluate(filter, row) is True:
                    yield row

    def _scan_index(self, column: str, value: Any, filter: Expression, limit: int | None) -> Iterator[dict]:
        prefix = self._index_prefixes[column] + encode_value(value, self.spec.kinds[column])
        return iter(list(islice(self._indexed(prefix, filter), limit)))

    def _indexed(self, prefix: bytes, filter: Expression) -> Iterator[dict]:
        for k, _ in self.txn.entries(prefix, after_prefix(prefix)):
            row = self._get(self.codec.decode(k[len(prefix):]))
            if row is not None and evaluate(filter, row) is True:
                yield row

    def _encode(self, row: dict) -> str:
        return json.dumps({n: base64.b64encode(v).decode() if v is not None and self.spec.kinds[n] == "bytes" else v
                           for n, v in row.items()}, separators=(",", ":"))

    def _decode(self, text: str) -> dict:
        data = json.loads(text)
        row = {}
        for name, kind in self.spec.kinds.items():
            v = data.get(name)
            if v is not None and kind == "bytes":
                v = base64.b64decode(v)
            elif v is not None and kind in ("float", "double"):
                v = float(v)
            row[name] = v
        return row


def _union(spans: list[tuple[bytes, bytes | None]]) -> list[tuple[bytes, bytes | None]]:
    """Byte intervals ``[low, high)`` as sorted, disjoint ones (each key once)."""
    out: list[tuple[bytes, bytes | None]] = []
    for low, high in sorted((s for s in spans if s[1] is None or s[0] < s[1]), key=lambda s: s[0]):
        if out and (out[-1][1] is None or low <= out[-1][1]):
            last = out[-1]
            out[-1] = (last[0], None if last[1] is None or high is None else max(last[1], high))
        else:
            out.append((low, high))
    return out
