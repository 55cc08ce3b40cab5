"""What a mirror describes of one revision: the live data files and, for each, the row
positions a reader must skip — its deletion vectors and the rows tombstones hide, which a
mirror materialises since other formats have no predicate deletes.

Both mirrors (:mod:`~cdkds.catalog.mirror.delta`, :mod:`~cdkds.catalog.mirror.iceberg`)
work from these, so "what is deleted" has one meaning: the reader's (:func:`read_task`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Hashable

import numpy as np

from cdkds.catalog.expressions import ALWAYS_TRUE
from cdkds.catalog.keyed.caches import deleted_positions as vector_positions
from cdkds.catalog.log.actions import AddFile, DeleteRows, RemoveFile, Tombstone
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.read.scan import FileScanTask, read_task
from cdkds.catalog.storage import ObjectStore
from cdkds.catalog.work_columns import POSITION

if TYPE_CHECKING:
    from cdkds.catalog.log.commit import Commit


def deletion_state(snapshot: Snapshot, file: AddFile) -> Hashable:
    """What decides ``file``'s deleted rows at ``snapshot``: its vectors and the revisions of
    the tombstones that may hide some of its rows. Equal states delete the same rows."""
    return file.deletes, tuple(t.revision for t in snapshot.tombstones_for(file))


def deleted_positions(store: ObjectStore, snapshot: Snapshot, file: AddFile) -> np.ndarray:
    """The positions (sorted, unique int64) of ``file``'s rows that readers of ``snapshot``
    skip. Only a file a tombstone may apply to is read (its tombstone columns); vectors alone
    are read from their references."""
    tombstones = tuple(t.predicate for t in snapshot.tombstones_for(file))
    if not tombstones:
        return vector_positions(store, file.deletes) if file.deletes else np.empty(0, np.int64)
    kept = [b.column(POSITION).to_numpy() for b in read_task(
        store, snapshot.descriptor, ALWAYS_TRUE, [], FileScanTask(file, tombstones), positions=True)]
    live = np.concatenate(kept) if kept else np.empty(0, np.int64)
    return np.setdiff1d(np.arange(file.row_count, dtype=np.int64), live, assume_unique=True)


@dataclass(frozen=True)
class Changes:
    """How one revision's live files differ from another's: ``added`` and ``removed`` files,
    ``redeleted`` files live in both whose deleted rows changed, and whether the descriptor
    or protocol changed."""

    added: tuple[AddFile, ...]
    removed: tuple[AddFile, ...]
    redeleted: tuple[AddFile, ...]
    metadata: bool

    @staticmethod
    def between(before: Snapshot | None, after: Snapshot) -> "Changes":
        """From ``before`` (``None``: an empty dataset) to ``after``."""
        old = {} if before is None else before.files
        added = tuple(f for p, f in after.files.items() if p not in old or old[p].revision != f.revision)
        removed = tuple(f for p, f in old.items() if p not in after.files or after.files[p].revision != f.revision)
        redeleted = tuple(f for p, f in after.files.items() if p in old and old[p].revision == f.revision
                          and deletion_state(before, old[p]) != deletion_state(after, f))
        metadata = before is None or (before.descriptor_version, before.protocol) != (after.descriptor_version,
                                                                                    after.protocol)
        return Changes(added, removed, redeleted, metadata)

    @staticmethod
    def of(before: Snapshot, after: Snapshot, commit: "Commit") -> "Changes":
        """What ``commit`` changed, ``after`` being ``before.apply(commit)``, found from its
        actions: work proportional to the commit, where :meth:`between` compares every live
        file (all of them are looked at only for a commit that adds a tombstone, which may
        delete rows of any). The same added and removed files as :meth:`between`; of the files
        whose deleted rows changed, only those whose rows did (a descriptor change that makes
        a tombstone's match look different to the statistics deletes no other row)."""
        touched = {a.path for a in commit.actions if isinstance(a, (AddFile, RemoveFile))}
        added = tuple(after.files[p] for p in sorted(touched) if p in after.files
                      and after.files[p].revision == commit.revision)
        removed = tuple(before.files[p] for p in sorted(touched) if p in before.files
                        and (p not in after.files or after.files[p].revision != before.files[p].revision))

        def kept(path: str) -> bool:
            return path in before.files and path in after.files and \
                before.files[path].revision == after.files[path].revision

        redeleted = {a.path for a in commit.actions if isinstance(a, DeleteRows) and kept(a.path)}
        if any(isinstance(a, Tombstone) for a in commit.actions):
            redeleted |= {p for p, f in after.files.items() if kept(p) and
                          any(t.revision == commit.revision for t in after.tombstones_for(f))}
        metadata = (before.descriptor_version, before.protocol) != (after.descriptor_version, after.protocol)
        return Changes(added, removed, tuple(after.files[p] for p in sorted(redeleted)), metadata)
