"""Durations, sizes and counts written as text, read the same way by every entry point: descriptor
properties (``ttl = 30 days``), Spark options (``maxBytesPerTrigger = 10m``) and the command
line (``--retention 7d``, ``--target-file-size 256m``)."""

from __future__ import annotations

import datetime as dt
import re

_SECONDS = {
    "": 1, "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "week": 604800, "weeks": 604800,
}
_BYTES = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30,
          "t": 1 << 40, "tb": 1 << 40}
_QUANTITY = re.compile(r"\s*(-?\d+(?:\.\d+)?)\s*([a-z]*)\s*")


def parse_duration(text: str) -> dt.timedelta:
    """``<number> [unit]`` (``30 days``, ``12h``, ``90 s``, ``1.5w``; units s, m, h, d, w and
    their long names; a bare number is seconds). ``ValueError`` if it is not one."""
    try:
        return dt.timedelta(seconds=duration_seconds(text))
    except OverflowError:
        raise ValueError(f"{text!r} is longer than a duration can be") from None


def duration_seconds(text: str) -> float:
    """The seconds of a duration written as :func:`parse_duration` reads it, however long
    (``inf`` beyond a float); ``ValueError`` if it is not one."""
    number, unit = _quantity(text, _SECONDS, "a duration (e.g. 7d, 12h, 30 days)")
    return number * _SECONDS[unit]


def parse_size(text: str) -> int:
    """Bytes: ``<number> [unit]`` (``134217728``, ``512k``, ``10m``, ``1.5g``; units b, k(b),
    m(b), g(b), t(b), powers of 1024). ``ValueError`` if it is not one."""
    number, unit = _quantity(text, _BYTES, "a size (e.g. 134217728, 512k, 10m, 1g)")
    try:
        return int(number * _BYTES[unit])
    except OverflowError:
        raise ValueError(f"{text!r} is larger than a size can be") from None


def parse_count(text: str) -> int:
    """A count written in ASCII digits (``8``). ``ValueError`` if it is not one (``str.isdigit``
    also takes ``²``, which ``int`` refuses, and ``int`` takes other scripts' digits)."""
    if not (isinstance(text, str) and text.isascii() and text.isdigit()):
        raise ValueError(f"{text!r} is not a count")
    return int(text)


def _quantity(text: str, units: dict, what: str) -> tuple[float, str]:
    match = _QUANTITY.fullmatch(text.lower()) if isinstance(text, str) else None
    if match is None or match.group(2) not in units:
        raise ValueError(f"{text!r} is not {what}")
    return float(match.group(1)), match.group(2)
