"""The log part of ``cdkds check``: every retained commit and checkpoint read in revision order,
the chain checked and replayed as readers replay it, checkpoints compared with the replay,
every part of every checkpoint read and checked against what its checkpoint says of it."""

from __future__ import annotations

import dataclasses
import warnings
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from typing import Any, Callable, Iterator, Mapping

import pyarrow.compute as pc

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import CorruptLogError, CorruptLogWarning, UnsupportedLogVersionError
from cdkds.catalog.log import checkpoint
from cdkds.catalog.log.actions import READER_VERSION, AddFile, SetProtocol
from cdkds.catalog.log.commit import Commit, commit_key
from cdkds.catalog.log.files import FileTable
from cdkds.catalog.log.listing import HINT_KEY, Listing, LogListing, checkpoint_key
from cdkds.catalog.log.parts import StoredParts
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.maintenance.file_diff import differing_files
from cdkds.catalog.maintenance.problems import Problem, Progress, References, detail, revisions, some

PREFETCH = 32  # log objects read ahead, by a few threads (one request each)


class LogCheck:
    """The commits and checkpoints of the retained log, read in revision order and replayed as
    readers replay them: what is wrong (with its cost), the objects they reference, and the
    last state the replay reached."""

    def __init__(self, listing: LogListing, listed: Listing, progress: Progress):
        self.listing = listing
        self.listed = listed
        self.progress = progress
        self.expired = listed.expired
        marker = listing.expiry_marker() if self.expired else None
        self.first = listed.retained_start(marker.expired_before if marker else 0) if self.expired else 0
        self.latest = max(listed.commits[-1:] + listed.checkpoints[-1:])
        self.refs = References(self.first)
        self.problems: list[Problem] = []
        self.notes: list[str] = []
        self.breaks: list[tuple[str, str, str, int, str]] = []  # kind, key, message, revision, extra cost
        self.readable: set[int] = set()  # checkpoints that decode (readers start from them)
        self.mismatches: list[tuple[int, str]] = []
        self.damaged: list[tuple[int, str]] = []
        self.damaged_parts: list[tuple[int, str, str]] = []  # checkpoint, part key, what is wrong
        self.sound_parts: set[tuple[str, str]] = set()  # (key, sha256) of the parts read whole: checkpoints share them
        self.out_of_order: list[tuple[int, Problem]] = []
        self.commits = self.checkpoints = 0
        self.state: Snapshot | None = None  # where the replay is; None while it is broken
        self.last_state: Snapshot | None = None  # the state the replay had when it last broke

    def run(self) -> None:
        listed = self.listed
        self._walk(listed.commits, {r for r in listed.checkpoints if r >= self.first or not self.expired})
        if self.expired:
            self._pinned()
        self._check_hint(listed.checkpoints)
        self._costs()
        unknown = [r for kind, _, _, r, _ in self.breaks if kind in ("missing_commit", "corrupt_commit")
                   and not any(c >= r for c in self.readable)]
        if unknown:
            self.notes.append(f"the files that commit{'s' if len(unknown) > 1 else ''} {some(map(str, unknown))} "
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
            self._break("corrupt_commit", key, f"commit {r} is corrupt or truncated ({detail(e)})", r,
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
            self._break("corrupt_commit", key, f"commit {r} cannot be replayed ({detail(e)})", r)

    def _break(self, kind: str, key: str, message: str, r: int, extra: str = "") -> None:
        """A problem that stops the replay at ``r`` (its cost is known once every checkpoint is)."""
        self.breaks.append((kind, key, message, r, extra))
        self.last_state = self.state or self.last_state
        self.state = None

    def _checkpoint(self, r: int, data: bytes | None) -> None:
        key = checkpoint_key(r)
        if data is None:  # deleted since the listing
            return
        loader = StoredParts(self.listing.store, self.listing.where(key), key)
        try:
            snapshot = checkpoint.decode(data, self.listing.where(key), loader)
            if snapshot.version != r:
                raise CorruptLogError(f"it says it is revision {snapshot.version}")
        except CorruptLogError as e:
            self.damaged.append((r, detail(e)))
            return
        except UnsupportedLogVersionError as e:
            self._problem("unsupported_protocol", key, f"checkpoint {r} {detail(e)}", "a newer cdkds reads it")
            return
        if not self._parts_read(r, snapshot, loader):
            return
        self.readable.add(r)
        files = snapshot.files.table()
        self.refs.of_snapshot(snapshot, files)
        if self.state is None:
            self.state = snapshot  # readers of revisions from r on start here
            return
        differences = _differences(snapshot, self.state, files)
        if differences:
            self.mismatches.append((r, "; ".join(differences)))

    def _pinned(self) -> None:
        """The revisions older than the retained log that tags keep (as of the replayed state;
        every older checkpoint when it is unknown): each one's checkpoint read with its parts,
        and the objects its state uses referenced at its revision only."""
        state = self.state or self.last_state
        older = [r for r in self.listed.checkpoints if 0 < r < self.first]
        pins = state.pinned_revisions() if state is not None else {r: ("a tag",) for r in older}
        for r in (r for r in pins if 0 < r < self.first):
            key = checkpoint_key(r)
            cost = f"revision {r}, which {', '.join(pins[r])} keeps, cannot be read; vacuum refuses to run"
            if r not in older:
                self._problem("corrupt_checkpoint", key, f"checkpoint {r} is missing", cost)
                continue
            data = self.listing.fetch(key)
            if data is None:  # deleted since the listing: untagged and expired meanwhile
                continue
            loader = StoredParts(self.listing.store, self.listing.where(key), key)
            try:
                snapshot = checkpoint.decode(data, self.listing.where(key), loader)
                if snapshot.version != r:
                    raise CorruptLogError(f"it says it is revision {snapshot.version}")
            except (CorruptLogError, UnsupportedLogVersionError) as e:
                self._problem("corrupt_checkpoint", key, f"checkpoint {r} is corrupt or truncated ({detail(e)})", cost)
                continue
            self.checkpoints += 1
            damaged = len(self.damaged_parts)
            if not self._parts_read(r, snapshot, loader):
                for _, part, reason in self.damaged_parts[damaged:]:
                    self._problem("corrupt_checkpoint_part", part, f"part {part} of checkpoint {r} cannot be read "
                                                                   f"({reason})", cost)
                del self.damaged_parts[damaged:]
                continue
            self.refs.of_pinned(snapshot, snapshot.files.table())

    def _parts_read(self, r: int, snapshot: Snapshot, loader: StoredParts) -> bool:
        """Whether every part of checkpoint ``r`` reads as it says (each one that does not is noted)."""
        whole = True
        for part in checkpoint.parts_of(snapshot) or ():
            if (part.key, part.sha256) in self.sound_parts:
                continue
            try:
                loader.load(part, snapshot.descriptor)
                self.sound_parts.add((part.key, part.sha256))
            except CorruptLogError as e:
                self.damaged_parts.append((r, part.key, detail(e)))
                whole = False
        return whole

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
        for r, reason in self.damaged:
            log_problems.append((r, Problem("corrupt_checkpoint", checkpoint_key(r),
                                            f"checkpoint {r} is corrupt or truncated ({reason})",
                                            self._checkpoint_cost(r))))
        for r, key, reason in self.damaged_parts:
            log_problems.append((r, Problem("corrupt_checkpoint_part", key,
                                            f"part {key} of checkpoint {r} cannot be read ({reason})",
                                            self._part_cost(r))))
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
        return (f"time travel to {revisions(r, resume - 1)} fails (revision {resume} and later read from "
                f"checkpoint {resume})")

    def _checkpoint_cost(self, r: int) -> str:
        older = [c for c in self.readable if c < r]
        if self.expired and not older:
            following = min((c for c in self.readable if c > r), default=None)
            what = (revisions(r, following - 1) if following is not None else f"revisions {r} to the latest")
            return (f"{what} cannot be read: the commits before them were expired; vacuum refuses to run"
                    + (", and the dataset cannot be opened" if following is None else ""))
        return "reads of revisions from it on replay from an older checkpoint or commit 0 (slower); nothing lost"

    def _part_cost(self, r: int) -> str:
        """What a damaged part of checkpoint ``r`` costs: readers starting there fail, naming it."""
        following = min((c for c in self.readable if c > r), default=None)
        what = revisions(r, following - 1) if following is not None else f"revisions {r} to the latest"
        if self.expired and not [c for c in self.readable if c < r]:
            return f"reads of {what} fail naming the part: the commits before checkpoint {r} were expired"
        return (f"reads of {what} fail naming the part; deleting checkpoint {r} makes them replay from an older "
                f"checkpoint or commit 0 (slower); nothing lost")

    def _problem(self, kind: str, key: str, message: str, cost: str) -> None:
        self.problems.append(Problem(kind, key, message, cost))


def _differences(stored: Snapshot, replayed: Snapshot, stored_files: FileTable) -> list[str]:
    """How a checkpoint's state (its live files: ``stored_files``) differs from the replayed
    one, in what a reader sees."""
    out = []
    if (stored.commit_uuid, stored.timestamp) != (replayed.commit_uuid, replayed.timestamp):
        out.append("its commit uuid or time differs")
    if stored.protocol != replayed.protocol:
        out.append("its protocol differs")
    if (stored.descriptor_version, stored.descriptor.to_json()) != (replayed.descriptor_version,
                                                                     replayed.descriptor.to_json()):
        out.append("its descriptor differs")
    files = differing_files(stored_files, replayed.files.table(), _same_file(stored.descriptor, replayed.descriptor))
    for noun, (only_stored, only_replayed, changed) in (
            ("file", files),
            ("index file", _differing(stored.index, replayed.index)),
            ("application transaction", _differing(stored.transactions, replayed.transactions)),
            ("tag", _differing(stored.tags, replayed.tags))):
        for keys, what in ((only_stored, "only in the checkpoint"), (only_replayed, "missing from it"),
                           (changed, "recorded differently")):
            if keys:
                out.append(f"{len(keys)} {noun}{'s' if len(keys) > 1 else ''} {what} ({some(keys)})")
    # a tombstone no live file predates is spent (FORMAT.md §3): a state may hold it or not,
    # as a replay over checkpoint parts only bounds the oldest live file from below
    oldest = pc.min(stored_files.table.column("revision")).as_py() if len(stored_files) else None
    tombstones = [sorted((t.revision, repr(t.predicate.to_json())) for t in s.tombstones
                         if oldest is not None and t.revision > oldest) for s in (stored, replayed)]
    if tombstones[0] != tombstones[1]:
        out.append(f"its tombstones differ ({len(tombstones[0])} in the checkpoint, {len(tombstones[1])} in the log)")
    return out


def _differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """The keys only in ``a``, only in ``b``, and in both with unequal values, each sorted."""
    return (sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys()),
            sorted(k for k in a.keys() & b.keys() if a[k] != b[k]))


def _same_file(stored: DatasetDescriptor, replayed: DatasetDescriptor) -> Callable[[AddFile, AddFile], bool]:
    """Whether a checkpoint's file is the replayed one: equal, or equal in their JSON form (one
    encoder for both, so only meaning counts). A checkpoint written before files carried their
    commit time has none; that is not a difference."""
    def same(a: AddFile, b: AddFile) -> bool:
        if not a.timestamp:
            b = dataclasses.replace(b, timestamp=0)
        return a == b or (a.revision == b.revision and a.to_json(stored) == b.to_json(replayed))
    return same
