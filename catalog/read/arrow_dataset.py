"""A scan as a ``pyarrow.dataset.Dataset``, for engines that read Arrow datasets lazily
(DuckDB, Polars' ``scan_pyarrow_dataset``, pandas through ``to_table``).

pyarrow cannot scan through Python code, so the dataset has two parts, and both give the
rows :func:`~cdkds.catalog.read.scan.read_task` gives:

- **direct** files are read by pyarrow itself, lazily and again on every scan, with the
  engine's own column and filter pushdown: the files of the native plan
  (:func:`~cdkds.catalog.read.native.plan_native`) whose columns are the output columns as
  they are (same names, types and ids: no rename, drop, widening or added field since they
  were written; a lazy dataset has no projection). One filter applies to all of them: the
  scan's predicate and, when every such file has the same tombstones and TTL and no file
  is read by cdkds, those rules; otherwise only files without tombstones or TTL are direct.
  The filter reads columns of the dataset, so no file is direct when the predicate or the
  rules use a column left out of ``columns``, and only files without tombstones when one reads
  a floating-point column (pyarrow prunes row groups with it as if they held no NaN: see
  :func:`~cdkds.catalog.read.arrow_scan.group_filters`). Files with deletion vectors are
  direct when every file is and the record key is among the output columns: the filter
  then also drops the deleted rows by their keys, once reading the files' key columns has
  shown it drops no other row (:mod:`~cdkds.catalog.read.deleted_keys`; a key deleted in
  one file and written again in another is such a row);
- every other file (deletion vectors otherwise, schema changes, Avro, other rules) is read
  now through cdkds's own reader, and its matching rows are held in memory.

An append-only Parquet dataset (or one just compacted), and a compacted keyed dataset after
deletes, are all direct.
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from cdkds.catalog.expressions import ALWAYS_TRUE
from cdkds.catalog.read.arrow_scan import (
    files_dataset, filesystem_for, group_filter, group_filters, partition_expression,
)
from cdkds.catalog.read.deleted_keys import deleted_keys_filter, filter_key
from cdkds.catalog.read.native import NativeGroup, NativePlan, NativeReader, plan_native
from cdkds.catalog.read.scan import ScanPlan, read_tasks
from cdkds.catalog.storage import ObjectStore
from cdkds.formats.projection import FileColumn, FileProjection


def lazy_reader(plan: ScanPlan, deletion_vectors: bool = False) -> NativeReader:
    """What a lazy pyarrow dataset of ``plan``'s output columns can read: files whose columns
    are those columns as they are stored, filtered by columns among them, and with
    ``deletion_vectors``, files with deletion vectors (which only a filter on the record key
    drops: :mod:`~cdkds.catalog.read.deleted_keys`)."""
    def conversions(projection: FileProjection) -> str | None:
        if len(projection.schema) != len(plan.columns):
            return "the predicate, tombstones or TTL read columns left out of the output"
        if not projection.is_identity_but_partition_values:
            return "a lazy pyarrow dataset reads columns as they are stored (renamed, added or widened fields)"
        return None
    return NativeReader("a lazy pyarrow dataset", deletion_vectors=deletion_vectors, predicates=True,
                        conversions=conversions)


def _stored(group: NativeGroup, columns: tuple[str, ...]) -> bool:
    """Whether ``group``'s files hold ``columns`` (rather than reading partition values for them)."""
    return all(isinstance(r, FileColumn) for r, f in zip(group.projection.readers, group.projection.schema)
               if f.name in columns)


def _direct(store: ObjectStore, plan: ScanPlan, native: NativePlan, key: tuple[str, ...], filesystem: pafs.FileSystem
            ) -> tuple[tuple[NativeGroup, ...], pc.Expression | None]:
    """The groups of ``native`` a lazy dataset reads, and the filter that drops the rows their
    deletion vectors delete (``None``: they have none): every file, when all share their rules
    (a filter applies to all of them) and a filter on the key drops exactly their deleted rows;
    else only the files without rules or deletion vectors (the other rows are held)."""
    groups = native.groups
    whole = (not native.fallback and len({(g.tombstones, g.visible) for g in groups}) == 1
             # pyarrow would prune row groups with tombstones on floating columns as if they held no NaN
             and group_filters(plan.predicate, groups[0], {})[1] is None)
    if whole and not any(g.has_deletes for g in groups):
        return groups, None
    if whole and key and all(_stored(g, key) for g in groups):
        keep = deleted_keys_filter(plan, store, [t for g in groups for t in g.tasks], key, filesystem)
        if keep is not None:
            return groups, keep
    plain = (replace(g, tasks=tuple(t for t in g.tasks if not t.file.deletes)) for g in groups
             if (g.tombstones, g.visible) == ((), ALWAYS_TRUE))
    return tuple(g for g in plain if g.tasks), None


def to_arrow_dataset(store: ObjectStore, plan: ScanPlan) -> ds.Dataset:
    """The rows of ``plan`` as a pyarrow dataset (see the module's docstring for what is lazy)."""
    schema = plan.output_schema
    key = filter_key(plan)
    native = plan_native(store, plan, lazy_reader(plan, deletion_vectors=bool(key)))
    filesystem = filesystem_for(store, native)  # knows the size of every file of the groups
    direct, keep = _direct(store, plan, native, key, filesystem)
    in_direct = {t.file.path for g in direct for t in g.tasks}
    held = list(read_tasks(store, plan, [t for t in plan.tasks if t.file.path not in in_direct]))
    parts = []
    if direct:
        # files lacking an identity partition's source column read their partition value (FORMAT.md §8):
        # a dataset per such group, whose fragments carry it; one dataset for all the others
        plain = [t for g in direct if partition_expression(g.projection) is None for t in g.tasks]
        if plain:
            parts.append(files_dataset(store, plain, schema, filesystem))
        parts.extend(files_dataset(store, g.tasks, schema, filesystem, partition_expression(g.projection))
                     for g in direct if partition_expression(g.projection) is not None)
    if held or not parts:
        parts.append(ds.dataset(pa.Table.from_batches(held, schema=schema)))
    dataset = parts[0] if len(parts) == 1 else ds.dataset(parts)  # type: ignore[arg-type]
    # the held rows match the predicate already (filtering them again changes nothing); rules
    # other than the predicate, and the deleted keys, are part of the filter only when no row is held
    where: pc.Expression | None = group_filter(plan.predicate, direct[0], {}) if direct else None
    if keep is not None:
        where = keep if where is None else where & keep
    return dataset if where is None else dataset.filter(where)
