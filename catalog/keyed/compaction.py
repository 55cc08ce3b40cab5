"""Compaction of a keyed dataset: rewrite files without their deleted and expired rows,
and give every row it moves a new index entry, all in one commit."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from cdkds.catalog.errors import CommitFailedError, CommitStateUnknownError
from cdkds.catalog.expressions import ALWAYS_TRUE
from cdkds.catalog.keyed.index import RecordIndex
from cdkds.catalog.log.actions import Action, AddIndex, RemoveFile
from cdkds.catalog.log.commit import clock
from cdkds.catalog.log.conflicts import Rewrite
from cdkds.catalog.read.scan import file_task, read_task
from cdkds.catalog.write.writer import DEFAULT_TARGET_FILE_SIZE, PartitionedWriter, delete_files

if TYPE_CHECKING:
    from cdkds.catalog.dataset import Dataset
    from cdkds.catalog.maintenance.compaction import CompactionPlan


def compact(dataset: "Dataset", plan: "CompactionPlan", target_file_size: int = DEFAULT_TARGET_FILE_SIZE) -> int:
    """Rewrite the planned files of a keyed dataset in one commit; returns its revision."""
    snapshot = dataset.snapshot
    descriptor = snapshot.descriptor
    index = RecordIndex(dataset.store, snapshot, dataset.name)
    now = clock()
    columns = list(descriptor.fields)
    indexed = list(dict.fromkeys([*descriptor.record_key, *(c for c in (
        descriptor.ordering_field, index.ttl.ttl_field if index.ttl else None) if c)]))
    files = plan.files
    writer = PartitionedWriter(dataset.store, dataset.name, descriptor, snapshot.descriptor_version, snapshot.version,
                               uuid.uuid4().hex, "compact", [f.path for f in files], target_file_size)
    moved: list[pa.Table] = []
    written: list[str] = []
    try:
        for f in files:
            for batch in read_task(dataset.store, descriptor, ALWAYS_TRUE, columns, file_task(snapshot, f, now)):
                writer.write_batch(batch)
                moved.append(pa.Table.from_batches([batch.select(indexed)]))
        adds = writer.close()
        written = [a.path for a in adds]
        actions: list[Action] = [*adds, *(RemoveFile(f.path) for f in files)]
        if moved:
            rows = pa.concat_tables(moved)
            placed, paths, positions = writer.placements()
            order = np.argsort(placed, kind="stable")
            entries = index.entries(rows, [paths[i] for i in order], positions[order])
            index_actions = index.write(entries, now)
            written.extend(a.path for a in index_actions if isinstance(a, AddIndex))
            actions.extend(index_actions)
        dataset._commit("compact", actions, {"rewritten_files": len(files)}, rule=Rewrite(tuple(files)))
    except CommitFailedError:
        delete_files(dataset.store, written)
        raise
    except CommitStateUnknownError:
        raise  # it may have landed: its files must stay
    except BaseException:
        writer.abort()
        delete_files(dataset.store, written)
        raise
    return dataset.version
