"""The columns a read outputs: one selection, and one "unknown column" error, for every
entry point that takes columns (a scan, the change feed, key lookups, and the Spark batch
source, change feed and stream)."""

from __future__ import annotations

from typing import Sequence

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import ExpressionError


def select_columns(dataset: str, descriptor: DatasetDescriptor, columns: Sequence[str] | str | None
                   ) -> tuple[str, ...]:
    """The columns a read of ``dataset`` outputs: ``columns`` (a sequence or ``"a,b"``;
    repeats once) checked against the descriptor's fields, or every field for ``None``.
    A column the schema does not have is an :class:`ExpressionError` naming the dataset,
    the column and the columns there are."""
    fields = descriptor.fields
    if columns is None:
        return tuple(fields)
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    unknown = [c for c in columns if c not in fields]
    if unknown:
        raise ExpressionError(f"dataset {dataset!r}: unknown column {unknown[0]!r}; columns are {list(fields)}")
    return tuple(dict.fromkeys(columns))
