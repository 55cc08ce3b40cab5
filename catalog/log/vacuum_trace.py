"""The trace a vacuum leaves in the log, and the check a commit makes against it.

A vacuum that deletes files first commits an empty ``vacuum`` commit whose ``info`` holds
its cut-off (``deletesBefore``, epoch milliseconds): it deletes unreferenced files modified
before then, listed before that commit and unreferenced after it. A commit planned before
the trace must be rebased over it, so it meets the trace in its catch-up and checks that
its own new files exist and are not older than the cut-off: a file that is missing, or
that the vacuum may still delete, fails the commit (``docs/FORMAT.md`` §4). Commits
planned after the trace, and every commit when no vacuum ran, pay nothing.
"""

from __future__ import annotations

from typing import Collection, Iterable, Mapping

from cdkds.catalog.log.actions import Action, AddFile, AddIndex, DeleteRows
from cdkds.catalog.log.commit import Commit
from cdkds.catalog.storage import ObjectStore, modified

VACUUM = "vacuum"
_CUTOFF = "deletesBefore"


def trace_info(cutoff_ms: int) -> Mapping[str, int]:
    """The ``info`` of the vacuum commit of a vacuum deleting files modified before ``cutoff_ms``."""
    return {_CUTOFF: cutoff_ms}


def cutoff_of(operation: str, info: Mapping[str, object]) -> int | None:
    """The cut-off (ms) of a vacuum trace, from its commit's operation and info; ``None`` for other commits."""
    if operation != VACUUM:
        return None
    value = info.get(_CUTOFF)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def new_files(actions: Iterable[Action]) -> list[str]:
    """The files a commit brings: its data files, record-index files and deletion-vector sidecars."""
    paths = []
    for a in actions:
        if isinstance(a, (AddFile, AddIndex)):
            paths.append(a.path)
        elif isinstance(a, DeleteRows) and a.vector.path:
            paths.append(a.vector.path)
    return paths


def endangered(store: ObjectStore, ours: Iterable[Action], trace: Commit, kept: Collection[str] = ()) -> str | None:
    """Why the vacuum of ``trace`` has deleted, or may delete, a file ``ours`` brings; ``None``
    when ``trace`` is no vacuum, or each file is there and modified at or after its cut-off
    (the vacuum never deletes those) or in ``kept`` (see :func:`files_at_risk`)."""
    cutoff = cutoff_of(trace.operation, trace.info)
    return None if cutoff is None else files_at_risk(store, ours, cutoff, kept)


def older(info: Mapping[str, object], cutoff: int) -> bool:
    """Whether a file (its store ``info``) was modified before ``cutoff`` (epoch ms): the one
    comparison by which a vacuum lists what it may delete and a commit checks its files
    against the vacuum's trace, so the two never disagree about a file near the cut-off."""
    return modified(dict(info)) * 1000 < cutoff


def files_at_risk(store: ObjectStore, ours: Iterable[Action], cutoff: int, kept: Collection[str] = ()) -> str | None:
    """Why a vacuum with cut-off ``cutoff`` (ms) has deleted, or may delete, a file ``ours`` brings.
    A file in ``kept`` was referenced in the log before the vacuum's trace (a live branch's, which
    a vacuum reads after its trace and keeps), so it is only checked to be there."""
    for path in new_files(ours):
        found = dict(store.walk_files(path))
        if path not in found:
            return f"it deleted {path}, a file this commit adds"
        if path not in kept and older(found[path], cutoff):
            return f"it may delete {path}, a file this commit adds, older than its cut-off"
    return None
