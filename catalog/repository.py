"""Dataset repositories and metadata providers (CDK's ``DatasetRepository`` and
``MetadataProvider``).

A repository is a root URL; dataset ``ns/name`` lives under ``<root>/ns/name/`` with its
transaction log in ``_log/`` and data files in ``data/``. The descriptor is kept in the
log (so it is versioned with the data) by the default :class:`LogMetadataProvider`.

A folder is a dataset or a namespace, never both: ``create`` refuses ``a/b`` while ``a`` is
a dataset (so ``a/data`` and ``a/_log`` can never share a dataset's own folders) and ``a``
while ``a/...`` datasets exist. Two processes creating
``a`` and ``a/b`` at once both pass the first check; each looks again after creating, and
one that then finds the other undoes its create and fails, so at most one of them stays.
"""

from __future__ import annotations

import re
import warnings
from abc import ABC, abstractmethod
from typing import Any

from cdkds.catalog.log.conflicts import Exclusive, replanned
from cdkds.catalog.dataset import Dataset
from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import (
    DatasetNotFoundError, InvalidDescriptorError, InvalidNameError, InvalidTimeTravelError,
)
from cdkds.catalog.log.actions import SetMetadata
from cdkds.catalog.log import LOG_FOLDER, TransactionLog, commit_key
from cdkds.catalog.maintenance.rebuild import IncompleteRebuildWarning, rebuild_log
from cdkds.catalog.storage import ObjectStore

_NAME_PART = re.compile(r"[A-Za-z0-9_]+")


def check_name(name: Any) -> str:
    """``name`` or ``namespace/name``, each part ``[A-Za-z0-9_]+``; raises :class:`InvalidNameError`."""
    if not isinstance(name, str):
        raise InvalidNameError(f"a dataset name must be a string, got {type(name).__name__}: {name!r:.100}")
    parts = name.split("/")
    if len(parts) > 2 or not all(_is_name_part(p) for p in parts):
        raise InvalidNameError(
            f"invalid dataset name {name!r}: use 'name' or 'namespace/name' with letters, digits and '_' only")
    return name


def _is_name_part(part: str) -> bool:
    return bool(_NAME_PART.fullmatch(part))


def _is_dataset(store: ObjectStore, name: str) -> bool:
    return store.exists(f"{name}/{commit_key(0)}" if name else commit_key(0))


def overlapping_datasets(store: ObjectStore, name: str) -> list[str]:
    """The datasets that dataset ``name`` of the repository at ``store`` would overlap: the
    repository itself or its namespace when that is a dataset, and the datasets inside it."""
    namespace, _, _ = name.rpartition("/")
    found = [""] if _is_dataset(store, "") else []  # "": the repository root itself
    if namespace and _is_dataset(store, namespace):
        found.append(namespace)
    if not namespace:
        found += [f"{name}/{child}" for child in store.list(name)
                  if _is_name_part(child) and _is_dataset(store, f"{name}/{child}")]
    return found


def _overlap_error(store: ObjectStore, name: str, found: list[str], concurrently: bool = False) -> InvalidNameError:
    inside = [f for f in found if f.startswith(f"{name}/")]
    reasons = [f"{repr(f) if f else f'the repository root {store.url}'} is a dataset, so it cannot also be a namespace"
               for f in found if f not in inside]
    if inside:
        reasons.append(f"it is the namespace of dataset {', '.join(repr(f) for f in inside)}")
    when = "; they were created concurrently, so this create was undone" if concurrently else ""
    return InvalidNameError(f"cannot create dataset {name!r}: {'; '.join(reasons)}{when}")


def split_dataset_url(url: str) -> tuple[str, str]:
    """The repository URL and the dataset name of a dataset's own URL
    (``s3://lake/sales/orders`` -> ``("s3://lake/sales", "orders")``)."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidNameError(f"a dataset URL must be a non-empty string, got {url!r}")
    trimmed = url.strip().rstrip("/")
    parent, _, name = trimmed.rpartition("/")
    if not parent or parent.endswith(":") or parent.endswith(":/"):
        raise InvalidNameError(f"dataset URL {url!r} names no dataset folder (expected e.g. lake/users or file:///tmp/lake/users)")
    check_name(name)
    return parent, name


class MetadataProvider(ABC):
    """Where descriptors live: save, load, delete and list them by dataset name."""

    @abstractmethod
    def save(self, name: str, descriptor: DatasetDescriptor) -> None:
        """Create the dataset's metadata, or record a new descriptor for it."""

    @abstractmethod
    def load(self, name: str) -> DatasetDescriptor:
        """The current descriptor; :class:`DatasetNotFoundError` if there is none."""

    @abstractmethod
    def delete(self, name: str) -> bool:
        """Remove the metadata; False if there was none."""

    @abstractmethod
    def list(self) -> list[str]:
        """Every dataset name, sorted."""

    def exists(self, name: str) -> bool:
        try:
            self.load(name)
        except DatasetNotFoundError:
            return False
        return True


class LogMetadataProvider(MetadataProvider):
    """Descriptors kept in each dataset's transaction log (a descriptor change is a commit)."""

    def __init__(self, store: ObjectStore):
        self.store = store

    def log(self, name: str) -> TransactionLog:
        return TransactionLog(self.store.child(name), name)

    def save(self, name: str, descriptor: DatasetDescriptor) -> None:
        log = self.log(name)
        if not log.exists():
            log.create(descriptor)
            return
        def commit() -> None:  # planned again when a compaction (a table service's) committed first
            base = log.snapshot()
            log.commit(base, "update_descriptor", [SetMetadata(base.evolve(descriptor, name))], rule=Exclusive())
        replanned(None, commit)

    def load(self, name: str) -> DatasetDescriptor:
        return self.log(name).snapshot().descriptor

    def exists(self, name: str) -> bool:
        return self.log(name).exists()

    def delete(self, name: str) -> bool:
        """Removes the dataset's own folders (its log first, so it stops existing before its
        data goes), never a dataset nested in it (which only older versions could create)."""
        dataset = self.store.child(name)
        if not dataset.exists(commit_key(0)):
            return False
        dataset.delete_tree(LOG_FOLDER)
        for child in dataset.list(""):
            if not _is_dataset(dataset, child):
                dataset.delete_tree(child)
        dataset.remove_empty_folder("")
        return True

    def list(self) -> list[str]:
        names = []
        for first in self.store.list(""):
            if not _is_name_part(first):
                continue
            if self.exists(first):
                names.append(first)
            for second in self.store.list(first):
                if _is_name_part(second) and self.exists(f"{first}/{second}"):
                    names.append(f"{first}/{second}")
        return sorted(names)


class DatasetRepository:
    """A root URL holding datasets: create, load, update, drop, list."""

    def __init__(self, url: str, storage_options: dict | None = None, single_writer: bool = False,
                 metadata_provider: MetadataProvider | None = None):
        self.store = ObjectStore.open(url, storage_options, single_writer)
        self.url = self.store.url
        self.metadata = metadata_provider or LogMetadataProvider(self.store)

    def __repr__(self) -> str:
        return f"DatasetRepository({self.url!r})"

    def create(self, name: str, descriptor: DatasetDescriptor) -> Dataset:
        """Create dataset ``name``; :class:`DatasetExistsError` if it exists."""
        check_name(name)
        if not isinstance(descriptor, DatasetDescriptor):
            raise InvalidDescriptorError(f"dataset {name!r}: create takes a DatasetDescriptor, got {type(descriptor).__name__}")
        found = overlapping_datasets(self.store, name)
        if found:
            raise _overlap_error(self.store, name, found)
        store = self.store.child(name)
        log = TransactionLog(store, name)
        snapshot = log.create(descriptor)
        found = overlapping_datasets(self.store, name)
        if found:  # an overlapping create ran at the same time: at most one may stay
            store.delete_tree(LOG_FOLDER)
            raise _overlap_error(self.store, name, found, concurrently=True)
        return Dataset(self, name, store, log, snapshot)

    def load(self, name: str, version: int | None = None, timestamp: Any = None, tag: str | None = None,
             branch: str | None = None) -> Dataset:
        """Dataset ``name`` at its latest commit, at revision ``version``, as of ``timestamp``,
        or at the revision tag ``tag`` names (:class:`RefNotFoundError` when it has no such tag);
        with ``branch``, on that branch (its writes commit to the branch; see ``Dataset.branch``;
        ``"main"`` is main itself)."""
        check_name(name)
        from cdkds.catalog.log.branches import MAIN
        branch = None if branch == MAIN else branch
        if sum(x is not None for x in (version, timestamp, tag)) > 1:
            raise InvalidTimeTravelError(f"dataset {name!r}: give one of a version, a timestamp or a tag, not "
                                         f"several (got version={version!r}, timestamp={timestamp!r}, tag={tag!r})")
        if branch is not None and tag is not None:
            raise InvalidTimeTravelError(f"dataset {name!r}: a tag names a revision of main; give a tag or a "
                                         f"branch, not both (got tag={tag!r}, branch={branch!r})")
        if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
            raise InvalidTimeTravelError(f"dataset {name!r}: version must be a revision number >= 0, got {version!r}")
        store = self.store.child(name)
        log = TransactionLog(store, name)
        if not log.exists():
            raise DatasetNotFoundError(f"dataset {name!r} does not exist in repository {self.url}")
        if tag is not None:
            from cdkds.catalog.log.tags import tag_of
            version = tag_of(name, log.snapshot(), tag)
        if branch is not None:
            from cdkds.catalog.log.branches import branch_log
            log = branch_log(log, branch)  # type: ignore[assignment]
        return Dataset(self, name, store, log, log.snapshot(version=version, timestamp=timestamp))

    def update(self, name: str, descriptor: DatasetDescriptor) -> Dataset:
        """Give dataset ``name`` a new descriptor (a commit), if the update rules allow it."""
        dataset = self.load(name)
        if not isinstance(descriptor, DatasetDescriptor):
            raise InvalidDescriptorError(f"dataset {name!r}: update takes a DatasetDescriptor, got {type(descriptor).__name__}")
        dataset.update_descriptor(descriptor)
        return dataset

    def drop(self, name: str) -> bool:
        """Remove the dataset's log and data; False if it did not exist."""
        check_name(name)
        return self.metadata.delete(name)

    def exists(self, name: str) -> bool:
        check_name(name)
        return self.metadata.exists(name)

    def list(self) -> list[str]:
        """Every dataset name in the repository, sorted."""
        return self.metadata.list()

    def convert(self, source: str, name: str | None = None, partition_types: dict[str, str] | None = None) -> Dataset:
        """Make the existing data in folder ``source`` (a URL, or a path from the repository
        root) dataset ``name`` (default: that path) without copying it: a Kite dataset, a Delta
        table or Hive-style partitioned Parquet (``partition_types``: the type of a partition
        column, e.g. ``{"day": "date"}``, where inference is not wanted). See
        :mod:`cdkds.catalog.convert`; :class:`ConversionError` naming the file or folder when
        it cannot be converted, and then nothing is committed."""
        from cdkds.catalog.convert import convert
        return convert(self, source, name, partition_types)

    def rebuild(self, name: str) -> Dataset:
        """Rebuild the log of dataset ``name`` from its data files (see :mod:`cdkds.catalog.maintenance.rebuild`);
        the damaged log is kept aside as ``_log.broken-<time>/``. What the files cannot tell
        (unreadable files, commits that left no file, the order of concurrent writes...) is
        reported by an :class:`IncompleteRebuildWarning` whose ``report`` lists it."""
        check_name(name)
        store = self.store.child(name)
        log, report = rebuild_log(store, name)
        if not report.complete:
            warnings.warn(IncompleteRebuildWarning(report), stacklevel=2)
        return Dataset(self, name, store, log, log.snapshot())

