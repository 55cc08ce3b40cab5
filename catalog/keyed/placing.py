"""Placing a keyed write's rows: their data files, and the index entries that say where each
row went (file and position).

An upsert or insert of many rows places all of them while the record index is looked up
(:class:`Speculation`): nearly always every row wins against what is stored, and then the
lookup and the writing share the machine's cores instead of following each other. When
some row does not win (an older ordering value, a tie, an existing key for an insert), the
speculative files are deleted and the winners placed again, as without speculation.
"""

from __future__ import annotations

import uuid
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from cdkds.catalog.keyed.index import RecordIndex
from cdkds.catalog.log.actions import Action, AddFile, AddIndex
from cdkds.catalog.write.writer import PartitionedWriter, delete_files
from cdkds.formats.threads import LazyPool

if TYPE_CHECKING:
    from cdkds.catalog.dataset import Dataset
    from cdkds.catalog.log.snapshot import Snapshot

SPECULATE_ROWS = 50_000  # fewer rows: a lookup takes milliseconds, and a thread's start costs as much
# its own threads: a speculation waits for tasks on the shared workers (encoding its files)
_SPECULATING = LazyPool(2, "cdkds-speculate")


@dataclass(frozen=True)
class DataFiles:
    """How a keyed write lays out its data files."""

    sort_by: tuple[str, ...]
    target_file_size: int
    max_open_files: int


@dataclass(frozen=True)
class Placed:
    """Rows written: their data files and the index files saying where each row went."""

    adds: list[AddFile]
    index: list[Action]

    @property
    def written(self) -> list[str]:
        return written_paths(self.adds, self.index)


def written_paths(adds: list[AddFile], index: list[Action]) -> list[str]:
    """The files of a keyed write's data files and index actions (a merge's removals are not files)."""
    return [a.path for a in adds] + [a.path for a in index if isinstance(a, AddIndex)]


def place(dataset: "Dataset", snapshot: "Snapshot", index: RecordIndex, operation: str, rows: pa.Table,
          hashes: np.ndarray, files: DataFiles, now: int) -> Placed:
    """Write ``rows`` (of ``hashes``) into new data files and their entries into index files
    (``index`` of ``snapshot``; ``now``: the time in milliseconds). Nothing it wrote is left
    when it fails."""
    writer = PartitionedWriter(dataset.store, dataset.name, snapshot.descriptor, snapshot.descriptor_version,
                               snapshot.version, uuid.uuid4().hex, operation, target_file_size=files.target_file_size,
                               max_open_files=files.max_open_files, sort_by=list(files.sort_by))
    try:
        writer.write_batch(rows)
        adds = writer.close()
    except BaseException:
        writer.abort()
        raise
    try:
        placed, paths, positions = writer.placements()
        order = _inverse(placed)
        entries = index.entries(rows, paths.take(pa.array(order)), positions[order], hashes)
        return Placed(adds, index.write(entries, now))  # it stores all of its files or none
    except BaseException:
        delete_files(dataset.store, [a.path for a in adds])
        raise


class Speculation:
    """Every row of a keyed write placed on a thread of its own, as if each won (see the
    module's docstring): :meth:`take` it when all did, else :meth:`discard` it."""

    def __init__(self, dataset: "Dataset", future: "Future[Placed]"):
        self.dataset, self.future = dataset, future

    @classmethod
    def start(cls, dataset: "Dataset", snapshot: "Snapshot", index: RecordIndex, operation: str, rows: pa.Table,
              hashes: np.ndarray, files: DataFiles, now: int) -> "Speculation | None":
        """The speculation of placing ``rows``, for an upsert or insert of enough rows; else None."""
        if operation not in ("upsert", "insert") or rows.num_rows < SPECULATE_ROWS:
            return None
        return cls(dataset, _SPECULATING.get().submit(place, dataset, snapshot, index, operation, rows, hashes,
                                                      files, now))

    def take(self) -> Placed:
        """What it placed (its failure raised: placing the same rows again would fail alike)."""
        return self.future.result()

    def discard(self) -> None:
        """Wait for it and delete whatever it wrote (its failure is moot: its rows are not wanted)."""
        try:
            placed = self.future.result()
        except BaseException:  # noqa: BLE001 - place() deletes what it wrote before raising
            return
        delete_files(self.dataset.store, placed.written)


def _inverse(placed: np.ndarray) -> np.ndarray:
    """The order that sorts ``placed`` (distinct row numbers): a scatter when they are every
    row of ``0..n-1`` once (a writer places each row once), else a stable sort."""
    order = np.full(len(placed), -1, dtype=np.int64)
    if len(placed) and 0 <= int(placed.min()) and int(placed.max()) < len(placed):
        order[placed] = np.arange(len(placed), dtype=np.int64)
        if (order >= 0).all():
            return order
    return np.argsort(placed, kind="stable")
