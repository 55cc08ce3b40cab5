"""Reading the log's objects: the listing of ``_log/``, commits, checkpoints and the hint.

Every reader of a checkpoint goes through :meth:`LogListing.checkpoint`: a damaged one
is reported (:class:`CorruptLogWarning`) and read as absent, so callers fall back to an
older state instead of failing or trusting it.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import CorruptLogError, CorruptLogWarning
from cdkds.catalog.log import checkpoint
from cdkds.catalog.log.commit import LOG_FOLDER, Commit, commit_key, commit_revision
from cdkds.catalog.log.parts import StoredParts
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.storage import ObjectStore

HINT_KEY = f"{LOG_FOLDER}/{checkpoint.LAST_CHECKPOINT}"
EXPIRED_KEY = f"{LOG_FOLDER}/_expired"


def checkpoint_key(revision: int) -> str:
    return f"{LOG_FOLDER}/{checkpoint.checkpoint_name(revision)}"


@dataclass(frozen=True)
class Listing:
    """The revisions of the commits and of the checkpoints in ``_log/`` at one LIST, ascending."""

    commits: tuple[int, ...]
    checkpoints: tuple[int, ...]

    @property
    def expired(self) -> bool:
        """Whether a prefix of the log was expired: commit 1 is gone and a checkpoint starts the rest."""
        return 1 not in self.commits and any(r > 0 for r in self.checkpoints)

    @property
    def suffix_start(self) -> int:
        """The oldest revision from which every commit up to the latest is present."""
        present = set(self.commits)
        start = max(self.commits, default=0)
        while start - 1 in present:
            start -= 1
        return start

    @property
    def replay_start(self) -> int:
        """The oldest revision a replay to the latest can start from: 0, or once the log is
        expired the revision before its oldest commit after 0. A checkpoint below it (one kept
        for a tag) is the state of its own revision only: the commits after it are gone."""
        if not self.expired:
            return 0
        later = [r for r in self.commits if r > 0]
        return later[0] - 1 if later else max(self.checkpoints)

    @property
    def replayable_checkpoints(self) -> tuple[int, ...]:
        """The checkpoints at or after :attr:`replay_start`: those later revisions can be replayed from."""
        start = self.replay_start
        return tuple(r for r in self.checkpoints if r >= start)

    def retained_start(self, expired_before: int) -> int:
        """The checkpoint the retained log starts at once a prefix of it was expired: the oldest
        replayable one at or after ``expired_before`` (what the newest expiry kept, as its marker
        says). One below it was kept for a tag: the state of its own revision, whose commit is
        gone. Without such a checkpoint, the oldest replayable one (or the oldest at all)."""
        replayable = [r for r in self.replayable_checkpoints if r > 0]
        return min([r for r in replayable if r >= expired_before] or replayable or
                   [r for r in self.checkpoints if r > 0])

    def beyond(self, revision: int) -> str | None:
        """An object that could only exist if commit ``revision`` had been written: a later
        commit, or a checkpoint at or after it (``None`` when there is none)."""
        later = [f"commit {r}" for r in self.commits if r > revision][:1]
        later += [f"checkpoint {r}" for r in self.checkpoints if r >= revision][:1]
        return later[0] if later else None


@dataclass(frozen=True)
class ExpiryMarker:
    """What expiry leaves beside the log (``_log/_expired``, ``docs/FORMAT.md`` §4): the commits
    before ``expired_before`` have been (or are being) deleted, and ``commit1_timestamp`` is
    the timestamp commit 1 had (``None`` when it was unknown to the expiry that wrote it)."""

    expired_before: int = 0
    commit1_timestamp: int | None = None

    def to_bytes(self) -> bytes:
        return json.dumps({"expiredBefore": self.expired_before, "commit1Timestamp": self.commit1_timestamp}).encode()

    @staticmethod
    def from_bytes(data: bytes) -> "ExpiryMarker":
        raw = json.loads(data)
        first = raw.get("commit1Timestamp")
        return ExpiryMarker(int(raw["expiredBefore"]), None if first is None else int(first))

    def merge(self, other: "ExpiryMarker") -> "ExpiryMarker":
        """The marker that says both: it is never lowered."""
        return ExpiryMarker(max(self.expired_before, other.expired_before),
                            self.commit1_timestamp if self.commit1_timestamp is not None else other.commit1_timestamp)


class LogListing:
    """The commits, checkpoints and checkpoint hint of one dataset's ``_log/`` folder; given
    another ``folder`` (a branch's, ``_log/_branches/<id>``), the commits are that folder's."""

    def __init__(self, store: ObjectStore, dataset: str, folder: str = LOG_FOLDER):
        self.store = store
        self.dataset = dataset
        self.folder = folder

    def commit_key(self, revision: int) -> str:
        """The key of commit ``revision`` in this listing's folder."""
        return commit_key(revision) if self.folder == LOG_FOLDER else f"{self.folder}/{revision:020d}.json"

    def list(self) -> Listing:
        commits, checkpoints = [], []
        for name in self.store.list(self.folder):
            if (revision := commit_revision(name)) is not None:
                commits.append(revision)
            elif (revision := checkpoint.checkpoint_revision(name)) is not None:
                checkpoints.append(revision)
        return Listing(tuple(sorted(commits)), tuple(sorted(checkpoints)))

    def exists(self) -> bool:
        """Commit 0 is never expired: it marks that the dataset exists."""
        return self.store.exists(commit_key(0))  # main's, whatever the folder

    def where(self, key: str) -> str:
        return f"{self.store.display(key)} of dataset {self.dataset!r}"

    def fetch(self, key: str) -> bytes | None:
        try:
            return self.store.read(key)
        except FileNotFoundError:
            return None

    # ---------------------------------------------------------------- commits

    def raw(self, revision: int) -> dict | None:
        """Commit ``revision``'s checked JSON (see :meth:`Commit.parse`), ``None`` if absent."""
        data = self.fetch(self.commit_key(revision))
        if data is None:
            return None
        raw = Commit.parse(data, self.where(self.commit_key(revision)))
        self._check_revision(raw["revision"], revision)
        return raw

    def commit(self, revision: int, descriptor: DatasetDescriptor | None) -> Commit | None:
        """Commit ``revision``, its actions decoded with ``descriptor``; ``None`` if absent."""
        data = self.fetch(self.commit_key(revision))
        if data is None:
            return None
        commit = Commit.from_bytes(data, descriptor, self.where(self.commit_key(revision)))
        self._check_revision(commit.revision, revision)
        return commit

    def _check_revision(self, says: object, revision: int) -> None:
        if says != revision:
            raise CorruptLogError(f"dataset {self.dataset!r}: {self.store.display(self.commit_key(revision))} "
                                  f"says it is revision {says}")

    # ---------------------------------------------------------------- checkpoints

    def checkpoint(self, revision: int) -> Snapshot | None:
        """The state checkpoint ``revision`` holds; ``None`` when it is absent or damaged."""
        data = self.fetch(checkpoint_key(revision))
        return self.decode_checkpoint(data, revision) if data is not None else None

    def decode_checkpoint(self, data: bytes, revision: int) -> Snapshot | None:
        """The state in a checkpoint object's bytes; ``None`` (and a warning) when they are damaged."""
        where = self.where(checkpoint_key(revision))
        try:
            snapshot = checkpoint.decode(data, where, StoredParts(self.store, where, checkpoint_key(revision)))
            if snapshot.version != revision:
                raise CorruptLogError(f"checkpoint {where} says it is revision {snapshot.version}")
            return snapshot
        except CorruptLogError as e:
            warnings.warn(f"{e}; reading around it", CorruptLogWarning, stacklevel=4)
            return None

    def expiry_marker(self) -> ExpiryMarker | None:
        """The marker expiry left (an empty one when the log was never expired); ``None`` when
        it is unreadable, so callers assume the worst."""
        data = self.fetch(EXPIRED_KEY)
        try:
            return ExpiryMarker.from_bytes(data) if data is not None else ExpiryMarker()
        except (ValueError, KeyError, TypeError):
            warnings.warn(f"dataset {self.dataset!r}: the _expired marker is unreadable", CorruptLogWarning,
                          stacklevel=3)
            return None

    def hint(self) -> int | None:
        """The revision ``_last_checkpoint`` names; ``None`` when it is missing or unreadable."""
        data = self.fetch(HINT_KEY)
        try:
            return int(json.loads(data)["revision"]) if data is not None else None
        except (ValueError, KeyError, TypeError):
            warnings.warn(f"dataset {self.dataset!r}: the _last_checkpoint hint is unreadable; listing the log instead",
                          CorruptLogWarning, stacklevel=3)
            return None
