"""What ``cdkds check`` reports: a :class:`Problem` and its kinds, the objects a log references,
and the wording the log and file checks share."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Iterable

import pyarrow.compute as pc

from cdkds.catalog.errors import CorruptLogError
from cdkds.catalog.log.files import FileTable
from cdkds.catalog.log.snapshot import Snapshot

BATCH_FILES = 65536  # files whose columns are turned into Python values at a time

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``: called as each phase advances."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong: ``kind`` a stable word (``missing_commit``, ``size_mismatch``...),
    ``object`` the key of the object concerned (relative to the dataset), ``message`` what is
    wrong and ``cost`` what it costs the user."""

    kind: str
    object: str
    message: str
    cost: str

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


PROBLEM_KINDS = {
    "missing_log": "the log is empty while data files remain (the dataset does not exist for readers)",
    "missing_commit": "a commit between the oldest retained revision and the latest is absent",
    "corrupt_commit": "a commit that does not parse, fails its checksum, names another revision or names a file "
                      "outside the dataset",
    "broken_chain": "a commit whose previous uuid is not the commit before it",
    "timestamp_order": "a commit not later than the one before it",
    "unsupported_protocol": "a commit needing a newer log reader than this cdkds",
    "corrupt_checkpoint": "a checkpoint that does not parse, fails its checksum, names another revision or names a "
                          "file outside the dataset, or is missing where a tag keeps its revision",
    "corrupt_checkpoint_part": "a part of a checkpoint that is missing, does not parse, or differs from what its "
                               "checkpoint says of it (size, SHA-256, files, rows)",
    "checkpoint_mismatch": "a checkpoint whose state differs from the replay of the commits",
    "bad_hint": "an unreadable _last_checkpoint, or one naming an absent checkpoint",
    "missing_file": "a data, index or deletion-vector file a retained revision references is absent",
    "size_mismatch": "a referenced file whose size differs from the log",
    "unreadable_file": "a data file that cannot be read whole (read_data)",
    "content_mismatch": "a data file whose rows or column statistics differ from the log (read_data)",
    "unreadable_index": "a record-index file that fails its SHA-256, page checksums or entry count",
    "unreadable_deletion_vector": "a deletion vector that cannot be loaded, or points past its file",
    "duplicate_key": "a record key live in more than one row of a keyed dataset (read_data)",
    "index_mismatch": "a live row the record index does not point at (read_data)",
    "mirror_mismatch": "a Delta Lake or Iceberg mirror whose newest version disagrees with the log, or cannot be read",
}


@dataclass
class Reference:
    """An object retained revisions reference: ``kind`` data, index or deletes; live from
    revision ``first`` to ``last`` (``None``: still live at the latest)."""

    key: str
    kind: str
    size: int
    first: int
    last: int | None = None
    rows: int = 0
    owner: str | None = None  # the data file of a deletion vector


class References:
    def __init__(self, oldest: int):
        self.oldest = oldest
        self.items: dict[str, Reference] = {}
        self._vectors: dict[str, list[str]] = {}

    def add(self, key: str, kind: str, size: int, revision: int, rows: int = 0, owner: str | None = None) -> None:
        revision = max(revision, self.oldest)
        ref = self.items.get(key)
        if ref is None:
            self.items[key] = Reference(key, kind, size, revision, None, rows, owner)
            if owner is not None:
                self._vectors.setdefault(owner, []).append(key)
        elif revision < ref.first:
            ref.first = revision

    def remove(self, key: str, revision: int) -> None:
        for k in (key, *self._vectors.get(key, ())):
            ref = self.items.get(k)
            if ref is not None and ref.last is None:
                ref.last = revision - 1

    def of_commit(self, revision: int, raw: dict) -> None:
        """The objects a parsed commit adds and removes (its JSON: no descriptor needed)."""
        for item in raw["actions"] if isinstance(raw["actions"], list) else ():
            try:
                (kind, body), = item.items()
                if kind == "add":
                    self.add(str(body["path"]), "data", int(body["size"]), revision, int(body["rows"]))
                elif kind == "addIndex":
                    self.add(str(body["path"]), "index", int(body["size"]), revision)
                elif kind == "deleteRows" and "path" in body["vector"]:
                    vector = body["vector"]
                    self.add(str(vector["path"]), "deletes", int(vector["size"]), revision, owner=str(body["path"]))
                elif kind in ("remove", "removeIndex"):
                    self.remove(str(body["path"]), revision)
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # a malformed action: the commit's decoding reports it

    def of_snapshot(self, snapshot: Snapshot, files: FileTable | None = None) -> None:
        """The objects a snapshot's live files (``files``, when its table is at hand) use, read
        from their columns batch by batch (an :class:`AddFile` only for files with deletion
        vectors)."""
        files = snapshot.files.table() if files is None else files
        columns = files.table.select(["path", "size", "revision", "rows"])
        for batch in columns.to_batches(max_chunksize=BATCH_FILES):
            for path, size, revision, rows in zip(*(c.to_pylist() for c in batch.columns)):
                self.add(path, "data", size, revision, rows)
        for add in with_deletion_vectors(files).files():
            for vector in add.deletes:
                if vector.path:
                    self.add(vector.path, "deletes", vector.size, add.revision, owner=add.path)
        for entry in snapshot.index.values():
            self.add(entry.path, "index", entry.size, entry.revision)

    def of_pinned(self, snapshot: Snapshot, files: FileTable) -> None:
        """The objects revision ``snapshot`` (kept for a tag, older than the retained log) uses
        that the retained log does not: live at that revision only."""
        pinned = References(snapshot.version)
        pinned.of_snapshot(snapshot, files)
        for key, ref in pinned.items.items():
            if key not in self.items:
                ref.last = snapshot.version
                self.items[key] = ref
                if ref.owner is not None:
                    self._vectors.setdefault(ref.owner, []).append(key)

    def of_kind(self, kind: str) -> list[Reference]:
        return [r for r in self.items.values() if r.kind == kind]


def with_deletion_vectors(files: FileTable) -> FileTable:
    """The files that have deletion vectors."""
    return files.filter(pc.is_valid(files.table.column("deletes")))


def detail(error: BaseException) -> str:
    """The underlying reason of a cdkds error raised ``from None`` (its context), else its text."""
    cause = error.__cause__ or error.__context__
    if cause is not None and not isinstance(cause, CorruptLogError):
        return f"{type(cause).__name__}: {cause}"
    return str(error)


def short(error: BaseException) -> str:
    """A record-index error without the dataset prefix and the advice (the cost says it)."""
    text = str(error).split("; run dataset.rebuild_index()")[0]
    return text.split(": ", 1)[1] if text.startswith("dataset ") and ": " in text else text


def revisions(first: int, last: int) -> str:
    return f"revision {first}" if first == last else f"revisions {first} to {last}"


def some(keys: Iterable[str], most: int = 3) -> str:
    keys = list(keys)
    return ", ".join(keys[:most]) + (f" and {len(keys) - most} more" if len(keys) > most else "")
