"""Can a data file hold rows matching a predicate? The one answer, for scans, deletes,
conflict checks and tombstones: partition projection first, then column statistics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Protocol

from cdkds.catalog.expressions.metrics import may_match, must_match
from cdkds.catalog.expressions.rows import evaluate
from cdkds.catalog.expressions.tree import (
    ALWAYS_FALSE, ALWAYS_TRUE, BoundPredicate, Expression, all_of, any_of,
)
from cdkds.formats.statistics import ColumnStatistics

if TYPE_CHECKING:
    from cdkds.catalog.descriptor import DatasetDescriptor
    from cdkds.catalog.partitioning import PartitionStrategy

MAX_SET_VALUES = 64  # values of one partition name FileFilter.of_partitions lists; more: their range
# the hidden partition value holding a file's partition spec id, in the projections of a
# dataset whose strategy changed (no partition name starts with "#")
SPEC_NAME = "#spec"


class DataFileSummary(Protocol):
    """What pruning reads of a data file (an ``AddFile``)."""

    partition: Mapping[str, Any]
    row_count: int
    statistics: Mapping[str, ColumnStatistics]
    spec_id: int


@dataclass(frozen=True)
class FileFilter:
    """A bound predicate with its projections onto partition values: ``inclusive`` is true
    for every partition that may hold a match, ``strict`` only for partitions whose every
    row matches. When the dataset's partition strategy changed, each file is projected by
    its own spec's strategy: the projections then read the file's spec id as partition
    value :data:`SPEC_NAME` (``by_spec``)."""

    predicate: Expression
    inclusive: Expression = ALWAYS_TRUE
    strict: Expression = ALWAYS_FALSE
    by_spec: bool = False

    @classmethod
    def of(cls, predicate: Expression, descriptor: "DatasetDescriptor") -> "FileFilter":
        """The filter of a predicate bound to ``descriptor``'s schema."""
        fields = descriptor.fields
        if not descriptor.has_past_specs:
            strategy = descriptor.partition_strategy
            if strategy is None:
                return cls(predicate)
            return cls(predicate, strategy.project(predicate, fields), strategy.project_strict(predicate, fields))
        if predicate is ALWAYS_TRUE:
            return cls(predicate)
        inclusive, strict = [], []
        for spec_id, strategy in sorted(descriptor.partition_specs.items()):
            is_spec = BoundPredicate("eq", SPEC_NAME, spec_id, kind="long")
            inclusive.append(all_of([is_spec, strategy.project(predicate, fields) if strategy else ALWAYS_TRUE]))
            strict.append(all_of([is_spec, strategy.project_strict(predicate, fields) if strategy else ALWAYS_FALSE]))
        return cls(predicate, any_of(inclusive), any_of(strict), by_spec=True)

    @classmethod
    def of_partitions(cls, partitions: Iterable[Mapping[str, Any]], descriptor: "DatasetDescriptor") -> "FileFilter":
        """The files of some partitions (each a mapping of partition name to value, and of
        :data:`SPEC_NAME` to the spec whose partition it is; the current spec when absent):
        per spec, per name, its values ``in`` a set (``is null`` for a null one), all names
        together; so it may also admit combinations of the values that were not given. A
        partition is a spec's: files of other specs are in none of its. None given: no file."""
        given = list(partitions)
        if not given:
            return cls(ALWAYS_FALSE, ALWAYS_FALSE)
        by_spec: dict[int, list[Mapping[str, Any]]] = {}
        for partition in given:
            by_spec.setdefault(partition.get(SPEC_NAME, descriptor.partition_spec_id), []).append(partition)
        if not descriptor.has_past_specs and set(by_spec) == {descriptor.partition_spec_id}:
            return cls(ALWAYS_TRUE, _in_partitions(given, descriptor.partition_strategy, descriptor))
        return cls(ALWAYS_TRUE, any_of(
            all_of([BoundPredicate("eq", SPEC_NAME, spec_id, kind="long"),
                    _in_partitions(ps, descriptor.strategy_of(spec_id), descriptor)])
            for spec_id, ps in sorted(by_spec.items())), by_spec=True)

    def may_match(self, file: DataFileSummary) -> bool:
        """False only when no row of ``file`` can match."""
        return evaluate(self.inclusive, self._partition(file)) is True and \
            may_match(self.predicate, file.row_count, file.statistics)

    def must_match(self, file: DataFileSummary) -> bool:
        """True only when every row of ``file`` matches."""
        return self.predicate is ALWAYS_TRUE or evaluate(self.strict, self._partition(file)) is True or \
            must_match(self.predicate, file.row_count, file.statistics)

    def _partition(self, file: DataFileSummary) -> Mapping[str, Any]:
        return {**file.partition, SPEC_NAME: file.spec_id} if self.by_spec else file.partition


def _in_partitions(partitions: list[Mapping[str, Any]], strategy: "PartitionStrategy | None",
                   descriptor: "DatasetDescriptor") -> Expression:
    """Per partition name of ``strategy``, its value is one of those ``partitions`` give it."""
    kinds = strategy.kinds(descriptor.fields) if strategy is not None else {}
    values: dict[str, dict[Any, None]] = {name: {} for name in kinds}
    for partition in partitions:
        for name in kinds:
            values[name][partition.get(name)] = None
    return all_of(_one_of(name, list(v), kinds[name]) for name, v in values.items())


def _one_of(name: str, values: list[Any], kind: str) -> Expression:
    """``name`` holds one of ``values`` (of partition kind ``kind``); beyond
    :data:`MAX_SET_VALUES` of them, a value between their least and greatest (a set is
    looked through value by value, file by file)."""
    present = tuple(v for v in values if v is not None)
    terms: list[Expression] = []
    if len(present) > MAX_SET_VALUES:
        terms.append(all_of([BoundPredicate("ge", name, min(present), kind=kind),
                             BoundPredicate("le", name, max(present), kind=kind)]))
    elif present:
        terms.append(BoundPredicate("in", name, values=present, kind=kind))
    if len(present) < len(values):
        terms.append(BoundPredicate("is_null", name, kind=kind))
    return any_of(terms)
