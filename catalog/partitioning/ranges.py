"""Kite's ``range`` (fixed width or upper bounds) and ``list`` (value list) functions."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from cdkds.catalog.errors import InvalidPartitionStrategyError
from cdkds.catalog.expressions import ALWAYS_FALSE, Expression, Predicate
from cdkds.catalog.expressions.tree import literal_to_text
from cdkds.catalog.partitioning.functions import (
    EVERYTHING, STRING_KINDS, Domain, PartitionFunction, kind_arrow_type, map_distinct,
)
from cdkds.formats.schema import INT_RANGES, INTEGER_KINDS

_LONG_MIN, _LONG_MAX = INT_RANGES["long"]


@dataclass(frozen=True)
class RangeFunction(PartitionFunction):
    """Fixed-width ranges (``size``: the value floored to a multiple of size, computed as
    a long; the lowest range, whose floor would be below the smallest long, starts at the
    smallest long) or explicit upper ``bounds`` (the first bound at or above the value;
    values above the last bound are outside the domain)."""

    size: int | None = None
    bounds: tuple = ()
    type: ClassVar[str] = "range"
    monotonic: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if (self.size is None) == (not self.bounds):
            raise InvalidPartitionStrategyError(f"range({self.source}) needs either a size or a list of upper bounds")
        if self.size is not None and (isinstance(self.size, bool) or not isinstance(self.size, int)
                                      or not 1 <= self.size <= _LONG_MAX):
            raise InvalidPartitionStrategyError(
                f"range({self.source}): size must be a positive integer up to 2**63-1, got {self.size!r}")
        if self.bounds:
            object.__setattr__(self, "bounds", tuple(self.bounds))
            kinds = {type(b) for b in self.bounds}
            if kinds not in ({int}, {str}):
                raise InvalidPartitionStrategyError(
                    f"range({self.source}): bounds must be all integers or all strings, got {list(self.bounds)!r}")
            if list(self.bounds) != sorted(set(self.bounds)):
                raise InvalidPartitionStrategyError(
                    f"range({self.source}): bounds must be strictly increasing, got {list(self.bounds)!r}")
            if kinds == {int} and not _LONG_MIN <= self.bounds[-1] <= _LONG_MAX:
                raise InvalidPartitionStrategyError(
                    f"range({self.source}): bounds must be longs, got {self.bounds[-1]!r}")

    def args_json(self) -> dict:
        return {"size": self.size} if self.size is not None else {"bounds": list(self.bounds)}

    def args_text(self) -> list[str]:
        if self.size is not None:
            return [str(self.size)]
        return ["[" + ", ".join(literal_to_text(b) for b in self.bounds) + "]"]

    def source_kinds(self) -> set[str]:
        if self.size is not None or isinstance(self.bounds[0], int):
            return set(INTEGER_KINDS)
        return set(STRING_KINDS)

    def result_kind(self, source_kind: str) -> str:
        return "long" if source_kind in INTEGER_KINDS else "string"

    def domain(self, kind: str) -> Domain:
        return EVERYTHING if self.size is not None else Domain(high=self.bounds[-1])

    def outside_reason(self, kind: str) -> str:
        return f"is above the last range bound {self.bounds[-1]!r}" if self.bounds else super().outside_reason(kind)

    def transform(self, array: pa.Array, kind: str) -> pa.Array:
        result = kind_arrow_type(self.result_kind(kind))
        if kind not in INTEGER_KINDS:
            bounds = np.array(self.bounds, dtype=object)
            return map_distinct(array, lambda v: bounds[np.searchsorted(bounds, v, side="left")], result)
        v = array.cast(pa.int64()).to_numpy(zero_copy_only=False)
        if self.size is None:
            bounds = np.array(self.bounds, dtype=np.int64)
            return pa.array(bounds[np.searchsorted(bounds, v, side="left")], type=result)
        remainder = v % np.int64(self.size)
        # v - remainder < smallest long  <=>  v - smallest long < remainder (unsigned: no overflow)
        lowest = (v.view(np.uint64) - np.int64(_LONG_MIN).view(np.uint64)) < remainder.view(np.uint64)
        with np.errstate(over="ignore"):
            floor = v - remainder
        return pa.array(np.where(lowest, _LONG_MIN, floor), type=result)

    def project_strict(self, p: Predicate, kind: str) -> Expression | None:
        if p.op in ("eq", "in"):
            return None
        return super().project_strict(p, kind)


@dataclass(frozen=True)
class ListFunction(PartitionFunction):
    """Kite's value list: the index of the set of values that holds the value; values in
    no set are outside the domain."""

    values: tuple = ()
    type: ClassVar[str] = "list"

    def __post_init__(self) -> None:
        sets = tuple(tuple(s) if isinstance(s, (list, tuple)) else (s,) for s in self.values)
        object.__setattr__(self, "values", sets)
        if not sets or not all(sets):
            raise InvalidPartitionStrategyError(f"list({self.source}) needs a non-empty list of non-empty value lists")
        seen: set = set()
        for s in sets:
            for v in s:
                if v in seen:
                    raise InvalidPartitionStrategyError(f"list({self.source}): value {v!r} is in more than one list")
                seen.add(v)

    def args_json(self) -> dict:
        return {"values": [list(s) for s in self.values]}

    def args_text(self) -> list[str]:
        return ["[" + ", ".join("[" + ", ".join(literal_to_text(v) for v in s) + "]" for s in self.values) + "]"]

    def source_kinds(self) -> set[str]:
        return INTEGER_KINDS | STRING_KINDS | {"boolean"}

    def result_kind(self, source_kind: str) -> str:
        return "int"

    def domain(self, kind: str) -> Domain:
        return self._domain

    def outside_reason(self, kind: str) -> str:
        return f"is in none of the partition lists {self.args_text()[0]}"

    @cached_property
    def _index(self) -> dict[Any, int]:
        return {v: i for i, s in enumerate(self.values) for v in s}

    @cached_property
    def _domain(self) -> Domain:
        return Domain(members=frozenset(self._index))

    def transform(self, array: pa.Array, kind: str) -> pa.Array:
        return map_distinct(array, self._index.__getitem__, pa.int32())

    def project(self, p: Predicate, kind: str) -> Expression | None:
        if p.op == "ne" and any(s == (p.value,) for s in self.values):
            return Predicate("ne", self.name, self.apply(p.value, kind))
        return super().project(p, kind)

    def project_strict(self, p: Predicate, kind: str) -> Expression | None:
        if p.op in ("eq", "in"):
            wanted = {p.value} if p.op == "eq" else set(p.values)
            inside = tuple(i for i, s in enumerate(self.values) if set(s) <= wanted)
            return Predicate("in", self.name, values=inside) if inside else ALWAYS_FALSE
        return super().project_strict(p, kind)
