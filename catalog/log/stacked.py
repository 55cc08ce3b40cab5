"""Files held in memory across commits without a copy per commit.

A checkpoint without parts (protocol below 4) is read whole into one mapping of path to
:class:`AddFile`; every commit replayed or made after it changed a copy of that mapping, so
an append to a dataset of 100k files copied 100k entries (40-80 ms) and a load replaying
nine commits copied them nine times. :class:`StackedFiles` shares the large mapping between
the snapshots made from it and holds only what the commits since changed on top of it, so
a commit costs what it changed; :class:`FilesEdit` is one commit's changes being made.
"""

from __future__ import annotations

from collections.abc import ItemsView, ValuesView
from types import MappingProxyType
from typing import Iterator, Mapping

from cdkds.catalog.log.actions import AddFile

STACK_AT = 1024  # files from which a mapping is shared under the changes rather than copied
COLLAPSE_FRACTION = 4  # changes beyond 1/4 of the shared files: copy them into one mapping again


class StackedFiles(Mapping[str, AddFile]):
    """The files of ``base`` (shared, never changed) less the paths ``gone``, with ``top``
    (files added or replaced since) over them."""

    __slots__ = ("base", "top", "gone", "_len")

    def __init__(self, base: Mapping[str, AddFile], top: Mapping[str, AddFile], gone: frozenset[str]):
        self.base = base
        self.top = top
        self.gone = gone
        hidden = len(gone) + sum(1 for p in top if p in base and p not in gone)
        self._len = len(base) - hidden + len(top)

    def __getitem__(self, path: str) -> AddFile:
        found = self.top.get(path)
        if found is not None:
            return found
        if path in self.gone:
            raise KeyError(path)
        return self.base[path]

    def __contains__(self, path: object) -> bool:
        return path in self.top or (path not in self.gone and path in self.base)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[str]:
        return (path for path, _ in self._pairs())

    def values(self) -> ValuesView:  # type: ignore[override]
        return _Values(self)

    def items(self) -> ItemsView:  # type: ignore[override]
        return _Items(self)

    def _pairs(self) -> Iterator[tuple[str, AddFile]]:
        top, gone = self.top, self.gone
        if top or gone:
            yield from ((p, f) for p, f in self.base.items() if p not in gone and p not in top)
        else:
            yield from self.base.items()
        yield from top.items()


class _Values(ValuesView):
    def __iter__(self) -> Iterator[AddFile]:
        return (f for _, f in self._mapping._pairs())


class _Items(ItemsView):
    def __iter__(self) -> Iterator[tuple[str, AddFile]]:
        return self._mapping._pairs()


class FilesEdit:
    """One commit's changes to ``files``: a copy of a small mapping, or changes kept over a
    large one (see the module docstring). :meth:`done` is the mapping after them."""

    def __init__(self, files: Mapping[str, AddFile]):
        self._base: Mapping[str, AddFile] | None = None
        self._gone: set[str] = set()
        if isinstance(files, StackedFiles) and \
                len(files.top) + len(files.gone) <= len(files.base) // COLLAPSE_FRACTION:
            self._base, self._top, self._gone = files.base, dict(files.top), set(files.gone)
        elif len(files) >= STACK_AT:
            # a mapping of LiveFiles is never changed once made; a stack with many changes is copied once
            self._base, self._top = (MappingProxyType(dict(files)) if isinstance(files, StackedFiles) else files), {}
        else:
            self._top = dict(files)

    def __contains__(self, path: str) -> bool:
        return path in self._top or (self._base is not None and path not in self._gone and path in self._base)

    def __getitem__(self, path: str) -> AddFile:
        found = self._top.get(path)
        if found is not None:
            return found
        if self._base is None or path in self._gone:
            raise KeyError(path)
        return self._base[path]

    def __setitem__(self, path: str, file: AddFile) -> None:
        self._top[path] = file

    def pop(self, path: str) -> AddFile | None:
        """Remove ``path``; the file it was, ``None`` when there was none."""
        found = self._top.pop(path, None)
        if self._base is not None and path not in self._gone and path in self._base:
            self._gone.add(path)
            return found if found is not None else self._base[path]
        return found

    def done(self) -> Mapping[str, AddFile]:
        if self._base is None:
            return MappingProxyType(self._top)
        return StackedFiles(self._base, MappingProxyType(self._top), frozenset(self._gone))
