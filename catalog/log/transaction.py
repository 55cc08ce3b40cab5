"""The transaction log of one dataset: one object per commit under ``_log/``, checkpoints,
time travel and expiry (byte format: ``docs/FORMAT.md``).

:class:`TransactionLog` is the facade the rest of cdkds uses; each concern is its own module:

- :mod:`~cdkds.catalog.log.commit` — commit objects, their encoding and the log's clock;
- :mod:`~cdkds.catalog.log.listing` — listing ``_log/`` and reading commits, checkpoints and the hint;
- :mod:`~cdkds.catalog.log.replay` — replay and time travel, chain and hole checks;
- :mod:`~cdkds.catalog.log.committer` — committing with retry, catch-up and settling unknown outcomes;
- :mod:`~cdkds.catalog.log.checkpointer` — writing (and repairing) checkpoints;
- :mod:`~cdkds.catalog.log.expiry` — expiry and the files retained revisions reference.
"""

from __future__ import annotations

import uuid
from typing import Any, Mapping, Sequence

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import DatasetExistsError
from cdkds.catalog.log.actions import PARTED_CHECKPOINT_PROTOCOL, Action, BranchRef, SetMetadata, SetProtocol
from cdkds.catalog.log.checkpointer import DEFAULT_CHECKPOINT_INTERVAL, Checkpointer, checkpoint_interval
from cdkds.catalog.log.commit import LOG_FOLDER, Commit, HistoryEntry, commit_key, engine_info, next_timestamp
from cdkds.catalog.log.committer import Committer
from cdkds.catalog.log.conflicts import ConflictRule
from cdkds.catalog.log.expiry import LogExpiry, Removed, RetainedFiles
from cdkds.catalog.log.listing import LogListing, checkpoint_key
from cdkds.catalog.log.replay import Replay
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.mirror.runner import after_commit
from cdkds.catalog.storage import ObjectStore

__all__ = ["DEFAULT_CHECKPOINT_INTERVAL", "LOG_FOLDER", "Commit", "HistoryEntry", "TransactionLog",
           "checkpoint_interval", "checkpoint_key", "commit_key"]


class TransactionLog:
    """The commits and checkpoints of one dataset, under its store's ``_log/`` folder."""

    branch: BranchRef | None = None  # main's log (a branch's is a BranchLog)

    def __init__(self, store: ObjectStore, dataset: str):
        self.store = store
        self.dataset = dataset
        self.listing = LogListing(store, dataset)
        self.replay = Replay(self.listing)
        self.checkpointer = Checkpointer(self.listing)
        self.committer = Committer(self.replay, self.checkpointer)
        self.expiry = LogExpiry(self.replay)

    def exists(self) -> bool:
        """Commit 0 is never expired: it marks that the dataset exists."""
        return self.listing.exists()

    def snapshot(self, version: int | None = None, timestamp: Any = None) -> Snapshot:
        """The latest snapshot, the one at revision ``version``, or the last one at or before ``timestamp``."""
        return self.replay.snapshot(version, timestamp)

    def history(self) -> list[HistoryEntry]:
        """The retained commits, oldest first."""
        return self.replay.history()

    def entry(self, revision: int, before: Snapshot | None = None) -> HistoryEntry | None:
        """The history entry of commit ``revision``; ``None`` when it is not (or no longer) in the log.
        Given ``before``, the state at ``revision - 1``, it counts the rows the commit removed."""
        return self.replay.entry(revision, before)

    def landed(self, commit_uuid: str, after: int) -> int | None:
        """The revision after ``after`` holding commit ``commit_uuid``; ``None`` when a
        complete read of the log shows it absent (store and log errors propagate: unknown)."""
        return self.replay.landed(commit_uuid, after)

    def first_commit(self, descriptor: DatasetDescriptor, info: Mapping[str, Any] | None = None,
                     actions: Sequence[Action] = ()) -> Commit:
        """The commit 0 that :meth:`create` writes (``Snapshot.first`` of it is the dataset
        as created, for planning a write that creates the dataset only when it commits);
        ``actions``: what it holds after the descriptor (a conversion's files)."""
        descriptor = DatasetDescriptor.from_json(descriptor.to_json())  # as every reader of the log sees it
        if descriptor.has_past_specs or descriptor.partition_spec_id:  # (another dataset's): no file has them here
            descriptor = descriptor.replace(partition_specs={}, partition_spec_id=0)
        # the newest protocol: its checkpoints are read in part (keyed datasets and field ids need less)
        protocol = SetProtocol(PARTED_CHECKPOINT_PROTOCOL, PARTED_CHECKPOINT_PROTOCOL)
        return Commit(0, uuid.uuid4().hex, None, next_timestamp(0), "create", engine_info(info),
                      (protocol, SetMetadata(descriptor), *actions))

    def create(self, descriptor: DatasetDescriptor, info: Mapping[str, Any] | None = None,
               actions: Sequence[Action] = ()) -> Snapshot:
        commit = self.first_commit(descriptor, info, actions)
        try:
            self.store.put_if_absent(commit_key(0), commit.to_bytes(None))
        except FileExistsError:
            raise DatasetExistsError(f"dataset {self.dataset!r} already exists at {self.store.url}") from None
        snapshot = Snapshot.first(commit)
        after_commit(self, snapshot)
        return snapshot

    def commit(self, base: Snapshot, operation: str, actions: Sequence[Action],
               info: Mapping[str, Any] | None = None, commit_uuid: str | None = None,
               rule: ConflictRule | None = None, planned_on: int | None = None) -> Snapshot:
        """Append one commit after ``base``; returns the snapshot it makes.

        When other writers took the next revisions first, the commit is rebased onto
        theirs unless ``rule`` (default: a blind append) finds a conflict, which raises
        :class:`CommitConflictError` naming the commit that won. Raises
        :class:`CommitFailedError` when it is known not to have landed and
        :class:`CommitStateUnknownError` when that cannot be told. ``planned_on``: the
        revision the commit's files were written on, when ``base`` may have moved on since
        (a vacuum in between must not have deleted them, ``docs/FORMAT.md`` §4).
        """
        snapshot = self.committer.commit(base, operation, actions, info, commit_uuid, rule, planned_on)
        after_commit(self, snapshot)  # derived data, like the checkpoints the committer writes
        return snapshot

    def write_checkpoint(self, snapshot: Snapshot) -> Snapshot:
        """Write the checkpoint of ``snapshot`` (replacing a damaged one) and point the hint at it;
        returns ``snapshot`` read from the checkpoint's parts (see :meth:`Checkpointer.write`)."""
        return self.checkpointer.write(snapshot)

    def expire(self, older_than: Any, force: bool = False) -> Removed:
        """Remove commits and checkpoints older than a time from the start of the log (see :class:`LogExpiry`)."""
        return self.expiry.expire(older_than, force)

    def retained_files(self) -> set[str]:
        """Paths of the data files any retained or pinned revision references."""
        return self.expiry.retained_files()

    def retained(self) -> RetainedFiles:
        """The files the retained revisions reference, and those only pinned revisions do."""
        return self.expiry.retained()
