"""The transaction log: actions, commits and retry, snapshots and replay, checkpoints,
conflicts, expiry — and nothing else (see ``docs/FORMAT.md``)."""

from cdkds.catalog.log.transaction import (
    LOG_FOLDER, Commit, HistoryEntry, TransactionLog, checkpoint_interval, checkpoint_key, commit_key,
)

__all__ = ["Commit", "HistoryEntry", "LOG_FOLDER", "TransactionLog", "checkpoint_interval", "checkpoint_key",
           "commit_key"]
