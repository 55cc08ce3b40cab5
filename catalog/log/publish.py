"""Publishing a branch: one commit on main holding the branch's net change since its base
(``docs/FORMAT.md`` §12).

The commit is planned on main's state at the base, so the committer's usual catch-up does
the rest: when main has not moved it lands right after the base (a fast-forward); when it
has, each of main's commits since is checked against each of the branch's commits by the
rule that commit implies (:class:`~cdkds.catalog.log.conflicts.Publish`), and a conflict
refuses the publish naming main's commit, nothing committed (the seal is lifted and the
deletion vectors it wrote are deleted).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from cdkds.catalog.errors import CommitStateUnknownError
from cdkds.catalog.expressions import any_of
from cdkds.catalog.keyed.deletion import DeletionVector, DeletionVectorRef
from cdkds.catalog.log.actions import (
    Action, AddFile, AddIndex, DeleteRows, DropBranch, RemoveFile, RemoveIndex, SetMetadata,
)
from cdkds.catalog.log.branches import BranchLog, live_branch, sealed_head
from cdkds.catalog.log.conflicts import Publish, Recorded
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.storage import ObjectStore
from cdkds.catalog.work_columns import POSITION

if TYPE_CHECKING:
    from cdkds.catalog.log.transaction import TransactionLog

PUBLISH_OPERATION = "publish"


def net_change(store: ObjectStore, base: Snapshot, head: Snapshot, written: list[str]) -> list[Action]:
    """The actions that take main's state ``base`` (the branch's base) to the branch's
    ``head``: protocol and metadata when they changed, removed files, added files (with
    their deletion vectors), deletion vectors added to main's files, index files removed
    and added (in the order of the branch's commits), the branch's live tombstones and
    applications' batches. A branch delete that hides rows of a file the branch added
    before it is carried as a deletion vector of that file (a tombstone in the publish
    commit reaches only older files); ``written`` gets the keys of those vectors' sidecars."""
    R = base.version
    actions: list[Action] = []
    if head.protocol.reader_version > base.protocol.reader_version or \
            head.protocol.writer_version > base.protocol.writer_version:
        actions.append(head.protocol)
    if head.descriptor_version > R:
        actions.append(SetMetadata(head.descriptor))
    kept = head.files
    actions += [RemoveFile(p) for p in sorted(p for p in base.files if p not in kept)]
    for f in sorted((f for f in head.files.values() if f.revision > R), key=lambda f: (f.revision, f.path)):
        vector = hidden_rows(store, head, f)
        if vector is not None and vector.path:
            written.append(vector.path)
        # a file's schema_version is a revision of the line it was written on: one on the branch would
        # name another commit on main, so the files read by field ids (the base's is the safe claim); it
        # keeps its commit time (committedAt), from which a TTL by commit time counts
        actions.append(dataclasses.replace(f, revision=-1, schema_version=min(f.schema_version, R),
                                           deletes=f.deletes + ((vector,) if vector is not None else ())))
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


def hidden_rows(store: ObjectStore, head: Snapshot, file: AddFile) -> DeletionVectorRef | None:
    """The rows of ``file`` (one the branch added) its later branch deletes hide and no
    deletion vector of it holds, as a stored deletion vector; ``None`` when there are none.
    The positions are found as a keyed delete finds them (:func:`row_deletes`)."""
    tombstones = head.tombstones_for(file)
    if not tombstones:
        return None
    from cdkds.catalog.read.scan import FileScanTask, read_task
    task = FileScanTask(file)  # its vectors apply, not the tombstones: they are what is looked for
    found = [b.column(POSITION).to_numpy(zero_copy_only=False) for b in read_task(
        store, head.descriptor, any_of(t.predicate for t in tombstones), [], task, positions=True)]
    positions = np.concatenate(found) if found else np.array([], np.int64)
    return DeletionVectorRef.store(store, DeletionVector.of(positions)) if len(positions) else None


def publish_branch(log: "TransactionLog", name: Any, info: dict | None = None) -> Snapshot:
    """Publish live branch ``name`` onto main in one commit that also ends it (see the
    module docstring; the branch's writers are sealed out first, see
    :meth:`~cdkds.catalog.log.branches.BranchLog.seal`); returns main's new snapshot."""
    from cdkds.catalog.write.writer import delete_files
    ref = live_branch(log.snapshot(), log.dataset, name)
    branch = BranchLog(log.replay, ref)
    base = branch.replay.base()
    walked, sealed = sealed_head(branch)
    written: list[str] = []
    try:
        commits = tuple(Recorded(commit, before, _index_hashes(log, base)) for commit, before in walked)
        actions = [*net_change(log.store, base, sealed, written), DropBranch(name)]
        return log.commit(base, PUBLISH_OPERATION, actions,
                          {"branch": name, "head": sealed.version, "commits": len(commits), **(info or {})},
                          rule=Publish(name, commits))
    except CommitStateUnknownError:
        raise  # it may have landed: the seal and the vectors stay
    except BaseException:  # known not to have landed: the branch goes on
        branch.unseal(sealed)
        delete_files(log.store, written)
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
