"""Garbage collection (vacuum): delete data, record-index and deletion-vector files no
retained revision references."""

from __future__ import annotations

import datetime as dt
import time
from typing import TYPE_CHECKING

from cdkds.catalog.errors import CdkdsError
from cdkds.catalog.keyed.deletion import DELETES_FOLDER
from cdkds.catalog.keyed.index import INDEX_FOLDER
from cdkds.catalog.log import LOG_FOLDER
from cdkds.catalog.storage import modified
from cdkds.catalog.write.writer import DATA_FOLDER, STAGING_FOLDER

if TYPE_CHECKING:
    from cdkds.catalog.dataset import Dataset

DEFAULT_RETENTION = dt.timedelta(days=7)  # Delta's default
MINIMUM_RETENTION = dt.timedelta(hours=1)


def vacuum(dataset: "Dataset", retention: dt.timedelta = DEFAULT_RETENTION, dry_run: bool = True,
           force: bool = False) -> list[str]:
    """Data files no retained revision references, older than ``retention`` (and stale
    temporary log files); deleted unless ``dry_run``. Returns their keys."""
    if not isinstance(retention, dt.timedelta):
        raise CdkdsError(f"dataset {dataset.name!r}: retention must be a datetime.timedelta, got {retention!r}")
    if retention < MINIMUM_RETENTION and not force:
        raise CdkdsError(
            f"dataset {dataset.name!r}: a retention of {retention} is below the safe minimum of {MINIMUM_RETENTION}: "
            f"files of writers that have not committed yet could be deleted; pass force=True if none are running")
    referenced = dataset.log.retained_files()
    cutoff = time.time() - retention.total_seconds()
    doomed = []
    for folder in (DATA_FOLDER, INDEX_FOLDER, DELETES_FOLDER, STAGING_FOLDER):
        for key, info in dataset.store.walk_files(folder):
            if key not in referenced and modified(info) < cutoff:
                doomed.append(key)
    for key, info in dataset.store.walk_files(LOG_FOLDER):
        if key.rsplit("/", 1)[-1].startswith(".") and key.endswith(".tmp") and modified(info) < cutoff:
            doomed.append(key)
    if not dry_run:
        for key in doomed:
            dataset.store.delete(key)
    return sorted(doomed)
