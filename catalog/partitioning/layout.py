"""Where a partition's files live: ``<name>=<value>/...`` in strategy order.

Values are percent-escaped so any value is one safe path segment. The path is for
people and for rebuilding a lost log; the log's typed partition values are the truth.
So the escaping need not be one-to-one, and two values share a folder with others: the
text ``__NULL__`` with null, and a lone NUL character (``%00``) with the empty string.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Mapping, Sequence
from urllib.parse import quote, unquote

NULL_SEGMENT = "__NULL__"


def value_text(value: Any) -> str:
    if value is None:
        return NULL_SEGMENT
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def escape(text: str) -> str:
    """One path segment for any text: everything but letters, digits and ``-_`` is escaped."""
    if text == NULL_SEGMENT:
        return text
    escaped = quote(text, safe="-_").replace(".", "%2E")  # '.' and '..' are not names
    return escaped if escaped else "%00"  # an empty segment would vanish from the path


def partition_path(names: Sequence[str], values: Sequence[Any]) -> str:
    """``name=value/name=value`` for one partition ('' for an unpartitioned dataset)."""
    return "/".join(f"{escape(n)}={escape(value_text(v))}" for n, v in zip(names, values))


def parse_partition_path(path: str) -> Mapping[str, str]:
    """The ``name -> value text`` pairs of a partition path (values as text, unescaped)."""
    out = {}
    for segment in path.strip("/").split("/"):
        if "=" in segment:
            name, _, text = segment.partition("=")
            out[unquote(name)] = None if text == NULL_SEGMENT else ("" if text == "%00" else unquote(text))
    return out
