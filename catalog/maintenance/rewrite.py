"""Rewriting data files without their deleted and expired rows, in one commit that changes
no row: compaction's and the table services' one way of moving rows. On a keyed dataset
every row moved gets a new index entry in the same commit, and index buckets may be merged
alongside.

A rewrite is two steps, so that the first can run anywhere: :func:`write_files` writes the
new data files of some of the files to rewrite (in the committing process, or in a Spark
task, see :func:`cdkds.connector.maintain`), and :func:`commit_rewrite` commits what one or
more of them wrote, with its index entries, as one commit. :func:`rewrite` does both."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pyarrow as pa

from cdkds.catalog.errors import CdkdsError, CommitStateUnknownError
from cdkds.catalog.expressions import ALWAYS_TRUE, bind, not_
from cdkds.catalog.expressions.pruning import FileFilter
from cdkds.catalog.keyed.ttl import TimeToLive
from cdkds.catalog.log.actions import Action, AddFile, AddIndex, RemoveFile
from cdkds.catalog.log.commit import REWRITE_OPERATION, clock
from cdkds.catalog.log.conflicts import Rewrite
from cdkds.catalog.read.scan import FileScanTask, file_task, read_task
from cdkds.catalog.work_columns import FILE, POSITION
from cdkds.catalog.write.writer import DEFAULT_TARGET_FILE_SIZE, PartitionedWriter, delete_files

if TYPE_CHECKING:
    from cdkds.catalog.dataset import Dataset
    from cdkds.catalog.descriptor import DatasetDescriptor
    from cdkds.catalog.storage import ObjectStore


@dataclass(frozen=True)
class Rewritten:
    """What one rewrite committed."""

    revision: int
    files_read: int
    bytes_read: int
    files_written: int
    bytes_written: int
    merged_buckets: int


@dataclass(frozen=True)
class WrittenFiles:
    """What :func:`write_files` wrote, not committed: data files and, on a keyed dataset, the
    rows it moved (``moved``: their record key, ordering and TTL columns, with the file and
    position each went to in ``_file`` (dictionary-encoded) and ``_pos``; ``None`` when no
    row moved)."""

    adds: tuple[AddFile, ...]
    moved: pa.Table | None = None


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
    now = clock()
    for f in files:
        if not keeps_expiry(snapshot.descriptor, f, now):
            raise CdkdsError(f"dataset {dataset.name!r}: rewriting {f.path} would move rows whose ttl counts from "
                             f"their commit time, and so make them outlive it; it can be rewritten once they expired")
    transaction = uuid.uuid4().hex
    written = write_files(dataset.store, dataset.name, snapshot.descriptor, snapshot.descriptor_version,
                          snapshot.version, [file_task(snapshot, f, now) for f in files], transaction,
                          target_file_size)
    return commit_rewrite(dataset, files, [written], transaction, now, info, merge_buckets)


def write_files(store: "ObjectStore", dataset: str, descriptor: "DatasetDescriptor", descriptor_version: int,
                base_revision: int, tasks: Sequence[FileScanTask], transaction: str,
                target_file_size: int = DEFAULT_TARGET_FILE_SIZE) -> WrittenFiles:
    """Write the live rows of the files of ``tasks`` (of revision ``base_revision``, read as the
    tasks say: without deleted and expired rows) into new data files of about
    ``target_file_size``, for commit ``transaction``; commits nothing. What it wrote is deleted
    when it fails."""
    indexed = index_columns(descriptor)
    writer = PartitionedWriter(store, dataset, descriptor, base_revision=base_revision,
                               descriptor_version=descriptor_version, transaction=transaction,
                               operation=REWRITE_OPERATION, replaces=[t.file.path for t in tasks],
                               target_file_size=target_file_size)
    moved: list[pa.Table] = []
    adds: list[AddFile] = []
    try:
        for task in tasks:
            for batch in read_task(store, descriptor, ALWAYS_TRUE, list(descriptor.fields), task):
                writer.write_batch(batch)
                if indexed:
                    moved.append(pa.Table.from_batches([batch.select(indexed)]))
        adds = writer.close()
        if not moved:
            return WrittenFiles(tuple(adds))
        placed, paths, positions = writer.placements()
        order = np.argsort(placed, kind="stable")  # placements in the order the rows were read
        rows = pa.concat_tables(moved)
        # dictionary-encoded, as index entries keep it: a code per row, not a path (2.6M rows: 0.4 s of casts)
        rows = rows.append_column(FILE, paths.take(pa.array(order))) \
            .append_column(POSITION, pa.array(positions[order], pa.int64()))
        return WrittenFiles(tuple(adds), rows)
    except BaseException:
        writer.abort()
        delete_files(store, [a.path for a in adds])
        raise


def index_columns(descriptor: "DatasetDescriptor") -> list[str]:
    """The columns an index entry takes from a row: record key, ordering and TTL fields (none
    for a dataset without a record key)."""
    if not descriptor.record_key:
        return []
    from cdkds.catalog.keyed.ttl import TimeToLive
    ttl = TimeToLive.of(descriptor)
    return list(dict.fromkeys([*descriptor.record_key, *(c for c in (
        descriptor.ordering_field, ttl.ttl_field if ttl is not None else None) if c)]))


def commit_rewrite(dataset: "Dataset", files: Sequence[AddFile], written: Sequence[WrittenFiles], transaction: str,
                   now_ms: int, info: Mapping[str, Any] | None = None, merge_buckets: Sequence[int] = ()) -> Rewritten:
    """Commit what :func:`write_files` wrote from ``files`` of the dataset's snapshot, for commit
    ``transaction`` at ``now_ms``, as one ``compact`` commit replacing ``files``: with index
    entries for the rows moved, and the deltas of the index buckets ``merge_buckets`` merged
    (with the moved rows' entries, and so is a bucket those entries are half of);
    the dataset moves to it. Raises what the commit raises; the written files (and the index
    files it wrote) are deleted unless the commit may have landed."""
    snapshot = dataset.snapshot
    adds = [a for w in written for a in w.adds]
    paths = [a.path for a in adds]
    try:
        actions: list[Action] = [*adds, *(RemoveFile(f.path) for f in files)]
        index = None
        if snapshot.descriptor.record_key:
            from cdkds.catalog.keyed.index import RecordIndex
            index = RecordIndex(dataset.store, snapshot, dataset.name)
        touched: set[int] = set()
        based: set[int] = set()  # buckets given a new base: merged
        moved = [w.moved for w in written if w.moved is not None and w.moved.num_rows]
        if index is not None and moved:
            rows = pa.concat_tables(moved)
            entries = index.entries(rows.drop_columns([FILE, POSITION]), rows.column(FILE),
                                    rows.column(POSITION).to_numpy())
            index_actions = index.write(entries, now_ms, merge=frozenset(merge_buckets), moved=True)
            touched = {a.bucket for a in index_actions if isinstance(a, AddIndex)}
            based = {a.bucket for a in index_actions if isinstance(a, AddIndex) and a.base}
            paths.extend(a.path for a in index_actions if isinstance(a, AddIndex))
            actions.extend(index_actions)
        merged = 0
        if index is not None:
            merge = index.merge(sorted(set(merge_buckets) - touched), now_ms)
            paths.extend(a.path for a in merge if isinstance(a, AddIndex))
            actions.extend(merge)
            merged = len(based | {a.bucket for a in merge if isinstance(a, AddIndex)})
        facts = {"rewritten_files": len(files), "bytes_read": sum(f.size for f in files),
                 "written_files": len(adds), "bytes_written": sum(a.size for a in adds)}
        if merged:
            facts["merged_buckets"] = merged
        dataset._commit(REWRITE_OPERATION, actions, {**facts, **(info or {})}, transaction, rule=Rewrite(tuple(files)))
    except CommitStateUnknownError:
        raise  # it may have landed: its files must stay
    except BaseException:
        delete_files(dataset.store, paths)
        raise
    return Rewritten(dataset.version, len(files), facts["bytes_read"], len(adds), facts["bytes_written"], merged)
