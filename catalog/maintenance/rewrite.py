"""Rewriting data files without their deleted and expired rows, in one commit that changes
no row: compaction's and the table services' one way of moving rows. On a keyed dataset
every row moved gets a new index entry in the same commit, and index buckets may be merged
alongside."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pyarrow as pa

from cdkds.catalog.errors import CdkdsError, CommitFailedError, CommitStateUnknownError
from cdkds.catalog.expressions import ALWAYS_TRUE, bind, not_
from cdkds.catalog.expressions.pruning import FileFilter
from cdkds.catalog.keyed.ttl import TimeToLive
from cdkds.catalog.log.actions import Action, AddFile, AddIndex, RemoveFile
from cdkds.catalog.log.commit import REWRITE_OPERATION, clock
from cdkds.catalog.log.conflicts import Rewrite
from cdkds.catalog.read.scan import file_task, read_task
from cdkds.catalog.write.writer import DEFAULT_TARGET_FILE_SIZE, PartitionedWriter, delete_files

if TYPE_CHECKING:
    from cdkds.catalog.dataset import Dataset
    from cdkds.catalog.descriptor import DatasetDescriptor


@dataclass(frozen=True)
class Rewritten:
    """What one rewrite committed."""

    revision: int
    files_read: int
    bytes_read: int
    files_written: int
    bytes_written: int
    merged_buckets: int


def keeps_expiry(descriptor: "DatasetDescriptor", f: AddFile, now_ms: int) -> bool:
    """Whether rewriting ``f`` at ``now_ms`` leaves the expiry of its rows as it is. Not when
    ``ttl`` counts from a row's commit time and ``f``'s rows are alive: moved, they would take
    the rewrite's commit time and outlive their ttl (expired, they are dropped, not moved)."""
    ttl = TimeToLive.of(descriptor)
    return ttl is None or not ttl.by_commit_time or f.timestamp + ttl.ttl_ms <= now_ms


def may_have_expired(descriptor: "DatasetDescriptor", f: AddFile, now_ms: int) -> bool:
    """Whether rows of ``f`` may have expired (TTL) at ``now_ms``, by its statistics."""
    ttl = TimeToLive.of(descriptor)
    if ttl is None:
        return False
    expired = bind(not_(ttl.visible(now_ms, f)), descriptor.fields)
    return FileFilter.of(expired, descriptor).may_match(f)


def rewrite(dataset: "Dataset", files: Sequence[AddFile], target_file_size: int = DEFAULT_TARGET_FILE_SIZE,
            info: Mapping[str, Any] | None = None, merge_buckets: Sequence[int] = ()) -> Rewritten:
    """Rewrite ``files`` of the dataset's snapshot (their live rows, into files of about
    ``target_file_size``) and merge the deltas of the index buckets ``merge_buckets`` into
    new bases, as one ``compact`` commit; the dataset moves to it. Raises what the commit
    raises (:class:`CommitConflictError` when a concurrent commit deleted rows of a file it
    rewrites); files of a commit known not to have landed are deleted. Refuses files whose
    rows' expiry it would change (:func:`keeps_expiry`)."""
    snapshot = dataset.snapshot
    descriptor = snapshot.descriptor
    now = clock()
    for f in files:
        if not keeps_expiry(descriptor, f, now):
            raise CdkdsError(f"dataset {dataset.name!r}: rewriting {f.path} would move rows whose ttl counts from "
                             f"their commit time, and so make them outlive it; it can be rewritten once they expired")
    keyed = bool(descriptor.record_key)
    index = None
    if keyed:
        from cdkds.catalog.keyed.index import RecordIndex
        index = RecordIndex(dataset.store, snapshot, dataset.name)
    columns = list(descriptor.fields)
    indexed = list(dict.fromkeys([*descriptor.record_key, *(c for c in (
        descriptor.ordering_field, index.ttl.ttl_field if index is not None and index.ttl else None) if c)]))
    transaction = uuid.uuid4().hex
    writer = PartitionedWriter(dataset.store, dataset.name, descriptor, snapshot.descriptor_version, snapshot.version,
                               transaction, REWRITE_OPERATION, [f.path for f in files], target_file_size)
    moved: list[pa.Table] = []
    written: list[str] = []
    try:
        for f in files:
            for batch in read_task(dataset.store, descriptor, ALWAYS_TRUE, columns, file_task(snapshot, f, now)):
                writer.write_batch(batch)
                if keyed:
                    moved.append(pa.Table.from_batches([batch.select(indexed)]))
        adds = writer.close()
        written = [a.path for a in adds]
        actions: list[Action] = [*adds, *(RemoveFile(f.path) for f in files)]
        touched: set[int] = set()
        if index is not None and moved:
            rows = pa.concat_tables(moved)
            placed, paths, positions = writer.placements()
            order = np.argsort(placed, kind="stable")
            index_actions = index.write(index.entries(rows, [paths[i] for i in order], positions[order]), now)
            touched = {a.bucket for a in index_actions if isinstance(a, AddIndex)}
            written.extend(a.path for a in index_actions if isinstance(a, AddIndex))
            actions.extend(index_actions)
        merged = 0
        if index is not None:
            for bucket in sorted(set(merge_buckets) - touched):
                merge = index.merge(bucket, now)
                written.extend(a.path for a in merge if isinstance(a, AddIndex))
                actions.extend(merge)
                merged += bool(merge)
        facts = {"rewritten_files": len(files), "bytes_read": sum(f.size for f in files),
                 "written_files": len(adds), "bytes_written": sum(a.size for a in adds)}
        if merged:
            facts["merged_buckets"] = merged
        dataset._commit(REWRITE_OPERATION, actions, {**facts, **(info or {})}, transaction, rule=Rewrite(tuple(files)))
    except CommitFailedError:
        delete_files(dataset.store, written)
        raise
    except CommitStateUnknownError:
        raise  # it may have landed: its files must stay
    except BaseException:
        writer.abort()
        delete_files(dataset.store, written)
        raise
    return Rewritten(dataset.version, len(files), facts["bytes_read"], len(adds), facts["bytes_written"], merged)
