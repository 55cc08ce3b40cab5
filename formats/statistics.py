"""Per-file column statistics: row count and, per top-level column, min, max and null count.

Statistics are collected batch by batch while a file is written, so they never need
the whole file. A bound that cannot be trusted (NaN in a float column, a string too
long to keep) is left out: a missing bound means "anything", never a wrong answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from cdkds.formats import values

MAX_BOUND_LENGTH = 64  # longer strings and bytes keep no min/max


@dataclass(frozen=True)
class ColumnStatistics:
    """What a file's column holds: bounds (``None`` when unknown) and its null count."""

    null_count: int
    min: Any = None
    max: Any = None

    def to_json(self, kind: str) -> dict:
        out: dict[str, Any] = {"nulls": self.null_count}
        if self.min is not None:
            out["min"] = values.to_json(self.min, kind)
            out["max"] = values.to_json(self.max, kind)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], kind: str) -> "ColumnStatistics":
        return cls(int(data["nulls"]), values.from_json(data.get("min"), kind), values.from_json(data.get("max"), kind))


@dataclass
class StatisticsCollector:
    """Accumulates :class:`ColumnStatistics` over the batches written to one file."""

    schema: pa.Schema
    row_count: int = 0
    _nulls: dict[str, int] = field(default_factory=dict)
    _bounds: dict[str, tuple[Any, Any] | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for f in self.schema:
            self._nulls[f.name] = 0
            if _has_bounds(f.type):
                self._bounds[f.name] = (None, None)

    def update(self, batch: pa.RecordBatch) -> None:
        self.row_count += batch.num_rows
        for name in self._nulls:
            column = batch.column(name)
            self._nulls[name] += column.null_count
            if self._bounds.get(name) is not None:
                self._bounds[name] = _merge(self._bounds[name], _bounds_of(column))

    def result(self) -> dict[str, ColumnStatistics]:
        out = {}
        for name, nulls in self._nulls.items():
            lo, hi = self._bounds.get(name) or (None, None)
            out[name] = ColumnStatistics(nulls, lo, hi) if lo is not None else ColumnStatistics(nulls)
        return out


def _has_bounds(t: pa.DataType) -> bool:
    return not pa.types.is_nested(t)


def _bounds_of(column: pa.Array) -> tuple[Any, Any] | None:
    """Min and max of a column, ``(None, None)`` when all null, ``None`` when unusable."""
    if column.null_count == len(column):
        return (None, None)
    if pa.types.is_floating(column.type) and pc.any(pc.is_nan(column)).as_py():
        return None
    mm = pc.min_max(column)
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if isinstance(lo, (str, bytes)) and max(len(lo), len(hi)) > MAX_BOUND_LENGTH:
        return None
    return (lo, hi)


def _merge(a: tuple[Any, Any] | None, b: tuple[Any, Any] | None) -> tuple[Any, Any] | None:
    if a is None or b is None:
        return None
    if a[0] is None:
        return b
    if b[0] is None:
        return a
    return (min(a[0], b[0]), max(a[1], b[1]))
