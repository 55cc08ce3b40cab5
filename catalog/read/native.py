"""The native plan of a scan: which planned files an engine's own Parquet reader (Spark's
Parquet source, pyarrow's dataset scanner) can read, grouped so that each group is one
scan of that reader, and the cdkds rules each group still needs; every other file is
read by cdkds's own reader (:func:`~cdkds.catalog.read.scan.read_task`).

A group's files share

- a **file layout**: the same columns under the same names and types, so one projection
  (:class:`~cdkds.formats.projection.FileProjection`, by field id) turns their columns into
  the scan's columns. A file whose descriptor revision (``schemaVersion``) is at or after
  the snapshot's :attr:`~cdkds.catalog.log.snapshot.Snapshot.schema_since` is laid out as
  the current descriptor says, known without opening it; for the others one footer is
  read per descriptor revision (files of one revision were written with one schema), or
  per file when the log does not know it; files that lack the source column of an identity
  partition read their partition value there (docs/FORMAT.md §8), so such files are grouped
  by those values too;
- the same **rules**: tombstones (bound predicates: a row they hold true for is deleted)
  and the TTL visibility predicate at the plan's time (a row is read only where it is
  true). Deletion vectors are per file (``file.deletes``): a reader that can address rows
  by position in a file applies them, others leave those files to cdkds.

The rows of a native plan are those of the scan: the groups' rows (each filtered by the
scan's predicate, its rules and its files' deletion vectors, projected to the output
columns) plus the rows of the fallback files.
"""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from cdkds.catalog.expressions import ALWAYS_FALSE, ALWAYS_TRUE, Expression, references
from cdkds.catalog.log.snapshot import schema_of_files
from cdkds.catalog.read.scan import FileScanTask, ScanPlan, reading_error
from cdkds.catalog.storage import ObjectStore
from cdkds.formats.files import open_data_file
from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.formats.projection import FileProjection, MissingField

FOOTER_READERS = 16  # footers fetched at once


@dataclass(frozen=True)
class NativeReader:
    """What an engine's Parquet reader can do beyond reading columns as they are stored:
    ``deletion_vectors``: drop rows by their position in a file; ``predicates``: filter rows
    with tombstones and TTL; ``conversions``: why it cannot read a group's files through a
    projection (renames, added fields, widened types...), or ``None`` if it can."""

    name: str
    deletion_vectors: bool
    predicates: bool
    conversions: Callable[[FileProjection], str | None]


@dataclass(frozen=True)
class NativeGroup:
    """Files one native scan reads: the same ``layout`` (their Arrow schema, with field ids;
    ``projection`` turns their columns into the plan's ``read_columns``) and the same rules."""

    tasks: tuple[FileScanTask, ...]
    projection: FileProjection
    tombstones: tuple[Expression, ...]
    visible: Expression
    layout: pa.Schema

    @property
    def has_deletes(self) -> bool:
        return any(t.file.deletes for t in self.tasks)


@dataclass(frozen=True)
class NativePlan:
    """A scan split between an engine's reader (``groups``) and cdkds's (``fallback``);
    ``reasons``: why each fallback file is read by cdkds, by path."""

    scan: ScanPlan
    read_columns: tuple[str, ...]  # what every group reads: the output columns, then those the rules use
    groups: tuple[NativeGroup, ...]
    fallback: tuple[FileScanTask, ...]
    reasons: Mapping[str, str]

    @property
    def native_files(self) -> int:
        return sum(len(g.tasks) for g in self.groups)


def plan_native(store: ObjectStore, scan: ScanPlan, reader: NativeReader) -> NativePlan:
    """``scan`` split between ``reader`` and cdkds's own reader (see the module's docstring)."""
    descriptor = scan.snapshot.descriptor
    tasks = [t for t in scan.tasks if t.visible is not ALWAYS_FALSE]  # no row of these is visible
    used = set(references(scan.predicate))
    for t in tasks:
        used.update(references(t.visible), *(references(x) for x in t.tombstones))
    read_columns = (*scan.columns, *sorted(used - set(scan.columns)))
    reasons: dict[str, str] = {}
    candidates = []
    for t in tasks:
        why = _why_not(t, reader, descriptor.format)
        if why is None:
            candidates.append(t)
        else:
            reasons[t.file.path] = why
    layouts = _layouts(store, scan, candidates)
    projection_names = list(read_columns) or [next(iter(descriptor.fields))]
    projection = descriptor.projection(projection_names)
    grouped: dict[tuple, list[FileScanTask]] = defaultdict(list)
    plain: dict[bytes, FileProjection] = {}  # by layout: its projection, partition values aside
    # by layout and the partition values its files read for columns they lack: the projection, or why the reader cannot
    resolved: dict[tuple, FileProjection | str] = {}
    schemas: dict[bytes, pa.Schema] = {}
    keys: dict[int, bytes] = {}  # by id(layout): files of one revision share one schema object
    for t in candidates:
        layout = layouts[t.file.path]
        if id(layout) not in keys:
            keys[id(layout)] = layout.serialize().to_pybytes()  # schemas compare equal whatever their field ids
        shape = keys[id(layout)]
        schemas.setdefault(shape, layout)
        if shape not in plain:
            plain[shape] = projection.resolve(layout, store.display(t.file.path))
        constants = _partition_values(descriptor, plain[shape], t)
        key = (shape, constants)
        if key not in resolved:
            resolved[key] = plain[shape] if not constants else descriptor.projection(
                projection_names, t.file.partition, t.file.spec_id).resolve(layout, store.display(t.file.path))
            resolved[key] = reader.conversions(resolved[key]) or resolved[key]  # type: ignore[arg-type]
        if isinstance(resolved[key], str):
            reasons[t.file.path] = resolved[key]  # type: ignore[assignment]
            continue
        grouped[(key, t.tombstones, t.visible)].append(t)
    groups = tuple(NativeGroup(tuple(ts), resolved[key], tombstones, visible, schemas[key[0]])  # type: ignore[arg-type]
                   for (key, tombstones, visible), ts in grouped.items())
    fallback = tuple(t for t in tasks if t.file.path in reasons)
    return NativePlan(scan, read_columns, groups, fallback, reasons)


def _partition_values(descriptor: DatasetDescriptor, projection: FileProjection, task: FileScanTask) -> tuple:
    """The fields ``projection`` finds missing from ``task``'s file that read the file's
    partition values instead (sources of identity partitions, docs/FORMAT.md §8), with those
    values; files of one layout are grouped by them."""
    if not task.file.partition:
        return ()
    missing = {r.field["name"] for r in projection.readers if isinstance(r, MissingField)}
    if not missing:
        return ()
    values = descriptor.source_values(task.file.partition, task.file.spec_id)
    return tuple(sorted((k, v) for k, v in values.items() if k in missing))


def _why_not(task: FileScanTask, reader: NativeReader, file_format: str) -> str | None:
    """Why ``reader`` cannot read ``task``'s file whatever its layout, or ``None``."""
    if file_format != "parquet":
        return f"{file_format} files are read by cdkds"
    if task.file.deletes and not reader.deletion_vectors:
        return f"{reader.name} cannot drop rows by position (deletion vectors)"
    if (task.tombstones or task.visible is not ALWAYS_TRUE) and not reader.predicates:
        return f"{reader.name} does not apply tombstones or TTL"
    return None


def _layouts(store: ObjectStore, scan: ScanPlan, tasks: list[FileScanTask]) -> dict[str, pa.Schema]:
    """Each file's Arrow schema (with field ids where it has them): from the log where it
    knows the file was written as the current descriptor says, else from a footer — one per
    descriptor revision, one per file whose revision the log does not know or in a dataset
    begun before field ids (whose files carry ids or not whatever their revision)."""
    snapshot = scan.snapshot
    current = schema_of_files(snapshot.descriptor)
    # in a log begun before field ids, files of one revision may or may not carry ids: each is its own
    by_file = snapshot.descriptor.files_may_lack_ids

    def key(t: FileScanTask) -> object:
        return t.file.path if by_file or t.file.schema_version < 0 else t.file.schema_version

    out: dict[str, pa.Schema] = {}
    to_read: dict[object, FileScanTask] = {}
    for t in tasks:
        if snapshot.written_as_current(t.file) and not by_file:
            out[t.file.path] = current
        else:
            to_read.setdefault(key(t), t)
    if to_read:
        with ThreadPoolExecutor(min(FOOTER_READERS, len(to_read))) as pool:
            schemas = dict(zip(to_read, pool.map(lambda t: footer_schema(store, t), to_read.values())))
        for t in tasks:
            if t.file.path not in out:
                out[t.file.path] = schemas[key(t)]
    return out


def footer_schema(store: ObjectStore, task: FileScanTask) -> pa.Schema:
    """The Arrow schema (with field ids) a Parquet data file holds."""
    try:
        with open_data_file(store.fs, store.path(task.file.path), task.file.size) as f:
            return pq.ParquetFile(f).schema_arrow.remove_metadata()
    except Exception as e:  # noqa: BLE001 - named, or passed on, by reading_error
        raise reading_error(e, store.display(task.file.path), task.file) from None
