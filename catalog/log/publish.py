"""Publishing a branch: one commit on main holding the branch's net change since its base
(``docs/FORMAT.md`` §12).

The commit is planned on main's state at the base, so the committer's usual catch-up does
the rest: when main has not moved it lands right after the base (a fast-forward); when it
has, each of main's commits since is checked against each of the branch's commits by the
rule that commit implies (:class:`~cdkds.catalog.log.conflicts.Publish`), and a conflict
refuses the publish naming main's commit, nothing committed.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable

from cdkds.catalog.errors import CommitFailedError, RefError
from cdkds.catalog.log.actions import (
    Action, AddIndex, DeleteRows, DropBranch, RemoveFile, RemoveIndex, SetMetadata,
)
from cdkds.catalog.log.branches import BranchLog, live_branch, sealed_head
from cdkds.catalog.log.conflicts import Publish, Recorded
from cdkds.catalog.log.snapshot import Snapshot

if TYPE_CHECKING:
    from cdkds.catalog.log.transaction import TransactionLog

PUBLISH_OPERATION = "publish"


def net_change(base: Snapshot, head: Snapshot, dataset: str, branch: str) -> list[Action]:
    """The actions that take main's state ``base`` (the branch's base) to the branch's
    ``head``: protocol and metadata when they changed, removed files, added files (with
    their deletion vectors), deletion vectors added to main's files, index files removed
    and added (in the order of the branch's commits), the branch's live tombstones and
    applications' batches. :class:`RefError` naming the tombstone when a branch delete
    hides rows of files the branch added before it: in one commit it would not reach them."""
    R = base.version
    actions: list[Action] = []
    if head.protocol.reader_version > base.protocol.reader_version or \
            head.protocol.writer_version > base.protocol.writer_version:
        actions.append(head.protocol)
    if head.descriptor_version > R:
        actions.append(SetMetadata(head.descriptor))
    added = [f for f in head.files.values() if f.revision > R]
    for f in added:
        for tombstone in head.tombstones_for(f):  # all of the branch's: newer than a file it added
            raise RefError(
                f"dataset {dataset!r}, branch {branch!r}: its delete '{tombstone.predicate}' (branch revision "
                f"{tombstone.revision}) hides rows of {f.path}, which the branch added before it; a delete in the "
                f"publish commit would not reach them — compact the branch (dataset.compact() on it) and publish "
                f"again; nothing was committed")
    kept = head.files
    actions += [RemoveFile(p) for p in sorted(p for p in base.files if p not in kept)]
    # a file's schema_version is a revision of the line it was written on: one on the branch would
    # name another commit on main, so the files read by field ids (the base's is the safe claim)
    actions += [dataclasses.replace(f, revision=-1, timestamp=0, schema_version=min(f.schema_version, R))
                for f in sorted(added, key=lambda f: (f.revision, f.path))]
    for f in head.files.values():
        if f.revision <= R and f.path in base.files:
            before = base.files[f.path].deletes
            actions += [DeleteRows(f.path, v) for v in f.deletes[len(before):]]
    actions += [RemoveIndex(p) for p in sorted(p for p in base.index if p not in head.index)]
    actions += [dataclasses.replace(e, revision=-1) for e in sorted(
        (e for p, e in head.index.items() if p not in base.index), key=lambda e: (not e.base, e.revision))]
    actions += [t for t in head.tombstones if t.revision > R]
    actions += [t for app, t in head.transactions.items() if base.transactions.get(app) != t]
    return actions


def publish_branch(log: "TransactionLog", name: Any, info: dict | None = None) -> Snapshot:
    """Publish live branch ``name`` onto main in one commit that also ends it (see the
    module docstring; the branch's writers are sealed out first, see
    :meth:`~cdkds.catalog.log.branches.BranchLog.seal`); returns main's new snapshot."""
    ref = live_branch(log.snapshot(), log.dataset, name)
    branch = BranchLog(log.replay, ref)
    base = branch.replay.base()
    head = branch.replay.forward(base)
    net_change(base, head, log.dataset, name)  # refused before anything is written
    walked, sealed = sealed_head(branch)
    hashes = _index_hashes(log, base)
    commits = tuple(Recorded(commit, before, hashes) for commit, before in walked)
    actions = [*net_change(base, sealed, log.dataset, name), DropBranch(name)]
    try:
        return log.commit(base, PUBLISH_OPERATION, actions,
                          {"branch": name, "head": sealed.version, "commits": len(commits), **(info or {})},
                          rule=Publish(name, commits))
    except CommitFailedError:  # known not to have landed: the branch goes on
        branch.unseal(sealed)
        raise


def _index_hashes(log: "TransactionLog", base: Snapshot) -> Callable[[AddIndex, int], frozenset[int]] | None:
    """How to read the key hashes of an index delta (keyed datasets only)."""
    if not base.descriptor.record_key:
        return None
    from cdkds.catalog.keyed.index import RecordIndex
    index = RecordIndex(log.store, base, log.dataset)

    def hashes(entry: AddIndex, revision: int) -> frozenset[int]:
        return frozenset(index.read_file(entry.at(revision)).column("_hash").to_pylist())
    return hashes
