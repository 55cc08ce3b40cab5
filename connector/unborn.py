"""A dataset a Spark job will create, before it exists (imported when a job plans, never
at import time of the source; see :mod:`cdkds.connector.source`)."""

from __future__ import annotations

from cdkds.catalog import Dataset, DatasetDescriptor, DatasetRepository
from cdkds.catalog.log import TransactionLog
from cdkds.catalog.log.snapshot import Snapshot


class UnbornDataset(Dataset):
    """The dataset ``name`` as creating it with a descriptor would make it (revision 0, no
    files), not created: a job that creates its dataset plans on it and creates the dataset
    only as it commits, so a job that fails creates nothing. Never committed to."""

    @classmethod
    def of(cls, repository: DatasetRepository, name: str, descriptor: DatasetDescriptor) -> "UnbornDataset":
        store = repository.store.child(name)
        log = TransactionLog(store, name)
        return cls(repository, name, store, log, Snapshot.first(log.first_commit(descriptor)))

    def _commit(self, *args, **kwargs):  # noqa: ANN002, ANN003 - the signature of Dataset._commit
        raise AssertionError(f"dataset {self.name!r} is not created yet: create it first (CdkdsWriter.created)")
