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
  :func:`~cdkds.catalog.read.arrow_scan.group_filters`);
- every other file (deletion vectors, schema changes, Avro, other rules) is read now through
  cdkds's own reader, and its matching rows are held in memory.

An append-only Parquet dataset (or one just compacted) is all direct.
"""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from cdkds.catalog.expressions import ALWAYS_TRUE
from cdkds.catalog.read.arrow_scan import (
    arrow_filesystem, files_dataset, group_filter, group_filters, partition_expression,
)
from cdkds.catalog.read.native import NativeGroup, NativeReader, plan_native
from cdkds.catalog.read.scan import ScanPlan, read_tasks
from cdkds.catalog.storage import ObjectStore
from cdkds.formats.projection import FileProjection


def lazy_reader(plan: ScanPlan) -> NativeReader:
    """What a lazy pyarrow dataset of ``plan``'s output columns can read: files whose columns
    are those columns as they are stored, filtered by columns among them."""
    def conversions(projection: FileProjection) -> str | None:
        if len(projection.schema) != len(plan.columns):
            return "the predicate, tombstones or TTL read columns left out of the output"
        if not projection.is_identity_but_partition_values:
            return "a lazy pyarrow dataset reads columns as they are stored (renamed, added or widened fields)"
        return None
    return NativeReader("a lazy pyarrow dataset", deletion_vectors=False, predicates=True, conversions=conversions)


def to_arrow_dataset(store: ObjectStore, plan: ScanPlan) -> ds.Dataset:
    """The rows of ``plan`` as a pyarrow dataset (see the module's docstring for what is lazy)."""
    schema = plan.output_schema
    native = plan_native(store, plan, lazy_reader(plan))
    by_rules: dict[tuple, list[NativeGroup]] = defaultdict(list)
    for group in native.groups:
        by_rules[(group.tombstones, group.visible)].append(group)
    if len(by_rules) == 1 and not native.fallback:
        direct = native.groups
    else:
        direct = tuple(by_rules.get(((), ALWAYS_TRUE), ()))
    if direct and group_filters(plan.predicate, direct[0], {})[1] is not None:
        # pyarrow would prune row groups with tombstones on floating columns as if they held no NaN
        direct = tuple(by_rules.get(((), ALWAYS_TRUE), ()))
    in_direct = {t.file.path for g in direct for t in g.tasks}
    held = list(read_tasks(store, plan, [t for t in plan.tasks if t.file.path not in in_direct]))
    parts = []
    if direct:
        tasks = [t for g in direct for t in g.tasks]
        filesystem = arrow_filesystem(store.fs, {store.path(t.file.path): t.file.size for t in tasks})
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
    # other than the predicate are part of the filter only when no row is held
    where: pc.Expression | None = group_filter(plan.predicate, direct[0], {}) if direct else None
    return dataset if where is None else dataset.filter(where)
