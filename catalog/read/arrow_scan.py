"""Reading a scan through pyarrow's dataset scanner: the files of the native plan's groups
(:func:`~cdkds.catalog.read.native.plan_native` with :data:`PYARROW`) are read by one
``pyarrow.dataset`` scan per group, on Arrow's own threads without Python's lock, and only
the fallback files by cdkds's own reader (:func:`~cdkds.catalog.read.scan.read_tasks`).

A group's scan is its files with their physical schema (the group's layout: no footer is
read to learn it), and

- a **projection** per output column: the file's column as it is stored, renamed, or
  widened by a cast (``CastTo``, the cast cdkds's reader makes), or the default (or null) of
  a field the files lack, or their partition value (a missing identity partition source);
  nested conversions (a record's, list's or map's children changed) are left to cdkds;
- a **filter**: the scan's predicate, the TTL visibility (rows where it is true) and no
  tombstone true (``~coalesce(t, false)``), each translated through the projection, so it
  has the meaning it has on the rows cdkds reads.

Files with deletion vectors are read by a scan of their own that knows each row's position
(:mod:`~cdkds.catalog.read.positions`). A stream (:func:`scan_batches`) on a store other than
local files is read by cdkds whole: a pyarrow scan left open there when Python exits aborts
the process (Arrow's threads reading fsspec's Python files need Python's lock).
"""

from __future__ import annotations

import operator

from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from cdkds.catalog.errors import DataFileError
from cdkds.catalog.expressions import ALWAYS_TRUE, Expression, references, to_arrow
from cdkds.catalog.expressions.tree import balanced
from cdkds.catalog.read.native import NativeGroup, NativePlan, NativeReader, plan_native
from cdkds.catalog.read.positions import KEEP, deleted_tasks, positioned_fragments, positioned_scan
from cdkds.catalog.read.scan import FileScanTask, ScanPlan, read_tasks, reading_error
from cdkds.catalog.storage import ObjectStore, store_failure
from cdkds.formats.files import DEFAULT_BATCH_ROWS, open_data_file
from cdkds.formats.projection import AsStored, CastTo, FileColumn, FileProjection, MissingField, PartitionValue
from cdkds.formats.schema import default_value

NAMED_FILES = 5  # files an error names when pyarrow's message does not say which one failed


def _nested(t: pa.DataType) -> bool:
    return pa.types.is_struct(t) or pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t)


def _view(t: pa.DataType) -> bool:
    return pa.types.is_string_view(t) or pa.types.is_binary_view(t)


def scanner_conversions(projection: FileProjection) -> str | None:
    """Why pyarrow's scanner cannot read files through ``projection`` exactly, or ``None``."""
    for reader, target in zip(projection.readers, projection.schema):
        if isinstance(reader, MissingField) and _nested(target.type):
            return f"pyarrow's scanner does not fill the missing record, list or map field {target.name!r}"
        if isinstance(reader, FileColumn) and not isinstance(reader.convert, (AsStored, CastTo)):
            return f"pyarrow's scanner does not convert the children of field {target.name!r}"
        if isinstance(reader, FileColumn) and isinstance(reader.convert, CastTo) and not reader.convert.exact:
            # an integer widened to a float rounds, but the scanner casts file statistics with checks
            return f"pyarrow's scanner checks the cast of field {target.name!r} to {reader.convert.target} exactly"
        if isinstance(reader, FileColumn) and isinstance(reader.convert, CastTo) and _view(reader.convert.source):
            # other engines (delta-rs, Polars) store strings as views: pyarrow's scanner reads them so (a file's
            # Arrow schema wins over the dataset's) and cannot filter or compare them
            return f"pyarrow's scanner cannot filter field {target.name!r} stored as {reader.convert.source}"
    return None


PYARROW = NativeReader("pyarrow", deletion_vectors=True, predicates=True, conversions=scanner_conversions)


def column_expressions(projection: FileProjection) -> dict[str, pc.Expression]:
    """Each field of ``projection`` as an expression over the file's columns."""
    out = {}
    for reader, target in zip(projection.readers, projection.schema):
        if isinstance(reader, MissingField):
            value = default_value(reader.field["type"], reader.field.get("default"))
            out[target.name] = pc.scalar(pa.scalar(value, target.type))
        elif isinstance(reader, PartitionValue):
            out[target.name] = pc.scalar(reader.scalar)
        elif isinstance(reader, FileColumn) and isinstance(reader.convert, AsStored):
            out[target.name] = pc.field(reader.name)
        elif isinstance(reader, FileColumn) and isinstance(reader.convert, CastTo):
            out[target.name] = pc.field(reader.name).cast(reader.convert.target, safe=True)
        else:
            raise ValueError(f"no scanner projection for field {target.name!r}: {reader}")  # refused by PYARROW
    return out


def _floating(expr: Expression, schema: pa.Schema) -> bool:
    """Whether ``expr`` reads a floating-point column of ``schema``."""
    return any(pa.types.is_floating(schema.field(name).type) for name in references(expr) if name in schema.names)


def group_filters(predicate: Expression, group: NativeGroup, columns: dict[str, pc.Expression]
                  ) -> tuple[pc.Expression | None, pc.Expression | None]:
    """The rows of ``group`` to read (matching ``predicate``, visible, deleted by no
    tombstone) as two filters whose conjunction it is (``None``: all rows): one the scanner
    may prune row groups with, and the tombstones that read a floating-point column,
    evaluated on the rows read. Parquet's min/max leave NaN out, and pyarrow prunes with
    them as if a row group had no NaN: one of NaN and -0.0 (min = max = -0.0) is taken for
    all -0.0, so a tombstone ``f = 0.0`` would skip its NaN rows, which it does not delete.
    (A predicate is never true on NaN where it is false on the values min/max bound: a
    comparison with NaN is null; so pruning with one skips no row it keeps.)"""
    schema = group.projection.schema
    terms = [to_arrow(e, schema, columns) for e in (predicate, group.visible) if e is not ALWAYS_TRUE]
    unprunable = []
    for t in group.tombstones:
        kept = ~pc.coalesce(to_arrow(t, schema, columns), pc.scalar(False))
        (unprunable if _floating(t, schema) else terms).append(kept)
    return _all(terms), _all(unprunable)


def _all(terms: list[pc.Expression]) -> pc.Expression | None:
    return balanced(terms, operator.and_) if terms else None


def group_filter(predicate: Expression, group: NativeGroup, columns: dict[str, pc.Expression]) -> pc.Expression | None:
    """The rows of ``group`` to read: matching ``predicate``, visible, deleted by no
    tombstone (``None``: all of them); see :func:`group_filters` for why a scan must not
    prune row groups with all of it."""
    return _all([f for f in group_filters(predicate, group, columns) if f is not None])


class _KnownSizes(pafs.FSSpecHandler):
    """An fsspec filesystem for pyarrow that opens data files with the sizes the log gives,
    so an object store is not asked for them (fsspec's handler asks twice per file)."""

    def __init__(self, fs: Any, sizes: Mapping[str, int]):
        super().__init__(fs)
        self.sizes = sizes

    def open_input_file(self, path: str) -> pa.PythonFile:
        if path not in self.sizes:
            return super().open_input_file(path)
        return pa.PythonFile(open_data_file(self.fs, path, self.sizes[path]), mode="r")


def _local(fs: Any) -> bool:
    from fsspec.implementations.local import LocalFileSystem
    return isinstance(fs, LocalFileSystem)


def arrow_filesystem(fs: Any, sizes: Mapping[str, int] | None = None) -> pafs.FileSystem:
    """``fs`` (fsspec) as a pyarrow filesystem: pyarrow's own for local files (read without
    Python's lock), others through fsspec, opening the files of ``sizes`` (path -> bytes)
    without asking their size."""
    if _local(fs):
        return pafs.LocalFileSystem()
    return pafs.PyFileSystem(_KnownSizes(fs, sizes or {}))


def filesystem_for(store: ObjectStore, native: NativePlan) -> pafs.FileSystem:
    """The pyarrow filesystem the scans of ``native``'s groups read through."""
    return arrow_filesystem(store.fs, {store.path(t.file.path): t.file.size for g in native.groups for t in g.tasks})


_PARQUET = ds.ParquetFileFormat()


def files_dataset(store: ObjectStore, tasks: Sequence[FileScanTask], schema: pa.Schema,
                  filesystem: pafs.FileSystem, partition: pc.Expression | None = None) -> ds.FileSystemDataset:
    """The Parquet files of ``tasks`` as a pyarrow dataset of ``schema`` (their columns as
    they are stored, and those ``partition`` fixes where they lack them: pyarrow fills a
    column a fragment lacks from its partition expression); no footer is read to learn it,
    and their sizes come from the log."""
    fragments = [_PARQUET.make_fragment(store.path(t.file.path), filesystem, file_size=t.file.size,
                                        partition_expression=partition if partition is not None else pc.scalar(True))
                 for t in tasks]
    return ds.FileSystemDataset(fragments, schema, _PARQUET, filesystem)


def partition_expression(projection: FileProjection) -> pc.Expression | None:
    """The partition values ``projection`` reads for fields its files lack, as the
    expression of a pyarrow fragment (which fills those columns from it); ``None``: none."""
    terms = [pc.field(t.name).is_null() if r.value is None else pc.field(t.name) == pc.scalar(r.scalar)
             for r, t in zip(projection.readers, projection.schema) if isinstance(r, PartitionValue)]
    return _all(terms)


def group_batches(store: ObjectStore, native: NativePlan, group: NativeGroup, filesystem: pafs.FileSystem,
                  batch_rows: int = DEFAULT_BATCH_ROWS, whole: bool = False) -> Iterator[pa.RecordBatch | pa.Table]:
    """The rows of ``group``'s files of the plan, in the plan's output columns: the files
    without deletion vectors in one scan filtered by the scanner (pruning row groups with
    the filter it may prune with, the rest evaluated as a column :data:`KEEP`), then those
    with deletion vectors (:mod:`~cdkds.catalog.read.positions`), or all of them in that
    second scan when no row is to be filtered but deleted ones (one scan reads files side by
    side). ``whole``: as tables (the first scan read on every core at once), else batch by
    batch."""
    columns = column_expressions(group.projection)
    prunable, unprunable = group_filters(native.scan.predicate, group, columns)
    projected = {c: columns[c] for c in native.scan.columns}
    schema = pa.schema([group.layout.field(c) for c in group.projection.read_columns])
    deleted = deleted_tasks(group)
    plain = tuple(t for t in group.tasks if not t.file.deletes)
    if deleted and prunable is None and unprunable is None:
        deleted, plain = group.tasks, ()  # nothing to filter but deleted rows: one scan of every file
    if plain:
        scan = files_dataset(store, plain, schema, filesystem).scanner(
            columns={**projected, **({KEEP: unprunable} if unprunable is not None else {})},
            filter=prunable, batch_size=batch_rows)
        yield from [scan.to_table()] if whole else _closing(scan.to_batches())
    if deleted:
        parts = positioned_fragments(store, deleted, schema, filesystem, prunable)
        batches = positioned_scan(parts, schema, filesystem, projected,
                                  _all([f for f in (prunable, unprunable) if f is not None]), batch_rows)
        if whole:
            read = list(batches)
            if read:
                yield pa.Table.from_batches(read)
        else:
            yield from batches


def _closing(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    try:
        yield from batches
    finally:
        batches.close()  # type: ignore[attr-defined]  # drops the scan: its read-ahead stops


def kept(batch: Any) -> Any:
    """The rows of a batch (or table) of a scan it keeps, without :data:`KEEP`."""
    if KEEP not in batch.schema.names:
        return batch
    keep = batch.column(KEEP)
    return batch.drop_columns([KEEP]).filter(keep)


def _conformed(batch: pa.RecordBatch | pa.Table, schema: pa.Schema) -> Any:
    """``batch`` with the output schema's field names, nullability and metadata."""
    if batch.schema.equals(schema, check_metadata=True):
        return batch
    kind = pa.Table if isinstance(batch, pa.Table) else pa.RecordBatch
    return kind.from_arrays(batch.columns, schema=schema)


def scan_error(error: Exception, store: ObjectStore, group: NativeGroup) -> Exception:
    """What a failed scan of ``group`` raises: :func:`reading_error` of the file pyarrow names,
    else a :class:`DataFileError` naming the group's files."""
    message = str(error)
    for t in group.tasks:
        if store.path(t.file.path) in message:
            return reading_error(error, store.display(t.file.path), t.file)
    names = [store.display(t.file.path) for t in group.tasks[:NAMED_FILES]]
    more = f" and {len(group.tasks) - NAMED_FILES} more" if len(group.tasks) > NAMED_FILES else ""
    where = f"one of the data files {', '.join(names)}{more}"
    failure = store_failure(error, f"reading {where}", unclassified=False)
    if failure is not None:
        return failure
    if not isinstance(error, (pa.ArrowException, OSError, ValueError, EOFError)):
        return error
    return DataFileError(f"reading {where} failed: {type(error).__name__}: {error}")


def native_plan(store: ObjectStore, plan: ScanPlan) -> NativePlan:
    """``plan`` split between pyarrow's scanner and cdkds's reader."""
    return plan_native(store, plan, PYARROW)


def scan_batches(store: ObjectStore, plan: ScanPlan, batch_rows: int = DEFAULT_BATCH_ROWS
                 ) -> Iterator[pa.RecordBatch]:
    """The rows of ``plan`` batch by batch (at most ``batch_rows`` each), group after group,
    then the fallback files; Arrow's scanner reads a bounded number of batches ahead, and
    closing the iterator stops it. On stores other than local files every file is read by
    cdkds's reader: Arrow's threads would read fsspec's Python files."""
    if not _local(store.fs):
        # Arrow's read-ahead threads would read fsspec's Python files: a scan left open when
        # Python exits would abort it (they need Python's lock during teardown)
        yield from read_tasks(store, plan, plan.tasks, batch_rows)
        return
    native = native_plan(store, plan)
    schema = plan.output_schema
    filesystem = filesystem_for(store, native)
    for group in native.groups:
        batches = group_batches(store, native, group, filesystem, batch_rows)
        try:
            while True:
                try:
                    batch = next(batches)
                except StopIteration:
                    break
                except Exception as e:  # noqa: BLE001 - named, or passed on, by scan_error
                    raise scan_error(e, store, group) from None
                batch = kept(batch)
                if batch.num_rows:
                    yield _conformed(batch, schema)
        finally:
            batches.close()  # drops the scans: their read-ahead stops
    if native.fallback:
        yield from read_tasks(store, plan, native.fallback, batch_rows)


def scan_table(store: ObjectStore, plan: ScanPlan) -> pa.Table:
    """The rows of ``plan`` as one table: each group read whole by its scan (every core),
    then the fallback files."""
    schema = plan.output_schema
    if not schema:  # tables of no columns lose their row counts when concatenated; batches keep them
        return pa.Table.from_batches(list(scan_batches(store, plan)), schema=schema)
    native = native_plan(store, plan)
    filesystem = filesystem_for(store, native)
    parts = []
    for group in native.groups:
        try:
            read = list(group_batches(store, native, group, filesystem, whole=True))
        except Exception as e:  # noqa: BLE001 - named, or passed on, by scan_error
            raise scan_error(e, store, group) from None
        parts.extend(_conformed(kept(table), schema) for table in read)
    if native.fallback:
        parts.append(pa.Table.from_batches(list(read_tasks(store, plan, native.fallback)), schema=schema))
    if not parts:
        return schema.empty_table()
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

