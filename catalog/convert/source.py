"""What a conversion finds in a source folder: a descriptor and the data files to adopt."""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Any, Mapping
import numpy as np
from cdkds.catalog.descriptor import DatasetDescriptor


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
