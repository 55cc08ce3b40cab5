"""The descriptor properties of the table services, parsed and checked once.

- ``services.inline`` — ``true`` (default) or ``false``: run the services in the writing
  process after each write's commit;
- ``services.budget`` — bytes of data and index files one inline pass may rewrite (default
  256m); work beyond it waits for the next commit or ``cdkds maintain``;
- ``services.deleted.fraction`` — rewrite a data file once this fraction of its rows is
  deleted (deletion vectors, tombstones) or expired (TTL); default 0.15, from 0.01 to 1;
- ``services.tombstones`` — ``true`` (default) or ``false``: rewrite the files a tombstone
  (a delete on a dataset without a record key) applies to, without the rows it hides;
- ``services.partition.specs`` — ``true`` (default) or ``false``: rewrite the files written
  with an older partition spec (before ``alter().partition_by(...)``) into the current one,
  so the dataset converges to one layout;
- ``services.small.files`` — bin-pack a partition's small files (under three quarters of
  ``services.file.size``) once it has this many (default 8, at least 2);
- ``services.file.size`` — the size files are rewritten to (default 128m);
- ``services.log.retention`` / ``services.vacuum.retention`` — durations; unset by default,
  since they destroy time travel: when set, the services expire commits and vacuum files
  older than that.

Sizes are read by :func:`cdkds.catalog.quantities.parse_size`, durations by
:func:`cdkds.catalog.quantities.parse_duration`. A descriptor read back from a log
(``recorded``) whose values no longer parse gets the defaults: a service must never stop a
dataset from being read or written.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from typing import Mapping

from cdkds.catalog import quantities
from cdkds.catalog.errors import InvalidDescriptorError
from cdkds.catalog.keyed.properties import count_property

DEFAULT_BUDGET = 256 * 1024 * 1024
DEFAULT_DELETED_FRACTION = 0.15  # two 10% upserts of random keys: 19% gone; see docs/PERFORMANCE.md
DEFAULT_SMALL_FILES = 8
DEFAULT_FILE_SIZE = 128 * 1024 * 1024  # the writer's DEFAULT_TARGET_FILE_SIZE
MIN_FILE_SIZE = 1024
MIN_LOG_RETENTION = dt.timedelta(hours=1)  # expiry refuses less without force; so do the services
MIN_VACUUM_RETENTION = dt.timedelta(hours=1)
INLINE_SWITCH = "CDKDS_INLINE_SERVICES"  # "off" (or false, 0) turns inline passes off for a whole process
SERVICE_PROPERTIES = ("services.inline", "services.budget", "services.deleted.fraction", "services.tombstones",
                      "services.small.files", "services.partition.specs",
                      "services.file.size", "services.log.retention", "services.vacuum.retention")


@dataclass(frozen=True)
class ServiceSettings:
    """What the table services of one dataset do (see the module docstring)."""

    inline: bool = True
    budget: int = DEFAULT_BUDGET
    deleted_fraction: float = DEFAULT_DELETED_FRACTION
    tombstones: bool = True
    small_files: int = DEFAULT_SMALL_FILES
    file_size: int = DEFAULT_FILE_SIZE
    log_retention: dt.timedelta | None = None
    vacuum_retention: dt.timedelta | None = None
    partition_specs: bool = True  # rewrite files of older partition specs into the current one

    @property
    def runs_inline(self) -> bool:
        """Whether a pass runs after each write in this process (``services.inline``, unless the
        environment variable ``CDKDS_INLINE_SERVICES`` is ``off``)."""
        return self.inline and os.environ.get(INLINE_SWITCH, "").strip().lower() not in ("off", "false", "0")

    @classmethod
    def parse(cls, props: Mapping[str, str], recorded: bool = False) -> "ServiceSettings":
        """The settings of a descriptor's properties; :class:`InvalidDescriptorError` naming the
        property and its value when one is malformed (``recorded``: defaults instead)."""
        try:
            unknown = sorted(k for k in props if k.startswith("services.") and k not in SERVICE_PROPERTIES)
            if unknown:  # the prefix is the services': a misspelt switch must not be kept silently
                raise InvalidDescriptorError(f"property {unknown[0]} is not a property of the table services; they "
                                             f"are {', '.join(SERVICE_PROPERTIES)}")
            return cls(
                _boolean(props, "services.inline", True),
                _size(props, "services.budget", DEFAULT_BUDGET, minimum=0),
                _fraction(props, "services.deleted.fraction", DEFAULT_DELETED_FRACTION),
                _boolean(props, "services.tombstones", True),
                count_property(props, "services.small.files", DEFAULT_SMALL_FILES, minimum=2),
                _size(props, "services.file.size", DEFAULT_FILE_SIZE, minimum=MIN_FILE_SIZE),
                _duration(props, "services.log.retention", MIN_LOG_RETENTION),
                _duration(props, "services.vacuum.retention", MIN_VACUUM_RETENTION),
                _boolean(props, "services.partition.specs", True),
            )
        except InvalidDescriptorError:
            if recorded:
                return cls()
            raise


def _boolean(props: Mapping[str, str], name: str, default: bool) -> bool:
    text = props.get(name)
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise InvalidDescriptorError(f"property {name} must be true or false, got {text!r}")
    return text.strip().lower() == "true"


def _size(props: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    text = props.get(name)
    if text is None:
        return default
    try:
        size = quantities.parse_size(text)
    except ValueError:
        raise InvalidDescriptorError(f"property {name} must be a size such as 256m or 1g, got {text!r}") from None
    if size < minimum:
        raise InvalidDescriptorError(f"property {name} must be at least {minimum} bytes, got {text!r}")
    return size


def _fraction(props: Mapping[str, str], name: str, default: float) -> float:
    text = props.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.01 <= value <= 1:  # NaN fails too
        raise InvalidDescriptorError(f"property {name} must be a fraction from 0.01 to 1, got {text!r}")
    return value


def _duration(props: Mapping[str, str], name: str, minimum: dt.timedelta) -> dt.timedelta | None:
    text = props.get(name)
    if text is None:
        return None
    try:
        value = quantities.parse_duration(text)
    except ValueError:
        raise InvalidDescriptorError(f"property {name} must be a duration such as '7 days' or '12h', got {text!r}") \
            from None
    if value < minimum:
        raise InvalidDescriptorError(f"property {name} must be at least {minimum}, got {text!r} (it removes what "
                                     f"time travel and running writers need)")
    return value
