"""The live data files of a snapshot: :class:`LiveFiles`, a mapping from path to
:class:`AddFile` that reads what it is asked for and nothing more.

It is layered: the parts of the checkpoint the replay started from (column-wise
:class:`FileTable` objects, each read only when a question needs it), then what the
commits replayed after them changed — files added, part files removed, deletion vectors
added to part files. Pruning (:meth:`LiveFiles.matching`) reads only the parts whose
bounds may match a filter and prunes their rows column-wise; an append makes a new
layer without reading any part.
"""

from __future__ import annotations

import dataclasses
import threading
from types import MappingProxyType
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.keyed.deletion import DeletionVectorRef
from cdkds.catalog.log.actions import AddFile, evolve_statistics
from cdkds.catalog.log.files import FileTable
from cdkds.catalog.log.parts import CheckpointPart, PartLoader
from cdkds.catalog.log.stacked import FilesEdit

if TYPE_CHECKING:
    from cdkds.catalog.expressions.pruning import FileFilter


_EMPTY: Mapping = MappingProxyType({})


class _Parts:
    """The parts of one checkpoint as read so far, shared by every :class:`LiveFiles`
    layered on them (a snapshot and the ones replayed from it)."""

    def __init__(self, parts: Sequence["CheckpointPart"], loader: PartLoader | None, descriptor: DatasetDescriptor):
        self.parts = tuple(parts)
        self.loader = loader
        self.descriptor = descriptor
        self._tables: dict[int, FileTable] = {}
        self._where: dict[str, tuple[int, int]] | None = None  # path -> (part, row)
        self._lock = threading.Lock()

    @property
    def files(self) -> int:
        return sum(p.files for p in self.parts)

    def table(self, i: int) -> FileTable:
        found = self._tables.get(i)
        if found is None:
            assert self.loader is not None
            found = self.loader.load(self.parts[i], self.descriptor)
            with self._lock:
                self._tables[i] = found
        return found

    def all(self) -> list[FileTable]:
        return [self.table(i) for i in range(len(self.parts))]

    def where(self, path: str) -> tuple[int, int] | None:
        if self._where is None:
            where = {}
            for i, t in enumerate(self.all()):
                where.update(zip(t.paths.to_pylist(), ((i, r) for r in range(len(t)))))
            self._where = where
        return self._where.get(path)

    def may_match(self, i: int, file_filter: "FileFilter") -> bool:
        return self.parts[i].may_match(file_filter, self.descriptor)


class LiveFiles(Mapping[str, AddFile]):
    """The live data files of one revision (see the module docstring)."""

    __slots__ = ("descriptor", "_parts", "added", "removed", "deletes", "_materialised")

    def __init__(self, descriptor: DatasetDescriptor, parts: "_Parts | None" = None,
                 added: Mapping[str, AddFile] = _EMPTY, removed: frozenset[str] = frozenset(),
                 deletes: Mapping[str, tuple[DeletionVectorRef, ...]] = _EMPTY):
        self.descriptor = descriptor
        self._parts = parts
        self.added = added
        self.removed = removed
        self.deletes = deletes
        self._materialised: dict[str, AddFile] | None = None

    @classmethod
    def of(cls, files: Mapping[str, AddFile] | Iterable[AddFile], descriptor: DatasetDescriptor) -> "LiveFiles":
        """Files held in memory (no checkpoint parts)."""
        added = dict(files) if isinstance(files, Mapping) else {f.path: f for f in files}
        return cls(descriptor, None, MappingProxyType(added))

    @classmethod
    def over(cls, parts: Sequence["CheckpointPart"], loader: PartLoader, descriptor: DatasetDescriptor) -> "LiveFiles":
        """The files of a checkpoint's parts, read when asked for."""
        return cls(descriptor, _Parts(parts, loader, descriptor))

    # ---------------------------------------------------------------- layers

    @property
    def parts(self) -> tuple["CheckpointPart", ...]:
        """The checkpoint parts under the changes since (empty when held in memory)."""
        return self._parts.parts if self._parts is not None else ()

    def part_table(self, i: int) -> FileTable:
        """Part ``i`` as it was checkpointed (before :attr:`removed` and :attr:`deletes`)."""
        assert self._parts is not None
        return self._parts.table(i)

    @property
    def changed_since_parts(self) -> bool:
        """Whether commits since the parts removed files of them or deleted rows of them."""
        return bool(self.removed or self.deletes)

    def apply(self, added: Sequence[AddFile], removed: Iterable[str],
              deleted: Sequence[tuple[str, DeletionVectorRef]]) -> "LiveFiles":
        """The files after one commit: ``removed`` paths go first, then ``added`` files join,
        then ``deleted`` vectors are added to their files (a file removed in the same
        commit is gone anyway)."""
        removed = list(removed)
        if not (added or removed or deleted):
            return self
        now = FilesEdit(self.added)  # the files since the parts: shared, not copied, when they are many
        gone = set(self.removed)
        deletes = dict(self.deletes)
        for path in removed:
            if now.pop(path) is None and self._parts is not None:
                gone.add(path)
            deletes.pop(path, None)
        for add in added:
            now[add.path] = add
        for path, vector in deleted:
            if path in now:
                add = now[path]
                now[path] = dataclasses.replace(add, deletes=add.deletes + (vector,))
            elif path not in gone and self._parts is not None:
                deletes[path] = deletes.get(path, ()) + (vector,)
        return LiveFiles(self.descriptor, self._parts, now.done(), frozenset(gone), MappingProxyType(deletes))

    def evolve(self, after: DatasetDescriptor) -> "LiveFiles":
        """The files read under descriptor ``after``: statistics follow fields by id (the
        parts' files are by id already, conformed when read; their summaries are by name)."""
        added = evolve_statistics(self.added, self.descriptor, after) if self.added else self.added
        parts = self._parts
        if parts is not None:
            parts = _Parts([p.evolve(self.descriptor, after) for p in parts.parts], parts.loader, after)
        return LiveFiles(after, parts, MappingProxyType(dict(added)), self.removed, self.deletes)

    # ---------------------------------------------------------------- questions

    def matching_table(self, file_filter: "FileFilter") -> FileTable:
        """The live files ``file_filter`` may match, as one table: only parts whose bounds
        may match are read, and their rows are pruned column-wise."""
        from cdkds.catalog.expressions.columnar import may_match_mask

        tables = []
        if self._parts is not None:
            for i in range(len(self._parts.parts)):
                if self._parts.may_match(i, file_filter):
                    table = self._visible(self._parts.table(i))
                    if len(table):
                        mask = may_match_mask(file_filter, table)
                        tables.append(table if pc.all(mask).as_py() else table.filter(mask))  # no copy of a whole part
        fresh = [f for f in self.added.values() if file_filter.may_match(f)]
        if fresh:
            tables.append(FileTable.of(fresh, self.descriptor))
        return FileTable.concat(tables, self.descriptor)

    def matching(self, file_filter: "FileFilter") -> list[AddFile]:
        """The live files ``file_filter`` may match (see :meth:`matching_table`)."""
        return list(self.matching_table(file_filter).files())

    def table(self) -> FileTable:
        """Every live file, as one table (reads every part)."""
        tables = [self._visible(t) for t in self._parts.all()] if self._parts is not None else []
        if self.added:
            tables.append(FileTable.of(self.added.values(), self.descriptor))
        return FileTable.concat([t for t in tables if len(t)], self.descriptor)

    def oldest_revision(self, default: int) -> int:
        """The oldest revision that added a live file, or a lower bound of it (``default``
        when there is no file): parts say their oldest without being read, but not which
        of their files were removed since."""
        oldest = min((f.revision for f in self.added.values()), default=default)
        if self._parts is not None and self._parts.parts:
            oldest = min(oldest, *(getattr(p, "min_revision", -1) for p in self._parts.parts))
        return oldest

    def with_deletion_vectors(self) -> list[AddFile]:
        """The live files that have deletion vectors (found in the parts by their ``deletes``
        column: an object only for those)."""
        out: list[AddFile] = []
        if self._parts is not None:
            for part in self._parts.all():
                table = self._visible(part)
                out += table.filter(pc.is_valid(table.table.column("deletes"))).files()
        return out + [f for f in self.added.values() if f.deletes]

    def live_rows_of(self, paths: Iterable[str]) -> dict[str, int]:
        """The live rows (:attr:`AddFile.live_rows`) of each of ``paths`` that is a live file:
        a column lookup in the parts, no object per file."""
        wanted = set(paths)
        out = {p: self.added[p].live_rows for p in wanted if p in self.added}
        rest = [p for p in wanted if p not in out and p not in self.removed]
        if rest and self._parts is not None:
            value_set = pa.array(rest, pa.string())
            for i in range(len(self._parts.parts)):
                part = self._parts.table(i)
                found = self._visible(part.filter(pc.is_in(part.paths, value_set=value_set)))
                live = pc.subtract(found.table.column("rows"), found.table.column("deleted_rows"))
                out.update(zip(found.paths.to_pylist(), live.to_pylist()))
        return out

    @property
    def live_rows(self) -> int:
        """Rows less those deleted by deletion vectors, over every live file."""
        parts = sum(self._visible(t).live_rows for t in self._parts.all()) if self._parts is not None else 0
        return parts + sum(f.live_rows for f in self.added.values())

    def _visible(self, table: FileTable) -> FileTable:
        """A part's rows less the files removed (or added again) since, with the deletion
        vectors added since."""
        hidden = [*self.removed, *(p for p in self.added if self._parts is not None)]
        table = table.without(hidden)
        if not self.deletes or not len(table):
            return table
        touched = pc.is_in(table.paths, value_set=pa.array(list(self.deletes), pa.string()))
        if not pc.any(touched).as_py():
            return table
        rows = [i for i, t in enumerate(touched.to_pylist()) if t]
        changed = {f.path: f for f in FileTable(table.table.take(rows), table.descriptor).files()}
        for path, vectors in self.deletes.items():
            if path in changed:
                add = changed[path]
                changed[path] = dataclasses.replace(add, deletes=add.deletes + vectors)
        kept = table.filter(pc.invert(touched))
        return FileTable.concat([kept, FileTable.of(changed.values(), table.descriptor)], table.descriptor)

    # ---------------------------------------------------------------- the mapping

    def _all(self) -> dict[str, AddFile]:
        if self._materialised is None:
            out = {}
            if self._parts is not None:
                for t in self._parts.all():
                    out.update((f.path, f) for f in self._visible(t).files())
            out.update(self.added)
            self._materialised = out
        return self._materialised

    def __len__(self) -> int:
        if self._parts is None:
            return len(self.added)
        if not self.removed:  # paths are never re-used: an added file is not in a part
            return self._parts.files + len(self.added)
        if self._materialised is not None:
            return len(self._materialised)
        hidden = [*self.removed, *self.added]  # counted column-wise: no file object is made
        return sum(len(t.without(hidden)) for t in self._parts.all()) + len(self.added)

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __contains__(self, path: object) -> bool:
        if path in self.added:
            return True
        if path in self.removed or self._parts is None or not isinstance(path, str):
            return False
        return self._parts.where(path) is not None

    def __getitem__(self, path: str) -> AddFile:
        found = self.added.get(path)
        if found is not None:
            return found
        if path in self.removed or self._parts is None:
            raise KeyError(path)
        where = self._parts.where(path)
        if where is None:
            raise KeyError(path)
        table = self._parts.table(where[0])
        (add,) = FileTable(table.table.slice(where[1], 1), table.descriptor).files()
        extra = self.deletes.get(path)
        return dataclasses.replace(add, deletes=add.deletes + extra) if extra else add

    def values(self):  # type: ignore[override]
        return self._all().values()

    def items(self):  # type: ignore[override]
        return self._all().items()

    def keys(self):  # type: ignore[override]
        return self._all().keys()
