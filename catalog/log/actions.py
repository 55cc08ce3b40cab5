"""The actions a commit is made of, and their JSON form (see ``docs/FORMAT.md``).

- :class:`AddFile` — a data file joins the dataset;
- :class:`RemoveFile` — a data file leaves it;
- :class:`Tombstone` — rows matching a predicate are deleted from every file added before it;
- :class:`DeleteRows` — rows of one data file are deleted by position (a deletion vector);
- :class:`AddIndex` / :class:`RemoveIndex` — a record-index file joins or leaves a bucket;
- :class:`SetMetadata` — the descriptor from this commit on;
- :class:`SetProtocol` — the log versions a reader and a writer must understand;
- :class:`SetTransaction` — the last batch an application (a streaming query) committed;
- :class:`Tag` / :class:`Untag` — a name for a revision, kept readable by expiry and vacuum, or its end;
- :class:`BranchRef` / :class:`DropBranch` — a branch starts at the commit's revision, or ends.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

import pyarrow as pa

from cdkds.catalog.descriptor import DatasetDescriptor, shared_partition_kind
from cdkds.catalog.errors import UnsupportedLogVersionError
from cdkds.catalog.expressions import Expression, from_json as expression_from_json
from cdkds.catalog.keyed.deletion import DeletionVectorRef
from cdkds.formats import values
from cdkds.formats.projection import widened
from cdkds.formats.statistics import ColumnStatistics

READER_VERSION = 5  # the newest protocol this build reads and writes
WRITER_VERSION = 5
KEYED_PROTOCOL = 2  # deletion vectors and index files: readers of version 1 would return deleted rows
FIELD_ID_PROTOCOL = 3  # renamed or dropped fields: readers matching columns by name would misread them
PARTED_CHECKPOINT_PROTOCOL = 4  # checkpoints whose files are in parts: older readers cannot start from them
LAYOUT_PROTOCOL = 5  # partition specs, tags and branches: older readers would prune by the wrong strategy or expire refs


# a scheme, a backslash, a control character, or an empty, "." or ".." segment
OUTSIDE_DATASET = r"^[A-Za-z][A-Za-z0-9+.-]*:|[\\\x00-\x1f]|(?:^|/)\.{0,2}(?:/|$)"  # RE2 reads it too (parts)
_OUTSIDE = re.compile(OUTSIDE_DATASET)


def dataset_path(path: Any, what: str) -> str:
    """``path``, a file a log names (``what``: "data file", "index file"...), checked to lie
    inside the dataset: a relative path of non-empty segments, none ``.`` or ``..``, with
    no scheme, drive or backslash; ``ValueError`` naming it otherwise (the log's readers
    turn that into :class:`CorruptLogError` naming the commit or checkpoint). A log edited
    to name another dataset's files must not make this one read, or keep, them."""
    if not isinstance(path, str) or not path:
        raise ValueError(f"the {what} path {path!r} is not a non-empty string")
    if _OUTSIDE.search(path):
        raise ValueError(f"the {what} {path!r} lies outside the dataset or has a name a log cannot hold (a file "
                         f"of the log must be a relative path inside the dataset's folder, without '..', a scheme, "
                         f"a leading '/', a backslash or a control character)")
    return path


def _vector(data: Mapping[str, Any]) -> DeletionVectorRef:
    vector = DeletionVectorRef.from_json(data)
    if vector.path is not None:
        dataset_path(vector.path, "deletion vector")
    return vector


@dataclass(frozen=True)
class AddFile:
    """A data file: its path (relative to the dataset), typed partition values, size, rows
    and per-column statistics. ``revision`` is the commit that added it and ``timestamp``
    that commit's time (known once it is in the log), ``schema_version`` the revision of the
    descriptor it was written with, ``deletes`` the deletion vectors later commits added to
    it (their union is the file's deleted row positions), ``spec_id`` the partition spec it
    was written with (its ``partition`` holds that spec's names; see
    :meth:`DatasetDescriptor.strategy_of`)."""

    path: str
    partition: Mapping[str, Any]
    size: int
    row_count: int
    statistics: Mapping[str, ColumnStatistics] = field(default_factory=dict)
    schema_version: int = 0
    revision: int = -1
    timestamp: int = 0
    deletes: tuple[DeletionVectorRef, ...] = ()
    spec_id: int = 0

    def at(self, revision: int, timestamp: int = 0) -> "AddFile":
        return dataclasses.replace(self, revision=revision, timestamp=timestamp)

    def landed(self, revision: int, timestamp: int) -> "AddFile":
        """The file as commit ``revision``, made at ``timestamp``, adds it: at that revision, and
        at that time unless it carries its own (``committedAt``: a published branch's file keeps
        the time of the branch commit that wrote it, from which a TTL by commit time counts)."""
        return self.at(revision, self.timestamp or timestamp)

    @property
    def deleted_rows(self) -> int:
        return sum(d.cardinality for d in self.deletes)

    @property
    def live_rows(self) -> int:
        """Rows not deleted by a deletion vector (tombstones and TTL are not counted)."""
        return self.row_count - self.deleted_rows

    @property
    def may_have_live_rows(self) -> bool:
        """Whether some row may survive the deletion vectors: ``live_rows`` is exact when a
        file's vectors are disjoint (FORMAT.md §2); logs written before that rule may hold
        overlapping ones, whose files are read rather than trusted to be empty."""
        return self.live_rows > 0 or len(self.deletes) > 1

    def to_json(self, descriptor: DatasetDescriptor) -> dict:
        kinds = partition_kinds(descriptor, self.spec_id)
        fields, ids = descriptor.fields, descriptor.field_ids
        out = {
            "path": self.path,
            "partition": {k: values.to_json(v, kinds[k]) for k, v in self.partition.items()},
            "size": self.size,
            "rows": self.row_count,
            "schemaVersion": self.schema_version,
            "stats": {str(ids[k]): s.to_json(fields[k].kind) for k, s in self.statistics.items() if k in fields},
        }
        if self.timestamp:
            out["committedAt"] = self.timestamp  # in checkpoints; a commit's own adds take its time
        if self.deletes:
            out["deletes"] = [d.to_json() for d in self.deletes]
        if self.spec_id:
            out["spec"] = self.spec_id
        return {"add": out}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], descriptor: DatasetDescriptor, revision: int) -> "AddFile":
        kinds_of, names = _decoding(descriptor)
        spec_id = data.get("spec", 0)
        if spec_id not in kinds_of:
            raise ValueError(f"data file {data.get('path')!r} names partition spec {spec_id!r}, which the descriptor "
                             f"does not have ({sorted(kinds_of)})")
        kinds = kinds_of[spec_id]
        fields = descriptor.fields
        stats = {names.get(k, k): s for k, s in data.get("stats", {}).items()}
        return cls(
            dataset_path(data["path"], "data file"),
            {k: values.from_json(v, kinds[k]) for k, v in data["partition"].items()},
            int(data["size"]), int(data["rows"]),
            {k: ColumnStatistics.from_json(s, fields[k].kind) for k, s in stats.items() if k in fields},
            int(data.get("schemaVersion", 0)), revision, int(data.get("committedAt", 0)),
            tuple(_vector(d) for d in data.get("deletes", ())), spec_id,
        )


def evolve_statistics(files: Mapping[str, AddFile], before: DatasetDescriptor,
                      after: DatasetDescriptor) -> Mapping[str, AddFile]:
    """``files`` (statistics named by ``before``'s fields) with statistics named and typed
    by ``after``'s fields, matched by id: a renamed field's bounds follow it, a dropped
    field's go, a widened field's are converted as its values are when read (an Arrow
    cast). Bounds that cannot be converted are dropped, which means "anything"."""
    old, new = before.arrow_schema, after.arrow_schema
    names = {i: n for n, i in after.field_ids.items()}
    target = {n: names.get(i) for n, i in before.field_ids.items()}  # old name -> new name (None: dropped)
    changed = {n: (old.field(n).type, new.field(m).type) for n, m in target.items()
               if m is not None and not old.field(n).type.equals(new.field(m).type)}
    if not changed and all(n == m for n, m in target.items()):
        return files
    return {path: dataclasses.replace(add, statistics={
        target[name]: promoted(stats, *changed[name]) if name in changed else stats
        for name, stats in add.statistics.items() if target.get(name) is not None})
        for path, add in files.items()}


def rebase_actions(actions: tuple["Action", ...], before: DatasetDescriptor,
                   after: DatasetDescriptor) -> tuple["Action", ...]:
    """Actions planned under ``before`` as they read under ``after`` (a concurrent schema
    change): the statistics of added files follow the fields by id."""
    adds = {a.path: a for a in actions if isinstance(a, AddFile)}
    if not adds or before is after:
        return actions
    moved = evolve_statistics(adds, before, after)
    return tuple(moved[a.path] if isinstance(a, AddFile) else a for a in actions)


def promoted(statistics: ColumnStatistics, source: pa.DataType, target: pa.DataType) -> ColumnStatistics:
    if statistics.min is None:
        return statistics
    try:
        lo, hi = widened(pa.array([statistics.min, statistics.max], type=source), target).to_pylist()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return ColumnStatistics(statistics.null_count)
    return ColumnStatistics(statistics.null_count, lo, hi)


@dataclass(frozen=True)
class RemoveFile:
    path: str

    def to_json(self, descriptor: DatasetDescriptor) -> dict:
        return {"remove": {"path": self.path}}


@dataclass(frozen=True)
class Tombstone:
    """Deletes the rows for which ``predicate`` is true from every file added before it."""

    predicate: Expression
    revision: int = -1

    def at(self, revision: int) -> "Tombstone":
        return dataclasses.replace(self, revision=revision)

    def to_json(self, descriptor: DatasetDescriptor) -> dict:
        return {"tombstone": {"predicate": self.predicate.to_json()}}


@dataclass(frozen=True)
class DeleteRows:
    """Deletes the rows of data file ``path`` at the positions of ``vector`` (added to the
    file's earlier deletion vectors)."""

    path: str
    vector: DeletionVectorRef

    def to_json(self, descriptor: DatasetDescriptor | None) -> dict:
        return {"deleteRows": {"path": self.path, "vector": self.vector.to_json()}}


@dataclass(frozen=True)
class AddIndex:
    """A record-index file of bucket ``bucket``: a ``base`` (the bucket's state up to its
    commit; at most one is live per bucket) or a delta (the entries of one commit).
    ``rows`` entries; ``size`` and ``sha256`` detect a damaged file; ``min_hash`` and
    ``max_hash`` bound the key hashes it holds; ``footer_crc32`` (``None`` for files written
    before it was recorded) is the CRC-32 of its Parquet footer (the bytes from the footer to the end): a
    lookup reads only the footer and what it points at, so damage there must be told without
    reading the whole file. ``revision`` is the commit that added it."""

    path: str
    bucket: int
    base: bool
    rows: int
    size: int
    sha256: str
    min_hash: int = 0
    max_hash: int = 0
    revision: int = -1
    footer_crc32: int | None = None

    def at(self, revision: int) -> "AddIndex":
        return dataclasses.replace(self, revision=revision)

    def to_json(self, descriptor: DatasetDescriptor | None) -> dict:
        return {"addIndex": {"path": self.path, "bucket": self.bucket, "base": self.base, "rows": self.rows,
                             "size": self.size, "sha256": self.sha256,
                             "minHash": self.min_hash, "maxHash": self.max_hash,
                             **({"footerCrc32": self.footer_crc32} if self.footer_crc32 is not None else {})}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], revision: int) -> "AddIndex":
        return cls(dataset_path(data["path"], "index file"), int(data["bucket"]), bool(data["base"]), int(data["rows"]),
                   int(data["size"]), str(data["sha256"]), int(data.get("minHash", 0)), int(data.get("maxHash", 0)),
                   revision, int(data["footerCrc32"]) if data.get("footerCrc32") is not None else None)


@dataclass(frozen=True)
class RemoveIndex:
    path: str

    def to_json(self, descriptor: DatasetDescriptor | None) -> dict:
        return {"removeIndex": {"path": self.path}}


@dataclass(frozen=True)
class SetMetadata:
    descriptor: DatasetDescriptor

    def to_json(self, descriptor: DatasetDescriptor | None) -> dict:
        return {"metadata": {"descriptor": self.descriptor.to_json()}}


@dataclass(frozen=True)
class SetProtocol:
    reader_version: int = 1
    writer_version: int = 1

    def to_json(self, descriptor: DatasetDescriptor | None) -> dict:
        return {"protocol": {"reader": self.reader_version, "writer": self.writer_version}}


def check_readable(protocol: SetProtocol, where: str) -> None:
    """:class:`UnsupportedLogVersionError` when a log of ``protocol`` (found at ``where``: a
    dataset, a checkpoint) is newer than this build reads: every state a replay starts from
    or reaches is checked, so an older reader refuses a newer log rather than misread it."""
    if protocol.reader_version > READER_VERSION:
        raise UnsupportedLogVersionError(f"{where} needs log reader version {protocol.reader_version}; this cdkds "
                                         f"reads version {READER_VERSION}")


@dataclass(frozen=True)
class SetTransaction:
    """Application ``app_id`` (a streaming query) committed its batch ``version`` in this
    commit (Delta's ``txn``): a writer that finds its batch recorded skips it, so a batch
    replayed after a crash is committed once. ``last_updated``: the commit's time (ms)."""

    app_id: str
    version: int
    last_updated: int = 0

    def to_json(self, descriptor: DatasetDescriptor | None) -> dict:
        return {"txn": {"appId": self.app_id, "version": self.version, "lastUpdated": self.last_updated}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "SetTransaction":
        return cls(str(data["appId"]), int(data["version"]), int(data.get("lastUpdated", 0)))


@dataclass(frozen=True)
class Tag:
    """Names revision ``revision`` ``name``: expiry and vacuum keep it readable until it is untagged."""

    name: str
    revision: int

    def to_json(self, descriptor: DatasetDescriptor | None) -> dict:
        return {"tag": {"name": self.name, "revision": self.revision}}


@dataclass(frozen=True)
class Untag:
    """Ends tag ``name``: its revision is kept no longer (unless another tag names it)."""

    name: str

    def to_json(self, descriptor: DatasetDescriptor | None) -> dict:
        return {"untag": {"name": self.name}}


@dataclass(frozen=True)
class BranchRef:
    """Branch ``name``, whose commits (``_log/_branches/<id>/``) continue main's state at
    revision ``base``: the revision of the commit that started it (``docs/FORMAT.md`` §12)."""

    name: str
    base: int
    id: str

    def to_json(self, descriptor: DatasetDescriptor | None) -> dict:
        return {"branch": {"name": self.name, "base": self.base, "id": self.id}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "BranchRef":
        name, branch_id = _tag_name(data["name"]), str(data["id"])
        if not re.fullmatch(r"[0-9a-f]{32}", branch_id):
            raise ValueError(f"branch {name!r} has the id {branch_id!r}, not 32 hexadecimal digits")
        return cls(name, int(data["base"]), branch_id)


@dataclass(frozen=True)
class DropBranch:
    """Branch ``name`` ends: its commits are no longer read (vacuum and expiry stop keeping them)."""

    name: str

    def to_json(self, descriptor: DatasetDescriptor | None) -> dict:
        return {"dropBranch": {"name": self.name}}


Action = (AddFile | RemoveFile | Tombstone | DeleteRows | AddIndex | RemoveIndex | SetMetadata | SetProtocol
          | SetTransaction | Tag | Untag | BranchRef | DropBranch)


def _decoding(descriptor: DatasetDescriptor) -> tuple[dict[int, dict[str, str]], dict[str, str]]:
    """What decoding an ``add`` needs of its descriptor, worked out once per descriptor rather
    than per file (a checkpoint holds one descriptor and up to millions of adds): the partition
    kinds of each spec, and field names by id (statistics are keyed by field id; by name before ids)."""
    global _LAST_DECODING
    last = _LAST_DECODING
    if last is not None and last[0] is descriptor:  # by identity: a descriptor's hash serialises it
        return last[1]
    found = ({i: partition_kinds(descriptor, i) for i in descriptor.partition_specs},
             {str(i): n for n, i in descriptor.field_ids.items()})
    _LAST_DECODING = (descriptor, found)
    return found


_LAST_DECODING: tuple[DatasetDescriptor, tuple[dict[int, dict[str, str]], dict[str, str]]] | None = None


def partition_kinds(descriptor: DatasetDescriptor, spec_id: int | None = None) -> dict[str, str]:
    """Partition name -> kind of its values, for spec ``spec_id`` (default: the current one)."""
    strategy = descriptor.partition_strategy if spec_id is None else descriptor.strategy_of(spec_id)
    return strategy.kinds(descriptor.fields) if strategy is not None else {}


def all_partition_kinds(descriptor: DatasetDescriptor) -> dict[str, str]:
    """Partition name -> kind of its values over every spec, the current spec's names first
    (a name's kinds in the specs that use it share one column: :func:`shared_partition_kind`)."""
    kinds = partition_kinds(descriptor)
    for spec_id in sorted(descriptor.partition_specs, reverse=True):
        for name, kind in partition_kinds(descriptor, spec_id).items():
            kinds[name] = shared_partition_kind(kinds[name], kind) or kinds[name] if name in kinds else kind
    return kinds


def encode_actions(actions: tuple[Action, ...], descriptor: DatasetDescriptor | None) -> list[dict]:
    """JSON of actions; values are encoded with the descriptor in effect at each action."""
    out = []
    for action in actions:
        if isinstance(action, SetMetadata):
            descriptor = action.descriptor
        out.append(action.to_json(descriptor))
    return out


def decode_actions(items: list, descriptor: DatasetDescriptor | None, revision: int) -> tuple[Action, ...]:
    """Actions from their JSON; raises ``ValueError``/``KeyError``/``TypeError`` when malformed,
    or when a file they name lies outside the dataset (:func:`dataset_path`)."""
    actions: list[Action] = []
    for item in items:
        (kind, body), = item.items()
        if kind == "metadata":
            descriptor = DatasetDescriptor.as_recorded(body["descriptor"])
            actions.append(SetMetadata(descriptor))
        elif kind == "protocol":
            actions.append(SetProtocol(int(body["reader"]), int(body["writer"])))
        elif kind == "add":
            if descriptor is None:
                raise ValueError("an add before any metadata")
            actions.append(AddFile.from_json(body, descriptor, revision))
        elif kind == "remove":
            actions.append(RemoveFile(dataset_path(body["path"], "removed data file")))
        elif kind == "tombstone":
            actions.append(Tombstone(expression_from_json(body["predicate"]), revision))
        elif kind == "deleteRows":
            actions.append(DeleteRows(dataset_path(body["path"], "data file"), _vector(body["vector"])))
        elif kind == "addIndex":
            actions.append(AddIndex.from_json(body, revision))
        elif kind == "removeIndex":
            actions.append(RemoveIndex(dataset_path(body["path"], "removed index file")))
        elif kind == "txn":
            actions.append(SetTransaction.from_json(body))
        elif kind == "tag":
            actions.append(Tag(_tag_name(body["name"]), int(body["revision"])))
        elif kind == "untag":
            actions.append(Untag(_tag_name(body["name"])))
        elif kind == "branch":
            actions.append(BranchRef.from_json(body))
        elif kind == "dropBranch":
            actions.append(DropBranch(_tag_name(body["name"])))
        else:
            raise ValueError(f"unknown action {kind!r}")
    return tuple(actions)


def _tag_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"the tag name {name!r} is not a non-empty string")
    return name
