"""Conversion in place: a folder of existing data becomes a cdkds dataset whose first
commit references the files where they are — nothing is copied or rewritten (Delta's
``CONVERT TO DELTA``, Iceberg's ``migrate``).

The kind of source is recognised from what is there: ``.metadata/descriptor.properties``
is a Kite dataset (:mod:`cdkds.catalog.convert.kite`), ``_delta_log/`` a Delta table
(:mod:`cdkds.catalog.convert.delta`), anything else Hive-style partitioned Parquet
(:mod:`cdkds.catalog.convert.hive`). Each reader returns a :class:`Found`: the descriptor
and the files; this module makes the one commit — revision 0, ``create`` — holding the
descriptor (with a ``cdkds.name-mapping``, so files without field ids are read by their
columns' names, docs/FORMAT.md §5.2), an ``add`` per file (:mod:`.adoption`) and the
deletion vectors of rows the source had deleted. Any error before it lands leaves the
folder as it was (deletion-vector sidecars written for it are removed).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping

from cdkds.catalog.convert.adoption import adopted, deletion
from cdkds.catalog.convert.source import Found, SourceFile
from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import ConversionError, DatasetExistsError, InvalidNameError
from cdkds.catalog.log import LOG_FOLDER, TransactionLog, commit_key
from cdkds.catalog.log.actions import Action
from cdkds.catalog.storage import ObjectStore
from cdkds.formats.schema import FIELD_ID, NAME_MAPPING, record_of

if TYPE_CHECKING:
    from cdkds.catalog.dataset import Dataset
    from cdkds.catalog.repository import DatasetRepository

__all__ = ["Found", "SourceFile", "convert", "find", "source_key"]

KITE_MARKER = ".metadata/descriptor.properties"
DELTA_LOG = "_delta_log"


def find(store: ObjectStore, partition_types: Mapping[str, str] | None = None) -> Found:
    """What the folder at ``store`` holds, by its kind (see the module's docstring)."""
    if store.exists(KITE_MARKER):
        from cdkds.catalog.convert.kite import is_kite, read_kite  # written alongside; imported once there
        if is_kite(store):
            _no_partition_types("a Kite dataset", partition_types)
            return read_kite(store)
    if store.exists(DELTA_LOG):
        from cdkds.catalog.convert.delta import read_delta
        _no_partition_types("a Delta table", partition_types)
        return read_delta(store)
    from cdkds.catalog.convert.hive import read_hive
    return read_hive(store, partition_types)


def _no_partition_types(kind: str, partition_types: Mapping[str, str] | None) -> None:
    if partition_types:
        raise ConversionError(f"partition types are given for Hive-style folders; {kind} records its own "
                              f"(given: {dict(partition_types)})")


def source_key(repository: ObjectStore, source: str) -> str:
    """The folder of ``source`` (a URL or local path, or a path relative to the repository
    root) relative to the repository root; :class:`ConversionError` naming both when it lies
    outside."""
    if not isinstance(source, str) or not source.strip():
        raise ConversionError(f"a source to convert must be a folder's URL or path, got {source!r}")
    source = source.strip().rstrip("/")
    if "://" not in source and not os.path.isabs(source):
        parts = source.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise ConversionError(f"source {source!r} is not a folder inside repository {repository.url}")
        return source
    other = ObjectStore.open(source)
    same_kind = type(other.fs) is type(repository.fs)
    if same_kind and other.root.startswith(repository.root.rstrip("/") + "/"):
        return other.root[len(repository.root.rstrip("/")) + 1:]
    raise ConversionError(f"source {source} lies outside repository {repository.url}: a converted dataset's "
                          f"folder is its source, so the source must be a folder inside the repository")


def convert(repository: "DatasetRepository", source: str, name: str | None = None,
            partition_types: Mapping[str, str] | None = None, info: Mapping[str, Any] | None = None) -> "Dataset":
    """Make the folder ``source`` inside ``repository`` a dataset named ``name`` (default:
    its path from the repository root), adopting its files in place."""
    from cdkds.catalog.dataset import Dataset
    from cdkds.catalog.repository import _overlap_error, check_name, overlapping_datasets

    key = source_key(repository.store, source)
    name = key if name is None else name
    try:
        check_name(name)
    except InvalidNameError as e:
        raise ConversionError(f"source {repository.store.display(key)} cannot become dataset {name!r}: {e}") from None
    if name != key:
        raise ConversionError(f"dataset {name!r} would live in {repository.store.display(name)}, not in the source "
                              f"{repository.store.display(key)}: a converted dataset's folder is its source")
    store = repository.store.child(name)
    if store.exists(commit_key(0)):
        raise DatasetExistsError(f"{store.url} is already a cdkds dataset ({name!r})")
    found = overlapping_datasets(repository.store, name)
    if found:
        raise _overlap_error(repository.store, name, found)
    if not repository.store.fs.isdir(store.root):
        raise ConversionError(f"source {store.url} is not a folder (or does not exist)")
    _no_files_vacuum_collects(store)
    result = find(store, partition_types)
    descriptor = with_name_mapping(result.descriptor)
    log = TransactionLog(store, name)
    actions, sidecars = _actions(store, descriptor, result.files)
    try:
        snapshot = log.create(descriptor, {"converted": result.kind, **(info or {})}, actions)
    except DatasetExistsError:
        _remove(store, sidecars)
        raise
    if overlapping_datasets(repository.store, name):  # an overlapping create ran at the same time
        store.delete_tree(LOG_FOLDER)
        _remove(store, sidecars)
        raise _overlap_error(repository.store, name, overlapping_datasets(repository.store, name), concurrently=True)
    return Dataset(repository, name, store, log, snapshot)


def _no_files_vacuum_collects(store: ObjectStore) -> None:
    """The source holds no file in the folders whose files vacuum deletes when no revision
    references them (``data/``, ``_index/``, ``_deletes/``, ``_staging/``): a Delta table
    laid out as Iceberg's, with its files under ``data/``, would lose its other versions'
    files there, and another tool's files in a hidden folder would go too."""
    from cdkds.catalog.maintenance.vacuum import COLLECTED_FOLDERS
    for folder in COLLECTED_FOLDERS:
        for key, _ in store.walk_files(folder):
            raise ConversionError(f"{store.display(key)} lies in {folder}/, a folder where cdkds's vacuum deletes "
                                  f"the files no revision references: move that folder out of the source first "
                                  f"(a converted dataset's folder is its source)")


def with_name_mapping(descriptor: DatasetDescriptor) -> DatasetDescriptor:
    """``descriptor`` whose schema maps its files' column names to field ids (docs/FORMAT.md
    §5.2): the mapping a reader gave it (a Delta table's physical names), else the fields' own
    names and Avro aliases (Kite records a rename as an alias: older files use the old name) —
    adopted files carry no ids, or ids of their own writer that mean nothing here."""
    schema = descriptor.schema
    if NAME_MAPPING not in schema:
        schema[NAME_MAPPING] = _mapping(schema)
    return descriptor.replace(schema=schema)


def _mapping(record: dict) -> list[dict]:
    """Iceberg's name-mapping form of a record's fields, their aliases among the names."""
    out = []
    for f in record["fields"]:
        item: dict = {"field-id": f[FIELD_ID], "names": list(dict.fromkeys([f["name"], *f.get("aliases", ())]))}
        inner = record_of(f["type"])
        if inner is not None:
            item["fields"] = _mapping(inner)
        out.append(item)
    return out


def _actions(store: ObjectStore, descriptor: DatasetDescriptor, files: tuple[SourceFile, ...]
             ) -> tuple[list[Action], list[str]]:
    """The adds and deletion vectors of ``files``, and the sidecars written for the vectors
    (removed again when the conversion fails)."""
    actions: list[Action] = []
    sidecars: list[str] = []
    try:
        for source in files:
            add = adopted(store, descriptor, source)
            actions.append(add)
            deleted = deletion(store, add, source)
            if deleted is not None:
                actions.append(deleted)
                if deleted.vector.path is not None:
                    sidecars.append(deleted.vector.path)
    except BaseException:
        _remove(store, sidecars)
        raise
    return actions, sidecars


def _remove(store: ObjectStore, keys: list[str]) -> None:
    for key in keys:
        try:
            store.delete(key)
        except Exception:  # noqa: BLE001,S110 - best effort: an unreferenced sidecar is vacuumed later
            pass

