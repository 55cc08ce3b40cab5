"""Sorted runs: the immutable files the object-store table store is made of (an LSM tree's runs).

A run is a Parquet data file of the store's dataset with two columns: ``k``, an entry's key
(bytes, unique within the run, ascending) and ``row``, its value (null: a tombstone). Row
groups hold :data:`ROW_GROUP_ROWS` entries; the footer's key-value metadata holds the first
key of every row group, the last key and a Bloom filter of the keys, so once a run's footer
is cached a point lookup reads at most one row group — one ranged GET — and usually none.
Small runs are read whole, once, and kept.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import struct
import threading
import uuid
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cdkds.catalog.errors import DataFileError
from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.storage import ObjectStore, store_failures
from cdkds.catalog.write.writer import DATA_FOLDER
from cdkds.formats.schema import PARQUET_FIELD_ID

ROW_GROUP_ROWS = 1024
WHOLE_BYTES = 1 << 20  # runs up to this size are read whole on first use
BLOOM_BITS_PER_KEY = 10
BLOOM_HASHES = 7
SCHEMA = pa.schema([pa.field("k", pa.binary(), False, {PARQUET_FIELD_ID: b"1"}),
                    pa.field("row", pa.string(), True, {PARQUET_FIELD_ID: b"2"})])
_MERGED = "merged-"

Entry = tuple[bytes, "str | None"]  # (key, value); a None value is a tombstone


class BloomFilter:
    """Which keys a run may hold (no false negatives; ~1% false positives at 10 bits a key)."""

    def __init__(self, bits: np.ndarray):
        self.bits = bits
        self.size = len(bits) * 8

    @classmethod
    def empty(cls, expected: int) -> "BloomFilter":
        return cls(np.zeros(max(8, (expected * BLOOM_BITS_PER_KEY + 7) // 8), dtype=np.uint8))

    def _positions(self, key: bytes) -> list[int]:
        digest = hashlib.blake2b(key, digest_size=16).digest()
        h1, h2 = int.from_bytes(digest[:8], "big"), int.from_bytes(digest[8:], "big") | 1
        return [(h1 + i * h2) % self.size for i in range(BLOOM_HASHES)]

    def add(self, key: bytes) -> None:
        for p in self._positions(key):
            self.bits[p >> 3] |= 1 << (p & 7)

    def might_contain(self, key: bytes) -> bool:
        return all(self.bits[p >> 3] & (1 << (p & 7)) for p in self._positions(key))

    def encode(self) -> bytes:
        return base64.b64encode(self.bits.tobytes())

    @classmethod
    def decode(cls, data: bytes) -> "BloomFilter":
        return cls(np.frombuffer(base64.b64decode(data), dtype=np.uint8).copy())


def run_order(add: AddFile) -> int:
    """Where a run stands among the others (a later run's entries replace an earlier one's):
    the revision that committed it, or for a merge of runs, the newest of theirs."""
    name = add.path.rsplit("/", 1)[-1]
    if name.startswith(_MERGED):
        return int(name[len(_MERGED):].split("-", 1)[0])
    return add.revision


def run_key(merged_order: int | None = None) -> str:
    """A new run's object key: a transaction's, or a merge's carrying the order it takes."""
    if merged_order is None:
        return f"{DATA_FOLDER}/run-{uuid.uuid4().hex}.parquet"
    return f"{DATA_FOLDER}/{_MERGED}{merged_order:020d}-{uuid.uuid4().hex}.parquet"


@dataclass(frozen=True)
class WrittenRun:
    key: str
    size: int
    rows: int


def write_run(store: ObjectStore, key: str, entries: Iterable[Entry], expected: int) -> WrittenRun:
    """Write ``entries`` (ascending, unique keys; at most ``expected`` of them) as run ``key``."""
    with store_failures(f"writing table run {store.display(key)}"):
        return _write_run(store, key, entries, expected)


def _write_run(store: ObjectStore, key: str, entries: Iterable[Entry], expected: int) -> WrittenRun:
    bloom = BloomFilter.empty(expected)
    firsts: list[bytes] = []
    last, rows = b"", 0
    path = store.open_output(key)
    with store.fs.open(path, "wb") as out:
        writer = pq.ParquetWriter(out, SCHEMA, compression="zstd", write_statistics=False)
        try:
            keys: list[bytes] = []
            values: list[str | None] = []

            def flush() -> None:
                firsts.append(keys[0])
                writer.write_table(pa.table([pa.array(keys, pa.binary()), pa.array(values, pa.string())], schema=SCHEMA),
                                   row_group_size=ROW_GROUP_ROWS)
                keys.clear()
                values.clear()

            for k, v in entries:
                if keys and k <= keys[-1] or not keys and firsts and k <= last:
                    raise ValueError("run entries must be ascending and unique")
                keys.append(k)
                values.append(v)
                bloom.add(k)
                last, rows = k, rows + 1
                if len(keys) == ROW_GROUP_ROWS:
                    flush()
            if keys:
                flush()
            writer.add_key_value_metadata({
                "cdkds.run.firsts": json.dumps([base64.b64encode(f).decode() for f in firsts]),
                "cdkds.run.last": base64.b64encode(last).decode(),
                "cdkds.run.bloom": bloom.encode(),
            })
        finally:
            writer.close()
        size = out.tell()  # no HEAD to learn it
    return WrittenRun(key, size, rows)


class Run:
    """A run as read: its footer (first keys of row groups, last key, Bloom filter) and the
    row groups read so far (all of them for a small run)."""

    def __init__(self, store: ObjectStore, add: AddFile, cache: "RunCache"):
        self.add = add
        self.order = run_order(add)
        self._store, self._cache = store, cache
        self._path = store.path(add.path)
        self._reading = threading.Lock()  # a ParquetFile is not safe to read from two threads at once
        if add.size <= WHOLE_BYTES:
            data = self._fetch(0, add.size)
            self._file = pq.ParquetFile(pa.BufferReader(data))
            self._metadata = self._file.metadata
        else:
            tail = self._fetch(max(0, add.size - 65536), add.size)
            length = struct.unpack("<I", tail[-8:-4])[0] + 8
            if length > len(tail):
                tail = self._fetch(add.size - length, add.size)
            self._metadata = pq.read_metadata(pa.BufferReader(b"PAR1" + tail[-length:]))
            self._file = None
        meta = self._metadata.metadata or {}
        try:
            self.firsts = [base64.b64decode(f) for f in json.loads(meta[b"cdkds.run.firsts"])]
            self.last = base64.b64decode(meta[b"cdkds.run.last"])
            self.bloom = BloomFilter.decode(meta[b"cdkds.run.bloom"])
        except (KeyError, ValueError) as e:
            raise DataFileError(f"{store.display(add.path)} is not a table run: {type(e).__name__}: {e}") from None
        if len(self.firsts) != self._metadata.num_row_groups:
            raise DataFileError(f"{store.display(add.path)}: its footer names {len(self.firsts)} row groups, "
                                   f"the file has {self._metadata.num_row_groups}")

    def _fetch(self, start: int, end: int) -> bytes:
        try:
            with store_failures(f"reading table run {self._store.display(self.add.path)}"):
                data = self._store.fs.cat_file(self._path, start=start, end=end)
        except FileNotFoundError:
            raise DataFileError(f"table run {self._store.display(self.add.path)}, live in the log, is missing") from None
        if len(data) != end - start:
            raise DataFileError(f"table run {self._store.display(self.add.path)} is shorter than the log says")
        return data

    @property
    def first(self) -> bytes:
        return self.firsts[0] if self.firsts else b""

    def group(self, i: int) -> tuple[list[bytes], list[str | None]]:
        """Row group ``i``'s keys and values."""
        cached = self._cache.group(self.add.path, i)
        if cached is not None:
            return cached
        if self._file is not None:
            with self._reading:
                table = self._file.read_row_group(i)
        else:
            rg = self._metadata.row_group(i)
            spans = [(c.dictionary_page_offset if c.has_dictionary_page else c.data_page_offset, c.total_compressed_size)
                     for c in (rg.column(j) for j in range(rg.num_columns))]
            lo, hi = min(s for s, _ in spans), max(s + n for s, n in spans)
            window = _Window(self.add.size, lo, self._fetch(lo, hi))
            table = pq.ParquetFile(window, metadata=self._metadata).read_row_group(i)
        found = (table.column("k").to_pylist(), table.column("row").to_pylist())
        self._cache.put_group(self.add.path, i, found)
        return found

    def get(self, key: bytes) -> tuple[bool, str | None]:
        """Whether the run holds ``key``, and its value (None: a tombstone)."""
        if not self.firsts or key < self.firsts[0] or key > self.last or not self.bloom.might_contain(key):
            return False, None
        keys, values = self.group(bisect_right(self.firsts, key) - 1)
        at = bisect_left(keys, key)
        if at < len(keys) and keys[at] == key:
            return True, values[at]
        return False, None

    def entries(self, low: bytes, high: bytes | None, reverse: bool = False) -> Iterator[Entry]:
        """Entries with ``low <= key < high`` (``None``: no upper bound), in key order or reversed."""
        if not self.firsts or self.last < low or (high is not None and self.first >= high):
            return
        first = max(0, bisect_right(self.firsts, low) - 1)
        end = len(self.firsts) if high is None else bisect_left(self.firsts, high)
        groups = range(first, end)
        for i in (reversed(groups) if reverse else groups):
            keys, values = self.group(i)
            a = bisect_left(keys, low)
            b = len(keys) if high is None else bisect_left(keys, high)
            span = range(b - 1, a - 1, -1) if reverse else range(a, b)
            for j in span:
                yield keys[j], values[j]

    def keys(self) -> Iterator[bytes]:
        for k, _ in self.entries(b"", None):
            yield k


class _Window(io.RawIOBase):
    """A file of ``size`` bytes of which only ``[start, start + len(data))`` is at hand:
    what a Parquet reader given the footer needs to read one row group."""

    def __init__(self, size: int, start: int, data: bytes):
        self._size, self._start, self._data, self._at = size, start, data, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self._at = offset if whence == 0 else self._at + offset if whence == 1 else self._size + offset
        return self._at

    def tell(self) -> int:
        return self._at

    def readinto(self, buffer: Any) -> int:
        at = self._at - self._start
        if at < 0 or at > len(self._data):
            raise OSError(f"read at {self._at} outside the fetched range")
        part = self._data[at:at + len(buffer)]
        buffer[:len(part)] = part
        self._at += len(part)
        return len(part)


class RunCache:
    """Runs and row groups read by this process, least recently used dropped first: a run is
    immutable, so what was read stays true (bounded by ``groups`` row groups)."""

    def __init__(self, runs: int = 256, groups: int = 2048):
        self._runs: OrderedDict[str, Run] = OrderedDict()
        self._groups: OrderedDict[tuple[str, int], tuple[list, list]] = OrderedDict()
        self._limits = (runs, groups)
        self._lock = threading.Lock()

    def run(self, store: ObjectStore, add: AddFile) -> Run:
        with self._lock:
            found = self._runs.get(add.path)
            if found is not None:
                self._runs.move_to_end(add.path)
                return found
        run = Run(store, add, self)
        with self._lock:
            self._runs[add.path] = run
            while len(self._runs) > self._limits[0]:
                self._runs.popitem(last=False)
        return run

    def group(self, path: str, i: int) -> tuple[list, list] | None:
        with self._lock:
            found = self._groups.get((path, i))
            if found is not None:
                self._groups.move_to_end((path, i))
            return found

    def put_group(self, path: str, i: int, group: tuple[list, list]) -> None:
        with self._lock:
            self._groups[(path, i)] = group
            while len(self._groups) > self._limits[1]:
                self._groups.popitem(last=False)
