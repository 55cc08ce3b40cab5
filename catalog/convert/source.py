"""What a conversion finds in a source folder: a descriptor and the data files to adopt."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import ConversionError
from cdkds.catalog.partitioning import PartitionStrategy
from cdkds.catalog.partitioning.functions import IdentityFunction, default_name
from cdkds.catalog.storage import ObjectStore, store_failures


@dataclass(frozen=True)
class SourceFile:
    """A data file to adopt: its path relative to the source folder ('/'-separated), its
    typed partition values by the descriptor's partition names, and the row positions the
    source had deleted (a Delta deletion vector), if any."""

    path: str
    partition: Mapping[str, Any] = field(default_factory=dict)
    deleted: np.ndarray | None = None


@dataclass(frozen=True)
class Found:
    """A source's dataset: its kind ("kite", "hive", "delta"), the descriptor it becomes and
    its files."""

    kind: str
    descriptor: DatasetDescriptor
    files: tuple[SourceFile, ...]


def identity_strategy(columns: Sequence[str]) -> PartitionStrategy | None:
    """Each of ``columns`` an identity partition under its default name (``<column>_copy``: a
    partition cannot be named as a field); ``None`` without columns."""
    if not columns:
        return None
    return PartitionStrategy(tuple(IdentityFunction(c, default_name("identity", c)) for c in columns))


def hidden(path: str) -> bool:
    """Whether a source's file is not data: a segment of its path starts with ``.`` or ``_``
    (``_SUCCESS``, ``.crc``, ``_temporary``, Kite's ``.metadata``, a cdkds log)."""
    return any(s.startswith((".", "_")) for s in path.split("/"))


def visible_files(store: ObjectStore) -> list[str]:
    """The keys, sorted, of the source's files that are not :func:`hidden`. A symbolic link
    among them is named: the dataset would reference a file that is not where the link is
    (outside the source, or read twice), and other readers follow links the listing skips."""
    with store_failures(f"listing {store.url}"):
        found = store.fs.find(store.path(""), detail=True, withdirs=True)
    keys = []
    for path, info in found.items():
        key = path[len(store.root) + 1:] if path.startswith(store.root + "/") else path
        if not key or key == store.root or hidden(key):
            continue
        if info.get("islink") or info.get("type") not in ("file", "directory"):
            target = info.get("destination")
            raise ConversionError(f"{store.display(key)} is a symbolic link{f' to {target}' if target else ''} "
                                  f"(or not a file): a converted dataset adopts files where they lie; copy or "
                                  f"move the file into the source folder, or hide the link (a name starting "
                                  f"with '.' or '_')")
        if info.get("type") == "file":
            keys.append(key)
    return sorted(keys)
