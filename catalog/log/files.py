"""The live data files of a snapshot as Arrow columns: a :class:`FileTable`.

One row per file; the columns (``file_schema``):

- ``path`` (string), ``size``, ``rows``, ``schema_version``, ``revision``, ``timestamp``,
  ``deleted_rows`` (int64; ``deleted_rows`` is the sum of the deletion vectors' cardinalities);
- ``deletes`` (string): the file's deletion vectors as the JSON array of their references,
  null when it has none;
- ``spec`` (int64, only when the partition strategy was ever changed): the partition spec
  each file was written with;
- ``partition`` (struct, only when the dataset is or was partitioned): one child per
  partition name of any spec, the current spec's first, typed by the kind of its values
  (:func:`partition_type`); null in the rows of files whose spec lacks the name;
- ``stats`` (struct): one child per top-level field of the descriptor, named by its field
  id, a ``struct<nulls: int64, min: T, max: T>`` with ``T`` the field's Arrow type (nested
  fields keep only ``nulls``). A null child means the file has no statistics for that
  field; a null ``min`` means no bounds (anything).

A file's :class:`AddFile` is made from its row only when asked for; pruning reads the
columns (:mod:`cdkds.catalog.expressions.columnar`).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.keyed.deletion import DeletionVectorRef
from cdkds.catalog.log.actions import AddFile, all_partition_kinds
from cdkds.catalog.partitioning.functions import kind_arrow_type
from cdkds.formats.projection import widened
from cdkds.formats.statistics import ColumnStatistics

_IPC_OPTIONS = pa.ipc.IpcWriteOptions()  # given, so that pyarrow does not read two environment variables a table
_SCALARS = ("size", "rows", "schema_version", "revision", "timestamp", "deleted_rows")


def partition_type(descriptor: DatasetDescriptor, name: str, kind: str) -> pa.DataType:
    """The Arrow type of partition ``name``'s values (decimals: the source field's type)."""
    if kind == "decimal":
        source = next(f.source for s in descriptor.partition_specs.values() if s is not None
                      for f in s.functions if f.name == name)
        return descriptor.arrow_schema.field(source).type
    return kind_arrow_type(kind)


def stats_type(field_type: pa.DataType) -> pa.DataType:
    """The type of one field's statistics column."""
    if pa.types.is_nested(field_type):
        return pa.struct([("nulls", pa.int64())])
    return pa.struct([("nulls", pa.int64()), ("min", field_type), ("max", field_type)])


def file_schema(descriptor: DatasetDescriptor) -> pa.Schema:
    """The columns of the file table of a dataset with ``descriptor`` (see the module docstring)."""
    fields = [pa.field("path", pa.string(), nullable=False)]
    fields += [pa.field(name, pa.int64(), nullable=False) for name in _SCALARS]
    fields.append(pa.field("deletes", pa.string()))
    if descriptor.has_past_specs:
        fields.append(pa.field("spec", pa.int64(), nullable=False))
    kinds = all_partition_kinds(descriptor)
    if kinds:
        fields.append(pa.field("partition", pa.struct(
            [(name, partition_type(descriptor, name, kind)) for name, kind in kinds.items()])))
    arrow = descriptor.arrow_schema
    fields.append(pa.field("stats", pa.struct(
        [(str(i), stats_type(arrow.field(name).type)) for name, i in descriptor.field_ids.items()])))
    return pa.schema(fields)


def conform(table: pa.Table, descriptor: DatasetDescriptor) -> pa.Table:
    """A file table written under an older descriptor (a checkpoint part) as ``descriptor``
    reads it: statistics children picked by the current field ids, partition children by
    name; a missing child is null (no statistics, no value), a widened type is cast as its
    values are when read, and bounds that cannot be cast are dropped (anything)."""
    schema = file_schema(descriptor)
    if table.schema.equals(schema):
        return table
    table = table.combine_chunks()
    columns = []
    for field in schema:
        if field.name == "stats":
            columns.append(_conformed(table, "stats", field.type, _conformed_stats))
        elif field.name == "partition":
            columns.append(_conformed(table, "partition", field.type, _conformed_value))
        elif field.name not in table.schema.names:  # "spec": the table predates partition specs
            columns.append(pa.array([0] * table.num_rows, field.type))
        else:
            columns.append(table.column(field.name).cast(field.type))
    return pa.table(columns, schema=schema)


def _conformed(table: pa.Table, name: str, target: pa.StructType,
               child: Callable[[pa.Array, pa.DataType], pa.Array]) -> pa.Array:
    """Column ``name`` (a struct) with ``target``'s children, each made by ``child(old, type)``."""
    rows = table.num_rows
    if name in table.schema.names:
        column = table.column(name)
        column = column.chunk(0) if column.num_chunks else pa.array([], column.type)
        have = {column.type.field(i).name: column.field(i) for i in range(column.type.num_fields)}
        mask = column.is_null() if column.null_count else None
    else:
        have, mask = {}, None
    children = [child(have[f.name], f.type) if f.name in have else pa.nulls(rows, f.type) for f in target]
    return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)


def _conformed_value(values: pa.Array, target: pa.DataType) -> pa.Array:
    if values.type.equals(target):
        return values
    try:
        return widened(values, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.nulls(len(values), target)


def _conformed_stats(stats: pa.Array, target: pa.StructType) -> pa.Array:
    """One field's statistics as ``target`` (``struct<nulls[, min, max]>``)."""
    if stats.type.equals(target):
        return stats
    rows = len(stats)
    nulls = stats.field("nulls").cast(pa.int64())
    children = [nulls]
    if target.num_fields > 1:
        bound = target.field("min").type
        if stats.type.get_field_index("min") < 0:
            children += [pa.nulls(rows, bound), pa.nulls(rows, bound)]
        else:
            try:
                children += [widened(stats.field("min"), bound), widened(stats.field("max"), bound)]
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                children += [pa.nulls(rows, bound), pa.nulls(rows, bound)]
    mask = stats.is_null() if stats.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)


class FileTable:
    """An immutable table of data files (:class:`AddFile` rows) of one descriptor."""

    __slots__ = ("table", "descriptor")

    def __init__(self, table: pa.Table, descriptor: DatasetDescriptor):
        self.table = table
        self.descriptor = descriptor

    @classmethod
    def empty(cls, descriptor: DatasetDescriptor) -> "FileTable":
        return cls(file_schema(descriptor).empty_table(), descriptor)

    @classmethod
    def of(cls, adds: Iterable[AddFile], descriptor: DatasetDescriptor) -> "FileTable":
        """The table of ``adds`` (their statistics named by ``descriptor``'s fields)."""
        adds = list(adds)
        schema = file_schema(descriptor)
        columns: dict[str, Any] = {"path": [a.path for a in adds]}
        columns["size"] = [a.size for a in adds]
        columns["rows"] = [a.row_count for a in adds]
        columns["schema_version"] = [a.schema_version for a in adds]
        columns["revision"] = [a.revision for a in adds]
        columns["timestamp"] = [a.timestamp for a in adds]
        columns["deleted_rows"] = [a.deleted_rows for a in adds]
        columns["deletes"] = [json.dumps([d.to_json() for d in a.deletes]) if a.deletes else None for a in adds]
        columns["spec"] = [a.spec_id for a in adds]
        if "partition" in schema.names:
            names = schema.field("partition").type
            columns["partition"] = [{names.field(i).name: a.partition.get(names.field(i).name)
                                     for i in range(names.num_fields)} for a in adds]
        names_by_id = {str(i): n for n, i in descriptor.field_ids.items()}
        stats_struct = schema.field("stats").type
        stats = []
        for a in adds:
            row = {}
            for i in range(stats_struct.num_fields):
                key = stats_struct.field(i).name
                s = a.statistics.get(names_by_id[key])
                row[key] = None if s is None else {"nulls": s.null_count, "min": s.min, "max": s.max}
            stats.append(row)
        columns["stats"] = stats
        return cls(pa.table([pa.array(columns[f.name], type=f.type) for f in schema], schema=schema), descriptor)

    def __len__(self) -> int:
        return self.table.num_rows

    def __reduce__(self):
        # as an Arrow IPC stream: only these rows (pickling a slice of a table copies its whole
        # buffers), LZ4-compressed (a few rows' stream is mostly metadata and padding: 60% less)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self.table.schema, options=_IPC_OPTIONS) as stream:
            stream.write_table(self.table)
        stream = sink.getvalue()
        return _unpickled, (pa.compress(stream, "lz4", asbytes=True), stream.size, self.descriptor)

    @property
    def paths(self) -> pa.ChunkedArray:
        return self.table.column("path")

    def filter(self, mask: pa.Array | pa.ChunkedArray) -> "FileTable":
        """The rows where ``mask`` is true."""
        return FileTable(self.table.filter(mask), self.descriptor)

    def without(self, paths: Iterable[str]) -> "FileTable":
        """The rows whose path is not among ``paths``."""
        paths = list(paths)
        if not paths or not len(self):
            return self
        return self.filter(pc.invert(pc.is_in(self.paths, value_set=pa.array(paths, pa.string()))))

    @staticmethod
    def concat(tables: Sequence["FileTable"], descriptor: DatasetDescriptor) -> "FileTable":
        """The rows of ``tables`` (each of ``descriptor``) one after the other."""
        if not tables:
            return FileTable.empty(descriptor)
        if len(tables) == 1:
            return tables[0]
        return FileTable(pa.concat_tables([t.table for t in tables]), descriptor)  # chunks kept: no copy

    @property
    def live_rows(self) -> int:
        """Rows less those the deletion vectors delete, over every file."""
        if not len(self):
            return 0
        return int(pc.sum(self.table.column("rows")).as_py()) - int(pc.sum(self.table.column("deleted_rows")).as_py())

    def files(self) -> Iterator[AddFile]:
        """The :class:`AddFile` of every row, in order, made batch by batch."""
        for batch in self.table.to_batches(max_chunksize=65536):
            yield from _adds(batch, self.descriptor)


def _unpickled(compressed: bytes, size: int, descriptor: DatasetDescriptor) -> FileTable:
    return FileTable(pa.ipc.open_stream(pa.decompress(compressed, size, "lz4")).read_all(), descriptor)


def _adds(batch: pa.RecordBatch, descriptor: DatasetDescriptor) -> Iterator[AddFile]:
    schema = batch.schema
    names = {str(i): n for n, i in descriptor.field_ids.items()}
    scalars = [batch.column(n).to_pylist() for n in ("path", *_SCALARS, "deletes")]
    partitions = batch.column("partition").to_pylist() if "partition" in schema.names else None
    specs = batch.column("spec").to_pylist() if "spec" in schema.names else None
    if specs is not None and partitions is not None:  # a file's partition holds its own spec's names only
        names_of = {i: (s.names if s is not None else []) for i, s in descriptor.partition_specs.items()}
        partitions = [{n: p[n] for n in names_of[spec]} for p, spec in zip(partitions, specs)]
    stats = batch.column("stats")
    per_field = [(names[stats.type.field(i).name], stats.field(i).to_pylist()) for i in range(stats.type.num_fields)]
    new = object.__new__
    for row, (path, size, rows, schema_version, revision, timestamp, _, deletes) in enumerate(zip(*scalars)):
        statistics = {}
        for name, column in per_field:
            s = column[row]
            if s is not None:
                statistics[name] = ColumnStatistics(s["nulls"], s.get("min"), s.get("max"))
        add = new(AddFile)
        # a frozen dataclass's __init__ sets each field through object.__setattr__: a third of the cost
        add.__dict__.update(path=path, partition=partitions[row] if partitions is not None else {}, size=size,
                            row_count=rows, statistics=statistics, schema_version=schema_version,
                            revision=revision, timestamp=timestamp,
                            deletes=tuple(DeletionVectorRef.from_json(d) for d in json.loads(deletes))
                            if deletes is not None else (), spec_id=specs[row] if specs is not None else 0)
        yield add
