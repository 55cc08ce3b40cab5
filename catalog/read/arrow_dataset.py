"""A scan as a ``pyarrow.dataset.Dataset``, for engines that read Arrow datasets lazily
(DuckDB, Polars' ``scan_pyarrow_dataset``, pandas through ``to_table``).

pyarrow cannot scan through Python code, so the dataset has two parts, and both give the
rows :func:`~cdkds.catalog.read.scan.read_task` gives:

- **direct** files are read by pyarrow itself, lazily and again on every scan, with the
  engine's own column and filter pushdown: Parquet files that no tombstone, deletion vector
  or TTL applies to and whose columns are the output columns as they are (same names, types
  and field ids: no rename, drop, widening or added field since they were written). The
  scan's predicate becomes the dataset's filter, so they must hold every column it uses;
- every other file (deletion vectors, tombstones, TTL, schema changes, Avro, or a predicate
  on a column left out of ``columns``) is read now through cdkds's own reader, and its
  matching rows are held in memory.

An append-only Parquet dataset (or one just compacted) is all direct.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from cdkds.catalog.expressions import ALWAYS_TRUE, references, to_arrow
from cdkds.catalog.read.scan import FileScanTask, ScanPlan, read_task, reading_error
from cdkds.catalog.storage import ObjectStore
from cdkds.formats.files import open_data_file
from cdkds.formats.projection import Projection

FOOTER_READERS = 16  # footers fetched at once when checking which files pyarrow can read as they are


def to_arrow_dataset(store: ObjectStore, plan: ScanPlan) -> ds.Dataset:
    """The rows of ``plan`` as a pyarrow dataset (see the module's docstring for what is lazy)."""
    schema = plan.output_schema
    descriptor = plan.snapshot.descriptor
    filterable = set(references(plan.predicate)) <= set(plan.columns)
    candidates = [t for t in plan.tasks if filterable and _plain(t) and descriptor.format == "parquet"]
    projection = descriptor.projection(list(plan.columns))
    with ThreadPoolExecutor(FOOTER_READERS) as pool:
        direct_flags = list(pool.map(lambda t: _reads_as_is(store, projection, t), candidates))
    direct = {t.file.path for t, ok in zip(candidates, direct_flags) if ok}
    held = [batch for task in plan.tasks if task.file.path not in direct
            for batch in read_task(store, descriptor, plan.predicate, plan.columns, task)]
    parts = []
    if direct:
        parts.append(ds.FileSystemDataset.from_paths(
            [store.path(t.file.path) for t in plan.tasks if t.file.path in direct], schema=schema,
            format=ds.ParquetFileFormat(), filesystem=_arrow_filesystem(store.fs)))
    if held or not parts:
        parts.append(ds.dataset(pa.Table.from_batches(held, schema=schema)))
    dataset = parts[0] if len(parts) == 1 else ds.dataset(parts)
    # the held rows match already; filtering them again changes nothing
    return dataset.filter(to_arrow(plan.predicate, schema)) if direct and plan.predicate is not ALWAYS_TRUE \
        else dataset


def _plain(task: FileScanTask) -> bool:
    """Whether every row of the file is live: no tombstone, deletion vector or TTL applies."""
    return not task.tombstones and not task.file.deletes and task.visible is ALWAYS_TRUE


def _reads_as_is(store: ObjectStore, projection: Projection, task: FileScanTask) -> bool:
    """Whether pyarrow reads the projection's columns out of the file as cdkds does."""
    try:
        with open_data_file(store.fs, store.path(task.file.path), task.file.size) as f:
            file_schema = pq.ParquetFile(f).schema_arrow
        return projection.resolve(file_schema, store.display(task.file.path)).is_identity
    except Exception as e:  # noqa: BLE001 - named, or passed on, by reading_error
        raise reading_error(e, store.display(task.file.path), task.file) from None


def _arrow_filesystem(fs: Any) -> pafs.FileSystem:
    from fsspec.implementations.local import LocalFileSystem
    if isinstance(fs, LocalFileSystem):
        return pafs.LocalFileSystem()
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs))
