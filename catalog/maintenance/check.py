"""Checking a dataset end to end (``cdkds check``): its log, checkpoints and every object the log references.

:func:`check_dataset` reads and never writes. It works from the dataset's store and name rather
than from a loaded :class:`~cdkds.catalog.dataset.Dataset`, because a damaged log may not load
at all, and it collects every problem instead of stopping at the first one:

- **the log**: every commit from the oldest retained revision (0, or after expiry the oldest
  checkpoint) to the latest is present, parses, matches its checksum and its revision, follows
  the one before it (uuid chain) and is later than it; the chain is replayed as readers replay it;
- **checkpoints**: each parses, matches its checksum and revision, and holds the state replayed
  from the commits (files with their statistics and deletion vectors, tombstones, descriptor,
  protocol, record-index files, application transactions) wherever those commits can be replayed;
  the ``_last_checkpoint`` hint is readable and names a checkpoint that exists;
- **referenced objects**: every data file, record-index file and deletion-vector sidecar that any
  retained revision references exists with the size the log records (one recursive listing per
  top-level folder, never a request per file);
- **contents, as of the latest revision the log replays to**: each record-index file is read whole
  by the index's own reader (size, SHA-256, Parquet page checksums, entry count), each deletion
  vector is loaded (sidecar size, SHA-256 and cardinality) and its positions lie inside its file;
  with ``read_data`` every live data file is also read whole, by the scan's own reader, and must
  hold the rows and the per-column null counts, minimums and maximums the log records.

What it cannot see: the log records no SHA-256 of data files (FORMAT.md §2), so a data file
altered in place that keeps its size is only caught by ``read_data``, and only when it no longer
decodes or its row count or column bounds change. The adds of a missing or unreadable commit are
unknown, so their files are not checked (the report says so). A commit 1 missing below a later
checkpoint reads as an expired prefix, as it does to readers; commits left below the oldest
retained checkpoint by an interrupted expiry are not read. Files no retained revision references
are vacuum's business, not a problem.

Each :class:`Problem` says what it costs: which revisions cannot be read, which reads fail, or
that nothing is lost but something is slower.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import CorruptIndexError, CorruptLogError, CorruptLogWarning, DatasetNotFoundError
from cdkds.catalog.keyed.deletion import DeletionVectorRef
from cdkds.catalog.keyed.index import RecordIndex
from cdkds.catalog.log import checkpoint
from cdkds.catalog.log.actions import READER_VERSION, AddFile, SetProtocol
from cdkds.catalog.log.commit import Commit, commit_key
from cdkds.catalog.log.listing import HINT_KEY, Listing, LogListing, checkpoint_key
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.expressions import ALWAYS_TRUE
from cdkds.catalog.scan import FileScanTask, read_task
from cdkds.catalog.storage import ObjectStore
from cdkds.formats.files import file_format
from cdkds.formats.statistics import StatisticsCollector

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``: called as each phase advances."""

PREFETCH = 32  # log objects read ahead, by a few threads (one request each)


@dataclass(frozen=True)
class Problem:
    """One thing wrong: ``kind`` a stable word (``missing_commit``, ``size_mismatch``...),
    ``object`` the key of the object concerned (relative to the dataset), ``message`` what is
    wrong and ``cost`` what it costs the user."""

    kind: str
    object: str
    message: str
    cost: str

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class CheckReport:
    """What :func:`check_dataset` checked and found. ``first_revision..latest_revision``: the
    retained log (``None`` when nothing of it could be read); ``checked_revision``: the revision
    whose live index files, deletion vectors (and, with ``contents_read``, data files) were read
    — the latest, unless the log cannot be replayed that far; ``data_files``, ``data_bytes``,
    ``index_files``, ``deletion_vector_files``: the objects of every retained revision checked
    for presence and size; ``notes``: what could not be checked, and why."""

    dataset: str
    first_revision: int | None
    latest_revision: int | None
    checked_revision: int | None
    commits: int
    checkpoints: int
    data_files: int
    data_bytes: int
    index_files: int
    deletion_vector_files: int
    contents_read: bool
    problems: tuple[Problem, ...]
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        out["ok"] = self.ok
        out["problems"] = [p.to_json() for p in self.problems]
        out["notes"] = list(self.notes)
        return out


PROBLEM_KINDS = {
    "missing_log": "the log is empty while data files remain (the dataset does not exist for readers)",
    "missing_commit": "a commit between the oldest retained revision and the latest is absent",
    "corrupt_commit": "a commit that does not parse, fails its checksum or names another revision",
    "broken_chain": "a commit whose previous uuid is not the commit before it",
    "timestamp_order": "a commit not later than the one before it",
    "unsupported_protocol": "a commit needing a newer log reader than this cdkds",
    "corrupt_checkpoint": "a checkpoint that does not parse, fails its checksum or names another revision",
    "checkpoint_mismatch": "a checkpoint whose state differs from the replay of the commits",
    "bad_hint": "an unreadable _last_checkpoint, or one naming an absent checkpoint",
    "missing_file": "a data, index or deletion-vector file a retained revision references is absent",
    "size_mismatch": "a referenced file whose size differs from the log",
    "unreadable_file": "a data file that cannot be read whole (read_data)",
    "content_mismatch": "a data file whose rows or column statistics differ from the log (read_data)",
    "unreadable_index": "a record-index file that fails its SHA-256, page checksums or entry count",
    "unreadable_deletion_vector": "a deletion vector that cannot be loaded, or points past its file",
    "duplicate_key": "a record key live in more than one row of a keyed dataset (read_data)",
    "index_mismatch": "a live row the record index does not point at (read_data)",
}


def check_dataset(store: ObjectStore, name: str, read_data: bool = False,
                  progress: Progress | None = None) -> CheckReport:
    """Check dataset ``name`` whose folder is ``store`` (``repository.store.child(name)``, or
    ``dataset.store``): see the module's documentation. Never writes. Raises
    :class:`DatasetNotFoundError` only when there is no trace of the dataset at all (no log
    object, no data); store errors propagate. ``read_data`` reads every live data file whole."""
    progress = progress or (lambda phase, done, total: None)
    listing = LogListing(store, name)
    listed = listing.list()
    if not listed.commits and not listed.checkpoints:
        return _no_log(store, name)
    log = _LogCheck(listing, listed, progress)
    log.run()
    files = _FileCheck(store, name, log.refs, log.latest, progress)
    files.check_presence()
    state = log.state or log.last_state
    notes = list(log.notes)
    if state is None:
        notes.append("no revision of the log could be replayed: index files, deletion vectors and data file "
                     "contents were not read")
    else:
        if state.version != log.latest:
            notes.append(f"the log replays only to revision {state.version}: index files, deletion vectors and "
                         f"data file contents were read as of that revision")
        files.check_index(state)
        files.check_vectors(state)
        if read_data:
            files.read_data(state)
            if state.descriptor.record_key and not any(p.kind == "unreadable_index" for p in files.problems):
                files.check_keys(state)
    data = log.refs.of_kind("data")
    return CheckReport(name, log.first, log.latest, state.version if state is not None else None, log.commits,
                       log.checkpoints, len(data), sum(r.size for r in data), len(log.refs.of_kind("index")),
                       len(log.refs.of_kind("deletes")), read_data and state is not None,
                       tuple(log.problems + files.problems), tuple(notes))


def _no_log(store: ObjectStore, name: str) -> CheckReport:
    """The report on a dataset folder whose log holds nothing."""
    data = [key for key, _ in store.walk_files("data")]
    if not data:
        raise DatasetNotFoundError(f"dataset {name!r} does not exist at {store.url}")
    problem = Problem("missing_log", commit_key(0), f"the log is empty but data/ holds {len(data)} files",
                      "the dataset does not exist for readers: every read fails; `cdkds rebuild` rebuilds a log from "
                      "the data files' own metadata")
    return CheckReport(name, None, None, None, 0, 0, 0, 0, 0, 0, False, (problem,))


# ---------------------------------------------------------------- what the log references


@dataclass
class _Reference:
    """An object retained revisions reference: ``kind`` data, index or deletes; live from
    revision ``first`` to ``last`` (``None``: still live at the latest)."""

    key: str
    kind: str
    size: int
    first: int
    last: int | None = None
    rows: int = 0
    owner: str | None = None  # the data file of a deletion vector


class _References:
    def __init__(self, oldest: int):
        self.oldest = oldest
        self.items: dict[str, _Reference] = {}
        self._vectors: dict[str, list[str]] = {}

    def add(self, key: str, kind: str, size: int, revision: int, rows: int = 0, owner: str | None = None) -> None:
        revision = max(revision, self.oldest)
        ref = self.items.get(key)
        if ref is None:
            self.items[key] = _Reference(key, kind, size, revision, None, rows, owner)
            if owner is not None:
                self._vectors.setdefault(owner, []).append(key)
        elif revision < ref.first:
            ref.first = revision

    def remove(self, key: str, revision: int) -> None:
        for k in (key, *self._vectors.get(key, ())):
            ref = self.items.get(k)
            if ref is not None and ref.last is None:
                ref.last = revision - 1

    def of_commit(self, revision: int, raw: dict) -> None:
        """The objects a parsed commit adds and removes (its JSON: no descriptor needed)."""
        for item in raw["actions"] if isinstance(raw["actions"], list) else ():
            try:
                (kind, body), = item.items()
                if kind == "add":
                    self.add(str(body["path"]), "data", int(body["size"]), revision, int(body["rows"]))
                elif kind == "addIndex":
                    self.add(str(body["path"]), "index", int(body["size"]), revision)
                elif kind == "deleteRows" and "path" in body["vector"]:
                    vector = body["vector"]
                    self.add(str(vector["path"]), "deletes", int(vector["size"]), revision, owner=str(body["path"]))
                elif kind in ("remove", "removeIndex"):
                    self.remove(str(body["path"]), revision)
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # a malformed action: the commit's decoding reports it

    def of_snapshot(self, snapshot: Snapshot) -> None:
        for add in snapshot.files.values():
            self.add(add.path, "data", add.size, add.revision, add.row_count)
            for vector in add.deletes:
                if vector.path:
                    self.add(vector.path, "deletes", vector.size, add.revision, owner=add.path)
        for entry in snapshot.index.values():
            self.add(entry.path, "index", entry.size, entry.revision)

    def of_kind(self, kind: str) -> list[_Reference]:
        return [r for r in self.items.values() if r.kind == kind]


# ---------------------------------------------------------------- the log


class _LogCheck:
    """The commits and checkpoints of the retained log, read in revision order and replayed as
    readers replay them: what is wrong (with its cost), the objects they reference, and the
    last state the replay reached."""

    def __init__(self, listing: LogListing, listed: Listing, progress: Progress):
        self.listing = listing
        self.listed = listed
        self.progress = progress
        self.expired = listed.expired
        self.first = min(r for r in listed.checkpoints if r > 0) if self.expired else 0  # the oldest retained
        self.latest = max(listed.commits[-1:] + listed.checkpoints[-1:])
        self.refs = _References(self.first)
        self.problems: list[Problem] = []
        self.notes: list[str] = []
        self.breaks: list[tuple[str, str, str, int, str]] = []  # kind, key, message, revision, extra cost
        self.readable: set[int] = set()  # checkpoints that decode (readers start from them)
        self.mismatches: list[tuple[int, str]] = []
        self.damaged: list[tuple[int, str]] = []
        self.out_of_order: list[tuple[int, Problem]] = []
        self.commits = self.checkpoints = 0
        self.state: Snapshot | None = None  # where the replay is; None while it is broken
        self.last_state: Snapshot | None = None  # the state the replay had when it last broke

    def run(self) -> None:
        listed = self.listed
        self._walk(listed.commits, {r for r in listed.checkpoints if r >= self.first or not self.expired})
        self._check_hint(listed.checkpoints)
        self._costs()
        unknown = [r for kind, _, _, r, _ in self.breaks if kind in ("missing_commit", "corrupt_commit")
                   and not any(c >= r for c in self.readable)]
        if unknown:
            self.notes.append(f"the files that commit{'s' if len(unknown) > 1 else ''} {_some(map(str, unknown))} "
                              f"added are unknown (no readable checkpoint after {'them' if len(unknown) > 1 else 'it'}"
                              f" lists them) and were not checked")

    def _walk(self, commits: tuple[int, ...], checkpoints: set[int]) -> None:
        """Reads every retained commit and checkpoint in revision order, checking the chain and
        replaying it as readers do: from commit 0 (or the oldest checkpoint), and on from the next
        readable checkpoint wherever a commit breaks the replay."""
        present = set(commits)
        revisions = ([0] if self.expired else []) + list(range(self.first, self.latest + 1))
        keys = []
        for r in revisions:
            if r in present:
                keys.append(commit_key(r))
            if r in checkpoints:
                keys.append(checkpoint_key(r))
        fetched = self._fetch(keys)
        done = 0
        previous: dict | None = None  # the raw JSON of the commit before, when it parsed
        try:
            for r in revisions:
                if self.expired and r == self.first:  # the retained part starts afresh from its checkpoint
                    previous, self.state = None, None
                data = next(fetched)[1] if r in present else None
                self.commits += data is not None
                previous = self._commit(r, data, previous)
                if r in checkpoints:
                    self._checkpoint(r, next(fetched)[1])
                    self.checkpoints += 1
                done += (r in present) + (r in checkpoints)
                self.progress("reading the log", done, len(keys))
        finally:
            fetched.close()
        if self.expired and self.first not in self.readable:
            self.notes.append(f"the log was expired to checkpoint {self.first}, which cannot be read: the files "
                              f"live at revision {self.first} that no later readable checkpoint lists were not "
                              f"checked")

    def _fetch(self, keys: list[str]) -> Iterator[tuple[str, bytes | None]]:
        """``(key, bytes or None)`` in order, read a few at a time ahead."""
        with ThreadPoolExecutor(max_workers=8) as pool:
            pending: deque = deque()
            remaining = iter(keys)
            for key in islice(remaining, PREFETCH):
                pending.append((key, pool.submit(self.listing.fetch, key)))
            while pending:
                key, future = pending.popleft()
                following = next(remaining, None)
                if following is not None:
                    pending.append((following, pool.submit(self.listing.fetch, following)))
                yield key, future.result()

    def _commit(self, r: int, data: bytes | None, previous: dict | None) -> dict | None:
        """Commit ``r``'s checked JSON, applied to the replayed state; ``None`` when it is unusable."""
        key = commit_key(r)
        if data is None:
            self._break("missing_commit", key, f"commit {r} is missing, but later log objects exist", r)
            return None
        try:
            raw = Commit.parse(data, self.listing.where(key))
            if raw["revision"] != r:
                raise CorruptLogError(f"it says it is revision {raw['revision']}")
        except CorruptLogError as e:
            self._break("corrupt_commit", key, f"commit {r} is corrupt or truncated ({_detail(e)})", r,
                        "`history` fails")
            return None
        self.refs.of_commit(r, raw)
        if previous is not None:
            if raw["previous"] != previous["uuid"]:
                self._break("broken_chain", key, f"commit {r} follows {raw['previous']!r}, but commit {r - 1} is "
                                                 f"{previous['uuid']!r}", r)
                return raw
            times = (previous["timestamp"], raw["timestamp"])
            if all(isinstance(t, int) for t in times) and times[1] <= times[0]:
                self.out_of_order.append((r, Problem(
                    "timestamp_order", key, f"commit {r} has timestamp {raw['timestamp']}, not later than commit "
                    f"{r - 1}'s {previous['timestamp']}",
                    f"time travel by timestamp near revision {r} may read the wrong revision; nothing lost")))
        self._replay(r, data, raw)
        return raw

    def _replay(self, r: int, data: bytes, raw: dict) -> None:
        key = commit_key(r)
        if r == 0:
            state = None
        elif self.state is None:
            return  # broken before: the replay resumes at the next readable checkpoint
        elif raw["previous"] != self.state.commit_uuid:  # it follows a commit the replay did not reach
            self._break("broken_chain", key, f"commit {r} follows {raw['previous']!r}, but the state it continues "
                                             f"(revision {self.state.version}) is {self.state.commit_uuid!r}", r)
            return
        else:
            state = self.state
        try:
            commit = Commit.from_bytes(data, state.descriptor if state else None, self.listing.where(key))
            needs = max((a.reader_version for a in commit.actions if isinstance(a, SetProtocol)), default=0)
            if needs > READER_VERSION:
                self._break("unsupported_protocol", key, f"commit {r} needs log reader version {needs}; this cdkds "
                                                         f"reads version {READER_VERSION}", r,
                            "a newer cdkds reads them")
                return
            following = Snapshot.first(commit) if state is None else state.apply(commit)
            if following.descriptor is None:
                raise CorruptLogError("it holds no descriptor")
            self.state = following
        except Exception as e:  # noqa: BLE001 - any failure to decode or apply it stops the replay there
            self._break("corrupt_commit", key, f"commit {r} cannot be replayed ({_detail(e)})", r)

    def _break(self, kind: str, key: str, message: str, r: int, extra: str = "") -> None:
        """A problem that stops the replay at ``r`` (its cost is known once every checkpoint is)."""
        self.breaks.append((kind, key, message, r, extra))
        self.last_state = self.state or self.last_state
        self.state = None

    def _checkpoint(self, r: int, data: bytes | None) -> None:
        key = checkpoint_key(r)
        if data is None:  # deleted since the listing
            return
        try:
            snapshot = checkpoint.decode(data, self.listing.where(key))
            if snapshot.version != r:
                raise CorruptLogError(f"it says it is revision {snapshot.version}")
        except CorruptLogError as e:
            self.damaged.append((r, _detail(e)))
            return
        self.readable.add(r)
        self.refs.of_snapshot(snapshot)
        if self.state is None:
            self.state = snapshot  # readers of revisions from r on start here
            return
        differences = _differences(snapshot, self.state)
        if differences:
            self.mismatches.append((r, "; ".join(differences)))

    def _check_hint(self, checkpoints: tuple[int, ...]) -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CorruptLogWarning)
            hint = self.listing.hint()
        cost = "opening the dataset lists the log instead (slower); nothing lost"
        if any(issubclass(w.category, CorruptLogWarning) for w in caught):
            self._problem("bad_hint", HINT_KEY, "the checkpoint hint is unreadable", cost)
        elif hint is not None and hint not in checkpoints:
            self._problem("bad_hint", HINT_KEY, f"the checkpoint hint names checkpoint {hint}, which does not exist",
                          cost)

    def _costs(self) -> None:
        """The problems of the log, with what each costs now that every checkpoint is known."""
        log_problems = list(self.out_of_order)
        for kind, key, message, r, extra in self.breaks:
            if kind == "missing_commit" and r == 0:
                cost = ("the dataset does not exist for readers: every read fails; `cdkds rebuild` rebuilds a log "
                        "from the data files")
            elif self.expired and r == self.first and r in self.readable:
                cost = f"no revision is lost (checkpoint {r} holds its state); the history and change feed lack it"
            else:
                cost = self._lost(r) + "; vacuum refuses to run and the change feed across it fails"
            log_problems.append((r, Problem(kind, key, message, f"{cost}; {extra}" if extra else cost)))
        for r, detail in self.damaged:
            log_problems.append((r, Problem("corrupt_checkpoint", checkpoint_key(r),
                                            f"checkpoint {r} is corrupt or truncated ({detail})",
                                            self._checkpoint_cost(r))))
        for r, differences in self.mismatches:
            following = min((c for c in self.readable if c > r), default=None)
            span = f"revisions {r} to {following - 1}" if following is not None else f"revision {r} to the latest"
            log_problems.append((r, Problem("checkpoint_mismatch", checkpoint_key(r),
                                            f"checkpoint {r} differs from the replay of the commits: {differences}",
                                            f"reads of {span} start from this checkpoint and see its state, not the "
                                            f"log's; deleting it makes them replay the commits")))
        self.problems = [p for _, p in sorted(log_problems, key=lambda item: item[0])] + self.problems

    def _lost(self, r: int) -> str:
        """What breaking the replay at revision ``r`` costs readers: up to the next readable checkpoint."""
        resume = min((c for c in self.readable if c >= r), default=None)
        if resume is None:
            return (f"revisions {r} to {self.latest} cannot be read, the latest included: the dataset cannot be "
                    f"opened" if r < self.latest else
                    f"revision {r}, the latest, cannot be read: the dataset cannot be opened")
        if resume == r:
            return f"no revision is lost (checkpoint {r} holds its state)"
        return (f"time travel to {_revisions(r, resume - 1)} fails (revision {resume} and later read from "
                f"checkpoint {resume})")

    def _checkpoint_cost(self, r: int) -> str:
        older = [c for c in self.readable if c < r]
        if self.expired and not older:
            following = min((c for c in self.readable if c > r), default=None)
            what = (_revisions(r, following - 1) if following is not None else f"revisions {r} to the latest")
            return (f"{what} cannot be read: the commits before them were expired; vacuum refuses to run"
                    + (", and the dataset cannot be opened" if following is None else ""))
        return "reads of revisions from it on replay from an older checkpoint or commit 0 (slower); nothing lost"

    def _problem(self, kind: str, key: str, message: str, cost: str) -> None:
        self.problems.append(Problem(kind, key, message, cost))


# ---------------------------------------------------------------- the objects it references


class _FileCheck:
    """The objects the log references: present with their sizes, and the contents of those the
    latest replayed state uses."""

    def __init__(self, store: ObjectStore, name: str, refs: _References, latest: int, progress: Progress):
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
                    found[ref.key] = int(self.store.fs.info(self.store.path(ref.key)).get("size") or 0)
                except FileNotFoundError:
                    pass
        for i, ref in enumerate(refs):
            if i % 1000 == 0:
                self.progress("checking files", i, len(refs))
            size = found.get(ref.key)
            if size is None:
                self.absent.add(ref.key)
                self._problem("missing_file", ref.key, f"{_what(ref)} is missing", self._missing_cost(ref))
            elif size != ref.size:
                self.absent.add(ref.key)
                self._problem("size_mismatch", ref.key, f"{_what(ref)} has {size} bytes, the log says {ref.size}",
                              self._missing_cost(ref, damaged=True))
        self.progress("checking files", len(refs), len(refs))

    def _missing_cost(self, ref: _Reference, damaged: bool = False) -> str:
        live = ref.last is None
        when = (f"from revision {ref.first} to the latest ({self.latest})" if live else
                f"at {_revisions(ref.first, ref.last)} only (time travel; the latest does not use it)")
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
        except Exception as e:  # noqa: BLE001 - an unkeyed descriptor with index files, or bad properties
            self._problem("unreadable_index", entries[0].path, f"the record index cannot be opened ({_detail(e)})",
                          "reads, upserts and deletes by key fail; `cdkds rebuild-index` rebuilds the index")
            return
        for i, entry in enumerate(entries):
            self.progress("reading index files", i, len(entries))
            try:
                rows = index.read_file(entry).num_rows
                message = None if rows == entry.rows else (f"index file {entry.path} of bucket {entry.bucket} holds "
                                                           f"{rows} entries, the log says {entry.rows}")
            except CorruptIndexError as e:
                message = _short(e)
            if message is not None:
                self._problem("unreadable_index", entry.path, message,
                              f"reads, upserts and deletes by key in bucket {entry.bucket} fail from revision "
                              f"{state.version}; `cdkds rebuild-index` rebuilds the index from the data files")
        self.progress("reading index files", len(entries), len(entries))

    def check_vectors(self, state: Snapshot) -> None:
        files = [f for f in state.files.values() if f.deletes]
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
        files = [f for f in state.files.values() if f.path not in self.absent]
        total = sum(f.size for f in files)
        done = 0
        for add in files:
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
        files = [f for f in state.files.values() if f.path not in self.absent and f.may_have_live_rows]
        index = RecordIndex(self.store, state, self.name)
        names = list(index.key.names)
        parts = []
        for i, add in enumerate(files):
            self.progress("reading record keys", i, len(files))
            task = FileScanTask(add, tuple(t.predicate for t in state.tombstones_for(add)))  # expired rows too
            try:
                for batch in read_task(self.store, state.descriptor, ALWAYS_TRUE, names, task, positions=True):
                    parts.append(pa.Table.from_batches([batch]).append_column(
                        "_file", pa.array([add.path] * batch.num_rows, pa.string())))
            except Exception:  # noqa: BLE001 - reported by read_data already
                return
        self.progress("reading record keys", len(files), len(files))
        if not parts:
            return
        live = pa.concat_tables(parts)
        counts = live.group_by(names, use_threads=False).aggregate([("_pos", "count")])
        twice = counts.filter(pc.greater(counts.column("_pos_count"), 1))
        for row in range(min(5, twice.num_rows)):
            self._problem("duplicate_key", index.key.describe(twice, row),
                          f"record key {index.key.describe(twice, row)} is live in {twice['_pos_count'][row]} rows",
                          "reads return the key more than once and `get` returns one of them; delete_keys and "
                          "upsert it to leave one row")
        found = index.lookup(live.select(names), index.key.hashes(live.select(names)))
        pointed = np.zeros(live.num_rows, dtype=bool)
        rows = found.column("_row").to_numpy()
        same = np.asarray(pc.and_(
            pc.equal(found.column("_file"), live.column("_file").take(found.column("_row"))),
            pc.equal(found.column("_pos"), live.column("_pos").take(found.column("_row")))).fill_null(False))
        pointed[rows[same]] = True
        missing = np.flatnonzero(~pointed)
        if len(missing):
            sample = ", ".join(index.key.describe(live, int(r)) for r in missing[:3])
            self._problem("index_mismatch", live.column("_file")[int(missing[0])].as_py(),
                          f"{len(missing)} live rows are not where the record index points for their key, "
                          f"e.g. {sample}",
                          "get, upserts and deletes by key miss or duplicate these rows; `cdkds rebuild-index` "
                          "rebuilds the index from the data files")


# ---------------------------------------------------------------- helpers


def _detail(error: BaseException) -> str:
    """The underlying reason of a cdkds error raised ``from None`` (its context), else its text."""
    cause = error.__cause__ or error.__context__
    if cause is not None and not isinstance(cause, CorruptLogError):
        return f"{type(cause).__name__}: {cause}"
    return str(error)


def _short(error: BaseException) -> str:
    """A record-index error without the dataset prefix and the advice (the cost says it)."""
    text = str(error).split("; run dataset.rebuild_index()")[0]
    return text.split(": ", 1)[1] if text.startswith("dataset ") and ": " in text else text


def _revisions(first: int, last: int) -> str:
    return f"revision {first}" if first == last else f"revisions {first} to {last}"


def _what(ref: _Reference) -> str:
    return {"data": "data file", "index": "record-index file", "deletes": f"deletion vector of {ref.owner}"}[ref.kind]


def _vector_problem(store: ObjectStore, ref: DeletionVectorRef, add: AddFile) -> str | None:
    """What is wrong with one deletion vector of ``add``, ``None`` when nothing."""
    try:
        vector = ref.load(store)
    except CorruptIndexError as e:
        return f"cannot be loaded ({e})"
    except Exception as e:  # noqa: BLE001 - an undecodable inline vector
        return f"cannot be decoded ({type(e).__name__}: {e})"
    if len(vector) != ref.cardinality:
        return f"holds {len(vector)} positions, the log says {ref.cardinality}"
    if len(vector) and vector.positions.max() >= add.row_count:
        return f"deletes row {vector.positions.max()}, but the file has {add.row_count} rows"
    return None


def _content_problem(store: ObjectStore, descriptor: DatasetDescriptor, add: AddFile) -> tuple[str, str] | None:
    """Reads data file ``add`` whole with the scan's reader; what differs from the log, if anything."""
    projection = descriptor.projection()
    collector = StatisticsCollector(projection.arrow_schema)
    try:
        for batch in file_format(descriptor.format).read(store.fs, store.path(add.path), projection, size=add.size):
            collector.update(batch)
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


def _differences(stored: Snapshot, replayed: Snapshot) -> list[str]:
    """How a checkpoint's state differs from the replayed one, in what a reader sees."""
    out = []
    if (stored.commit_uuid, stored.timestamp) != (replayed.commit_uuid, replayed.timestamp):
        out.append("its commit uuid or time differs")
    if stored.protocol != replayed.protocol:
        out.append("its protocol differs")
    if (stored.descriptor_version, stored.descriptor.to_json()) != (replayed.descriptor_version,
                                                                     replayed.descriptor.to_json()):
        out.append("its descriptor differs")
    same_file = _same_file(stored.descriptor, replayed.descriptor)
    for noun, a, b, same in (("file", stored.files, replayed.files, same_file),
                             ("index file", stored.index, replayed.index, _equal),
                             ("application transaction", stored.transactions, replayed.transactions, _equal)):
        changed = sorted(k for k in a.keys() & b.keys() if not same(a[k], b[k]))
        for keys, what in ((sorted(a.keys() - b.keys()), "only in the checkpoint"),
                           (sorted(b.keys() - a.keys()), "missing from it"), (changed, "recorded differently")):
            if keys:
                out.append(f"{len(keys)} {noun}{'s' if len(keys) > 1 else ''} {what} ({_some(keys)})")
    tombstones = [sorted((t.revision, repr(t.predicate.to_json())) for t in s.tombstones) for s in (stored, replayed)]
    if tombstones[0] != tombstones[1]:
        out.append(f"its tombstones differ ({len(tombstones[0])} in the checkpoint, {len(tombstones[1])} in the log)")
    return out


def _equal(a: Any, b: Any) -> bool:
    return a == b


def _same_file(stored: DatasetDescriptor, replayed: DatasetDescriptor) -> Callable[[AddFile, AddFile], bool]:
    """Whether a checkpoint's file is the replayed one: equal, or equal in their JSON form (one
    encoder for both, so only meaning counts). A checkpoint written before files carried their
    commit time has none; that is not a difference."""
    def same(a: AddFile, b: AddFile) -> bool:
        if not a.timestamp:
            b = dataclasses.replace(b, timestamp=0)
        return a == b or (a.revision == b.revision and a.to_json(stored) == b.to_json(replayed))
    return same


def _some(keys: Iterable[str], most: int = 3) -> str:
    keys = list(keys)
    return ", ".join(keys[:most]) + (f" and {len(keys) - most} more" if len(keys) > most else "")
