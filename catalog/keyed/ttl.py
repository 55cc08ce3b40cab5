"""Time to live: when a row expires, and the one rule every read applies.

A row expires at its ``ttl.field`` value when that is set; otherwise ``ttl`` after its
ordering value (a date counts from midnight UTC) when the dataset has an ordering field,
or ``ttl`` after the commit that wrote it (its file's commit time) when it has none; a
row with none of these never expires. A row is visible while ``now < expiry``. Scans
apply :meth:`TimeToLive.visible` (a predicate, so statistics also prune whole expired
files); the record index applies :meth:`TimeToLive.alive` to the expiry it stores per
entry (:meth:`TimeToLive.expiry`). A property test holds the two to the same answers.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.expressions import ALWAYS_FALSE, ALWAYS_TRUE, Expression, and_, field, or_
from cdkds.formats import domains

if TYPE_CHECKING:
    from cdkds.catalog.log.actions import AddFile

EXPIRY_TYPE = pa.timestamp("us", tz="UTC")
_DAY_MS = domains.ticks_per_day("ms")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class TimeToLive:
    """The TTL of a dataset: ``ttl`` (ms, or None), the ``ttl.field`` and the ordering field
    it counts from (None: commit time), with their kinds."""

    ttl_ms: int | None
    ttl_field: str | None
    ordering_field: str | None
    ordering_kind: str | None
    ttl_field_local: bool = False  # a local-timestamp ttl.field compares with naive datetimes

    @classmethod
    def of(cls, descriptor: DatasetDescriptor) -> "TimeToLive | None":
        props = descriptor.keyed
        if props.ttl is None and props.ttl_field is None:
            return None
        ordering = descriptor.ordering_field if props.ttl is not None else None
        kind = descriptor.fields[ordering].kind if ordering is not None else None
        ttl_ms = int(props.ttl.total_seconds() * 1000) if props.ttl is not None else None
        local = props.ttl_field is not None and descriptor.fields[props.ttl_field].kind.startswith("local-")
        return cls(ttl_ms, props.ttl_field, ordering, kind, local)

    @property
    def by_commit_time(self) -> bool:
        return self.ttl_ms is not None and self.ordering_field is None

    def _base_alive(self, now_ms: int, file: "AddFile | None") -> Expression:
        """Rows with no ``ttl.field`` value: alive by ordering value + ttl, commit time + ttl, or always."""
        if self.ttl_ms is None:
            return ALWAYS_TRUE
        if self.ordering_field is None:
            if file is None:
                return ALWAYS_TRUE
            return ALWAYS_TRUE if file.timestamp + self.ttl_ms > now_ms else ALWAYS_FALSE
        since = now_ms - self.ttl_ms
        if self.ordering_kind == "date":
            bound = dt.date(1970, 1, 1) + dt.timedelta(days=since // _DAY_MS)
        else:
            bound = _EPOCH + dt.timedelta(milliseconds=since)
            if self.ordering_kind.startswith("local-"):
                bound = bound.replace(tzinfo=None)
        return or_(field(self.ordering_field) > bound, field(self.ordering_field).is_null())

    def visible(self, now_ms: int, file: "AddFile | None" = None) -> Expression:
        """The rows (of ``file``, for commit-time TTL) that have not expired at ``now_ms``."""
        base = self._base_alive(now_ms, file)
        if self.ttl_field is None:
            return base
        moment = _EPOCH + dt.timedelta(milliseconds=now_ms)
        if self.ttl_field_local:
            moment = moment.replace(tzinfo=None)
        return or_(field(self.ttl_field) > moment, and_(field(self.ttl_field).is_null(), base))

    def file_expired(self, file: "AddFile", now_ms: int) -> bool:
        """Whether every row of ``file`` has expired by commit time (nothing to read)."""
        return self.ttl_field is None and self.by_commit_time and file.timestamp + self.ttl_ms <= now_ms

    def expiry(self, batch: pa.RecordBatch | pa.Table) -> pa.Array | None:
        """Each row's expiry (timestamp us UTC; null: never, or by commit time) for index
        entries; ``None`` when no row can have one."""
        out = None
        if self.ttl_ms is not None and self.ordering_field is not None:
            out = pc.add(_micros(batch.column(self.ordering_field)), self.ttl_ms * 1000)
        if self.ttl_field is not None:
            own = _micros(batch.column(self.ttl_field))
            out = own if out is None else pc.coalesce(own, out)
        if out is None:
            return None
        if isinstance(out, pa.ChunkedArray):
            out = out.combine_chunks()
        return out.cast(EXPIRY_TYPE)

    def alive(self, expires: pa.Array, file_timestamps: np.ndarray, now_ms: int) -> np.ndarray:
        """For index entries with expiry ``expires`` whose files were committed at
        ``file_timestamps`` (ms): True where the row has not expired at ``now_ms``."""
        values = pc.fill_null(expires.cast(pa.int64()), np.iinfo(np.int64).max).to_numpy(zero_copy_only=False)
        alive = values > now_ms * 1000
        if self.by_commit_time:
            unset = expires.is_null().to_numpy(zero_copy_only=False)
            alive &= ~unset | (file_timestamps + self.ttl_ms > now_ms)
        return alive


def _micros(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Microseconds since the epoch of a date or timestamp column (a date: its midnight UTC)."""
    if pa.types.is_date(column.type):
        return pc.multiply(column.cast(pa.int32()).cast(pa.int64()), _DAY_MS * 1000)
    return column.cast(pa.timestamp("us", tz=column.type.tz)).cast(pa.int64())


def files_timestamps(files: Mapping[str, "AddFile"], paths: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The commit time (ms) of each entry's file (0 for a file not live)."""
    from cdkds.catalog.keyed.index import by_file

    out = np.zeros(len(paths), dtype=np.int64)
    for path, rows in by_file(paths):
        out[rows] = files[path].timestamp if path in files else 0
    return out
