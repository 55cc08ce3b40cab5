"""Planning and reading a scan: prune partitions and files with a predicate, then stream
the rows that match as Arrow batches.

Planning binds the predicate to the schema, projects it through the partition functions
(inclusive projection) and checks each file's statistics, so only files that may hold a
match are opened. Reading streams each file's batches, reads them with the current
schema (older files are conformed), drops the rows of newer tombstones, and filters
rows exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import pyarrow as pa

from cdkds.catalog.errors import CdkdsError, DataFileError, ExpressionError
from cdkds.catalog.expressions import Expression, as_expression, bind, drop_matching, filter_batch, references
from cdkds.catalog.expressions.pruning import FileFilter
from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.storage import ObjectStore
from cdkds.formats.files import DEFAULT_BATCH_ROWS, conform, file_format


@dataclass(frozen=True)
class FileScanTask:
    """One file to read and the (bound) tombstone predicates that apply to it."""

    file: AddFile
    tombstones: tuple[Expression, ...] = ()


@dataclass(frozen=True)
class ScanPlan:
    """The files a scan reads, the bound predicate rows must satisfy and the output columns."""

    dataset: str
    snapshot: Snapshot
    predicate: Expression
    columns: tuple[str, ...]
    tasks: tuple[FileScanTask, ...]

    @property
    def files(self) -> list[AddFile]:
        return [t.file for t in self.tasks]

    @property
    def total_files(self) -> int:
        return len(self.snapshot.files)

    @property
    def output_schema(self) -> pa.Schema:
        schema = self.snapshot.descriptor.arrow_schema
        return pa.schema([schema.field(c) for c in self.columns])


def plan_scan(dataset: str, snapshot: Snapshot, where: Expression | str | None = None,
              columns: Sequence[str] | None = None) -> ScanPlan:
    """The files of ``snapshot`` that may hold rows matching ``where``."""
    descriptor = snapshot.descriptor
    fields = descriptor.fields
    predicate = bind(as_expression(where), fields, dataset)
    if columns is None:
        selected = tuple(fields)
    else:
        if isinstance(columns, str):
            columns = [c.strip() for c in columns.split(",") if c.strip()]
        unknown = [c for c in columns if c not in fields]
        if unknown:
            raise ExpressionError(f"dataset {dataset!r}: unknown column {unknown[0]!r}; columns are {list(fields)}")
        selected = tuple(dict.fromkeys(columns))
    matches = FileFilter.of(predicate, descriptor)
    tasks = tuple(FileScanTask(f, tuple(t.predicate for t in snapshot.tombstones_for(f)))
                  for f in snapshot.files.values() if matches.may_match(f))
    return ScanPlan(dataset, snapshot, predicate, selected, tasks)


def read_plan(store: ObjectStore, plan: ScanPlan, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """The matching rows of the plan's files, batch by batch, in the output columns."""
    for task in plan.tasks:
        yield from read_task(store, plan.snapshot.descriptor, plan.predicate, plan.columns, task, batch_rows)


def read_task(store: ObjectStore, descriptor: DatasetDescriptor, predicate: Expression, columns: Sequence[str],
              task: FileScanTask, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """The rows of one file that survive its tombstones and match ``predicate``, in ``columns``."""
    schema = descriptor.arrow_schema
    referenced = set(references(predicate)).union(*(references(t) for t in task.tombstones))
    needed = list(dict.fromkeys([*columns, *sorted(referenced)]))
    if not needed:
        needed = [schema.names[0]]  # a file must be read to count its rows
    read_schema = pa.schema([schema.field(n) for n in needed])
    fmt = file_format(descriptor.format)
    where = store.display(task.file.path)
    try:
        for batch in fmt.read(store.fs, store.path(task.file.path), read_schema, batch_rows, task.file.size):
            batch = conform(batch, read_schema, descriptor.defaults)
            batch = filter_batch(drop_matching(batch, task.tombstones), predicate)
            if batch.num_rows:
                yield batch.select(list(columns)) if needed != list(columns) else batch
    except FileNotFoundError:
        raise DataFileError(f"data file {where} (added at revision {task.file.revision}) is missing") from None
    except DataFileError as e:
        raise DataFileError(f"{e} (added at revision {task.file.revision})") from None
    except CdkdsError:
        raise
    except (pa.ArrowException, OSError, ValueError, EOFError) as e:
        raise DataFileError(f"data file {where} (added at revision {task.file.revision}) is damaged: "
                            f"{type(e).__name__}: {e}") from None
