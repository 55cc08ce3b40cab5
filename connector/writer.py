"""Writing a DataFrame into a cdkds dataset (``df.write.format("cdkds")``).

The driver checks the DataFrame's schema against the dataset (creating the dataset's
descriptor on first write) before any file is written; executors write files per
partition and send back their descriptions; the driver's ``commit`` makes one log commit
of them (keyed datasets: one reconciled upsert); ``abort`` deletes them. Batch writes
with ``txnAppId``/``txnVersion``, and the stream sink, commit a batch once.

Like :mod:`cdkds.connector.source`, this module imports only pyspark at import time.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from cdkds.connector.source import open_dataset

if TYPE_CHECKING:
    import pyarrow as pa

    from cdkds.catalog import Dataset, DatasetDescriptor
    from cdkds.catalog.keyed.operations import UpsertResult
    from cdkds.catalog.log.actions import Action, AddFile, SetTransaction
    from cdkds.catalog.services.runner import ServiceReport
    from cdkds.connector.options import Location

ROUTING_ROWS = 131_072  # rows an executor gathers before routing them to partition files


class CdkdsCommitMessage(WriterCommitMessage):
    """What a task wrote: data files; for a keyed write, staged rows or a planned change."""

    def __init__(self, adds: "list[AddFile]", staged: "list[str] | None" = None, change: Any = None):
        self.adds = adds
        self.staged = staged or []
        self.change = change

    @property
    def written(self) -> list[str]:
        """The files the task wrote that a commit would reference: data files, index files."""
        return self.change.written if self.change is not None else [a.path for a in self.adds]



def plan_write(options: dict[str, str], schema: StructType, overwrite: bool,
               keyed_operation: str = "insert") -> "CdkdsWriter":
    """Check the write on the driver, before any file is written. ``keyed_operation``: what
    a write to a keyed dataset does when option ``operation`` does not say."""
    import uuid

    from cdkds.catalog import DatasetNotFoundError
    from cdkds.catalog.write.writer import DEFAULT_TARGET_FILE_SIZE
    from cdkds.connector.options import write_location, write_options

    where = write_location(options)
    write = write_options(options, where.name)
    try:
        dataset = open_dataset(where)
    except DatasetNotFoundError:
        if where.branch is not None:  # a write to a branch never creates the dataset
            raise
        dataset = None
    if dataset is None:
        descriptor = new_descriptor(where.name, schema, write)
        descriptor_version, base = 0, None
    else:
        check_write_options(dataset, write)
        descriptor, descriptor_version, base = dataset.descriptor, dataset.descriptor_version, dataset.version
    if descriptor.record_key or write.operation:
        return plan_keyed_write(where, write, dataset, descriptor, descriptor_version, base, schema, overwrite,
                                keyed_operation)
    check_dataframe_schema(where.name, descriptor, schema, write.check_null_schema)
    if overwrite:
        mode = "overwrite_partitions" if write.dynamic_partition_overwrite else "overwrite"
    else:
        mode = "append"
    target = write.target_file_size or DEFAULT_TARGET_FILE_SIZE
    return CdkdsWriter(where, descriptor, descriptor_version, base, uuid.uuid4().hex, mode, target,
                       txn=transaction_of(write), sort_by=sort_option(where.name, descriptor, write))


def sort_option(name: str, descriptor: "DatasetDescriptor", write: Any) -> "tuple[str, ...] | None":
    """The fields option ``sortBy`` sorts each data file by (``None``: the dataset's ``sort.by``)."""
    from cdkds.catalog.write.sorting import write_sort
    from cdkds.connector.options import InvalidOptionError

    if write.sort_by is None:
        return None
    return write_sort(name, descriptor, write.sort_by, "sortBy", InvalidOptionError)


def transaction_of(write: Any) -> "SetTransaction | None":
    """The batch an exactly-once write records (options txnAppId and txnVersion), if any."""
    from cdkds.catalog.log.actions import SetTransaction

    return None if write.txn_app_id is None else SetTransaction(write.txn_app_id, write.txn_version)


def plan_keyed_write(where: "Location", write: Any, dataset: "Dataset | None", descriptor: "DatasetDescriptor",
                     descriptor_version: int, base: int | None, schema: StructType, overwrite: bool,
                     default_operation: str = "insert") -> "CdkdsWriter":
    """A write to a dataset with a record key: an upsert, insert, update or delete by key
    (option ``operation``; plain appends insert), one commit for the job."""
    import uuid

    from cdkds.catalog.write.writer import DEFAULT_TARGET_FILE_SIZE
    from cdkds.connector.options import InvalidOptionError

    name = where.name
    if not descriptor.record_key:
        raise InvalidOptionError(f"dataset {name!r} has no record key, so option operation={write.operation!r} cannot "
                                 f"apply; give the dataset a record key (option recordKey when it is created)")
    operation = write.operation or default_operation
    if overwrite and (operation != "insert" or write.dynamic_partition_overwrite):
        raise InvalidOptionError(f"dataset {name!r}: an overwrite of a keyed dataset replaces it whole; it cannot be "
                                 f"combined with operation={operation!r} or a dynamic partition overwrite")
    given = [f.name for f in schema.fields]
    missing = [k for k in descriptor.record_key if k not in given]
    if missing:
        raise InvalidOptionError(f"dataset {name!r}: the DataFrame has no record key column {missing[0]!r} "
                                 f"(the key is {list(descriptor.record_key)})")
    if operation in ("upsert", "insert"):
        check_dataframe_schema(name, descriptor, schema, write.check_null_schema)
    elif operation == "update":
        unknown = [c for c in given if c not in descriptor.fields]
        if unknown:
            raise InvalidOptionError(f"dataset {name!r}: update gives unknown column {unknown[0]!r}; "
                                     f"the schema has {list(descriptor.fields)}")
    target = write.target_file_size or DEFAULT_TARGET_FILE_SIZE
    return CdkdsWriter(where, descriptor, descriptor_version, base, write.job or uuid.uuid4().hex,
                       "overwrite" if overwrite else "append", target, operation, write.clustered,
                       transaction_of(write), sort_option(name, descriptor, write))


def new_descriptor(name: str, schema: StructType, write: Any) -> "DatasetDescriptor":
    from cdkds.catalog import CdkdsError, DatasetDescriptor
    from cdkds.connector.options import InvalidOptionError

    try:
        avro = write.schema if write.schema else None
        kwargs = dict(partition_strategy=write.partition_by, format=write.format or "parquet",
                      compression=write.compression, record_key=write.record_key,
                      ordering_field=write.ordering_field, properties=dict(write.properties))
        if avro is not None:
            return DatasetDescriptor(avro, **kwargs)
        return DatasetDescriptor.from_spark_json(schema.jsonValue(), name=_record_name(name), **kwargs)
    except CdkdsError as e:
        raise InvalidOptionError(f"dataset {name!r}: cannot create it from this write: {e}") from None


def _record_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_")) or "Record"


def check_write_options(dataset: "Dataset", write: Any) -> None:
    """Options that would create a dataset must agree with an existing one (they are not
    ignored: a write that asks for other settings than the dataset has is refused)."""
    from cdkds.catalog import CdkdsError, PartitionStrategy
    from cdkds.connector.options import InvalidOptionError

    d = dataset.descriptor
    conflicts = []
    if write.partition_by is not None:
        wanted = PartitionStrategy.parse(write.partition_by)
        try:
            wanted = wanted.bind(d.fields)
        except CdkdsError:  # a source not in the schema: it differs, and says so below
            pass
        if wanted != d.partition_strategy:
            have = d.partition_strategy.to_text() if d.partition_strategy else "no partitioning"
            past = [i for i, s in d.partition_specs.items() if s is not None and s == wanted]
            conflicts.append(f"partitionBy={wanted.to_text()!r} but the dataset has {have!r}" + (
                f" (it was partitioned so until it changed: partition spec {past[0]}; leave partitionBy out to "
                f"write with the current strategy, or change it with alter().partition_by)" if past else ""))
    if write.format is not None and write.format != d.format:
        conflicts.append(f"format={write.format!r} but the dataset is {d.format!r}")
    if write.record_key is not None and tuple(write.record_key) != d.record_key:
        conflicts.append(f"recordKey={','.join(write.record_key)!r} but the dataset's is {','.join(d.record_key)!r}")
    if write.ordering_field is not None and write.ordering_field != d.ordering_field:
        conflicts.append(f"orderingField={write.ordering_field!r} but the dataset's is {d.ordering_field!r}")
    if write.compression is not None and write.compression != d.compression:
        conflicts.append(f"compression={write.compression!r} but the dataset's is {d.compression!r}")
    for key, value in write.properties.items():
        if d.properties.get(key) != value:
            have = f"{d.properties[key]!r}" if key in d.properties else "no such property"
            conflicts.append(f"property.{key}={value!r} but the dataset has {have} (change it with DatasetRepository.update)")
    if conflicts:
        raise InvalidOptionError(f"dataset {dataset.name!r} exists with other settings: " + "; ".join(conflicts))


def check_dataframe_schema(name: str, descriptor: "DatasetDescriptor", schema: StructType,
                           nullability: bool = True) -> None:
    from cdkds.catalog import SchemaMismatchError
    from cdkds.formats.schema import from_spark_json, writable_from

    problems = writable_from(from_spark_json(schema.jsonValue()), descriptor.schema, nullability)
    if problems:
        raise SchemaMismatchError(f"dataset {name!r}: the DataFrame does not fit the dataset's schema: "
                                  + "; ".join(problems))


class CdkdsWriter(DataSourceArrowWriter):
    """One write job: executors write files (or stage keyed rows) under the job's commit
    uuid ``transaction``; the driver commits them all as one commit planned on ``base``
    (``None``: the job creates the dataset). ``txn``: the application batch the commit
    records, which makes the job exactly-once (skipped when the batch is recorded)."""

    def __init__(self, where: "Location", descriptor: "DatasetDescriptor", descriptor_version: int,
                 base: int | None, transaction: str, mode: str, target_file_size: int,
                 operation: str | None = None, clustered: bool = False, txn: "SetTransaction | None" = None,
                 sort_by: "Sequence[str] | None" = None):
        self.operation = operation
        self.clustered = clustered
        self.where = where
        self.descriptor = descriptor
        self.descriptor_version = descriptor_version
        self.base = base
        self.transaction = transaction
        self.mode = mode
        self.target_file_size = target_file_size
        self.txn = txn
        self.sort_by = None if sort_by is None else list(sort_by)  # None: the dataset's sort.by

    def replaced(self, **changes: Any) -> "CdkdsWriter":
        """This job with some of its attributes changed."""
        job = copy.copy(self)
        job.__dict__.update(changes)
        return job

    def write(self, iterator: Iterator["pa.RecordBatch"]) -> CdkdsCommitMessage:
        import pyarrow as pa

        from cdkds.catalog.storage import ObjectStore
        from cdkds.catalog.write.writer import PartitionedWriter

        store = ObjectStore.open(self.where.url, dict(self.where.storage_options))
        if self.operation is not None:
            return self._write_keyed(store, iterator)
        files = PartitionedWriter(store, self.where.name, self.descriptor, self.descriptor_version,
                                  self.base if self.base is not None else 0, self.transaction,
                                  self.mode, target_file_size=self.target_file_size, sort_by=self.sort_by)
        try:
            pending, rows = [], 0
            for batch in iterator:  # Spark sends 10,000-row batches: route bigger chunks to save per-partition work
                pending.append(batch)
                rows += batch.num_rows
                if rows >= ROUTING_ROWS:
                    files.write_batch(pa.Table.from_batches(pending).combine_chunks())
                    pending, rows = [], 0
            if pending:
                files.write_batch(pa.Table.from_batches(pending).combine_chunks())
            return CdkdsCommitMessage(files.close())
        except BaseException:
            files.abort()
            raise

    def _write_keyed(self, store: Any, iterator: Iterator["pa.RecordBatch"]) -> CdkdsCommitMessage:
        """A task of a keyed write. Clustered (each task holds whole index buckets): plan the
        change here. Otherwise stage the rows for the driver, which plans the whole job at
        once (rows of one key may be in several tasks)."""
        import uuid

        import pyarrow as pa
        import pyarrow.parquet as pq

        if self.clustered:
            from cdkds.catalog.keyed import operations

            batches = list(iterator)
            if not batches:
                return CdkdsCommitMessage([])
            table = pa.Table.from_batches(batches)
            dataset = self.planned_on()
            change = operations.prepare(dataset, self.operation, operation_rows(dataset, self.operation, table),
                                        whole_buckets=True, sort_by=self.sort_by, target_file_size=self.target_file_size)
            try:  # this task's buckets are its own: their index files are written here, not on the driver
                change = operations.write_index(dataset, change)
            except BaseException:
                change.discard(dataset)
                raise
            return CdkdsCommitMessage(change.adds, change=change)
        from cdkds.catalog.storage import store_failures
        from cdkds.catalog.write.writer import STAGING_FOLDER

        path = f"{STAGING_FOLDER}/{self.transaction}/{uuid.uuid4().hex}.parquet"
        writer = None
        try:
            with store_failures(f"staging rows at {store.display(path)}"), \
                    store.fs.open(store.open_output(path), "wb") as f:
                for batch in iterator:
                    if writer is None:
                        writer = pq.ParquetWriter(f, batch.schema, compression="lz4")
                    writer.write_batch(batch)
                if writer is not None:
                    writer.close()
        except BaseException:
            _delete_quietly(store, [path])
            raise
        if writer is None:
            _delete_quietly(store, [path])
            return CdkdsCommitMessage([])
        return CdkdsCommitMessage([], staged=[path])

    # ---------------------------------------------------------------- the driver

    def commit(self, messages: list) -> None:
        dataset = self.target()
        before = dataset.version
        staged = StagedRows(self.where, messages)
        results: "list[UpsertResult | None]" = []
        try:
            commit_once(dataset, self.txn,
                        lambda extra: results.append(self.commit_to(dataset, messages, staged, extra)),
                        lambda: self.discard(dataset, messages))
        finally:
            staged.drop()
        services = self.serve(dataset, before)
        if self.clustered and results and results[0] is not None:
            self.record_result(dataclasses.replace(results[0], services=services))

    def serve(self, dataset: "Dataset", before: int) -> "ServiceReport | None":
        """The inline pass of the table services after the job committed onto ``dataset`` (at
        revision ``before`` until then), on the driver: it never fails the job (a failure is a
        :class:`ServiceWarning`). ``None`` when the job committed nothing or they are off."""
        if self.operation is not None and self.mode == "overwrite":
            return dataset.last_services  # the keyed overwrite's KeyedWriter ran them after its commits
        if dataset.version == before:
            return None
        return dataset._after_write()

    def _repository(self) -> "tuple[Any, str]":
        from cdkds.catalog import DatasetRepository
        from cdkds.catalog.repository import split_dataset_url

        parent, name = split_dataset_url(self.where.url)
        return DatasetRepository(parent, dict(self.where.storage_options)), name

    def planned_on(self) -> "Dataset":
        """The dataset as of the revision the job is planned on; for a job that creates the
        dataset, an :class:`UnbornDataset` (created only as the job commits)."""
        from cdkds.connector.unborn import UnbornDataset

        repo, name = self._repository()
        if self.base is None:
            return UnbornDataset.of(repo, name, self.descriptor)
        return repo.load(name, version=self.base, branch=self.where.branch)

    def target(self, prefer_latest: bool = False) -> "Dataset":
        """The dataset to commit onto: as of the revision the job was planned on (for a job
        that creates it and finds it absent: unborn, created by its commit), or with
        ``prefer_latest`` the latest revision when it still has the job's descriptor (or the
        job plans keyed rows on the driver)."""
        from cdkds.catalog import DatasetNotFoundError
        from cdkds.connector.unborn import same_creation

        repo, name = self._repository()
        if prefer_latest and self.base is not None:  # one load of the latest revision when it will do
            latest = repo.load(name, branch=self.where.branch)
            return latest if self._commits_onto(latest) else self.planned_on()
        dataset = self.planned_on()
        if self.base is None:
            try:  # a concurrent first write created it
                dataset = same_creation(repo.load(name, version=0), self.descriptor)
            except DatasetNotFoundError:
                return dataset
        if prefer_latest:
            latest = repo.load(name, branch=self.where.branch)
            if self._commits_onto(latest):
                return latest
        return dataset

    def _commits_onto(self, latest: "Dataset") -> bool:
        """Whether the job may commit onto ``latest`` rather than the revision it was planned
        on: it still has the job's descriptor, or the job plans keyed rows on the driver."""
        return (self.operation is not None and not self.clustered) or \
            latest.descriptor_version == self.descriptor_version

    @property
    def base_revision(self) -> int:
        """The revision the tasks' files were written on: the driver may commit onto a later
        one (``target(prefer_latest=True)``), past a vacuum those files must have survived."""
        return self.base if self.base is not None else 0

    def commit_to(self, dataset: "Dataset", messages: list, staged: "StagedRows",
                  extra: "Sequence[Action]" = ()) -> "UpsertResult | None":
        """Commit the job onto ``dataset`` as one commit, with ``extra`` actions (``staged``:
        the rows of a keyed job's tasks); what a clustered keyed job did."""
        from cdkds.catalog.log.conflicts import replanned
        from cdkds.catalog.write.writer import write_mode

        if self.operation is not None:
            return self._commit_keyed(dataset, messages, staged.table(), extra)
        adds = [a for m in messages if m is not None for a in m.adds]
        mode = write_mode(self.mode, self.descriptor, dataset.name)
        info = {"rows": sum(a.row_count for a in adds), "files": len(adds), "engine.spark": True}

        def commit() -> None:  # planned again when a compaction (a table service's) committed first
            removes, rule = mode.plan(dataset.snapshot, adds, set(), True)
            dataset._commit(mode.operation, [*removes, *adds, *extra], info, self.transaction, rule,
                            planned_on=self.base_revision)
        replanned(dataset, commit)
        return None

    def _commit_keyed(self, dataset: "Dataset", messages: list, table: "pa.Table | None",
                      extra: "Sequence[Action]") -> "UpsertResult | None":
        """Plan (on ``dataset``, unborn for a first write: a planning failure creates
        nothing) and commit a keyed job; a clustered job returns its counts (``commit``
        records them for :func:`cdkds.connector.upsert`)."""
        from cdkds.catalog.keyed import operations
        from cdkds.catalog.log.conflicts import replanned

        info = {"engine.spark": True, "job": self.transaction}
        if self.clustered:
            changes = [m.change for m in messages if m is not None and m.change is not None]
            return operations.commit(dataset, changes, info, commit_uuid=self.transaction, extra_actions=extra,
                                     planned_on=self.base_revision)
        if self.mode == "overwrite":
            from cdkds.catalog.keyed.writer import KeyedWriter

            writer = KeyedWriter(dataset, mode="overwrite", commit_uuid=self.transaction,
                                 extra_actions=extra, sort_by=self.sort_by, target_file_size=self.target_file_size)
            if table is not None:
                writer.write_batch(table)
            writer.close()
            return None
        if table is None:
            if extra:
                operations.commit(dataset, [], info, commit_uuid=self.transaction,
                                  operation=self.operation, extra_actions=extra)
            return None
        def commit() -> None:  # planned on the driver: again when a compaction committed first
            change = operations.prepare(dataset, self.operation, operation_rows(dataset, self.operation, table),
                                        sort_by=self.sort_by, target_file_size=self.target_file_size)
            operations.commit(dataset, [change], info, commit_uuid=self.transaction, extra_actions=extra)
        replanned(dataset, commit)
        return None

    def record_result(self, result: "UpsertResult") -> None:
        """Keep what the job did where :func:`cdkds.connector.upsert` reads it (the job's
        staging folder): the counts of the one commit path, made even when nothing needed
        committing (then no commit records them), and what the inline services did after it."""
        import json

        from cdkds.catalog.storage import ObjectStore

        store = ObjectStore.open(self.where.url, dict(self.where.storage_options))
        with store.fs.open(store.open_output(result_path(self.transaction)), "wb") as f:
            f.write(json.dumps(dataclasses.asdict(result)).encode())

    def discard(self, dataset: "Dataset", messages: list) -> None:
        """Delete the files of a job whose batch an earlier attempt committed: those not live
        in ``dataset`` (this very job's files stay if its own commit is the one that landed)."""
        live, indexed = dataset.snapshot.files, dataset.snapshot.index
        _delete_quietly(dataset.store, [p for m in messages if m is not None for p in m.written
                                        if p not in live and p not in indexed])

    def abort(self, messages: list) -> None:
        """Delete the written files, but only once a complete read of the log shows that the
        commit (uuid ``transaction``) did not land: ``commit()`` may have failed after it
        landed, and this runs in a fresh worker that knows nothing of it."""
        import warnings

        from cdkds.catalog.log import TransactionLog
        from cdkds.catalog.storage import ObjectStore
        from cdkds.catalog.write.writer import delete_files

        store = ObjectStore.open(self.where.url, dict(self.where.storage_options))
        try:
            log = TransactionLog(store, self.where.name)
            if self.where.branch is not None:
                from cdkds.catalog.log.branches import branch_log
                log = branch_log(log, self.where.branch)  # type: ignore[assignment]
            landed = log.landed(self.transaction, self.base or 0)
        except Exception as e:  # noqa: BLE001 - the outcome is unknown: keep the files for vacuum
            warnings.warn(f"dataset {self.where.name!r}: cannot tell whether the aborted write {self.transaction} "
                          f"landed ({e}); its files were kept (vacuum collects them if it did not)", stacklevel=2)
            return
        _delete_quietly(store, [p for m in messages if m is not None for p in m.staged])  # never committed
        if landed is None:
            delete_files(store, [p for m in messages if m is not None for p in m.written])


def operation_rows(dataset: "Dataset", operation: str, table: "pa.Table") -> "pa.Table":
    """The columns of a keyed job's rows its operation takes: a delete takes the record key
    (and the ordering field when the rows have it) and ignores the DataFrame's other columns."""
    if operation != "delete":
        return table
    d = dataset.descriptor
    return table.select([*d.record_key, *([d.ordering_field] if d.ordering_field in table.schema.names else [])])


def result_path(job: str) -> str:
    """Where a clustered keyed job keeps its :class:`UpsertResult` (see ``record_result``)."""
    from cdkds.catalog.write.writer import STAGING_FOLDER

    return f"{STAGING_FOLDER}/{job}/result.json"


def take_result(where: "Location", job: str) -> "UpsertResult | None":
    """The result job ``job`` recorded (``None``: it recorded none), deleted once read."""
    import json

    from cdkds.catalog.keyed.operations import UpsertResult
    from cdkds.catalog.storage import ObjectStore

    store = ObjectStore.open(where.url, dict(where.storage_options))
    path = result_path(job)
    try:
        with store.fs.open(store.path(path), "rb") as f:
            data = json.loads(f.read())
    except FileNotFoundError:
        return None
    if data.get("services") is not None:
        from cdkds.catalog.services.runner import ServiceReport

        data["services"] = ServiceReport(**{k: tuple(v) if isinstance(v, list) else v
                                            for k, v in data["services"].items()})
    result = UpsertResult(**data)
    _delete_quietly(store, [path])
    return result


class StagedRows:
    """The rows a keyed job's tasks staged for the driver, read when first needed (a
    batch already committed never reads them) and deleted once the job is done."""

    def __init__(self, where: "Location", messages: list):
        self.where = where
        self.paths = [p for m in messages if m is not None for p in m.staged]
        self._table: "pa.Table | None" = None

    def table(self) -> "pa.Table | None":
        import pyarrow as pa

        from cdkds.formats.parquet import parquet_in_memory

        if self._table is None and self.paths:
            store = self._store()
            tables = [parquet_in_memory(store.read(p)).read() for p in self.paths]
            self._table = pa.concat_tables(tables, promote_options="permissive")
        return self._table

    def drop(self) -> None:
        """Delete the staged rows (never in the log, whatever became of the commit)."""
        if self.paths:
            _delete_quietly(self._store(), self.paths)

    def _store(self) -> Any:
        from cdkds.catalog.storage import ObjectStore

        return ObjectStore.open(self.where.url, dict(self.where.storage_options))


def commit_once(dataset: "Dataset", txn: "SetTransaction | None", commit: "Callable[[Sequence[Action]], None]",
                discard: "Callable[[], None]") -> bool:
    """Run ``commit`` with ``txn`` (stamped now) as its extra action, unless ``dataset``
    records that batch already, or a concurrent commit of the same application recorded it
    meanwhile: then ``discard`` the job's files. Whether ``commit`` ran and landed."""
    import dataclasses

    from cdkds.catalog import CommitConflictError
    from cdkds.catalog.log.commit import clock

    if txn is None:
        commit(())
        return True
    if recorded(dataset, txn):
        discard()
        return False
    try:
        commit((dataclasses.replace(txn, last_updated=clock()),))
    except CommitConflictError:
        if recorded(dataset.refresh(), txn):
            discard()
            return False
        raise
    return True


def recorded(dataset: "Dataset", txn: "SetTransaction") -> bool:
    """Whether ``dataset`` records batch ``txn.version`` (or a later one) of ``txn.app_id``."""
    version = dataset.transaction_version(txn.app_id)
    return version is not None and version >= txn.version


def _delete_quietly(store: Any, keys: list[str]) -> None:
    from cdkds.catalog.write.writer import delete_files

    delete_files(store, keys)
