"""Retention of the log: expiring its oldest commits and checkpoints, and the data files
the retained revisions reference (what garbage collection must keep)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from cdkds.catalog.errors import CdkdsError, CorruptLogError
from cdkds.catalog.log.actions import AddFile, AddIndex, DeleteRows
from cdkds.catalog.log.commit import age_ms, commit_key, cutoff_millis
from cdkds.catalog.log import checkpoint
from cdkds.catalog.log.listing import EXPIRED_KEY, ExpiryMarker, Listing, checkpoint_key
from cdkds.catalog.log.parts import PARTS_FOLDER, part_revision
from cdkds.catalog.log.replay import Replay
from cdkds.catalog.log.snapshot import Snapshot

MINIMUM_LOG_AGE = dt.timedelta(hours=1)


class LogExpiry:
    """Expiry and retained files of one dataset's log."""

    def __init__(self, replay: Replay):
        self.replay = replay
        self.listing = replay.listing
        self.dataset = replay.dataset

    def expire(self, older_than: Any, force: bool = False) -> list[str]:
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
        listing = self.listing.list()
        keep = self.replay.checkpoint_at(cutoff, listing)
        if keep is None:
            return []
        # checkpoints first, then commits oldest first: every intermediate state reads as expired up to a
        # retained checkpoint, never as a log with a hole
        doomed = [checkpoint_key(r) for r in listing.checkpoints if r < keep.version]
        doomed += [commit_key(r) for r in listing.commits if 0 < r < keep.version]
        if not doomed:
            return []
        self._check_parts(keep)
        ours = ExpiryMarker(keep.version, self._commit1_timestamp(listing))
        self._mark(ours)  # before any commit's name is freed: committers check it (committer.py)
        for key in doomed:
            self.listing.store.delete(key)
        self._mark(ours)  # a concurrent expiry that read the marker before ours may have lowered it
        parts = self._unnamed_parts(keep.version)
        for key in parts:
            self.listing.store.delete(key)
        return doomed + parts

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
        """The checkpoint parts no retained checkpoint names, of checkpoints older than ``oldest``
        (the oldest retained): a checkpoint being written names parts of its own revision (new
        ones) or ones a retained checkpoint names already. None when a retained checkpoint
        cannot be read: what it names is unknown."""
        store = self.listing.store
        old = [key for key in (f"{PARTS_FOLDER}/{name}" for name in store.list(PARTS_FOLDER))
               if (revision := part_revision(key)) is not None and revision < oldest]
        if not old:
            return []
        named: set[str] = set()
        for revision in self.listing.list().checkpoints:
            if revision < oldest:
                continue  # being expired meanwhile by a concurrent expiry
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
        """Paths of the files any retained revision references (data files, record-index
        files, deletion-vector sidecars); fails (rather than answer from part of the log)
        when the log cannot be read whole."""
        start = self.replay.oldest()
        paths = set(start.files) | set(start.index)
        paths.update(d.path for f in start.files.values() for d in f.deletes if d.path)
        for commit, _ in self.replay.walk(start):
            for a in commit.actions:
                if isinstance(a, (AddFile, AddIndex)):
                    paths.add(a.path)
                elif isinstance(a, DeleteRows) and a.vector.path:
                    paths.add(a.vector.path)
        return paths
