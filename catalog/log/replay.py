"""Replay and time travel: the state at a revision or a time, checked commit by commit.

The state at revision ``n`` is the newest readable checkpoint at or before ``n`` (or
commit 0) with the later commits up to ``n`` applied in order. A missing commit is the
end of the log only when nothing later exists; otherwise it is a hole, and reading fails.
"""

from __future__ import annotations

from typing import Any, Iterator

from cdkds.catalog.errors import CdkdsError, CorruptLogError, DatasetNotFoundError, InvalidTimeTravelError
from cdkds.catalog.log.actions import SetProtocol, check_readable
from cdkds.catalog.log.commit import Commit, HistoryEntry, millis, touched_files
from cdkds.catalog.log.listing import Listing, LogListing
from cdkds.catalog.log.snapshot import Snapshot


class Replay:
    """Snapshots of one dataset read from its log."""

    def __init__(self, listing: LogListing):
        self.listing = listing
        self.dataset = listing.dataset

    # ---------------------------------------------------------------- snapshots

    def snapshot(self, version: int | None = None, timestamp: Any = None) -> Snapshot:
        """The latest snapshot, the one at revision ``version``, or the last one at or before ``timestamp``."""
        if not self.listing.exists():
            raise self._not_found()
        if timestamp is not None:
            try:
                at = millis(timestamp)
            except InvalidTimeTravelError as e:
                raise InvalidTimeTravelError(f"dataset {self.dataset!r}: {e}") from None
            return self._at_time(at, timestamp)
        if version == 0:
            return self.first()
        start = self._start(version)
        try:
            snapshot = self.forward(start, upto=version)
        except CorruptLogError:
            listed = self._start(version, hinted=False)
            if listed.version == start.version:
                raise
            # a stale hint named a checkpoint the retained commits do not continue (one kept for a tag)
            snapshot = self.forward(listed, upto=version)
        if version is not None and snapshot.version != version:
            latest = self.snapshot().version
            raise InvalidTimeTravelError(
                f"dataset {self.dataset!r} has no revision {version}; its latest is {latest}" if version > latest else
                f"dataset {self.dataset!r}: revision {version} has been expired from the log")
        return snapshot

    def first(self) -> Snapshot:
        """The state commit 0 makes."""
        commit = self.listing.commit(0, None)
        if commit is None:
            raise self._not_found()
        snapshot = Snapshot.first(commit)
        check_readable(snapshot.protocol, f"dataset {self.dataset!r}")  # later commits: see walk
        if snapshot.descriptor is None:
            raise CorruptLogError(f"dataset {self.dataset!r}: commit 0 holds no descriptor")
        return snapshot

    def oldest(self) -> Snapshot:
        """The oldest retained state: commit 0's, or after expiry the oldest checkpoint the
        retained commits continue. Fails when that checkpoint is damaged or missing."""
        listing = self.listing.list()
        if not listing.expired:
            return self.first()
        covering = [r for r in listing.checkpoints if r >= listing.suffix_start - 1]
        start = self.listing.checkpoint(covering[0]) if covering else None
        if start is None:
            raise CorruptLogError(
                f"dataset {self.dataset!r}: commits 1 to {listing.suffix_start - 1} were expired, and "
                + (f"checkpoint {covering[0]}, the oldest retained state, is damaged" if covering else
                   "no checkpoint holds the state they led to"))
        return start

    def forward(self, snapshot: Snapshot, upto: int | None = None, until_ms: int | None = None,
                confirm_end: bool = True) -> Snapshot:
        """``snapshot`` moved forward to revision ``upto``, the last commit at or before
        ``until_ms``, or the end of the log. With ``confirm_end`` false, the first missing
        commit is taken for the end without listing the log to rule out a hole: one GET when
        nothing is new, for readers that refresh often and list the log now and then."""
        for _, snapshot in self.walk(snapshot, upto, until_ms, confirm_end):
            pass
        return snapshot

    def walk(self, snapshot: Snapshot, upto: int | None = None, until_ms: int | None = None,
             confirm_end: bool = True) -> Iterator[tuple[Commit, Snapshot]]:
        """Each later commit with the snapshot it makes, checking the chain (see :meth:`forward`)."""
        revision = snapshot.version + 1
        while upto is None or revision <= upto:
            commit = self.listing.commit(revision, snapshot.descriptor)
            if commit is None:
                if confirm_end and self._written_meanwhile(revision):
                    continue
                return
            if until_ms is not None and commit.timestamp > until_ms:
                return
            if commit.previous != snapshot.commit_uuid:
                raise CorruptLogError(
                    f"dataset {self.dataset!r}: commit {revision} follows {commit.previous!r}, but commit "
                    f"{revision - 1} is {snapshot.commit_uuid!r}; the log's chain is broken")
            for action in commit.actions:
                if isinstance(action, SetProtocol):
                    check_readable(action, f"dataset {self.dataset!r}")
            snapshot = snapshot.apply(commit)
            yield commit, snapshot
            revision += 1

    def landed(self, commit_uuid: str, after: int) -> int | None:
        """The revision after ``after`` at which the commit ``commit_uuid`` is in the log;
        ``None`` when a complete read of the log from there shows it absent. Errors of the
        store or the log propagate: then the answer is unknown."""
        revision = after + 1
        while True:
            raw = self.listing.raw(revision)
            if raw is None:
                if self._written_meanwhile(revision):
                    continue
                return None
            if raw["uuid"] == commit_uuid:
                return revision
            revision += 1

    def entry(self, revision: int, before: Snapshot | None = None) -> HistoryEntry | None:
        """The history entry of commit ``revision``; ``None`` when it is not (or no longer) in the log.
        Given ``before``, the state at ``revision - 1``, it counts the rows the commit removed."""
        raw = self.listing.raw(revision)
        if raw is None:
            return None
        if before is None or before.version != revision - 1:
            return HistoryEntry.of(raw)
        return HistoryEntry.of(raw, before.files.live_rows_of(touched_files([raw])))

    def history(self) -> list[HistoryEntry]:
        """The retained commits, oldest first."""
        listing = self.listing.list()
        raws = [raw for raw in (self.listing.raw(r) for r in listing.commits)
                if raw is not None]  # None: expired since the listing
        start, live_rows = self._live_rows_before(listing, raws)
        return [HistoryEntry.of(raw, live_rows if int(raw["revision"]) > start else {} if raw["revision"] == 0 else None)
                for raw in raws]

    def _live_rows_before(self, listing: Listing, raws: list[dict]) -> tuple[int, dict[str, int]]:
        """The revision after which the history counts removed rows, and the live rows then of
        the files later commits remove or delete rows of: nothing before commit 0, or after
        expiry the oldest retained state (a checkpoint), looked up column-wise."""
        if not listing.expired:
            return -1, {}
        try:
            oldest = self.oldest()
        except CdkdsError:  # the history still lists the commits, without their removed rows
            return max(int(raw["revision"]) for raw in raws), {}
        return oldest.version, oldest.files.live_rows_of(touched_files(raw for raw in raws
                                                                        if int(raw["revision"]) > oldest.version))

    # ---------------------------------------------------------------- internals

    def _written_meanwhile(self, revision: int) -> bool:
        """Whether the missing commit ``revision`` has appeared since it was read; raises
        :class:`CorruptLogError` when it is still missing but something later exists."""
        listing = self.listing.list()
        if revision in listing.commits:
            return True
        later = listing.beyond(revision)
        if later is not None:
            raise CorruptLogError(
                f"dataset {self.dataset!r}: commit {self.listing.store.display(self.listing.commit_key(revision))} is "
                f"missing but {later} exists; the log has a hole")
        return False

    def _start(self, upto: int | None, hinted: bool = True) -> Snapshot:
        """The newest readable state at or before ``upto`` to replay from (without ``hinted``,
        found by listing the log rather than from the checkpoint hint)."""
        hint = self.listing.hint() if hinted else None
        if hint is not None and (upto is None or hint <= upto):
            start = self.listing.checkpoint(hint)
            if start is not None:
                return start
        listing = self.listing.list()
        if upto is not None and upto < listing.replay_start and upto in listing.checkpoints and \
                upto in self.snapshot().pinned_revisions() and (start := self.listing.checkpoint(upto)) is not None:
            return start  # a tagged revision's own checkpoint below the retained log (once untagged, it is expired)
        candidates = [r for r in listing.replayable_checkpoints if upto is None or r <= upto]
        for revision in reversed(candidates):
            start = self.listing.checkpoint(revision)
            if start is not None:
                return start
        self._check_not_expired(listing, candidates, "the latest revision" if upto is None else f"revision {upto}")
        return self.first()

    def _at_time(self, until: int, given: Any) -> Snapshot:
        first = self.first()
        if first.timestamp > until:
            raise InvalidTimeTravelError(f"dataset {self.dataset!r} has no revision at or before {given!r}; "
                                         f"it was created at {first.timestamp} ms")
        listing = self.listing.list()
        start = self.checkpoint_at(until, listing)
        if start is None:
            if listing.expired and until < self._commit1_timestamp(first):
                return first  # commit 1 is later than the time: revision 0 is the answer, and it is kept
            if listing.expired:  # the checkpoints are all later than the time, or damaged
                damaged = [r for r in listing.checkpoints if self.listing.checkpoint(r) is None]
                self._check_not_expired(listing, damaged, f"the revision at {given!r}")
            start = first
        return self.forward(start, until_ms=until)

    def _commit1_timestamp(self, first: Snapshot) -> int:
        """Commit 1's timestamp once it is expired, as the expiry marker recorded it; without it,
        the earliest it can have been (timestamps grow strictly along the log)."""
        marker = self.listing.expiry_marker()
        known = marker.commit1_timestamp if marker is not None else None
        return known if known is not None else first.timestamp + 1

    def checkpoint_at(self, until: int, listing: Listing) -> Snapshot | None:
        """The state of the newest readable checkpoint whose commit is at or before ``until``
        (ms); timestamps grow with revisions, so a binary search over the listed checkpoints."""
        candidates = list(listing.replayable_checkpoints)  # one kept for a tag below them has no commits after it
        best = None
        lo, hi = 0, len(candidates) - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            state = self.listing.checkpoint(candidates[mid])
            if state is None:  # damaged or gone: search the others
                del candidates[mid]
                hi -= 1
            elif state.timestamp <= until:
                best, lo = state, mid + 1
            else:
                hi = mid - 1
        return best

    def _check_not_expired(self, listing: Listing, damaged: list[int], what: str) -> None:
        """Replaying from commit 0 is wrong once a prefix of the log has been expired."""
        if not listing.expired:
            return
        if damaged:
            raise CorruptLogError(
                f"dataset {self.dataset!r}: {what} cannot be read: checkpoint {damaged[-1]} is damaged and the "
                f"commits before it have been expired")
        raise InvalidTimeTravelError(f"dataset {self.dataset!r}: {what} has been expired from the log")

    def _not_found(self) -> DatasetNotFoundError:
        return DatasetNotFoundError(f"dataset {self.dataset!r} does not exist at {self.listing.store.url}")
