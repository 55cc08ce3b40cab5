"""What a conversion finds in a source folder: a descriptor and the data files to adopt."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.partitioning import PartitionStrategy
from cdkds.catalog.partitioning.functions import IdentityFunction, default_name


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
