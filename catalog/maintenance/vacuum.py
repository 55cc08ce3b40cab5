"""Garbage collection (vacuum): delete data, record-index and deletion-vector files no
retained revision references.

A vacuum that deletes leaves a trace in the log first (:mod:`cdkds.catalog.log.vacuum_trace`):
it lists the files older than its cut-off, commits the trace, and only then reads which files
the retained log references, so a commit that landed before the trace keeps its files, and a
commit planned before it learns (rebasing over it) whether its own files survived.
The files live at a revision a tag pins are kept, and the result says so (``kept``).
"""

from __future__ import annotations

import datetime as dt
import math
import time
from typing import TYPE_CHECKING

from cdkds.catalog.errors import CdkdsError
from cdkds.catalog.keyed.deletion import DELETES_FOLDER
from cdkds.catalog.keyed.index import INDEX_FOLDER
from cdkds.catalog.log import LOG_FOLDER
from cdkds.catalog.log.conflicts import Trace
from cdkds.catalog.log.expiry import Removed
from cdkds.catalog.log.vacuum_trace import VACUUM, older, trace_info
from cdkds.catalog.mirror.runner import present_mirrors
from cdkds.catalog.write.writer import DATA_FOLDER, STAGING_FOLDER

if TYPE_CHECKING:
    from cdkds.catalog.dataset import Dataset

DEFAULT_RETENTION = dt.timedelta(days=7)  # Delta's default
COLLECTED_FOLDERS = (DATA_FOLDER, INDEX_FOLDER, DELETES_FOLDER, STAGING_FOLDER)  # whose unreferenced files it deletes
MINIMUM_RETENTION = dt.timedelta(hours=1)


def vacuum(dataset: "Dataset", retention: dt.timedelta = DEFAULT_RETENTION, dry_run: bool = True,
           force: bool = False) -> Removed:
    """Data files no retained or pinned revision references, older than ``retention`` (and
    stale temporary log files); deleted unless ``dry_run``. Returns their keys, and in
    ``kept`` what it left for a tag."""
    if not isinstance(retention, dt.timedelta):
        raise CdkdsError(f"dataset {dataset.name!r}: retention must be a datetime.timedelta, got {retention!r}")
    if retention < MINIMUM_RETENTION and not force:
        raise CdkdsError(
            f"dataset {dataset.name!r}: a retention of {retention} is below the safe minimum of {MINIMUM_RETENTION}: "
            f"files of writers that have not committed yet could be deleted; pass force=True if none are running")
    cutoff = math.ceil((time.time() - retention.total_seconds()) * 1000)  # ms, as the trace records it
    old = _older_than(dataset, cutoff)
    doomed = _unreferenced(dataset, old)
    if dry_run or not doomed:
        return doomed
    # the listing above, then the trace, then the log: what landed before the trace is kept
    dataset._commit(VACUUM, [], trace_info(cutoff), rule=Trace())
    doomed = _unreferenced(dataset, old)
    for key in doomed:
        dataset.store.delete(key)
    return doomed


def _older_than(dataset: "Dataset", cutoff: int) -> list[str]:
    """The files a vacuum may collect that were modified before ``cutoff`` (epoch ms)."""
    old = []
    for folder in COLLECTED_FOLDERS:
        old += [key for key, info in dataset.store.walk_files(folder) if older(info, cutoff)]
    for key, info in dataset.store.walk_files(LOG_FOLDER):
        if key.rsplit("/", 1)[-1].startswith(".") and key.endswith(".tmp") and older(info, cutoff):
            old.append(key)
    return old


def _unreferenced(dataset: "Dataset", keys: list[str]) -> Removed:
    retained = dataset.log.retained()
    mirrored: set[str] = set()
    for mirror in present_mirrors(dataset.store, dataset.name):  # a mirror's readers need its files too
        mirrored |= mirror.referenced()
    referenced = retained.every | mirrored
    return Removed(sorted(key for key in keys if key not in referenced), retained.kept(keys, mirrored))
