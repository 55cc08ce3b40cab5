"""Deletion vectors: the row positions of a data file that are deleted without rewriting it.

A :class:`DeletionVector` is a set of row positions (a roaring bitmap). A commit's
:class:`~cdkds.catalog.log.actions.DeleteRows` action adds one to a data file; the
deletions of a file are the union of every vector added to it since it was added. A
vector is stored inline in the log (base64 of the portable roaring serialisation) when it
is small, otherwise as a sidecar object ``_deletes/<uuid>.roaring`` whose size and
SHA-256 the log records (see docs/FORMAT.md).
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
from pyroaring import BitMap, FrozenBitMap

from cdkds.catalog.errors import CorruptIndexError
from cdkds.catalog.storage import ObjectStore

DELETES_FOLDER = "_deletes"
INLINE_LIMIT = 1024  # serialised bytes up to which a vector lives in the log itself


@dataclass(frozen=True)
class DeletionVector:
    """An immutable set of deleted row positions of one data file."""

    positions: FrozenBitMap

    @classmethod
    def of(cls, positions: Iterable[int] | np.ndarray) -> "DeletionVector":
        if isinstance(positions, np.ndarray):
            return cls(FrozenBitMap(positions.astype(np.uint32, copy=False)))
        return cls(FrozenBitMap(positions))

    @classmethod
    def union_of(cls, vectors: Iterable["DeletionVector"]) -> "DeletionVector":
        bitmap = BitMap()
        for v in vectors:
            bitmap |= v.positions
        return cls(FrozenBitMap(bitmap))

    def __len__(self) -> int:
        return len(self.positions)

    def __contains__(self, position: int) -> bool:
        return position in self.positions

    def to_numpy(self) -> np.ndarray:
        """The positions, sorted, as uint32."""
        return np.frombuffer(self.positions.to_array(), dtype=np.uint32) if self.positions else np.zeros(0, np.uint32)

    def keep_mask(self, offset: int, length: int) -> np.ndarray | None:
        """For rows ``offset .. offset+length`` of the file, True where a row is not deleted;
        ``None`` when none of them is."""
        if not self.positions or self.positions.max() < offset or self.positions.min() >= offset + length:
            return None
        deleted = self.to_numpy()
        lo, hi = np.searchsorted(deleted, [offset, offset + length])
        if lo == hi:
            return None
        mask = np.ones(length, dtype=bool)
        mask[deleted[lo:hi].astype(np.int64) - offset] = False
        return mask

    def serialize(self) -> bytes:
        return self.positions.serialize()

    @classmethod
    def deserialize(cls, data: bytes) -> "DeletionVector":
        return cls(FrozenBitMap.deserialize(data))


@dataclass(frozen=True)
class DeletionVectorRef:
    """Where one deletion vector of a data file is: ``inline`` bytes, or a sidecar ``path``
    (relative to the dataset) with its ``size`` and ``sha256``. ``cardinality`` is its
    number of positions."""

    cardinality: int
    inline: bytes | None = None
    path: str | None = None
    size: int = 0
    sha256: str = ""

    @classmethod
    def store(cls, store: ObjectStore, vector: DeletionVector) -> "DeletionVectorRef":
        """A reference to ``vector``: inline when small, else written as a sidecar first."""
        ref, sidecar = cls.planned(vector)
        if sidecar is not None:
            store.put(ref.path, sidecar)
        return ref

    @classmethod
    def planned(cls, vector: DeletionVector) -> "tuple[DeletionVectorRef, bytes | None]":
        """A reference to ``vector`` and the bytes of its sidecar, to store at ``ref.path``
        before the reference is committed (``None``: the vector is inline)."""
        data = vector.serialize()
        if len(data) <= INLINE_LIMIT:
            return cls(len(vector), inline=data), None
        path = f"{DELETES_FOLDER}/{uuid.uuid4()}.roaring"
        return cls(len(vector), path=path, size=len(data), sha256=hashlib.sha256(data).hexdigest()), data

    def load(self, store: ObjectStore) -> DeletionVector:
        """The vector; :class:`CorruptIndexError` if its sidecar is missing or damaged."""
        if self.inline is not None:
            return DeletionVector.deserialize(self.inline)
        where = store.display(self.path)
        try:
            data = store.read(self.path)
        except FileNotFoundError:
            raise CorruptIndexError(f"deletion vector {where} is missing") from None
        if len(data) != self.size or hashlib.sha256(data).hexdigest() != self.sha256:
            raise CorruptIndexError(f"deletion vector {where} is damaged: size or checksum differs from the log")
        vector = DeletionVector.deserialize(data)
        if len(vector) != self.cardinality:
            raise CorruptIndexError(f"deletion vector {where} holds {len(vector)} positions, the log says {self.cardinality}")
        return vector

    def to_json(self) -> dict:
        if self.inline is not None:
            return {"cardinality": self.cardinality, "inline": base64.b64encode(self.inline).decode()}
        return {"cardinality": self.cardinality, "path": self.path, "size": self.size, "sha256": self.sha256}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "DeletionVectorRef":
        if "inline" in data:
            return cls(int(data["cardinality"]), inline=base64.b64decode(data["inline"]))
        return cls(int(data["cardinality"]), path=str(data["path"]), size=int(data["size"]), sha256=str(data["sha256"]))


def load_deletes(store: ObjectStore, refs: Iterable[DeletionVectorRef]) -> DeletionVector | None:
    """The union of a data file's deletion vectors, ``None`` when it has none."""
    refs = tuple(refs)
    if not refs:
        return None
    return DeletionVector.union_of(r.load(store) for r in refs)
