"""Kite's ``hash`` partition function, with Java's ``hashCode`` semantics."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from cdkds.catalog.errors import InvalidPartitionStrategyError
from cdkds.catalog.partitioning.functions import STRING_KINDS, PartitionFunction, column_of, map_distinct
from cdkds.formats.schema import INT_RANGES, INTEGER_KINDS

HASHABLE_KINDS = INTEGER_KINDS | STRING_KINDS
MAX_BUCKETS = 2**31 - 1  # Kite's buckets are a Java int; a bucket is a hash value & Integer.MAX_VALUE anyway
_PROMOTED = {"int": {"int", "long"}}  # the Avro promotions a hashed source may take


def _string_hash_code(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as an unsigned 32-bit int."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def hash_codes(array: pa.Array, hashed_as: str) -> np.ndarray:
    """Java's ``hashCode`` of each value, as signed 32-bit ints in an int64 array.

    ``hashed_as`` is the Java type: ``int`` (``Integer.hashCode``: the value; a value
    beyond the int range, only possible after an int -> long promotion, is hashed as a
    long), ``long`` (``Long.hashCode``: the halves xor-ed) or a string kind.
    """
    if hashed_as in INTEGER_KINDS:
        v = array.cast(pa.int64()).to_numpy(zero_copy_only=False)
        unsigned = (v ^ (v.view(np.uint64) >> np.uint64(32)).view(np.int64)) & 0xFFFFFFFF
        if hashed_as == "int":
            lo, hi = INT_RANGES["int"]
            unsigned = np.where((v >= lo) & (v <= hi), v & 0xFFFFFFFF, unsigned)
    else:
        unsigned = map_distinct(array, _string_hash_code, pa.int64()).to_numpy(zero_copy_only=False)
    return np.where(unsigned >= 1 << 31, unsigned - (1 << 32), unsigned)


def java_hash(value: Any, kind: str) -> int:
    """Java's ``hashCode`` of an Avro int, long or string value, as a signed 32-bit int."""
    return int(hash_codes(column_of([value], kind), kind)[0])


@dataclass(frozen=True)
class HashFunction(PartitionFunction):
    """Kite's hash: ``(hashCode(value) & Integer.MAX_VALUE) % buckets``.

    ``source_type`` is the source's type when the partition was created: values keep
    being hashed as that Java type after the source is promoted (int -> long), so a value
    stays in its bucket. It is recorded in the JSON form as ``sourceType`` (Kite ignores
    it) and is not part of equality: it is a fact about the dataset, not a choice.
    """

    buckets: int = 0
    source_type: str | None = dataclasses.field(default=None, compare=False)
    type: ClassVar[str] = "hash"

    def __post_init__(self) -> None:
        if isinstance(self.buckets, bool) or not isinstance(self.buckets, int) or self.buckets < 1:
            raise InvalidPartitionStrategyError(f"hash({self.source}): buckets must be a positive integer, got {self.buckets!r}")
        if self.source_type is not None and self.source_type not in HASHABLE_KINDS:
            raise InvalidPartitionStrategyError(
                f"hash({self.source}): sourceType must be one of {sorted(HASHABLE_KINDS)}, got {self.source_type!r}")

    def check_limits(self) -> None:
        if self.buckets > MAX_BUCKETS:
            raise InvalidPartitionStrategyError(
                f"hash({self.source}, {self.buckets}): buckets must be at most {MAX_BUCKETS} (a Java int, as in Kite)")

    def args_json(self) -> dict:
        out: dict[str, Any] = {"buckets": self.buckets}
        if self.source_type is not None:
            out["sourceType"] = self.source_type
        return out

    def args_text(self) -> list[str]:
        return [str(self.buckets)]

    def source_kinds(self) -> set[str]:
        return set(HASHABLE_KINDS)

    def check_source(self, kind: str) -> None:
        super().check_source(kind)
        if self.source_type is not None and kind not in _PROMOTED.get(self.source_type, {self.source_type}):
            raise InvalidPartitionStrategyError(
                f"partition function {self.to_text()} hashes {self.source!r} as the {self.source_type} it was "
                f"created with, but the field is now {kind}")

    def bind(self, kind: str) -> "HashFunction":
        return self if self.source_type is not None else dataclasses.replace(self, source_type=kind)

    def result_kind(self, source_kind: str) -> str:
        return "int"

    def transform(self, array: pa.Array, kind: str) -> pa.Array:
        codes = hash_codes(array, self.source_type or kind)
        return pa.array(((codes & 0x7FFFFFFF) % self.buckets).astype(np.int32))
