"""Deletion vectors applied inside a pyarrow dataset scan.

A deletion vector names rows by their position in a file, and pyarrow's scanner gives no
positions; but it gives the batches of each fragment in order, so a scan of fragments
that reads every row of the row groups it reads (no filter) knows where each batch's rows
are. The files of a group that have deletion vectors are read that way, one fragment each,
holding

- the row groups that may hold rows of the scan: pruned with the group's prunable filter
  by their statistics, as pyarrow prunes, and without those whose rows are all deleted;
- a **keep-mask** over the rows the fragment reads: :meth:`DeletionVector.keep_mask
  <cdkds.catalog.keyed.deletion.DeletionVector.keep_mask>` of its file, the one meaning of
  "deleted" cdkds's own reader (:func:`~cdkds.catalog.read.scan.read_task`) applies too.

Each batch keeps the rows its keep-mask keeps and the group's filter (the predicate, TTL
and tombstones, evaluated by the scanner as a column, :data:`KEEP`) holds true for. A
scan with nothing to filter but deleted rows reads the group's other files in the same
scan, their keep-masks all true. Every fragment must give the rows its footer (or the
log) says: a file that gives more or fewer is a :class:`DataFileError` naming it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from cdkds.catalog.errors import DataFileError
from cdkds.catalog.keyed.deletion import load_deletes
from cdkds.catalog.read.native import FOOTER_READERS, NativeGroup
from cdkds.catalog.read.scan import FileScanTask
from cdkds.catalog.storage import ObjectStore

KEEP = "cdkds keep"  # the column of a scan holding a filter evaluated on the rows read (no field has a space)

_PARQUET = ds.ParquetFileFormat()


@dataclass(frozen=True)
class PositionedFragment:
    """The row groups of one file a scan reads, all their rows, and ``keep``: for each of
    those rows in order, whether its file's deletion vectors leave it."""

    fragment: ds.ParquetFileFragment
    keep: np.ndarray  # bool, one per row the fragment reads

    @property
    def rows(self) -> int:
        return len(self.keep)


def positioned_fragment(store: ObjectStore, task: FileScanTask, schema: pa.Schema, filesystem: pafs.FileSystem,
                        prunable: pc.Expression | None) -> PositionedFragment | None:
    """The fragment reading ``task``'s file (of dataset ``schema``) with its keep-mask;
    ``None`` when no row group may hold a row of the scan. With a filter to prune row
    groups with, reads the file's footer; without, the file's rows are those the log says
    (the scan checks it)."""
    fragment = _PARQUET.make_fragment(store.path(task.file.path), filesystem, file_size=task.file.size)
    vector = load_deletes(store, task.file.deletes)
    if prunable is None:
        rows = task.file.row_count
        keep = (None if vector is None else vector.keep_mask(0, rows))
        keep = np.ones(rows, bool) if keep is None else keep
        return PositionedFragment(fragment, keep) if keep.any() else None
    fragment.ensure_complete_metadata()
    metadata = fragment.metadata
    sizes = np.array([metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)], np.int64)
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    keep_all = None if vector is None else vector.keep_mask(0, int(offsets[-1]))
    chosen, masks = [], []
    for g in (r.id for r in fragment.subset(filter=prunable, schema=schema).row_groups):
        mask = np.ones(sizes[g], bool) if keep_all is None else keep_all[offsets[g]:offsets[g + 1]]
        if mask.any():  # a row group all of whose rows are deleted is not read
            chosen.append(g)
            masks.append(mask)
    if not chosen:
        return None
    return PositionedFragment(fragment.subset(row_group_ids=chosen), np.concatenate(masks))


def positioned_fragments(store: ObjectStore, tasks: tuple[FileScanTask, ...], schema: pa.Schema,
                         filesystem: pafs.FileSystem, prunable: pc.Expression | None) -> list[PositionedFragment]:
    """:func:`positioned_fragment` of each task that reads some row group; footers of an
    object store read side by side."""
    def one(task: FileScanTask) -> PositionedFragment | None:
        return positioned_fragment(store, task, schema, filesystem, prunable)
    if len(tasks) == 1 or prunable is None or isinstance(filesystem, pafs.LocalFileSystem):
        found = [one(t) for t in tasks]
    else:
        with ThreadPoolExecutor(min(FOOTER_READERS, len(tasks))) as pool:
            found = list(pool.map(one, tasks))
    return [p for p in found if p is not None]


def positioned_scan(parts: list[PositionedFragment], schema: pa.Schema, filesystem: pafs.FileSystem,
                    columns: dict[str, pc.Expression], where: pc.Expression | None,
                    batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The rows of ``parts`` (a dataset of ``schema``) in ``columns`` that their keep-masks
    keep and ``where`` holds true for (``None``: all), batch by batch: each batch filtered
    here while Arrow's threads read the next ones."""
    if not parts:
        return
    projected = dict(columns)
    if where is not None:
        projected[KEEP] = where
    dataset = ds.FileSystemDataset([p.fragment for p in parts], schema, _PARQUET, filesystem)
    # no filter: every row of a fragment's row groups comes, in order, so a batch's positions are known;
    # each batch names its file, so one file's rows are never counted as another's
    scanner = dataset.scanner(columns=projected, batch_size=batch_rows)
    batches = ((tagged.fragment.path, tagged.record_batch) for tagged in scanner.scan_batches())
    part, seen = -1, 0
    try:
        for path, batch in batches:
            if not batch.num_rows:
                continue
            if part < 0 or path != parts[part].fragment.path:
                if part >= 0 and seen != parts[part].rows:
                    raise _miscounted(parts[part])
                part, seen = part + 1, 0
                if part == len(parts) or path != parts[part].fragment.path:  # a file gave no row
                    raise _miscounted(parts[min(part, len(parts) - 1)])
            read = batch.num_rows
            if seen + read > parts[part].rows:
                raise _miscounted(parts[part])
            batch = kept_rows(batch, parts[part].keep[seen:seen + read])
            seen += read
            if batch.num_rows:
                yield batch
        if part < 0 or seen != parts[part].rows:
            raise _miscounted(parts[max(part, 0)])
        if part < len(parts) - 1:
            raise _miscounted(parts[part + 1])
    finally:
        batches.close()  # drops the scan: its read-ahead stops


def _miscounted(part: PositionedFragment) -> DataFileError:
    return DataFileError(f"reading {part.fragment.path} failed: its row groups hold other than the "
                         f"{part.rows} rows its footer and the log say")


def kept_rows(batch: pa.RecordBatch, keep: np.ndarray) -> pa.RecordBatch:
    """The rows of ``batch`` where ``keep`` (a keep-mask) and its column :data:`KEEP` (when it
    has it; null is not kept) are true, without that column."""
    if KEEP not in batch.schema.names:
        return batch if keep.all() else batch.filter(pa.array(keep))
    mask = pc.and_(batch.column(KEEP), pa.array(keep))
    return batch.drop_columns([KEEP]).filter(mask)


def deleted_tasks(group: NativeGroup) -> tuple[FileScanTask, ...]:
    """The files of ``group`` with deletion vectors."""
    return tuple(t for t in group.tasks if t.file.deletes)
