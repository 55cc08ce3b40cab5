"""A dataset a Spark job will create, before it exists (imported when a job plans, never
at import time of the source; see :mod:`cdkds.connector.source`)."""

from __future__ import annotations

from typing import Any

from cdkds.catalog import CommitConflictError, Dataset, DatasetDescriptor, DatasetExistsError, DatasetRepository
from cdkds.catalog.log import TransactionLog
from cdkds.catalog.log.snapshot import Snapshot


class UnbornDataset(Dataset):
    """The dataset ``name`` as creating it with a descriptor would make it (revision 0, no
    files), not created: a job that creates its dataset plans on it, and the dataset is
    created only by the job's commit (whichever path makes it: a plain, keyed or
    overwriting commit), so a job that fails before its commit creates nothing."""

    @classmethod
    def of(cls, repository: DatasetRepository, name: str, descriptor: DatasetDescriptor) -> "UnbornDataset":
        store = repository.store.child(name)
        log = TransactionLog(store, name)
        return cls(repository, name, store, log, Snapshot.first(log.first_commit(descriptor)))

    def _commit(self, *args: Any, **kwargs: Any) -> Snapshot:
        """Create the dataset (or take the one a concurrent first write created with the same
        descriptor), then commit onto its revision 0."""
        try:
            self.snapshot = self.repository.create(self.name, self.descriptor).snapshot
        except DatasetExistsError:
            self.snapshot = same_creation(self.repository.load(self.name, version=0), self.descriptor).snapshot
        return super()._commit(*args, **kwargs)


def same_creation(created: Dataset, descriptor: DatasetDescriptor) -> Dataset:
    """``created`` (revision 0 of a dataset a concurrent first write created) when it has
    the descriptor this job would have created it with; else a :class:`CommitConflictError`."""
    if created.descriptor != descriptor:
        raise CommitConflictError(f"dataset {created.name!r} was created by a concurrent write with another "
                                  f"descriptor while this write created it; nothing of this write was committed")
    return created
