"""Whether a data file written with one partition spec lies inside some partitions of
another: what a partition overwrite after a change of strategy needs to know of the files
of older specs (replace those wholly inside the partitions written, keep those wholly
outside, refuse when it cannot tell).

A file's rows are known through its column statistics (exact bounds and null counts, see
:mod:`cdkds.formats.statistics`) and, for the source of an identity function of its own
spec, its partition value. Each function of the current strategy maps those bounds to the
partition values the rows may have (:class:`Image`): one value when the bounds are equal,
an interval when the function keeps order over them (identity, range, year, an ordered
dateFormat; month, day, hour and minute within one year, month, day, hour), every bucket
of a hash, anything otherwise.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from itertools import product
from typing import TYPE_CHECKING, Any, Collection

from cdkds.catalog.expressions.pruning import DataFileSummary
from cdkds.catalog.partitioning.calendar import CALENDAR_UNITS, CalendarFunction
from cdkds.catalog.partitioning.functions import IdentityFunction, PartitionFunction
from cdkds.catalog.partitioning.hashing import HashFunction
from cdkds.formats.errors import SchemaMismatchError

if TYPE_CHECKING:
    from cdkds.catalog.descriptor import DatasetDescriptor

INSIDE, OUTSIDE, UNKNOWN = "inside", "outside", "unknown"
MAX_ENUMERATED = 4096  # partition value combinations a file's images are enumerated up to


@dataclass(frozen=True)
class Image:
    """The values one partition function may give a file's rows: the finite ``values``, or
    those from ``low`` to ``high`` (both included), or anything (``everything``)."""

    values: frozenset | None = None
    low: Any = None
    high: Any = None
    everything: bool = False

    def may_hold(self, value: Any) -> bool:
        if self.everything:
            return True
        if self.values is not None:
            return value in self.values
        try:
            return value is not None and self.low <= value <= self.high
        except TypeError:
            return True

    def enumerated(self) -> frozenset | None:
        """Every value the image holds, when it is a short list (an interval of integers counts)."""
        if self.values is not None:
            return self.values
        if isinstance(self.low, int) and isinstance(self.high, int) and self.high - self.low < MAX_ENUMERATED:
            return frozenset(range(self.low, self.high + 1))
        return None


EVERYTHING = Image(everything=True)


def coverage(descriptor: "DatasetDescriptor", file: DataFileSummary, partitions: Collection[tuple]) -> str:
    """:data:`INSIDE` when every row of ``file`` (of any of ``descriptor``'s specs) belongs
    to one of ``partitions`` (value tuples of the current strategy's functions, in order),
    :data:`OUTSIDE` when none does, :data:`UNKNOWN` when the file's statistics cannot tell."""
    strategy = descriptor.partition_strategy
    functions = strategy.functions if strategy is not None else ()
    images = [image(descriptor, file, f) for f in functions]
    if not any(all(i.may_hold(v) for i, v in zip(images, p)) for p in partitions):
        return OUTSIDE
    values = [i.enumerated() for i in images]
    if all(v is not None for v in values):
        count = 1
        for v in values:
            count *= len(v)
        if count <= MAX_ENUMERATED and all(p in partitions for p in product(*values)):
            return INSIDE
    return UNKNOWN


def image(descriptor: "DatasetDescriptor", file: DataFileSummary, function: PartitionFunction) -> Image:
    """The values ``function`` (of the current strategy) may give the rows of ``file``."""
    kind = descriptor.fields[function.source].kind
    bounds = source_bounds(descriptor, file, function.source)
    if bounds is None:
        return EVERYTHING
    low, high, nulls = bounds
    if nulls and not isinstance(function, IdentityFunction):
        return EVERYTHING  # a null the function does not map: the file is in no partition of it
    extra = frozenset([None]) if nulls else frozenset()
    if low is None:  # every row null
        return Image(extra)
    try:
        first, last = function.apply(low, kind), function.apply(high, kind)
        if low == high:
            return Image(frozenset([first]) | extra)
        # equal images of the bounds say nothing of the values between unless the function
        # keeps order there (hour(ts) of two midnights, a hash of 1 and of 5)
        if extra or not _keeps_order(function, low, high, kind):
            return _all_values(function)
    except (SchemaMismatchError, TypeError, ValueError):  # a value the function does not map
        return EVERYTHING
    return Image(low=first, high=last)


def _all_values(function: PartitionFunction) -> Image:
    """Every value ``function`` gives a non-null source, when they are few (hash buckets)."""
    if isinstance(function, HashFunction) and function.buckets <= MAX_ENUMERATED:
        return Image(frozenset(range(function.buckets)))
    return EVERYTHING


def source_bounds(descriptor: "DatasetDescriptor", file: DataFileSummary, source: str) -> tuple[Any, Any, bool] | None:
    """The lowest and highest value of field ``source`` in ``file`` (``None, None``: every
    row null) and whether it holds nulls; ``None`` when unknown."""
    own = descriptor.strategy_of(file.spec_id)
    for f in own.functions if own is not None else ():
        if isinstance(f, IdentityFunction) and f.source == source and f.name in file.partition:
            value = file.partition[f.name]
            return value, value, value is None
    stats = file.statistics.get(source)
    if stats is None:
        return None
    nulls = stats.null_count > 0
    if stats.null_count >= file.row_count:
        return None, None, nulls
    if stats.min is None or stats.max is None:
        return None
    return stats.min, stats.max, nulls


def _keeps_order(function: PartitionFunction, low: Any, high: Any, kind: str) -> bool:
    """Whether ``function`` maps every value from ``low`` to ``high`` between the images of
    those two (it is monotonic there)."""
    if isinstance(function, CalendarFunction):  # a unit repeats each coarser unit: order holds within one
        coarser = CALENDAR_UNITS[:CALENDAR_UNITS.index(function.unit)]
        return all(dataclasses.replace(function, unit=u).apply(low, kind) ==
                   dataclasses.replace(function, unit=u).apply(high, kind) for u in coarser)
    return bool(function.monotonic)
