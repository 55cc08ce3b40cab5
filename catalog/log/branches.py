"""Branches: lines of commits that continue main's state at one revision (``docs/FORMAT.md`` §12).

Main's commit ``{"branch": {"name", "base", "id"}}`` starts branch ``name`` at its own
revision ``base``; the branch's commits are ``_log/_branches/<id>/<revision>.json``,
revisions ``base + 1`` on, the first following main's commit ``base``. A branch's log is
main's log given another folder and another start: the same listing, replay, committer
and conflict rules serve it (:class:`BranchLog`), so its commits race each other under
the usual put-if-absent rule, and main's readers never list its folder.

Starting, ending and publishing a branch are commits on main (:func:`start_branch`,
:func:`end_branch`, :func:`publish_branch`).
"""

from __future__ import annotations

import uuid
import warnings
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from cdkds.catalog.errors import (
    CommitConflictError, CommitFailedError, CorruptLogWarning, InvalidTimeTravelError, RefError, RefExistsError,
    RefNotFoundError,
)
from cdkds.catalog.log.actions import (
    LAYOUT_PROTOCOL, PARTED_CHECKPOINT_PROTOCOL, Action, BranchRef, DropBranch, SetProtocol,
)
from cdkds.catalog.log.commit import LOG_FOLDER, Commit, HistoryEntry, engine_info, next_timestamp
from cdkds.catalog.log.committer import Committer
from cdkds.catalog.log.conflicts import BlindAppend, ConflictRule
from cdkds.catalog.log.listing import LogListing
from cdkds.catalog.log.replay import Replay
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.log.tags import TAG_NAME
from cdkds.catalog.log.vacuum_trace import cutoff_of, files_at_risk

if TYPE_CHECKING:
    from cdkds.catalog.log.transaction import TransactionLog

BRANCHES_FOLDER = f"{LOG_FOLDER}/_branches"
MAIN = "main"  # the name of the line every dataset has; no branch may take it
SEAL_OPERATION = "seal"  # an empty branch commit: a publish or a drop of the branch began
UNSEAL_OPERATION = "unseal"  # an empty branch commit right after a seal: that publish or drop failed
SEAL_ATTEMPTS = 20  # seals lost to the branch's writers before a publish or a drop gives up
START_ATTEMPTS = 5  # a branch must start at the revision its commit lands on: planned again when another lands first


def branch_folder(ref: BranchRef) -> str:
    """The folder of branch ``ref``'s commits."""
    return f"{BRANCHES_FOLDER}/{ref.id}"


def check_branch_name(dataset: str, name: Any) -> str:
    """``name`` when it can name a branch (as it could a tag, and not ``main``); :class:`RefError`
    naming the dataset and the name otherwise."""
    if not isinstance(name, str) or not TAG_NAME.fullmatch(name) or name == MAIN:
        raise RefError(f"dataset {dataset!r}: {name!r} is not a valid branch name (1 to 128 letters, digits, '.', "
                       f"'_' or '-', starting with a letter or digit, and not main)")
    return name


def live_branch(snapshot: Snapshot, dataset: str, name: Any) -> BranchRef:
    """The live branch ``name`` of ``snapshot``; :class:`RefNotFoundError` naming it otherwise."""
    check_branch_name(dataset, name)
    ref = snapshot.branches.get(name)
    if ref is None:
        known = ", ".join(sorted(snapshot.branches)) or "none"
        raise RefNotFoundError(f"dataset {dataset!r} has no branch {name!r} (as of revision {snapshot.version}; "
                               f"its live branches: {known})")
    return ref


class BranchReplay(Replay):
    """Snapshots of one branch: main's state at the branch's base, then the branch's commits."""

    def __init__(self, listing: LogListing, main: Replay, ref: BranchRef):
        super().__init__(listing)
        self.main = main
        self.ref = ref
        self._base: Snapshot | None = None

    def base(self) -> Snapshot:
        """Main's state at the branch's base (it never changes, so it is read once)."""
        if self._base is None:
            self._base = self.main.snapshot(self.ref.base)
        return self._base

    def snapshot(self, version: int | None = None, timestamp: Any = None) -> Snapshot:
        where = f"dataset {self.dataset!r}, branch {self.ref.name!r}"
        if timestamp is not None:
            raise InvalidTimeTravelError(f"{where}: time travel by timestamp is not offered on a branch; give a version")
        if version is not None and version < self.ref.base:
            raise InvalidTimeTravelError(f"{where} starts at revision {self.ref.base}; it has no revision {version} "
                                         f"(read main for it)")
        snapshot = self.forward(self.base(), upto=version)
        if version is not None and snapshot.version != version:
            raise InvalidTimeTravelError(f"{where} has no revision {version}; its latest is {snapshot.version}")
        return snapshot

    def first(self) -> Snapshot:
        return self.main.first()

    def oldest(self) -> Snapshot:
        return self.base()

    def history(self) -> list[HistoryEntry]:
        """Main's commits up to the base, then the branch's."""
        return [e for e in self.main.history() if e.revision <= self.ref.base] + super().history()


class BranchLog:
    """The log of one branch: main's log classes over the branch's folder and start. Branches
    keep no checkpoints and no mirrors, and are neither expired nor vacuumed on their own."""

    def __init__(self, main: Replay, ref: BranchRef):
        self.main = main  # main's replay
        self.branch = ref
        self.store = main.listing.store
        self.dataset = main.dataset
        self.listing = LogListing(self.store, self.dataset, branch_folder(ref))
        self.replay = BranchReplay(self.listing, main, ref)
        self.committer = Committer(self.replay, None)
        self.main_seen: int | None = None  # main's latest revision when this branch was last committed to or checked

    def exists(self) -> bool:
        return self.main.listing.exists()

    def snapshot(self, version: int | None = None, timestamp: Any = None) -> Snapshot:
        return self.replay.snapshot(version, timestamp)

    def history(self) -> list[HistoryEntry]:
        return self.replay.history()

    def entry(self, revision: int, before: Snapshot | None = None) -> HistoryEntry | None:
        return self.replay.entry(revision, before)

    def landed(self, commit_uuid: str, after: int) -> int | None:
        return self.replay.landed(commit_uuid, after)

    def commit(self, base: Snapshot, operation: str, actions: Sequence[Action],
               info: Mapping[str, Any] | None = None, commit_uuid: str | None = None,
               rule: ConflictRule | None = None, planned_on: int | None = None) -> Snapshot:
        """Append one commit to the branch (see :meth:`TransactionLog.commit`); :class:`RefNotFoundError`
        when the branch was published or dropped meanwhile (its commits would be read by nobody)."""
        self.check_live(actions, operation)
        self._check_not_sealed(base, operation)
        return self.committer.commit(base, operation, actions, info, commit_uuid,
                                     Sealed(self.branch.name, rule, self.lifted), planned_on)

    def seal(self, head: Snapshot) -> Snapshot | None:
        """Put an empty ``seal`` commit right after ``head``, the branch's latest state, before
        a publish or a drop commits on main: a writer of the branch that has not landed yet
        then conflicts (:class:`Sealed`) rather than land where nobody will read it. ``None``
        when a writer took that revision first (read the branch again and retry)."""
        commit = Commit(head.version + 1, uuid.uuid4().hex, head.commit_uuid, next_timestamp(head.timestamp),
                        SEAL_OPERATION, engine_info(None), ())
        try:
            self.store.put_if_absent(self.listing.commit_key(commit.revision), commit.to_bytes(head.descriptor))
        except FileExistsError:
            return None
        return head.apply(commit)

    def unseal(self, sealed: Snapshot) -> None:
        """Lift our seal after the publish or drop it was for failed: an empty ``unseal`` commit
        right after it (no writer can have taken that revision: a writer planned on the seal
        is refused, one planned before it conflicts with it), and the branch goes on."""
        commit = Commit(sealed.version + 1, uuid.uuid4().hex, sealed.commit_uuid, next_timestamp(sealed.timestamp),
                        UNSEAL_OPERATION, engine_info(None), ())
        try:
            self.store.put_if_absent(self.listing.commit_key(commit.revision), commit.to_bytes(sealed.descriptor))
        except FileExistsError:
            pass

    def lifted(self, seal: int) -> bool:
        """Whether the seal at revision ``seal`` was lifted (its publish or drop failed)."""
        raw = self.listing.raw(seal + 1)
        return raw is not None and raw["operation"] == UNSEAL_OPERATION

    def _check_not_sealed(self, base: Snapshot, operation: str) -> None:
        """:class:`CommitConflictError` when ``base``, the branch state a commit is planned on,
        ends with a seal (a seal is only ever the head: nothing is committed after one but
        its ``unseal``)."""
        if base.version <= self.branch.base:
            return
        raw = self.listing.raw(base.version)
        if raw is not None and raw["operation"] == SEAL_OPERATION:
            raise CommitConflictError(
                f"dataset {self.dataset!r}: branch {self.branch.name!r} is sealed at its revision {base.version}: a "
                f"publish or a drop of it began (if it failed and the branch is still listed, publish or drop it "
                f"again); nothing of {operation!r} was committed")

    def check_live(self, actions: Sequence[Action] = (), operation: str = "") -> None:
        """:class:`RefNotFoundError` when main's latest revision no longer has this branch;
        :class:`CommitConflictError` when a vacuum committed on main since this log last looked
        may have deleted a file ``actions`` add (a branch writer meets no trace in its own log)."""
        latest = self.main.snapshot()
        if latest.branches.get(self.branch.name) != self.branch:
            raise RefNotFoundError(f"dataset {self.dataset!r}: branch {self.branch.name!r} (started at revision "
                                   f"{self.branch.base}) was published or dropped; nothing was committed to it")
        seen, self.main_seen = self.main_seen, latest.version
        for revision in range(seen + 1 if seen is not None else latest.version + 1, latest.version + 1):
            raw = self.main.listing.raw(revision)
            cutoff = None if raw is None else cutoff_of(raw["operation"], raw.get("info") or {})
            reason = None if cutoff is None else files_at_risk(self.store, actions, cutoff)
            if reason is not None:
                raise CommitConflictError(
                    f"dataset {self.dataset!r}, branch {self.branch.name!r}: {operation!r} conflicts with main's "
                    f"revision {revision} ('vacuum'), committed while its files were written: {reason}; nothing "
                    f"of {operation!r} was committed — write it again")

    def write_checkpoint(self, snapshot: Snapshot) -> Snapshot:
        raise self._main_only("a checkpoint")

    def expire(self, older_than: Any, force: bool = False) -> list[str]:
        raise self._main_only("expiring the log")

    def retained_files(self) -> set[str]:
        raise self._main_only("the files retained revisions reference")

    def retained(self) -> Any:
        raise self._main_only("the files retained revisions reference")

    def _main_only(self, what: str) -> RefError:
        return RefError(f"dataset {self.dataset!r}, branch {self.branch.name!r}: {what} is kept for the whole "
                        f"dataset on main; load the dataset without a branch for it")


def branch_log(main: "TransactionLog", name: Any, snapshot: Snapshot | None = None) -> BranchLog:
    """The log of live branch ``name`` (as of ``snapshot``, default main's latest)."""
    snapshot = snapshot or main.snapshot()
    log = BranchLog(main.replay, live_branch(snapshot, main.dataset, name))
    log.main_seen = snapshot.version  # a vacuum on main after it is checked against the writes to the branch
    return log


class Sealed(ConflictRule):
    """A branch commit's own rule (``rule``), and a conflict with a seal not lifted: a
    publish or a drop of the branch began, and what lands after it would be read by nobody."""

    def __init__(self, name: str, rule: ConflictRule | None, lifted: Callable[[int], bool]):
        self.name = name
        self.rule = rule or BlindAppend()
        self.lifted = lifted
        self.rebases_over_schema_changes = self.rule.rebases_over_schema_changes

    def conflict(self, ours: tuple[Action, ...], theirs: Commit, base: Snapshot) -> str | None:
        if theirs.operation == SEAL_OPERATION and not self.lifted(theirs.revision):
            return (f"a publish or a drop of branch {self.name!r} began there (if it failed and the branch is "
                    f"still listed, publish or drop it again)")
        return self.rule.conflict(ours, theirs, base)

    def specific_conflict(self, theirs: Commit, base: Snapshot) -> str | None:
        return self.rule.specific_conflict(theirs, base)


class StartsAt(ConflictRule):
    """A branch starts at the revision of its commit: any commit landing first moves that
    revision, so the start is planned again on the new state."""

    def conflict(self, ours: tuple[Action, ...], theirs: Commit, base: Snapshot) -> str | None:
        return f"a branch starts at the revision its commit was planned for, and {theirs.operation!r} took it"

    def specific_conflict(self, theirs: Commit, base: Snapshot) -> str | None:
        return None


class EndsBranch(ConflictRule):
    """Ending a branch assumes it is still live: a concurrent commit that ended it conflicts.
    Nothing else about main does matter to it."""

    rebases_over_schema_changes = True

    def __init__(self, name: str):
        self.name = name

    def conflict(self, ours: tuple[Action, ...], theirs: Commit, base: Snapshot) -> str | None:
        return self.specific_conflict(theirs, base)

    def specific_conflict(self, theirs: Commit, base: Snapshot) -> str | None:
        if any(isinstance(a, DropBranch) and a.name == self.name for a in theirs.actions):
            return f"it ended branch {self.name!r} ({theirs.operation})"
        return None


def start_branch(log: "TransactionLog", snapshot: Snapshot, name: Any) -> Snapshot:
    """Commit branch ``name`` on main after ``snapshot`` (moved to main's latest revision
    first), and write a checkpoint at its base when there is none; returns main's snapshot
    at the base. The first ref raises the log to protocol :data:`LAYOUT_PROTOCOL`."""
    dataset = log.dataset
    check_branch_name(dataset, name)
    for attempt in range(START_ATTEMPTS):
        snapshot = log.replay.forward(snapshot)
        if name in snapshot.branches:
            raise RefExistsError(f"dataset {dataset!r} already has a branch {name!r} (started at revision "
                                 f"{snapshot.branches[name].base}); drop it or choose another name")
        protocol = snapshot.protocol
        if protocol.reader_version < PARTED_CHECKPOINT_PROTOCOL:
            raise RefError(f"dataset {dataset!r}: its log is of version {protocol.reader_version}; branches need "
                           f"version {LAYOUT_PROTOCOL} — run `cdkds upgrade` (or dataset.upgrade_log()) first")
        actions: list[Action] = []
        if protocol.reader_version < LAYOUT_PROTOCOL or protocol.writer_version < LAYOUT_PROTOCOL:
            actions.append(SetProtocol(max(protocol.reader_version, LAYOUT_PROTOCOL),
                                       max(protocol.writer_version, LAYOUT_PROTOCOL)))
        actions.append(BranchRef(name, snapshot.version + 1, uuid.uuid4().hex))
        try:
            started = log.commit(snapshot, "branch", actions, {"branch": name}, rule=StartsAt())
        except CommitConflictError:
            if attempt == START_ATTEMPTS - 1:
                raise
            continue
        try:
            return log.write_checkpoint(started)  # the base stays readable when expiry removes the commits before it
        except Exception as e:  # noqa: BLE001 - the branch stands; expiry writes a pinned revision's checkpoint
            warnings.warn(f"dataset {dataset!r}: the checkpoint of revision {started.version}, where branch "
                          f"{name!r} starts, failed ({e}); expiry writes it before it would be needed",
                          CorruptLogWarning, stacklevel=3)
            return started
    raise AssertionError("unreachable")


def end_branch(log: "TransactionLog", snapshot: Snapshot, name: Any) -> Snapshot:
    """Commit the end of live branch ``name`` on main (its writers sealed out first, see
    :meth:`BranchLog.seal`); returns main's new snapshot."""
    snapshot = log.replay.forward(snapshot)
    branch = BranchLog(log.replay, live_branch(snapshot, log.dataset, name))
    _, sealed = sealed_head(branch)
    try:
        return log.commit(snapshot, "drop_branch", [DropBranch(name)], {"branch": name}, rule=EndsBranch(name))
    except CommitFailedError:
        branch.unseal(sealed)
        raise


def sealed_head(branch: BranchLog) -> tuple[list[tuple[Commit, Snapshot]], Snapshot]:
    """The branch's commits (each with the state before it) and its head once sealed."""
    for _ in range(SEAL_ATTEMPTS):
        commits, head = [], branch.replay.base()
        for commit, after in branch.replay.walk(head):
            commits.append((commit, head))
            head = after
        sealed = branch.seal(head)
        if sealed is not None:
            return commits, sealed
    raise CommitConflictError(f"dataset {branch.dataset!r}: branch {branch.branch.name!r} kept moving under "
                              f"{SEAL_ATTEMPTS} attempts to seal it; nothing was committed — retry")
