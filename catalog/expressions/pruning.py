"""Can a data file hold rows matching a predicate? The one answer, for scans, deletes,
conflict checks and tombstones: partition projection first, then column statistics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Protocol

from cdkds.catalog.expressions.metrics import may_match, must_match
from cdkds.catalog.expressions.rows import evaluate
from cdkds.catalog.expressions.tree import ALWAYS_FALSE, ALWAYS_TRUE, Expression
from cdkds.formats.statistics import ColumnStatistics

if TYPE_CHECKING:
    from cdkds.catalog.descriptor import DatasetDescriptor


class DataFileSummary(Protocol):
    """What pruning reads of a data file (an ``AddFile``)."""

    partition: Mapping[str, Any]
    row_count: int
    statistics: Mapping[str, ColumnStatistics]


@dataclass(frozen=True)
class FileFilter:
    """A bound predicate with its projections onto partition values: ``inclusive`` is true
    for every partition that may hold a match, ``strict`` only for partitions whose every
    row matches."""

    predicate: Expression
    inclusive: Expression = ALWAYS_TRUE
    strict: Expression = ALWAYS_FALSE

    @classmethod
    def of(cls, predicate: Expression, descriptor: "DatasetDescriptor") -> "FileFilter":
        """The filter of a predicate bound to ``descriptor``'s schema."""
        strategy = descriptor.partition_strategy
        if strategy is None:
            return cls(predicate)
        fields = descriptor.fields
        return cls(predicate, strategy.project(predicate, fields), strategy.project_strict(predicate, fields))

    def may_match(self, file: DataFileSummary) -> bool:
        """False only when no row of ``file`` can match."""
        return evaluate(self.inclusive, file.partition) is True and \
            may_match(self.predicate, file.row_count, file.statistics)

    def must_match(self, file: DataFileSummary) -> bool:
        """True only when every row of ``file`` matches."""
        return self.predicate is ALWAYS_TRUE or evaluate(self.strict, file.partition) is True or \
            must_match(self.predicate, file.row_count, file.statistics)
