"""Committing: put-if-absent of the next revision, retry and catch-up, and never an
acknowledgement the log does not show.

The outcome of every commit is one of three: it landed (a snapshot is returned), it is
known not to have landed (:class:`CommitFailedError`, of which :class:`CommitConflictError`
is one: its data files may be deleted), or it cannot be told
(:class:`CommitStateUnknownError`: its data files must stay). A PUT that failed may have
landed, so the commit is settled by reading the log back before anything is reported.

A commit must also be reachable: a writer that read an old revision may find the name of
an expired commit free again (expiry deletes commits below the newest old checkpoint), and
its put-if-absent would succeed in a gap no reader replays. When the revision it built on
is old enough to have been expired, or the expiry marker (one small read per commit) says
commits after it were expired, a LIST and a walk forward check that every later commit
descends from ours; otherwise the commit is deleted and reported as a conflict
(``docs/RELIABILITY.md``, "The expired gap").

And a commit must not acknowledge files a vacuum deleted: a commit meeting a vacuum's trace
(in its catch-up, or between the revision its files were written on and its base) checks
its own files against it (:mod:`cdkds.catalog.log.vacuum_trace`).
"""

from __future__ import annotations

import random
import time
import uuid
from typing import Any, Mapping, Sequence

from cdkds.catalog.errors import (
    CommitConflictError, CommitFailedError, CommitStateUnknownError, ConcurrentRewriteError, CorruptLogError,
    StorageError,
)
from cdkds.catalog.log.actions import Action, AddFile, rebase_actions
from cdkds.catalog.log.checkpointer import Checkpointer
from cdkds.catalog.log.commit import REWRITE_OPERATION, Commit, age_ms, engine_info, next_timestamp
from cdkds.catalog.log.conflicts import BlindAppend, ConflictRule
from cdkds.catalog.log.replay import Replay
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.log.vacuum_trace import cutoff_of, endangered, files_at_risk

# Each lost race means another writer's commit landed, so the log progresses; a writer that
# keeps losing (its rivals, already caught up by their own commits, go again at once) keeps
# trying for MAX_COMMIT_SECONDS, and at least MAX_COMMIT_ATTEMPTS times, before giving up.
MAX_COMMIT_ATTEMPTS = 20
MAX_COMMIT_SECONDS = 60.0
MAX_STORE_FAILURES = 5  # transient store errors tolerated in one commit
SETTLE_ATTEMPTS = 3  # reads of the log to learn whether a failed PUT landed
GAP_CHECK_AGE_MS = 30 * 60 * 1000  # half of expiry's minimum age: tolerates clocks up to 30 minutes apart
# the store's failures (catalog/storage.py raises StorageError for all of them; OSError is kept
# for stores wrapped outside it): none tells whether a PUT landed, the read-back does
_TRANSIENT = (StorageError, OSError, TimeoutError)


class Committer:
    """Appends commits to one dataset's log (or to one branch's: ``replay`` says which)."""

    def __init__(self, replay: Replay, checkpointer: Checkpointer | None):
        self.replay = replay
        self.listing = replay.listing
        self.store = replay.listing.store
        self.dataset = replay.dataset
        self.checkpointer = checkpointer

    def commit(self, base: Snapshot, operation: str, actions: Sequence[Action],
               info: Mapping[str, Any] | None = None, commit_uuid: str | None = None,
               rule: ConflictRule | None = None, planned_on: int | None = None) -> Snapshot:
        """Append one commit after ``base``; returns the snapshot it makes (see the module docstring).
        ``planned_on``: the revision its files were written on, when ``base`` may be later."""
        attempt = _Attempt(self, base, operation, tuple(actions), engine_info(info), commit_uuid or uuid.uuid4().hex,
                           rule or BlindAppend(), planned_on)
        snapshot = attempt.run()
        if self.checkpointer is None:  # a branch's log: no checkpoints of its own
            return snapshot
        return self.checkpointer.after_commit(snapshot)  # read from the checkpoint's parts when it wrote some

    def accept(self, commit: Commit, before: Snapshot) -> Snapshot:
        """The snapshot ``commit`` (ours, in the log) makes after ``before``, once it is known
        to be reachable; a commit in an expired gap is deleted and reported as a conflict."""
        try:
            reachable = not self._may_be_in_a_gap(before) or self._reachable(commit)
        except CommitStateUnknownError:
            raise
        except Exception as e:  # noqa: BLE001 - whatever failed, the outcome is not known
            raise CommitStateUnknownError(self.dataset, commit.revision, commit.uuid, e) from e
        if not reachable:
            try:
                self.store.delete(self.listing.commit_key(commit.revision))
            except Exception:  # noqa: BLE001 - left behind, it stays unreachable; the next expiry removes it
                pass
            raise CommitConflictError(
                f"dataset {self.dataset!r}: {commit.operation!r} planned on revision {before.version} was written "
                f"as revision {commit.revision}, but the log had been expired past it (revision "
                f"{before.version} is older than the newest retained checkpoint); nothing of "
                f"{commit.operation!r} was committed — re-read the dataset and retry")
        return before.apply(commit)

    def _may_be_in_a_gap(self, before: Snapshot) -> bool:
        """Whether a commit built on ``before`` may have taken the name of an expired commit: its
        base is old enough for an unforced expiry, or the expiry marker (one small read) says
        commits after it were expired. Otherwise no checkpoint can cover the commit's revision."""
        if age_ms(before.timestamp) >= GAP_CHECK_AGE_MS:
            return True
        marker = self.listing.expiry_marker()
        return marker is None or marker.expired_before > before.version

    def _reachable(self, commit: Commit) -> bool:
        """Whether readers replay ``commit``: every later commit descends from it (so no checkpoint
        of another history covers it), or, when an expiry removed it meanwhile, the oldest retained
        state holds its files. :class:`CommitStateUnknownError` when neither can be told."""
        listing = self.listing.list()
        if commit.revision not in listing.commits:
            return self._in_oldest_state(commit)
        previous = commit.uuid
        for revision in range(commit.revision + 1, max(listing.commits) + 1):
            raw = self.listing.raw(revision)
            if raw is None and not self.store.exists(self.listing.commit_key(commit.revision)):
                return self._in_oldest_state(commit)  # expired from under us while we read
            if raw is None or raw["previous"] != previous:
                return False
            previous = raw["uuid"]
        return True

    def _in_oldest_state(self, commit: Commit) -> bool:
        """Our commit was expired after it landed: it was reachable if the oldest retained
        checkpoint, which its expiry kept, holds a file it added."""
        state = self.replay.oldest()
        added = [a.path for a in commit.actions if isinstance(a, AddFile)]
        if any(p in state.files and state.files[p].revision == commit.revision for p in added):
            return True
        raise CommitStateUnknownError(self.dataset, commit.revision, commit.uuid,
                                      "an expiry removed it before it could be confirmed reachable")


class _Attempt:
    """One commit's attempts: the state the retry loop carries."""

    def __init__(self, committer: Committer, base: Snapshot, operation: str, actions: tuple[Action, ...],
                 info: Mapping[str, Any], commit_uuid: str, rule: ConflictRule, planned_on: int | None = None):
        self.committer = committer
        self.dataset = committer.dataset
        self.base = base
        self.operation = operation
        self.actions = actions
        self.info = info
        self.uuid = commit_uuid
        self.rule = rule
        self.current = base
        self.planned_on = planned_on
        self.unsettled: int | None = None  # the revision of a PUT that failed and may have landed

    def run(self) -> Snapshot:
        try:
            return self._attempts()
        except CommitFailedError:
            raise
        except Exception as e:  # an interrupt propagates as it is: the caller keeps the files
            if self.unsettled is not None:
                return self._settle(e)
            if isinstance(e, _TRANSIENT):  # no PUT of ours can have landed
                raise CommitFailedError(f"dataset {self.dataset!r}: committing {self.operation!r} failed on the "
                                        f"object store ({e}); nothing of it was committed") from e
            raise

    def _attempts(self) -> Snapshot:
        if self.planned_on is not None and self.planned_on < self.base.version:
            self.check_vacuums(self.planned_on)
        failures, attempt, start = 0, 0, time.monotonic()
        while attempt < MAX_COMMIT_ATTEMPTS or time.monotonic() - start < MAX_COMMIT_SECONDS:
            commit = Commit(self.current.version + 1, self.uuid, self.current.commit_uuid,
                            next_timestamp(self.current.timestamp), self.operation, self.info, self.actions)
            try:
                data = commit.to_bytes(self.current.descriptor)
                self.committer.store.put_if_absent(self.committer.listing.commit_key(commit.revision), data)
            except FileExistsError:
                pass
            except _TRANSIENT as e:  # the object may or may not be there
                self.unsettled = commit.revision
                failures += 1
                if failures > MAX_STORE_FAILURES:
                    return self._settle(e, f"failed {failures} times on the object store (the last: {e})")
            else:
                self.unsettled = commit.revision
                return self.committer.accept(commit, self.current)
            landed = self._catch_up(commit)
            if landed is not None:
                return landed  # an earlier attempt landed though its acknowledgement was lost
            time.sleep(random.uniform(0, min(0.2, 0.005 * 2 ** min(attempt, 10))))
            attempt += 1
        raise CommitConflictError(f"dataset {self.dataset!r}: gave up committing {self.operation!r} after "
                                  f"{attempt} attempts in {time.monotonic() - start:.0f} s lost to concurrent writers")

    def check_vacuums(self, planned_on: int) -> None:
        """:class:`CommitConflictError` when a vacuum between revision ``planned_on`` (when the
        files were written) and the base, which the catch-up will not walk, endangers our files."""
        for revision in range(planned_on + 1, self.base.version + 1):
            raw = self.committer.listing.raw(revision)
            if raw is None:  # expired since: whether a vacuum ran there cannot be told, so check the files exist
                reason = files_at_risk(self.committer.store, self.actions, 0)
            else:
                cutoff = cutoff_of(raw["operation"], raw.get("info") or {})
                reason = None if cutoff is None else files_at_risk(self.committer.store, self.actions, cutoff)
            if reason is not None:
                raise CommitConflictError(
                    f"dataset {self.dataset!r}: {self.operation!r}, whose files were written on revision "
                    f"{planned_on}, conflicts with revision {revision} ('vacuum'), committed since: {reason}; "
                    f"nothing of {self.operation!r} was committed — write it again")

    def _catch_up(self, ours: Commit) -> Snapshot | None:
        """Apply the commits others made since ``current``; the snapshot of ours if it is among them."""
        for theirs, after in self.committer.replay.walk(self.current):
            if theirs.uuid == ours.uuid:
                return self.committer.accept(theirs, self.current)
            if theirs.revision == self.unsettled:
                self.unsettled = None  # that revision is someone else's: our PUT there did not land
            reason = self.rule.conflict(ours.actions, theirs, self.base) or endangered(
                self.committer.store, ours.actions, theirs, self.rule.referenced_before)
            if reason is not None:
                kind = ConcurrentRewriteError if theirs.operation == REWRITE_OPERATION else CommitConflictError
                raise kind(
                    f"dataset {self.dataset!r}: {ours.operation!r} planned on revision {self.base.version} conflicts "
                    f"with revision {theirs.revision} ({theirs.operation!r}), which committed first: {reason}; "
                    f"nothing of {ours.operation!r} was committed — re-read the dataset and retry")
            self.actions = rebase_actions(self.actions, self.current.descriptor, after.descriptor)
            self.current = after
        return None

    def _settle(self, error: BaseException, what: str = "") -> Snapshot:
        """Read the log back after a PUT that may have landed: our snapshot if it did,
        :class:`CommitFailedError` if it did not, :class:`CommitStateUnknownError` if the
        log cannot be read."""
        last: BaseException = error
        for attempt in range(SETTLE_ATTEMPTS):
            try:
                revision = self.committer.replay.landed(self.uuid, self.current.version)
                if revision is not None:
                    before = self.committer.replay.forward(self.current, upto=revision - 1)
                    ours = self.committer.listing.commit(revision, before.descriptor)
                    if ours is None or before.version != revision - 1:
                        raise CorruptLogError(f"dataset {self.dataset!r}: commit {revision} vanished while read back")
                    return self.committer.accept(ours, before)
            except (*_TRANSIENT, CorruptLogError) as e:
                last = e
                time.sleep(0.05 * 2 ** attempt)
                continue
            raise CommitFailedError(f"dataset {self.dataset!r}: committing {self.operation!r} "
                                    f"{what or f'failed ({error})'}; the log, read back, does not hold it: "
                                    f"nothing of it was committed") from error
        raise CommitStateUnknownError(self.dataset, self.unsettled if self.unsettled is not None else -1,
                                      self.uuid, last) from last
