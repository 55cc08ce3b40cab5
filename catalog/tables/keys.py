"""Primary keys as bytes that sort as the keys do, and key ranges as byte intervals.

A key is the concatenation of its parts in key order: an int or long as 8 bytes, big-endian,
with the sign bit flipped (so negative numbers sort first); a string as its UTF-8 bytes with
``0x00`` escaped as ``0x00 0xFF``, ended by ``0x00 0x01``. Byte order then equals key order
(tuples compared part by part, strings by code point), and the encoding of a leftmost prefix
of a key is a byte prefix of the key's: so a range of partial keys (seed 000: "the leftmost
keys of the composite key always have to be specified") is one byte interval.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Mapping

from cdkds.catalog.errors import InvalidFieldError, NoSuchFieldError
from cdkds.catalog.tables.spec import TableSpecification

INT_RANGES = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
_END = b"\x00\x01"


@dataclass(frozen=True)
class Range:
    """Keys between two leftmost key prefixes (dicts of key fields; ``None``: unbounded). A
    prefix bound covers every key that extends it: an inclusive end includes them, an
    exclusive begin excludes them."""

    begin: Mapping[str, Any] | None = None
    begin_bound: str = "inclusive"
    end: Mapping[str, Any] | None = None
    end_bound: str = "inclusive"

    INCLUSIVE = "inclusive"
    EXCLUSIVE = "exclusive"

    def __post_init__(self) -> None:
        for bound in (self.begin_bound, self.end_bound):
            if bound not in (self.INCLUSIVE, self.EXCLUSIVE):
                raise InvalidFieldError(f"a range bound is Range.INCLUSIVE or Range.EXCLUSIVE, got {bound!r:.100}")
        for key in (self.begin, self.end):
            if key is not None and not isinstance(key, Mapping):
                raise InvalidFieldError(f"a range bound is a dict of key fields, got {key!r:.100}")
        for name in ("begin", "end"):  # an empty prefix bounds nothing: it is no bound, on every store
            if getattr(self, name) is not None and not getattr(self, name):
                object.__setattr__(self, name, None)

    @classmethod
    def of(cls, begin: Mapping[str, Any] | None, begin_bound: str, end: Mapping[str, Any] | None,
           end_bound: str) -> "Range":
        return cls(begin, begin_bound, end, end_bound)

    @classmethod
    def all(cls) -> "Range":
        return cls()

    @classmethod
    def singleton(cls, key: Mapping[str, Any]) -> "Range":
        return cls(key, cls.INCLUSIVE, key, cls.INCLUSIVE)

    @classmethod
    def from_(cls, begin: Mapping[str, Any], bound: str = "inclusive") -> "Range":
        return cls(begin, bound, None)

    @classmethod
    def to(cls, end: Mapping[str, Any], bound: str = "inclusive") -> "Range":
        return cls(None, "inclusive", end, bound)


@dataclass(frozen=True)
class KeyCodec:
    """Encodes and decodes the primary keys of one table."""

    spec: TableSpecification
    _kinds: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_kinds", self.spec.key_kinds)

    def encode(self, key: Mapping[str, Any]) -> bytes:
        """A full key (every key field, no other field)."""
        encoded, used = self._encode(key)
        if used < len(self._kinds):
            missing = self.spec.primary_key[used]
            raise InvalidFieldError(f"table {self.spec.name!r}: key field {missing!r} is missing from {dict(key)!r:.200}")
        return encoded

    def prefix(self, key: Mapping[str, Any]) -> bytes:
        """A leftmost prefix of a key (the first n key fields, for any n)."""
        return self._encode(key)[0]

    def decode(self, data: bytes) -> dict[str, Any]:
        out, at = {}, 0
        for name, kind in zip(self.spec.primary_key, self._kinds):
            if kind == "string":
                out[name], at = decode_text(data, at)
            else:
                raw = bytearray(data[at:at + 8])
                raw[0] ^= 0x80
                out[name] = struct.unpack(">q", raw)[0]
                at += 8
        return out

    def bounds(self, range_: Range) -> tuple[bytes | None, bytes | None]:
        """``range_`` as the half-open byte interval ``[low, high)`` (``None``: unbounded)."""
        low = high = None
        if range_.begin is not None:
            low = self.prefix(range_.begin)
            if range_.begin_bound == Range.EXCLUSIVE:
                low = after_prefix(low)
                if low is None:
                    return b"", b""  # nothing is after every key
        if range_.end is not None:
            high = self.prefix(range_.end)
            if range_.end_bound == Range.INCLUSIVE:
                high = after_prefix(high)
        return low, high

    def _encode(self, key: Mapping[str, Any]) -> tuple[bytes, int]:
        where = f"table {self.spec.name!r}"
        if not isinstance(key, Mapping):
            raise InvalidFieldError(f"{where}: a key is a dict of key fields, got {key!r:.100}")
        unknown = [n for n in key if n not in self.spec.primary_key]
        if unknown:
            if unknown[0] in self.spec.kinds:
                raise InvalidFieldError(f"{where}: {unknown[0]!r} is not a key field; the key is {list(self.spec.primary_key)}")
            raise NoSuchFieldError(f"{where} has no field {unknown[0]!r}; the key is {list(self.spec.primary_key)}")
        parts, used = [], 0
        for name, kind in zip(self.spec.primary_key, self._kinds):
            if name not in key:
                break
            parts.append(_part(key[name], kind, f"{where}: key field {name!r}"))
            used += 1
        skipped = [n for n in self.spec.primary_key[used:] if n in key]
        if skipped:
            raise InvalidFieldError(f"{where}: key field {skipped[0]!r} is given without "
                                    f"{self.spec.primary_key[used]!r} before it; give a leftmost prefix of "
                                    f"{list(self.spec.primary_key)}")
        return b"".join(parts), used


def encode_text(text: str) -> bytes:
    """A string as a key part (order-preserving and prefix-free)."""
    return _part(text, "string", "text")


def decode_text(data: bytes, at: int = 0) -> tuple[str, int]:
    """The string key part starting at ``at``, and where the rest begins."""
    parts = []
    while True:
        stop = data.index(b"\x00", at)
        parts.append(data[at:stop])
        marker = data[stop + 1]
        at = stop + 2
        if marker == 1:
            return b"".join(parts).decode("utf-8"), at
        parts.append(b"\x00")


def encode_value(value: Any, kind: str) -> bytes:
    """A checked, non-null value of any field kind as bytes no other value of that kind
    starts with (equal values, 0.0 and -0.0 included, encode alike): an index entry's key
    is ``encode_value(value) + encode(primary key)``."""
    if kind in ("int", "long", "string"):
        return _part(value, kind, "value")
    if kind in ("float", "double"):
        return struct.pack(">d", value + 0.0)  # -0.0 + 0.0 is 0.0
    if kind == "bytes":
        return bytes(value).replace(b"\x00", b"\x00\xff") + _END
    return b"\x01" if value else b"\x00"


def after_prefix(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string that starts with ``prefix``
    (``None`` when there is none: the prefix is all 0xFF)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


def _part(value: Any, kind: str, where: str) -> bytes:
    if value is None:
        raise InvalidFieldError(f"{where} is null; key fields cannot be null")
    if kind == "string":
        if not isinstance(value, str):
            raise InvalidFieldError(f"{where}: value {value!r:.100} ({type(value).__name__}) is not a string")
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidFieldError(f"{where}: value {value!r:.100} is not valid Unicode") from None
        return data.replace(b"\x00", b"\x00\xff") + _END
    lo, hi = INT_RANGES[kind]
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InvalidFieldError(f"{where}: value {value!r:.100} ({type(value).__name__}) is not an {kind}")
    raw = bytearray(struct.pack(">q", value))
    raw[0] ^= 0x80  # the sign bit flipped: negative numbers sort first
    return bytes(raw)

