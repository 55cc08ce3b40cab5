"""Retention of the log: expiring its oldest commits and checkpoints, and the data files
the retained revisions reference (what garbage collection must keep).

A revision a tag pins (:meth:`Snapshot.pinned_revisions`) stays readable: expiry keeps its
checkpoint and the parts that checkpoint names, and the files live at it are retained;
both say in their result what they kept for it.
"""

from __future__ import annotations

import datetime as dt
import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping

from cdkds.catalog.errors import CdkdsError, CorruptLogError
from cdkds.catalog.log.actions import AddFile, AddIndex, DeleteRows
from cdkds.catalog.log.checkpointer import Checkpointer
from cdkds.catalog.log.commit import Commit, age_ms, commit_key, cutoff_millis
from cdkds.catalog.log import checkpoint
from cdkds.catalog.log.listing import EXPIRED_KEY, HINT_KEY, ExpiryMarker, Listing, checkpoint_key
from cdkds.catalog.log.parts import PARTS_FOLDER, part_revision
from cdkds.catalog.log.replay import Replay
from cdkds.catalog.log.snapshot import Snapshot

MINIMUM_LOG_AGE = dt.timedelta(hours=1)


class Removed(list):
    """The keys an expiry or a vacuum removed (or, on a dry run, would remove), as a list;
    ``kept``: a sentence for each thing it left only because a tag pins it."""

    def __init__(self, keys: Iterable[str] = (), kept: Iterable[str] = ()):
        super().__init__(keys)
        self.kept: tuple[str, ...] = tuple(kept)


@dataclass(frozen=True)
class RetainedFiles:
    """The files (data, record-index, deletion-vector sidecars) the retained log references
    (``paths``), and besides them those live at each pinned revision older than the retained
    log (``pinned``, by revision), with the refs that pin each revision (``refs``)."""

    paths: frozenset[str]
    pinned: Mapping[int, frozenset[str]]
    refs: Mapping[int, tuple[str, ...]]
    # by live branch: the files its commits reference (those it added are in no state of main)
    branched: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=dict)

    @property
    def every(self) -> frozenset[str]:
        """Every file a retained or pinned revision, or a live branch, references."""
        return self.paths.union(*self.pinned.values(), *self.branched.values())

    def kept(self, keys: Iterable[str], referenced: Iterable[str] = ()) -> list[str]:
        """A sentence for each pinned revision holding files of ``keys`` that nothing else
        (the retained log, ``referenced``) keeps."""
        others = self.paths | set(referenced)
        candidates = set(keys) - others
        out = []
        for revision, files in self.pinned.items():
            only = len(candidates & files)
            if only:
                out.append(f"kept {only} file(s) live at revision {revision} for {', '.join(self.refs[revision])}")
        for name, files in self.branched.items():
            only = len(candidates & files)
            if only:
                out.append(f"kept {only} file(s) that branch {name!r} references")
        return out


def files_of(snapshot: Snapshot) -> set[str]:
    """The files ``snapshot`` reads: its live data files, their deletion-vector sidecars and its record-index files."""
    paths = set(snapshot.files) | set(snapshot.index)
    paths.update(d.path for f in snapshot.files.values() for d in f.deletes if d.path)
    return paths


def referenced(commit: Commit) -> Iterator[str]:
    """The files ``commit`` adds: data and record-index files, deletion-vector sidecars."""
    for a in commit.actions:
        if isinstance(a, (AddFile, AddIndex)):
            yield a.path
        elif isinstance(a, DeleteRows) and a.vector.path:
            yield a.vector.path


class LogExpiry:
    """Expiry and retained files of one dataset's log."""

    def __init__(self, replay: Replay):
        self.replay = replay
        self.listing = replay.listing
        self.dataset = replay.dataset

    def expire(self, older_than: Any, force: bool = False) -> Removed:
        """Remove commits and checkpoints older than a time, from the start of the log only,
        and the checkpoint parts no retained checkpoint names.

        The newest readable checkpoint at or before the time is kept, so every revision from
        it on stays readable; commit 0 is kept as the dataset's birth record. A time less
        than :data:`MINIMUM_LOG_AGE` ago needs ``force``: a writer that read a revision
        about to be expired could otherwise still be committing after it. Returns the keys removed.
        """
        cutoff = cutoff_millis(older_than)
        if age_ms(cutoff) < MINIMUM_LOG_AGE.total_seconds() * 1000 and not force:
            raise CdkdsError(
                f"dataset {self.dataset!r}: expiring the log up to {older_than!r} is closer to now than the safe "
                f"minimum of {MINIMUM_LOG_AGE}: a writer that read a revision being expired could still commit "
                f"after it; pass force=True if no writer is running")
        ended = self._remove_ended_branches()
        listing = self.listing.list()
        keep = self.replay.checkpoint_at(cutoff, listing)
        if keep is None:
            return Removed(ended)
        keep, held = self._held_by_branches(keep)
        if keep is None:
            return Removed(ended, held)
        # checkpoints first, then commits oldest first: every intermediate state reads as expired up to a
        # retained checkpoint, never as a log with a hole
        doomed = [r for r in listing.checkpoints if r < keep.version]
        commits = [commit_key(r) for r in listing.commits if 0 < r < keep.version]
        if not doomed and not commits:
            return Removed(ended, held)
        self._check_parts(keep)
        ours = ExpiryMarker(keep.version, self._commit1_timestamp(listing))
        self._mark(ours)  # before any commit's name is freed: committers check it (committer.py)
        pins = self._pins(keep.version)
        self._pin(pins)
        self._hint_at_least(keep.version)
        # a tag may land between reading the pins and deleting: its checkpoint is put back (below)
        dropped = {r: self.listing.fetch(checkpoint_key(r)) for r in doomed if r not in pins}
        keys = [checkpoint_key(r) for r in dropped] + commits
        for key in keys:
            self.listing.store.delete(key)
        self._mark(ours)  # a concurrent expiry that read the marker before ours may have lowered it
        late = {r: refs for r, refs in self._pins(keep.version).items() if r not in pins}
        for revision in late:
            if dropped.get(revision) is not None:
                self.listing.store.put(checkpoint_key(revision), dropped[revision])
                keys.remove(checkpoint_key(revision))
        if late:  # its tagger may have moved the hint to its checkpoint before our marker
            self._hint_at_least(keep.version)
        pins = dict(sorted({**pins, **late}.items()))
        parts = self._unnamed_parts(keep.version)
        for key in parts:
            self.listing.store.delete(key)
        kept = [f"kept checkpoint {r} and the parts it names for {', '.join(refs)}" for r, refs in pins.items()]
        return Removed(ended + keys + parts, kept + held)

    def _remove_ended_branches(self) -> list[str]:
        """Delete the commit folders of branches that ended (published or dropped): nobody reads
        them. The folders are listed before the latest state is read, and a branch's folder is
        made only after its start landed, so a branch started meanwhile is never among them."""
        from cdkds.catalog.log.branches import BRANCHES_FOLDER
        store = self.listing.store
        folders = store.list(BRANCHES_FOLDER)
        if not folders:
            return []
        live = {b.id for b in self.replay.snapshot().branches.values()}
        removed = []
        for name in (f for f in folders if f not in live):
            removed += [f"{BRANCHES_FOLDER}/{name}/{key}" for key in store.list(f"{BRANCHES_FOLDER}/{name}")]
            store.delete_tree(f"{BRANCHES_FOLDER}/{name}")
        return removed

    def _held_by_branches(self, keep: Snapshot) -> tuple[Snapshot | None, list[str]]:
        """The state to keep the log from, no later than the oldest live branch's base: a
        publish replays the branch onto main's commits since its base, so they stay (with
        a sentence saying so). ``None`` when that base's checkpoint cannot be read."""
        branches = self.replay.snapshot().branches
        held = sorted((b.base, n) for n, b in branches.items() if b.base < keep.version)
        if not held:
            return keep, []
        base = held[0][0]
        names = ", ".join(f"branch {n!r}" for r, n in held if r == base)
        start = self.listing.checkpoint(base)  # written when the branch started
        sentence = f"kept the commits from revision {base} on for {names} (its publish is checked against them)"
        return start, [sentence if start is not None else f"expired nothing: checkpoint {base}, the base of "
                       f"{names}, cannot be read, and its publish is checked against the commits after it"]

    def _hint_at_least(self, oldest: int) -> None:
        """Point a hint older than ``oldest`` (the revision expiry keeps) at it: a stale hint
        naming a checkpoint kept for a tag would start readers of the latest where the commits
        after it are gone (an expired one would only be missing, and readers list the log)."""
        hint = self.listing.hint()
        if hint is not None and hint < oldest:
            self.listing.store.put(HINT_KEY, json.dumps({"revision": oldest}).encode())

    def _pins(self, oldest: int) -> dict[int, tuple[str, ...]]:
        """The pinned revisions older than ``oldest`` (the revision expiry keeps) other than 0, as
        of the latest revision."""
        return {r: refs for r, refs in self.replay.snapshot().pinned_revisions().items() if 0 < r < oldest}

    def _pin(self, pins: Mapping[int, tuple[str, ...]]) -> None:
        """Make sure each pinned revision below the one expiry keeps has a readable checkpoint
        (the commits it would be replayed from are about to go); one whose state can no longer
        be read is left as it is."""
        for revision in pins:
            if self.listing.checkpoint(revision) is not None:
                continue
            try:
                state = self.replay.snapshot(version=revision)
            except CdkdsError:
                continue
            Checkpointer(self.listing).write(state)

    def _check_parts(self, keep: Snapshot) -> None:
        """:class:`CorruptLogError` when a part of ``keep``, the checkpoint to keep, is missing:
        reads can go around it only from the commits before it, which expiring would delete."""
        parts = checkpoint.parts_of(keep) or ()
        if not parts:
            return
        store = self.listing.store
        there = {f"{PARTS_FOLDER}/{name}" for name in store.list(PARTS_FOLDER)}
        for part in parts:
            if part.key not in there:
                raise CorruptLogError(
                    f"dataset {self.dataset!r}: part {store.display(part.key)} of checkpoint {keep.version}, the "
                    f"one expiry would keep, is missing; reads can go around it only from the commits before it, "
                    f"so nothing was expired (cdkds check names the remedy)")

    def _unnamed_parts(self, oldest: int) -> list[str]:
        """The checkpoint parts no checkpoint names, of checkpoints older than ``oldest`` (the
        oldest retained): a checkpoint being written names parts of its own revision (new ones)
        or ones a present checkpoint names already. Every present checkpoint counts, the older
        ones too: those kept for a tag, or written for a tag that landed after the pins were
        read (a concurrent expiry's leftovers only keep their parts until the next expiry).
        None when a present checkpoint cannot be read: what it names is unknown."""
        store = self.listing.store
        old = [key for key in (f"{PARTS_FOLDER}/{name}" for name in store.list(PARTS_FOLDER))
               if (revision := part_revision(key)) is not None and revision < oldest]
        if not old:
            return []
        named: set[str] = set()
        for revision in self.listing.list().checkpoints:
            data = self.listing.fetch(checkpoint_key(revision))
            try:
                named.update(checkpoint.part_keys(data, self.listing.where(checkpoint_key(revision)))
                             if data is not None else ())
            except CorruptLogError:
                return []
        return [key for key in old if key not in named]

    def _commit1_timestamp(self, listing: Listing) -> int | None:
        """Commit 1's timestamp while it still exists: time travel needs it to tell revision 0 from
        an expired one. ``None`` when it is gone or damaged: no reader needs it, so it is expired all the same."""
        if 1 not in listing.commits:
            return None
        try:
            raw = self.listing.raw(1)
        except CorruptLogError:
            return None
        return None if raw is None else int(raw["timestamp"])

    def _mark(self, ours: ExpiryMarker) -> None:
        """Raise the expiry marker to say at least what ``ours`` says, and at least the oldest
        retained checkpoint: a concurrent expiry that kept a later one may have finished after
        we read the marker, and the commits below its checkpoint are gone (no store offers a
        compare-and-set here, so the log itself is the other witness)."""
        there = self.listing.expiry_marker() or ExpiryMarker()
        oldest = min(self.listing.list().checkpoints, default=0)
        merged = there.merge(ours).merge(ExpiryMarker(oldest))
        if merged != there:
            self.listing.store.put(EXPIRED_KEY, merged.to_bytes())

    def retained_files(self) -> set[str]:
        """Paths of the files any retained or pinned revision references (data files,
        record-index files, deletion-vector sidecars); fails (rather than answer from part of
        the log) when the log cannot be read whole."""
        return set(self.retained().every)

    def retained(self) -> RetainedFiles:
        """The files the retained revisions reference, and those of the pinned revisions older
        than them (read from their checkpoints); :class:`CorruptLogError` naming the revision and
        its tag when a pinned one cannot be read (which of its files to keep is unknown)."""
        start = latest = self.replay.oldest()
        paths = files_of(start)
        for commit, latest in self.replay.walk(start):
            paths.update(referenced(commit))
        refs = {r: refs for r, refs in latest.pinned_revisions().items() if r < start.version}
        pinned = {}
        for revision, names in refs.items():
            try:
                # pinned: its own checkpoint is its state wherever it lies
                state = self.listing.checkpoint(revision) or self.replay.snapshot(version=revision)
                pinned[revision] = frozenset(files_of(state))
            except CdkdsError as e:
                raise CorruptLogError(f"dataset {self.dataset!r}: revision {revision}, which {', '.join(names)} "
                                      f"keeps, cannot be read ({e}): which of its files to keep is unknown") from None
        return RetainedFiles(frozenset(paths), pinned, refs, self._branched(latest))

    def _branched(self, latest: Snapshot) -> dict[str, frozenset[str]]:
        """The files each live branch's commits reference (a branch keeps all its commits)."""
        from cdkds.catalog.log.branches import BranchLog
        out = {}
        for name, ref in latest.branches.items():
            replay = BranchLog(self.replay, ref).replay
            out[name] = frozenset(path for commit, _ in replay.walk(replay.base()) for path in referenced(commit))
        return out
