"""Commits: the objects ``_log/<revision as 20 digits>.json``, their encoding and the log's clock.

Each commit holds its revision, a uuid, the previous commit's uuid, a timestamp
(milliseconds, strictly increasing along the log), the operation, engine information,
its actions (:mod:`cdkds.catalog.log.actions`) and a SHA-256 checksum of the rest
(``docs/FORMAT.md`` §2).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import time
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import CorruptLogError, InvalidTimeTravelError
from cdkds.catalog.log.actions import Action, decode_actions, encode_actions
from cdkds.formats import values
from cdkds.formats.errors import SchemaMismatchError

LOG_FOLDER = "_log"
REWRITE_OPERATION = "compact"  # commits that rewrite files without changing a row (compaction, the table services)
ENGINE = "cdkds/0.1.0"
_REQUIRED = ("revision", "uuid", "previous", "timestamp", "operation", "actions")


def commit_key(revision: int) -> str:
    return f"{LOG_FOLDER}/{revision:020d}.json"


def commit_revision(name: str) -> int | None:
    """The revision of a commit object's name, ``None`` for other names."""
    stem, _, ext = name.partition(".")
    return int(stem) if ext == "json" and len(stem) == 20 and stem.isdigit() else None


@dataclass(frozen=True)
class Commit:
    revision: int
    uuid: str
    previous: str | None
    timestamp: int  # milliseconds since the epoch, strictly increasing along the log
    operation: str
    info: Mapping[str, Any]
    actions: tuple[Action, ...]

    def to_bytes(self, descriptor: DatasetDescriptor | None) -> bytes:
        body = {
            "revision": self.revision, "uuid": self.uuid, "previous": self.previous, "timestamp": self.timestamp,
            "operation": self.operation, "info": dict(self.info), "actions": encode_actions(self.actions, descriptor),
        }
        return json.dumps({**body, "checksum": _checksum(body)}, separators=(",", ":")).encode("utf-8")

    @staticmethod
    def parse(data: bytes, where: str) -> dict:
        """The commit's JSON, checked: parsable, complete and matching its checksum."""
        try:
            raw = json.loads(data)
            checksum = raw.pop("checksum")
            if checksum != _checksum(raw):
                raise ValueError("checksum mismatch")
            missing = [key for key in _REQUIRED if key not in raw]
            if missing:
                raise KeyError(missing[0])
            return raw
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CorruptLogError(f"commit {where} is corrupt or truncated: {type(e).__name__}: {e}") from None

    @staticmethod
    def from_bytes(data: bytes, descriptor: DatasetDescriptor | None, where: str) -> "Commit":
        raw = Commit.parse(data, where)
        try:
            revision = int(raw["revision"])
            return Commit(revision, str(raw["uuid"]), raw["previous"], int(raw["timestamp"]), str(raw["operation"]),
                          MappingProxyType(dict(raw.get("info", {}))),
                          decode_actions(raw["actions"], descriptor, revision))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CorruptLogError(f"commit {where} is corrupt: {type(e).__name__}: {e}") from None


def _checksum(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class HistoryEntry:
    """One commit in a dataset's history and what it changed. ``removed_rows`` counts the live
    rows of the files it removed and the rows its deletion vectors mark; rows hidden by its
    tombstones (``tombstones`` predicates) are not counted, since only a scan could tell.
    ``None`` when a removed file was added before the retained log and its rows are unknown."""

    revision: int
    timestamp: int
    operation: str
    info: Mapping[str, Any]
    added_files: int
    removed_files: int
    added_rows: int
    tombstones: int
    removed_rows: int | None = None

    @property
    def time(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.timestamp / 1000, tz=dt.timezone.utc)

    @staticmethod
    def of(raw: dict, live_rows: dict[str, int] | None = None) -> "HistoryEntry":
        """The entry of a parsed commit (see :meth:`Commit.parse`). ``live_rows``, the live rows
        of each data file before the commit, gives ``removed_rows`` and is moved past the commit."""
        kinds = [next(iter(a)) for a in raw["actions"]]
        return HistoryEntry(
            int(raw["revision"]), int(raw["timestamp"]), raw["operation"], MappingProxyType(dict(raw.get("info", {}))),
            kinds.count("add"), kinds.count("remove"),
            sum(int(a["add"]["rows"]) for a in raw["actions"] if "add" in a), kinds.count("tombstone"),
            None if live_rows is None else _removed_rows(raw, live_rows))


def touched_files(raws: Iterable[dict]) -> set[str]:
    """The data files parsed commits remove or delete rows of: the only ones of the files
    before them whose live rows :meth:`HistoryEntry.of` reads."""
    out = set()
    for raw in raws:
        for action in raw["actions"]:
            kind, body = next(iter(action.items()))
            if kind in ("remove", "deleteRows"):
                out.add(body["path"])
    return out


def _removed_rows(raw: dict, live_rows: dict[str, int]) -> int | None:
    """The rows a commit removes (files and deletion vectors), moving ``live_rows`` past it."""
    removed: int | None = 0
    for action in raw["actions"]:
        kind, body = next(iter(action.items()))
        if kind == "add":
            live_rows[body["path"]] = int(body["rows"])
        elif kind == "remove":
            rows = live_rows.pop(body["path"], None)
            removed = None if rows is None or removed is None else removed + rows
        elif kind == "deleteRows":
            marked = int(body["vector"]["cardinality"])
            if body["path"] in live_rows:
                live_rows[body["path"]] -= marked
            removed = None if removed is None else removed + marked
    return removed


# ---------------------------------------------------------------- the log's clock


def clock() -> int:
    """Now, in milliseconds since the epoch."""
    return int(time.time() * 1000)


def age_ms(timestamp: int) -> int:
    """How long ago ``timestamp`` (ms) was, by this process's clock."""
    return clock() - timestamp


def next_timestamp(previous: int) -> int:
    """The timestamp of a commit after one at ``previous``: now, but always later."""
    return max(clock(), previous + 1)


def engine_info(info: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return {"engine": ENGINE, **(info or {})}


def cutoff_millis(older_than: Any) -> int:
    """A cut-off time given as a time (see :func:`millis`) or as a ``timedelta`` ago."""
    if isinstance(older_than, dt.timedelta):
        return clock() - int(older_than.total_seconds() * 1000)
    return millis(older_than)


def millis(timestamp: Any) -> int:
    """A time given as epoch milliseconds, ISO text or a datetime (naive means UTC)."""
    if isinstance(timestamp, (int, float)) and not isinstance(timestamp, bool):
        if not math.isfinite(timestamp):
            raise InvalidTimeTravelError(f"cannot read {timestamp!r} as a time")
        return int(timestamp)
    if isinstance(timestamp, str):
        try:
            timestamp = values.coerce(timestamp, "timestamp-micros")
        except SchemaMismatchError:
            raise InvalidTimeTravelError(f"cannot read {timestamp!r} as a time") from None
    if isinstance(timestamp, dt.datetime):
        if timestamp.tzinfo is None:
            timestamp = timestamp.replace(tzinfo=dt.timezone.utc)
        return int(timestamp.timestamp() * 1000)
    raise InvalidTimeTravelError(f"cannot read {timestamp!r} as a time")
