"""A dataset: a named, versioned collection of records with a descriptor (CDK's ``Dataset``)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import pyarrow as pa

from cdkds.catalog.log.conflicts import DELETE_OPERATION, ConflictRule, Exclusive, replanned
from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.expressions import Expression
from cdkds.catalog.log.actions import Action, AddFile
from cdkds.catalog.log import HistoryEntry, TransactionLog
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.read.arrow_scan import scan_batches, scan_table
from cdkds.catalog.read.scan import ScanPlan, batch_reader, check_batch_rows, plan_scan
from cdkds.catalog.services.scope import ServiceScope
from cdkds.catalog.storage import ObjectStore
from cdkds.catalog import maintenance
from cdkds.catalog.write.delete import plan_delete, row_deletes
from cdkds.catalog.errors import CommitFailedError, RefError
from cdkds.catalog.log.actions import (
    FIELD_ID_PROTOCOL, KEYED_PROTOCOL, LAYOUT_PROTOCOL, PARTED_CHECKPOINT_PROTOCOL, AddIndex, DeleteRows, SetMetadata,
    SetProtocol, Untag,
)
from cdkds.catalog.log.commit import clock
from cdkds.catalog.write.writer import DEFAULT_TARGET_FILE_SIZE, DatasetWriter, delete_files
from cdkds.formats.evolution import misread_by_name
from cdkds.formats.files import DEFAULT_BATCH_ROWS
from cdkds.formats.records import to_records

if TYPE_CHECKING:
    import pyarrow.dataset
    from cdkds.catalog.log.actions import BranchRef
    from cdkds.catalog.keyed.operations import UpsertResult
    from cdkds.catalog.keyed.writer import KeyedWriter
    from cdkds.catalog.maintenance.check import CheckReport
    from cdkds.catalog.mirror.runner import MirrorReport
    from cdkds.catalog.repository import DatasetRepository
    from cdkds.catalog.schema_update import SchemaUpdate
    from cdkds.catalog.services.planner import ServicePlan
    from cdkds.catalog.services.runner import ServiceReport


class Dataset:
    """One dataset as of one snapshot. Writing through it moves it to the new snapshot;
    :meth:`refresh` picks up other writers' commits."""

    def __init__(self, repository: "DatasetRepository", name: str, store: ObjectStore, log: TransactionLog,
                 snapshot: Snapshot):
        self.repository = repository
        self.name = name
        self.store = store
        self.log = log
        self.snapshot = snapshot
        self.last_services: "ServiceReport | None" = None  # what the services did after this object's last write
        self._serviced: Snapshot | None = None  # the services' commits after this object's last write
        self._touched = ServiceScope()  # what this object's commits touched since its last inline pass

    def __repr__(self) -> str:
        on = f", branch={self.branch_name!r}" if self.branch_name is not None else ""
        return f"Dataset({self.name!r}, version={self.version}{on}, url={self.store.url!r})"

    @property
    def descriptor(self) -> DatasetDescriptor:
        return self.snapshot.descriptor

    @property
    def version(self) -> int:
        """The revision of the log this dataset shows."""
        return self.snapshot.version

    @property
    def descriptor_version(self) -> int:
        """The revision that set the current descriptor."""
        return self.snapshot.descriptor_version

    @property
    def files(self) -> list[AddFile]:
        return list(self.snapshot.files.values())

    @property
    def url(self) -> str:
        return self.store.url

    def refresh(self) -> "Dataset":
        """Move to the latest commit."""
        self._serviced = None
        self.snapshot = self.log.snapshot()
        return self

    def history(self) -> list[HistoryEntry]:
        """Every commit: revision, time, operation and counts."""
        return self.log.history()

    # ---------------------------------------------------------------- tags

    def tag(self, name: str, version: int | None = None) -> int:
        """Name revision ``version`` (default: the one this dataset shows) ``name``, in a commit
        of its own; expiry and vacuum keep a tagged revision readable until it is untagged
        (``repo.load(name, tag=...)`` reads it). Returns the tagged revision. :class:`RefExistsError`
        when the tag exists, :class:`RefError` for a bad name or a revision the log does not hold."""
        from cdkds.catalog.log.conflicts import RefChange
        from cdkds.catalog.log.tags import TAG, UNTAG, lost_to_expiry, plan_tag
        self._on_main("tagging")  # a tag names a revision of main
        plan = plan_tag(self.log, self.snapshot, name, version)
        self._commit(TAG, plan.actions, plan.info, rule=RefChange())
        if lost_to_expiry(self.log, plan):
            self._commit(UNTAG, [Untag(name)], {"tag": name}, rule=RefChange())
            raise RefError(f"dataset {self.name!r}: an expiry running meanwhile removed revision {plan.revision} "
                           f"before tag {name!r} could keep it; the tag was taken back (revision {self.version})")
        return plan.revision

    def untag(self, name: str) -> int:
        """End tag ``name`` in a commit of its own (its revision is then expired and vacuumed as
        any other); returns that commit's revision. :class:`RefNotFoundError` when there is no such tag."""
        from cdkds.catalog.log.conflicts import RefChange
        from cdkds.catalog.log.tags import UNTAG, plan_untag
        self._on_main("untagging")
        self._commit(UNTAG, plan_untag(self.name, self.snapshot, name), {"tag": name}, rule=RefChange())
        return self.version

    def tags(self) -> dict[str, int]:
        """The tags as of this dataset's revision: name -> tagged revision."""
        return dict(sorted(self.snapshot.tags.items()))

    def transaction_version(self, app_id: str) -> int | None:
        """The last batch application ``app_id`` (a streaming query) committed, as of this
        dataset's revision; ``None`` if it never committed one."""
        txn = self.snapshot.transactions.get(app_id)
        return None if txn is None else txn.version

    # ---------------------------------------------------------------- reading

    def plan(self, where: Expression | str | None = None, columns: Sequence[str] | None = None) -> ScanPlan:
        """The files a scan with this predicate reads (after partition and statistics pruning)."""
        return plan_scan(self.name, self.snapshot, where, columns)

    def scan(self, where: Expression | str | None = None, columns: Sequence[str] | None = None,
             batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        """The matching rows as Arrow batches, streamed file by file."""
        check_batch_rows(self.name, batch_rows)
        return scan_batches(self.store, self.plan(where, columns), batch_rows)

    def to_table(self, where: Expression | str | None = None, columns: Sequence[str] | None = None) -> pa.Table:
        """The matching rows as one Arrow table (this one does hold them all in memory)."""
        return scan_table(self.store, self.plan(where, columns))

    def to_batch_reader(self, where: Expression | str | None = None, columns: Sequence[str] | None = None,
                        batch_rows: int = DEFAULT_BATCH_ROWS) -> pa.RecordBatchReader:
        """The matching rows as a stream of Arrow batches (read once, file by file, as they are
        taken: bounded memory). DuckDB queries it directly; ``read_all()`` gathers it;
        ``close()`` stops reading at once."""
        check_batch_rows(self.name, batch_rows)
        plan = self.plan(where, columns)
        return batch_reader(plan.output_schema, scan_batches(self.store, plan, batch_rows))

    def to_arrow_dataset(self, where: Expression | str | None = None,
                         columns: Sequence[str] | None = None) -> "pyarrow.dataset.Dataset":
        """The matching rows as a ``pyarrow.dataset.Dataset`` that DuckDB, Polars
        (``scan_pyarrow_dataset``) and pandas scan again and again, pushing their own column
        selections and filters into it. Parquet files where no schema change applies are read
        lazily by pyarrow, with tombstones, TTL and a keyed dataset's deleted keys as its filter
        where one filter fits them all; the matching rows of the others are read now and held
        (see :mod:`cdkds.catalog.read.arrow_dataset`). Read the rows through the dataset, not
        its files: those may hold deleted rows."""
        from cdkds.catalog.read.arrow_dataset import to_arrow_dataset
        return to_arrow_dataset(self.store, self.plan(where, columns))

    def changes(self, start_version: int, end_version: int | None = None,
                columns: Sequence[str] | None = None) -> pa.RecordBatchReader:
        """The rows changed by revisions ``start_version`` to ``end_version`` (default: the
        latest), both included, as a stream of Arrow batches with ``_change_type`` (``insert``,
        ``update_preimage``, ``update_postimage``, ``delete``), ``_commit_version`` and
        ``_commit_timestamp``, commit by commit (see :mod:`cdkds.catalog.read.changes`). The range
        is checked now; rows are read as the batches are taken (``read_all()`` gathers them)."""
        from cdkds.catalog.read.changes import plan_changes, read_changes
        plan = plan_changes(self.log, start_version, end_version, columns)
        return batch_reader(plan.output_schema, read_changes(self.store, plan))

    def reader(self, where: Expression | str | None = None, columns: Sequence[str] | None = None) -> "DatasetReader":
        """The matching records as dicts (CDK's reader stream)."""
        return DatasetReader(self.scan(where, columns))

    # ---------------------------------------------------------------- writing

    def writer(self, **options: Any) -> "DatasetWriter | KeyedWriter":
        """A writer stream; use it as a context manager (see :class:`DatasetWriter`). On a
        keyed dataset appends are inserts (see :class:`cdkds.catalog.keyed.writer.KeyedWriter`)."""
        self._adopt_services()
        if self.descriptor.record_key:
            from cdkds.catalog.keyed.writer import KeyedWriter
            return KeyedWriter(self, **options)
        return DatasetWriter(self, **options)

    def delete(self, where: Expression | str) -> int | None:
        """Delete the rows matching ``where`` in one commit; returns its revision (``None``
        when no file can hold a match). Whole files are removed where the partition or
        the statistics prove every row matches; otherwise a tombstone hides the rows (on
        a keyed dataset, deletion vectors mark them)."""
        self._adopt_services()
        revision = replanned(self, lambda: self._delete(where))
        if revision is not None:
            self._after_write()
        return revision

    def _delete(self, where: Expression | str) -> int | None:
        plan = plan_delete(self.name, self.snapshot, where)
        if not plan.removed and not plan.partial:
            return None
        info = {"predicate": str(plan.predicate), "removed_files": len(plan.removed), "tombstoned_files": len(plan.partial)}
        actions = plan.actions
        if self.descriptor.record_key:
            actions = row_deletes(self.store, self.snapshot, plan, clock())
            if not actions:
                return None
            sidecars = [a.vector.path for a in actions if isinstance(a, DeleteRows) and a.vector.path]
            try:
                self._commit(DELETE_OPERATION, actions, info, rule=plan.rule)
            except CommitFailedError:
                delete_files(self.store, sidecars)
                raise
            return self.version
        self._commit(DELETE_OPERATION, actions, info, rule=plan.rule)
        return self.version

    # ---------------------------------------------------------------- keyed datasets

    def upsert(self, rows: Any) -> "UpsertResult":
        """Insert or replace rows by record key, reconciled by last-write-wins (see
        docs/MODEL.md), in one commit. ``rows``: dicts, an Arrow table or batch, or an
        iterator of them."""
        return self._keyed("upsert", rows)

    def insert(self, rows: Any) -> "UpsertResult":
        """Insert rows whose keys are not live; :class:`KeyExistsError` naming the first
        existing key otherwise (nothing committed)."""
        return self._keyed("insert", rows)

    def update(self, rows: Any) -> "UpsertResult":
        """Change only the columns given, for keys that are live; keys that are not are
        counted (``unchanged``), not added."""
        return self._keyed("update", rows)

    def delete_keys(self, keys: Any) -> "UpsertResult":
        """Delete rows by key: dicts (with the ordering field, optionally), tuples, single
        values for one-field keys, or an Arrow table of the key columns."""
        return self._keyed("delete", keys)

    def get(self, key: Any, columns: Sequence[str] | None = None) -> dict | None:
        """The live row of ``key`` (a dict, a tuple in key order, or a value), or ``None``."""
        rows = self.get_many([key], columns)
        return to_records(rows)[0] if rows.num_rows else None

    def get_many(self, keys: Any, columns: Sequence[str] | None = None) -> pa.Table:
        """The live rows of ``keys``, in the order of the keys (keys not found are left out);
        one index lookup per bucket touched."""
        from cdkds.catalog.keyed.operations import get_many
        return get_many(self, keys, columns)

    def rebuild_index(self) -> int:
        """Rebuild the record index from the data files in one commit; returns its revision."""
        from cdkds.catalog.keyed.operations import rebuild_index
        self._adopt_services()
        return replanned(self, lambda: rebuild_index(self))

    def _keyed(self, operation: str, rows: Any) -> "UpsertResult":
        from cdkds.catalog.keyed.operations import run
        self._adopt_services()
        result = run(self, operation, rows)
        if result.revision is not None:
            result = dataclasses.replace(result, services=self._after_write())
        return result

    def compact(self, target_file_size: int = DEFAULT_TARGET_FILE_SIZE, where: Expression | str | None = None) -> int | None:
        """Merge small files per partition, apply tombstones and rewrite the files of older
        partition specs into the current strategy, in one commit; returns its revision,
        ``None`` when there was nothing to compact."""
        self._adopt_services()
        return replanned(self, lambda: maintenance.compact(self, target_file_size, where))

    def maintain(self, budget: int | None = None) -> "ServiceReport":
        """Run the table services once over the latest revision: rewrite files with many
        deleted rows, bin-pack small files, merge index deltas, and expire the log and
        vacuum where the descriptor asks for it (see :mod:`cdkds.catalog.services`), within
        ``budget`` bytes of input (``None``: all there is). Each rewrite is its own
        ``compact`` commit; this dataset moves to the latest revision."""
        from cdkds.catalog.services.runner import maintain
        self._on_main("the table services")
        return maintain(self, budget)

    def services_plan(self) -> "ServicePlan":
        """What a pass of the table services over every file (``maintain``) would do next on
        this revision, and why (an inline pass looks only at what its write touched)."""
        from cdkds.catalog.services.planner import plan_services
        return plan_services(self.store, self.snapshot, clock())

    def _after_write(self) -> "ServiceReport | None":
        """The inline pass of the table services after one of this object's writes committed,
        over the partitions its commits touched since the last pass. They commit through a
        copy, so this object keeps showing the write's revision; its next write starts from
        their last commit (:meth:`_adopt_services`)."""
        from cdkds.catalog.services.runner import after_write
        scope, self._touched = self._touched, ServiceScope()
        if self.branch_name is not None:  # the services keep main; a branch is compacted by hand, or once published
            return None
        serviced = Dataset(self.repository, self.name, self.store, self.log, self.snapshot)
        self.last_services = after_write(serviced, scope)
        self._serviced = serviced.snapshot if serviced.version != self.version else None
        return self.last_services

    def _adopt_services(self) -> None:
        """Move to the services' last commit after this object's write, before writing again:
        it holds the same rows, and a write planned there does not race it."""
        if self._serviced is not None:
            self.snapshot, self._serviced = self._serviced, None

    def vacuum(self, retention: dt.timedelta = maintenance.DEFAULT_RETENTION, dry_run: bool = True,
               force: bool = False) -> list[str]:
        """Data files that no retained revision references and are older than ``retention``;
        deleted unless ``dry_run`` (the default only lists them). Files live at a tagged
        revision are kept; the list's ``kept`` says so."""
        return maintenance.vacuum(self, retention, dry_run, force)

    def expire_log(self, older_than: Any, force: bool = False) -> list[str]:
        """Remove commits and checkpoints older than a time (a datetime, or a timedelta ago)
        from the start of the log, keeping every later revision readable. A time less than
        an hour ago needs ``force`` (no writer may be running on a revision it expires).
        A tagged revision's checkpoint and parts are kept; the list's ``kept`` says so."""
        return self.log.expire(older_than, force)

    def check(self, read_data: bool = False) -> "CheckReport":
        """Verify the log, checkpoints and every referenced file; never writes (see
        :mod:`cdkds.catalog.maintenance.check`). ``read_data`` reads every live data file whole."""
        from cdkds.catalog.maintenance.check import check_dataset
        return check_dataset(self.store, self.name, read_data)

    # ---------------------------------------------------------------- the descriptor

    def alter(self) -> "SchemaUpdate":
        """Schema changes committed together: ``alter().rename("a", "b").drop("c")
        .add("d", "long", default=0).widen("e", "double").move("b", first=True).commit()``
        (see :class:`cdkds.catalog.schema_update.SchemaUpdate`). No data file is rewritten."""
        from cdkds.catalog.schema_update import SchemaUpdate
        return SchemaUpdate(self)

    def update_descriptor(self, descriptor: DatasetDescriptor, operation: str = "update_descriptor",
                          info: Mapping[str, Any] | None = None) -> Snapshot:
        """Commit ``descriptor`` as the dataset's new one, if the update rules allow it
        (:meth:`DatasetDescriptor.evolve`). Setting a record key builds the record index
        from the data files in the same commit."""
        self._adopt_services()
        return replanned(self, lambda: self._update_descriptor(descriptor, operation, info))

    def _update_descriptor(self, descriptor: DatasetDescriptor, operation: str,
                           info: Mapping[str, Any] | None) -> Snapshot:
        evolved = self.snapshot.evolve(descriptor, self.name)
        actions: list[Action] = [SetMetadata(evolved)]
        protocol = self.snapshot.protocol.reader_version
        if misread_by_name(self.descriptor.schema, evolved.schema):
            protocol = max(protocol, FIELD_ID_PROTOCOL)
        if evolved.partition_spec_id != self.descriptor.partition_spec_id:  # v4 readers would prune by one strategy
            protocol = max(protocol, LAYOUT_PROTOCOL)
        if evolved.record_key and not self.descriptor.record_key:
            from cdkds.catalog.keyed.index import RecordIndex
            view = dataclasses.replace(self.snapshot, descriptor=evolved)
            actions.extend(RecordIndex(self.store, view, self.name).rebuild(clock()))
            protocol = max(protocol, KEYED_PROTOCOL)
        if protocol > self.snapshot.protocol.reader_version:
            actions.insert(0, SetProtocol(protocol, protocol))
        try:
            return self._commit(operation, actions, info, rule=Exclusive())
        except CommitFailedError:
            delete_files(self.store, [a.path for a in actions if isinstance(a, AddIndex)])
            raise

    def mirror(self, *formats: str) -> "list[MirrorReport]":
        """Write the Delta Lake or Iceberg metadata (``"delta"``, ``"iceberg"``; default: the
        mirrors the descriptor's ``mirror.*`` properties enable) over this dataset's files, or
        bring it up to this revision: one mirror version per revision (see
        :mod:`cdkds.catalog.mirror`). Enabled mirrors are kept after every commit anyway."""
        from cdkds.catalog.mirror.runner import update_mirrors
        self._on_main("a mirror")
        return update_mirrors(self.log, self.snapshot, formats or None)

    def upgrade_log(self) -> int:
        """Raise the log to version 4 (checkpoints in parts, read in part) and write a
        checkpoint in the new form; older cdkds versions then refuse the dataset. Version 5
        comes with the first partition-spec change, tag or branch, which need it. Returns the
        revision; nothing is committed when the log is at 4 or above already."""
        self._on_main("upgrading the log")
        protocol, wanted = self.snapshot.protocol, PARTED_CHECKPOINT_PROTOCOL
        if protocol.reader_version < wanted or protocol.writer_version < wanted:
            self._commit("upgrade", [SetProtocol(max(protocol.reader_version, wanted),
                                                 max(protocol.writer_version, wanted))])
            self.checkpoint()
        return self.version

    def checkpoint(self) -> None:
        """Write a checkpoint of the revision this dataset shows (its files then read from the
        checkpoint's parts, so its next checkpoint rewrites only what changed)."""
        self.snapshot = self.log.write_checkpoint(self.snapshot)

    # ---------------------------------------------------------------- branches

    @property
    def branch_name(self) -> str | None:
        """The branch this dataset reads and writes; ``None`` on main."""
        ref = self.log.branch
        return ref.name if ref is not None else None

    def branch(self, name: str) -> "Dataset":
        """Start branch ``name`` at main's latest revision (a commit on main, which this
        dataset moves to) and return the dataset on it: everything done through that one
        commits to the branch, which readers of main do not see until :meth:`publish`."""
        from cdkds.catalog.log.branches import start_branch
        self._on_main("starting a branch")
        self.snapshot = start_branch(self.log, self.snapshot, name)
        return self.repository.load(self.name, branch=name)

    def branches(self) -> "dict[str, BranchRef]":
        """The live branches by name (as of main's latest revision), each with its base revision."""
        main = self.log.main if self.branch_name is not None else self.log.replay
        return dict(main.snapshot().branches)

    def drop_branch(self, name: str) -> int:
        """End branch ``name`` without publishing it (a commit on main); returns its revision."""
        from cdkds.catalog.log.branches import end_branch
        self._on_main("dropping a branch")
        self.snapshot = end_branch(self.log, self.snapshot, name)
        return self.version

    def publish(self, name: str) -> int:
        """Publish branch ``name`` onto main in one commit that also ends it: the branch's net
        change since its base. When main moved since, the branch's commits are checked
        against main's as concurrent writes are, and a conflict raises
        :class:`CommitConflictError` naming main's commit (nothing committed). Returns the
        revision; this dataset moves to it."""
        from cdkds.catalog.log.publish import publish_branch
        self._on_main("publishing a branch")
        self.snapshot = publish_branch(self.log, name)
        return self.version

    def _on_main(self, what: str) -> None:
        if self.branch_name is not None:
            raise RefError(f"dataset {self.name!r}: {what} is done on main, and this dataset is on branch "
                           f"{self.branch_name!r}; load the dataset without a branch for it")

    def _commit(self, operation: str, actions: Sequence[Action], info: Mapping[str, Any] | None = None,
                commit_uuid: str | None = None, rule: ConflictRule | None = None,
                planned_on: int | None = None) -> Snapshot:
        self.snapshot = self.log.commit(self.snapshot, operation, actions, info, commit_uuid, rule, planned_on)
        self._touched = self._touched.including(actions, self.snapshot)
        return self.snapshot


class DatasetReader:
    """Iterates records (dicts) from a stream of batches, one batch in memory at a time."""

    def __init__(self, batches: Iterator[pa.RecordBatch]):
        self._batches = batches
        self._rows: Iterator[dict] = iter(())
        self._open = True

    def __iter__(self) -> "DatasetReader":
        return self

    def __next__(self) -> dict:
        while True:
            try:
                return next(self._rows)
            except StopIteration:
                if not self._open:
                    raise
                try:
                    self._rows = iter(to_records(next(self._batches)))
                except StopIteration:
                    self.close()
                    raise

    def __enter__(self) -> "DatasetReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def is_open(self) -> bool:
        return self._open

    def close(self) -> None:
        if self._open:
            self._open = False
            close = getattr(self._batches, "close", None)
            if close is not None:
                close()
