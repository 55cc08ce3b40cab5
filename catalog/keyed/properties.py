"""The descriptor properties of keyed datasets and TTL, parsed and checked once.

- ``index.buckets`` — record-index buckets, fixed at creation (default 16);
- ``index.compaction.deltas`` — a bucket's delta files that make the table services merge
  them into a new base (default 8; the seed's IndexCompactor threshold); without inline
  services the next commit touching the bucket does, and with them a write does at three
  times as many;
- ``ttl`` — a duration: rows expire that long after their ordering value (a date or
  timestamp), or without an ordering field after the commit that wrote them;
- ``ttl.field`` — a timestamp field holding each row's expiry time (null: ``ttl`` applies,
  or never without one);
- ``gc.grace`` — how long a deleted key's tombstone is kept (default 10 days, Scylla's
  ``gc_grace_seconds``), so that a late, older write cannot resurrect it.

Durations are read by :func:`cdkds.catalog.quantities.parse_duration` (``30 days``, ``12h``)
and must lie from 1 millisecond to :data:`MAX_DURATION` (365,000 days, about 1,000 years):
``ttl`` is counted back from now to a date that must exist (year 1 or later) and forward
from any date to an expiry Arrow holds, ``gc.grace`` forward from now. A descriptor read
back from a log written before the range was checked takes a value outside it as the nearer
end (a longer one: in effect never; a shorter one, such as ``0.0001``: at once, as then), so
that no operation on such a dataset fails.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Mapping

from cdkds.catalog import quantities
from cdkds.catalog.errors import InvalidDescriptorError
from cdkds.formats.schema import TIMESTAMP_KINDS, FieldType

DEFAULT_BUCKETS = 16
MAX_BUCKETS = 4096
DEFAULT_COMPACTION_DELTAS = 8
DEFAULT_GC_GRACE = dt.timedelta(days=10)
MIN_DURATION = dt.timedelta(milliseconds=1)
MAX_DURATION = dt.timedelta(days=365_000)
_TIME_KINDS = TIMESTAMP_KINDS | {"date"}


def parse_duration(text: str, what: str, recorded: bool = False) -> dt.timedelta:
    """A duration property's value; :class:`InvalidDescriptorError` naming ``what`` if malformed
    or outside :data:`MIN_DURATION` .. :data:`MAX_DURATION` (``recorded``: one outside, from a
    log written before the range was checked, is taken as the nearer end)."""
    try:
        seconds = quantities.duration_seconds(text)
    except ValueError:
        raise InvalidDescriptorError(f"property {what} must be a duration such as '30 days' or '12h', got {text!r}") \
            from None
    if seconds <= 0:
        raise InvalidDescriptorError(f"property {what} must be a positive duration, got {text!r}")
    if recorded:  # a log written before the range was checked: its value held in range
        return max(dt.timedelta(seconds=min(seconds, MAX_DURATION.total_seconds())), MIN_DURATION)
    if seconds < MIN_DURATION.total_seconds():
        raise InvalidDescriptorError(f"property {what} must be at least 1 millisecond, got {text!r}")
    if seconds > MAX_DURATION.total_seconds():
        raise InvalidDescriptorError(f"property {what} must be at most {MAX_DURATION.days} days (about 1,000 "
                                     f"years), got {text!r}")
    return dt.timedelta(seconds=seconds)


def count_property(props: Mapping[str, str], name: str, default: int, minimum: int = 1,
                   most: int | None = None) -> int:
    """A count property's value (``default`` when unset); :class:`InvalidDescriptorError`
    naming it unless it is ASCII digits from ``minimum`` to ``most``."""
    text = props.get(name)
    if text is None:
        return default
    try:
        count = quantities.parse_count(text)
    except ValueError:
        count = minimum - 1
    if count < minimum or (most is not None and count > most):
        what = "a positive integer" if minimum == 1 else f"an integer of at least {minimum}"
        limit = f" at most {most}" if most is not None else ""
        raise InvalidDescriptorError(f"property {name} must be {what}{limit}, got {text!r}")
    return count


@dataclass(frozen=True)
class KeyedProperties:
    buckets: int = DEFAULT_BUCKETS
    compaction_deltas: int = DEFAULT_COMPACTION_DELTAS
    ttl: dt.timedelta | None = None
    ttl_field: str | None = None
    gc_grace: dt.timedelta = DEFAULT_GC_GRACE

    @classmethod
    def parse(cls, props: Mapping[str, str], fields: Mapping[str, FieldType],
              ordering_field: str | None, recorded: bool = False) -> "KeyedProperties":
        """The properties of a descriptor; :class:`InvalidDescriptorError` naming the property
        and its value when one is malformed or does not fit the schema (``recorded``: read
        back from a log, see :func:`parse_duration`)."""
        ttl = parse_duration(props["ttl"], "ttl", recorded) if "ttl" in props else None
        ttl_field = props.get("ttl.field")
        if ttl_field is not None:
            if ttl_field not in fields:
                raise InvalidDescriptorError(f"property ttl.field names {ttl_field!r}, which is not in the schema {list(fields)}")
            if fields[ttl_field].kind not in TIMESTAMP_KINDS:
                raise InvalidDescriptorError(f"property ttl.field names {ttl_field!r}, a {fields[ttl_field].kind}; "
                                             f"it must be a timestamp")
        if ttl is not None and ordering_field is not None and fields[ordering_field].kind not in _TIME_KINDS:
            raise InvalidDescriptorError(
                f"property ttl counts from the ordering field, but {ordering_field!r} is a "
                f"{fields[ordering_field].kind}, not a date or timestamp; give each row its expiry in a ttl.field instead")
        return cls(
            count_property(props, "index.buckets", DEFAULT_BUCKETS, most=MAX_BUCKETS),
            count_property(props, "index.compaction.deltas", DEFAULT_COMPACTION_DELTAS),
            ttl, ttl_field,
            parse_duration(props["gc.grace"], "gc.grace", recorded) if "gc.grace" in props else DEFAULT_GC_GRACE,
        )
