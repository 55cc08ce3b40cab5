"""The parts of a checkpoint (log protocol 4): the live data files of a revision in Parquet
objects of at most :data:`PART_FILES` files each, named by the checkpoint with a summary
(:class:`CheckpointPart`) from which a query tells the parts it must read.

A part, ``_log/_parts/<revision:020d>-<n>-<uuid8>.parquet``, is a zstd Parquet file of a
:class:`FileTable` (the columns of :func:`files.file_schema`), its key-value metadata
naming the revision of the checkpoint that wrote it. A later checkpoint names it again
when none of its files changed, so a part outlives the checkpoint that wrote it; expiry
deletes those no retained checkpoint names.

The files are sorted by their partition values before they are cut into parts, so each
part covers a contiguous range of partitions and its bounds are tight.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import CorruptLogError
from cdkds.catalog.expressions import Expression, transform
from cdkds.catalog.expressions.metrics import may_match
from cdkds.catalog.expressions.pruning import SPEC_NAME
from cdkds.catalog.expressions.tree import BoundPredicate
from cdkds.catalog.log.actions import OUTSIDE_DATASET, all_partition_kinds, promoted
from cdkds.catalog.log.commit import LOG_FOLDER
from cdkds.catalog.log.files import FileTable, conform
from cdkds.formats.parquet import parquet_in_memory
from cdkds.formats.statistics import ColumnStatistics

if TYPE_CHECKING:
    from cdkds.catalog.expressions.pruning import FileFilter
    from cdkds.catalog.storage import ObjectStore

PART_FILES = 50_000  # data files a part holds at most
PARTS_FOLDER = f"{LOG_FOLDER}/_parts"
_REVISION_KEY = b"cdkds.part.revision"


def part_key(revision: int, n: int) -> str:
    """A fresh key for part ``n`` of the checkpoint of ``revision`` (unique: a checkpoint
    written twice, by two writers, must not overwrite the parts the other one names)."""
    return f"{PARTS_FOLDER}/{revision:020d}-{n}-{uuid.uuid4().hex[:8]}.parquet"


def part_revision(key: str) -> int | None:
    """The revision of the checkpoint that wrote the part at ``key``; ``None`` for other keys."""
    if not key.startswith(PARTS_FOLDER + "/") or not key.endswith(".parquet"):
        return None
    stem = key[len(PARTS_FOLDER) + 1:].split("-", 1)[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


@dataclass(frozen=True)
class CheckpointPart:
    """One part of a checkpoint: its object, what it holds, and the summary a query prunes
    it by. ``partition``: per partition name, the min/max/null count of the files' values;
    ``statistics``: per field name, the files' statistics merged (absent when a file has
    none for the field; without bounds when a file holding values has none);
    ``min_revision``: the oldest revision that added one of its files."""

    key: str
    files: int
    rows: int
    size: int
    sha256: str
    partition: Mapping[str, ColumnStatistics] = dataclasses.field(default_factory=dict)
    statistics: Mapping[str, ColumnStatistics] = dataclasses.field(default_factory=dict)
    min_revision: int = -1  # the oldest revision that added one of its files (-1: unknown)

    @property
    def revision(self) -> int:
        """The revision of the checkpoint that wrote it."""
        revision = part_revision(self.key)
        return -1 if revision is None else revision

    def may_match(self, file_filter: "FileFilter", descriptor: DatasetDescriptor) -> bool:
        """False only when no file of the part can hold a row ``file_filter`` (of ``descriptor``) matches."""
        partition = self.partition
        if descriptor.has_past_specs and SPEC_NAME not in partition:
            # written before the strategy first changed: every file is of the first spec, 0
            partition = {**partition, SPEC_NAME: ColumnStatistics(0, 0, 0)}
        return may_match(partition_bound(file_filter.inclusive, descriptor), self.files, partition) and \
            may_match(file_filter.predicate, self.rows, self.statistics)

    def to_json(self, descriptor: DatasetDescriptor) -> dict:
        """The part's row of a checkpoint (bounds as values' JSON by kind, statistics by field id)."""
        kinds, fields, ids = bound_kinds(descriptor), descriptor.fields, descriptor.field_ids
        return {"part": {
            "key": self.key, "files": self.files, "rows": self.rows, "size": self.size, "sha256": self.sha256,
            "minRevision": self.min_revision,
            "partition": {k: s.to_json(kinds[k]) for k, s in self.partition.items() if k in kinds},
            "stats": {str(ids[k]): s.to_json(fields[k].kind) for k, s in self.statistics.items() if k in fields},
        }}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], descriptor: DatasetDescriptor) -> "CheckpointPart":
        """A part from its row's JSON; ``ValueError``/``KeyError``/``TypeError`` when malformed."""
        kinds, fields = bound_kinds(descriptor), descriptor.fields
        names = {str(i): n for n, i in descriptor.field_ids.items()}
        key = str(data["key"])
        if part_revision(key) is None:
            raise ValueError(f"the part {key!r} is not an object of {PARTS_FOLDER}/")
        stats = {names[k]: s for k, s in data.get("stats", {}).items() if k in names}
        return cls(key, int(data["files"]), int(data["rows"]), int(data["size"]), str(data["sha256"]),
                   {k: ColumnStatistics.from_json(s, kinds[k]) for k, s in data.get("partition", {}).items()
                    if k in kinds},
                   {k: ColumnStatistics.from_json(s, fields[k].kind) for k, s in stats.items()},
                   int(data.get("minRevision", -1)))

    def evolve(self, before: DatasetDescriptor, after: DatasetDescriptor) -> "CheckpointPart":
        """The part with its statistics summary named and typed by ``after``'s fields (matched by
        id, as :func:`evolve_statistics` does for a file): a renamed field's bounds follow it, a
        dropped one's go, a widened one's are converted (dropped when they cannot be)."""
        names = {i: n for n, i in after.field_ids.items()}
        old, new = before.arrow_schema, after.arrow_schema
        statistics = {}
        for name, stats in self.statistics.items():
            target = names.get(before.field_ids.get(name, -1))
            if target is None:
                continue
            source, wanted = old.field(name).type, new.field(target).type
            statistics[target] = stats if source.equals(wanted) else promoted(stats, source, wanted)
        kinds = bound_kinds(after)
        return dataclasses.replace(self, statistics=statistics,
                                   partition={k: s for k, s in self.partition.items() if k in kinds})


def partition_bound(inclusive: Expression, descriptor: DatasetDescriptor) -> Expression:
    """An inclusive projection (predicates on partition names, of typed values) bound to the
    kinds of the partition values, for the metrics evaluator to read partition bounds with."""
    kinds = bound_kinds(descriptor)
    return transform(inclusive, lambda p: p if isinstance(p, BoundPredicate) else
                     BoundPredicate(p.op, p.name, p.value, p.values, kinds[p.name]))


def bound_kinds(descriptor: DatasetDescriptor) -> dict[str, str]:
    """The kinds of a part's partition bounds: every spec's partition names, and the spec id
    (:data:`SPEC_NAME`) once the strategy changed."""
    kinds = all_partition_kinds(descriptor)
    if descriptor.has_past_specs:
        kinds[SPEC_NAME] = "long"
    return kinds


# ---------------------------------------------------------------- summaries

def summarise(table: FileTable) -> tuple[dict[str, ColumnStatistics], dict[str, ColumnStatistics]]:
    """The partition bounds (by partition name) and merged statistics (by field name) of the
    files of ``table``, computed column-wise."""
    data = table.table.combine_chunks()
    partition: dict[str, ColumnStatistics] = {}
    if "partition" in data.schema.names:
        values = data.column("partition").chunk(0) if data.num_rows else None
        for child in data.schema.field("partition").type:
            column = values.field(child.name) if values is not None else pa.array([], child.type)
            partition[child.name] = _bounds(column, column.null_count, column)
    if "spec" in data.schema.names:
        specs = data.column("spec").chunk(0) if data.num_rows else pa.array([], pa.int64())
        partition[SPEC_NAME] = _bounds(specs, 0, specs)
    statistics: dict[str, ColumnStatistics] = {}
    if not data.num_rows:
        return partition, statistics
    names = {str(i): n for n, i in table.descriptor.field_ids.items()}
    rows = data.column("rows").chunk(0)
    stats = data.column("stats").chunk(0)
    for child in data.schema.field("stats").type:
        column = stats.field(child.name)
        if column.null_count or child.name not in names:  # some file has no statistics for it
            continue
        nulls = int(pc.sum(column.field("nulls")).as_py())
        if child.type.get_field_index("min") < 0:
            statistics[names[child.name]] = ColumnStatistics(nulls)
            continue
        lows = column.field("min")
        # a file without bounds that holds values can hold anything; one of nulls only adds none
        unbounded = pc.and_(lows.is_null(), pc.less(column.field("nulls"), rows))
        if pc.any(unbounded).as_py():
            statistics[names[child.name]] = ColumnStatistics(nulls)
        else:
            statistics[names[child.name]] = _bounds(lows, nulls, column.field("max"))
    return partition, statistics


def _bounds(lows: pa.Array, nulls: int, highs: pa.Array) -> ColumnStatistics:
    """Null count ``nulls`` with the least of ``lows`` and the greatest of ``highs`` (no bounds
    when they are all null, or a float holds NaN)."""
    if lows.null_count == len(lows):
        return ColumnStatistics(nulls)
    if pa.types.is_floating(lows.type) and (pc.any(pc.is_nan(lows)).as_py() or pc.any(pc.is_nan(highs)).as_py()):
        return ColumnStatistics(nulls)
    return ColumnStatistics(nulls, pc.min(lows).as_py(), pc.max(highs).as_py())


# ---------------------------------------------------------------- writing

def in_partition_order(table: FileTable) -> FileTable:
    """``table``'s files sorted by their partition spec (when the strategy changed: a part
    then mostly holds one spec's files, which its bounds keep apart), their partition values
    (then path), nulls last."""
    data = table.table
    if not len(table):
        return table
    keys = {"spec": data.column("spec")} if "spec" in data.schema.names else {}
    if "partition" in data.schema.names:
        partition = data.column("partition")
        for i, child in enumerate(data.schema.field("partition").type):
            keys[f"p{i}"] = pc.struct_field(partition, [i])
    keys["path"] = data.column("path")
    order = pc.sort_indices(pa.table(keys), sort_keys=[(k, "ascending", "at_end") for k in keys])
    return FileTable(data.take(order), table.descriptor)


def split(table: FileTable, most: int = PART_FILES) -> list[FileTable]:
    """``table`` in partition order, cut into even runs of at most ``most`` files."""
    count = len(table)
    if not count:
        return []
    pieces = -(-count // most)
    cuts = [count * i // pieces for i in range(pieces + 1)]
    ordered = in_partition_order(table)
    return [FileTable(ordered.table.slice(start, end - start), table.descriptor) for start, end in zip(cuts, cuts[1:])]


def encode_part(table: FileTable, revision: int) -> bytes:
    """The Parquet object of a part holding ``table``'s files."""
    data = table.table.replace_schema_metadata({_REVISION_KEY: str(revision).encode()})
    sink = io.BytesIO()
    pq.write_table(data, sink, compression="zstd")
    return sink.getvalue()


def made_part(key: str, table: FileTable, data: bytes) -> CheckpointPart:
    """The summary of the part at ``key`` holding ``table`` as the object ``data``."""
    partition, statistics = summarise(table)
    rows = int(pc.sum(table.table.column("rows")).as_py()) if len(table) else 0
    oldest = int(pc.min(table.table.column("revision")).as_py()) if len(table) else -1
    return CheckpointPart(key, len(table), rows, len(data), hashlib.sha256(data).hexdigest(), partition, statistics,
                          oldest)


def write_parts(store: "ObjectStore", tables: Iterable[FileTable], revision: int,
                most: int = PART_FILES) -> list[CheckpointPart]:
    """Write the files of ``tables`` as new parts of the checkpoint of ``revision`` (each table
    split on its own, so files of one table never share a part with another's); returns
    their summaries once every object is durable."""
    objects: dict[str, bytes] = {}
    parts = []
    n = 0
    for table in tables:
        for piece in split(table, most):
            key, data = part_key(revision, n), encode_part(piece, revision)
            objects[key] = data
            parts.append(made_part(key, piece, data))
            n += 1
    store.put_all(objects)
    return parts


# ---------------------------------------------------------------- reading

class PartLoader(Protocol):
    def load(self, part: CheckpointPart, descriptor: DatasetDescriptor) -> FileTable:
        """The files of ``part`` as ``descriptor`` reads them; :class:`CorruptLogError` naming the
        part (and the checkpoint) when it is missing, damaged, or not what the checkpoint says."""


class StoredParts:
    """Reads the parts a checkpoint names from the dataset's store (a :class:`PartLoader`);
    ``checkpoint``: the checkpoint object, as errors name it; ``key``: its key, to tell a
    part expired with it (the state was read before an expiry) from a lost one."""

    def __init__(self, store: "ObjectStore", checkpoint: str, key: str | None = None):
        self.store = store
        self.checkpoint = checkpoint
        self.key = key

    def load(self, part: CheckpointPart, descriptor: DatasetDescriptor) -> FileTable:
        where = f"part {self.store.display(part.key)} of checkpoint {self.checkpoint}"
        try:
            data = self.store.read(part.key)
        except FileNotFoundError:
            if self.key is not None and not self.store.exists(self.key):
                raise CorruptLogError(f"{where} is missing: the checkpoint was expired since this state was read: "
                                      f"read the dataset again") from None
            raise CorruptLogError(f"{where} is missing; the files it holds cannot be known") from None
        return FileTable(conform(read_part(data, part, where), descriptor), descriptor)


def read_part(data: bytes, part: CheckpointPart, where: str) -> pa.Table:
    """The table in a part's bytes, checked against what the checkpoint says of it."""
    if len(data) != part.size:
        raise CorruptLogError(f"{where} is damaged: it has {len(data)} bytes, the checkpoint says {part.size}")
    if hashlib.sha256(data).hexdigest() != part.sha256:
        raise CorruptLogError(f"{where} is damaged: its SHA-256 differs from the one the checkpoint records")
    try:
        table = parquet_in_memory(data).read()
    except Exception as e:  # noqa: BLE001 - any failure to parse is damage
        raise CorruptLogError(f"{where} is damaged: {type(e).__name__}: {e}") from None
    if table.num_rows != part.files:
        raise CorruptLogError(f"{where} holds {table.num_rows} files, the checkpoint says {part.files}")
    if "path" not in table.schema.names or "rows" not in table.schema.names:
        raise CorruptLogError(f"{where} is not a part: it has no path or rows column")
    rows = int(pc.sum(table.column("rows")).as_py() or 0) if table.num_rows else 0
    if rows != part.rows:
        raise CorruptLogError(f"{where} holds {rows} rows, the checkpoint says {part.rows}")
    paths = table.column("path")
    if paths.null_count or (table.num_rows and pc.any(pc.match_substring_regex(paths, OUTSIDE_DATASET)).as_py()):
        raise CorruptLogError(f"{where} names a data file outside the dataset")
    return table
