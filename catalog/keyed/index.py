"""The record-level index (Hudi RFC-08): record key -> (data file, row position, ordering
value, expiry), hashed into a fixed number of buckets.

Each bucket is a *base* file plus the *delta* files of later commits, all Parquet
(LZ4, page checksums, a Bloom filter of the hashes in the footer), entries sorted by key hash in row groups of 16k, under
``_index/<bucket>/``. The log references them (:class:`AddIndex`, with size and SHA-256)
and they are written in the same commit as the data they describe. A lookup reads only
the buckets its keys hash to and, in each file, only the row groups whose hash range may
hold one; the latest entry of a key (base, then deltas by revision, rows in file order)
is the one that counts. When a bucket has ``index.compaction.deltas`` deltas, the table
services' next pass merges them into a new base (the seed's IndexCompactor) — or, where they
do not run inline, the next commit touching it, as a write does at three times that — dropping
entries that are superseded, point at removed files or deleted rows, or have expired.
"""

from __future__ import annotations

import hashlib
import io
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Collection, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import CdkdsError, CorruptIndexError, InvalidDescriptorError, InvalidKeyError
from cdkds.catalog.expressions import ALWAYS_TRUE
from cdkds.catalog.keyed.bloom import HashBloom
from cdkds.catalog.keyed.caches import FOOTERS, IndexFooter, deleted_positions
from cdkds.catalog.keyed.index_encoding import checked_codes, coded_columns, dictionary_keys
from cdkds.catalog.keyed.keys import RecordKey
from cdkds.catalog.keyed.matching import (deleted_at, distinct_sorted, join, latest_per_key, matches, same_keys,
                                          with_key_rows)
from cdkds.catalog.keyed.reconcile import distinct_hashes, repeated_keys
from cdkds.catalog.keyed.ttl import EXPIRY_TYPE, TimeToLive, files_timestamps
from cdkds.catalog.log.actions import Action, AddIndex, RemoveIndex
from cdkds.catalog.read.scan import file_task, read_task
from cdkds.catalog.storage import ObjectStore, store_failure, store_failures
from cdkds.catalog.work_columns import INDEX_COLUMNS, POSITION, RANK, ROW
from cdkds.formats.threads import WORKERS
from cdkds.formats.files import open_data_file
from cdkds.formats.parquet import parquet_in_memory
from cdkds.formats.parquet_footer import footer_length, footer_of

if TYPE_CHECKING:
    from cdkds.catalog.log.snapshot import Snapshot

INDEX_FOLDER = "_index"
WRITE_MERGE_FACTOR = 3  # with inline services, a write merges a bucket at this many times index.compaction.deltas
ROW_GROUP_ENTRIES = 16384
COMPRESSION = "lz4"  # LZ4_RAW: decodes twice as fast as zstd for 30% more bytes
INLINEKEY_ROWS = 64
BLOOMKEY_ROWS_PER_GROUP = 4
FOOTER_READ = 64 << 10  # bytes read from an index file's end to get its footer: one request for most


def entry_schema(descriptor: DatasetDescriptor) -> pa.Schema:
    """The columns of an index entry (see docs/FORMAT.md): the key's and
    :data:`~cdkds.catalog.work_columns.INDEX_COLUMNS`."""
    schema = descriptor.arrow_schema
    order = schema.field(descriptor.ordering_field).type if descriptor.ordering_field else pa.int8()  # all null
    return pa.schema([
        pa.field("_hash", pa.uint64(), nullable=False),
        *(schema.field(n).with_nullable(False) for n in descriptor.record_key),
        pa.field("_file", pa.string()), pa.field("_pos", pa.int64()), pa.field("_order", order),
        pa.field("_expires", EXPIRY_TYPE), pa.field("_deleted", pa.bool_(), nullable=False),
    ])


def index_column_key(descriptor: DatasetDescriptor) -> str | None:
    """The first record key field named like one of :data:`INDEX_COLUMNS`, which the index
    cannot store beside them; only a log written before create refused such keys holds one."""
    return next((n for n in descriptor.record_key if n in INDEX_COLUMNS), None)


FILE_CODES = pa.dictionary(pa.int32(), pa.string())  # ``_file`` as entries are written: a code per row


def coded_schema(schema: pa.Schema) -> pa.Schema:
    """The schema of entries being written (``schema``: :func:`entry_schema`): ``_file``
    dictionary-encoded, as Parquet stores it, so sorting and taking entries moves codes, not
    a path per row."""
    return schema.set(schema.get_field_index("_file"), pa.field("_file", FILE_CODES))


_READERS = WORKERS  # pyarrow decodes index files without holding Python's lock


def _reading_pool() -> ThreadPoolExecutor:
    """Threads reading index files."""
    return _READERS.get()


def by_file(paths: pa.Array | pa.ChunkedArray) -> list[tuple[str | None, np.ndarray]]:
    """The distinct values of a column of file paths (strings, or dictionary-encoded as
    entries are read and written) and the rows holding each."""
    if isinstance(paths, pa.ChunkedArray):
        paths = paths.combine_chunks()  # dictionary chunks: their dictionaries unified
    if not pa.types.is_dictionary(paths.type) or len(pc.unique(paths.dictionary)) < len(paths.dictionary):
        paths = paths.cast(pa.string()).dictionary_encode() if pa.types.is_dictionary(paths.type) \
            else paths.dictionary_encode()
    names = [*paths.dictionary.to_pylist(), None]  # the last: null paths (tombstones)
    codes = paths.indices.fill_null(len(names) - 1).to_numpy(zero_copy_only=False)
    small = codes.astype(np.int16) if len(names) < 2**15 else codes  # a radix sort
    order = np.argsort(small, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    return [(names[j], order[bounds[j]:bounds[j + 1]]) for j in range(len(names)) if bounds[j + 1] > bounds[j]]


@dataclass(frozen=True)
class IndexFile:
    """An index file encoded and not stored yet, the action that adds it, and its footer as
    a lookup reads it (cached once the file is stored: the writer's next lookup reads none)."""

    action: AddIndex
    data: bytes = field(repr=False)
    footer: IndexFooter | None = field(default=None, repr=False)


class RecordIndex:
    """The record index of one snapshot of a keyed dataset."""

    def __init__(self, store: ObjectStore, snapshot: "Snapshot", dataset: str):
        self.store = store
        self.snapshot = snapshot
        self.dataset = dataset
        self.descriptor = snapshot.descriptor
        self.key = RecordKey.of(self.descriptor, dataset)
        clash = index_column_key(self.descriptor)
        if clash is not None:
            raise InvalidDescriptorError(
                f"dataset {dataset!r}: record key field {clash!r} is named like a column the record index "
                f"stores beside the key's ({', '.join(INDEX_COLUMNS)}); rename it to use the index: "
                f"dataset.alter().rename({clash!r}, 'new_name').commit()")
        self.schema = entry_schema(self.descriptor)
        self.coded = coded_schema(self.schema)
        props = self.descriptor.keyed
        self.buckets = props.buckets
        self.compaction_deltas = props.compaction_deltas
        # the table services merge a bucket at the threshold after the write; a write merges
        # it itself only when they do not run inline here, or have fallen far behind
        self.merge_deltas = props.compaction_deltas * (WRITE_MERGE_FACTOR if self.descriptor.services.runs_inline else 1)
        self.ttl = TimeToLive.of(self.descriptor)

    # ---------------------------------------------------------------- reading

    def lookup(self, keys: pa.Table, hashes: np.ndarray) -> pa.Table:
        """The latest entry of each key of ``keys`` that has one, with :data:`ROW`: the key's
        row in ``keys``; in :attr:`coded` (``_file`` dictionary-encoded). Reads only the buckets the hashes are in, in each bucket only the
        files whose Bloom filter may hold one of them, and in each file the ``_hash``
        column of the row groups whose hash range may hold one, then the other columns of
        the row groups that do; buckets are read in parallel."""
        buckets = self.key.buckets(hashes, self.buckets)
        order = np.argsort(buckets.astype(np.int16), kind="stable")  # radix sort: at most 4,096 buckets
        sorted_buckets = buckets[order]
        starts = np.flatnonzero(np.r_[True, sorted_buckets[1:] != sorted_buckets[:-1]]) if len(order) else []
        bounds = [*starts, len(order)]
        tasks, carried = [], True
        for i, start in enumerate(starts):
            bucket = int(sorted_buckets[start])
            rows = order[start:bounds[i + 1]]
            rows = rows[np.argsort(hashes[rows])]  # unstable: equal hashes are joined by key values below
            wanted = hashes[rows]
            carried &= not (wanted[1:] == wanted[:-1]).any()  # else keys of equal hash: joined by values below
            tasks.extend((entry, _file_rank(bucket, seq), wanted, rows)
                         for seq, entry in enumerate(self.snapshot.index_files(bucket)))
        if not carried:
            tasks = [(entry, rank, distinct_sorted(wanted), None) for entry, rank, wanted, _ in tasks]
        if len(tasks) <= 1 or len(hashes) <= INLINEKEY_ROWS:  # a handful of keys: threads cost more than they save
            pieces = [self._read_matching(*task) for task in tasks]
        else:
            pieces = list(_reading_pool().map(lambda task: self._read_matching(*task), tasks))
        pieces = [p for p in pieces if p is not None and p.num_rows]
        if not pieces:
            return self._with_row(self.coded.empty_table(), np.zeros(0, np.int64))
        found = pa.concat_tables(pieces)
        if carried:  # each entry read knows the one key row of its hash: compared by values (a collision)
            key_rows = found.column(ROW).to_numpy()
            entry_rows = np.flatnonzero(same_keys(found, keys, None, key_rows, self.key.names))
            key_rows = key_rows[entry_rows]
        else:
            entry_rows, key_rows = join(found, keys, hashes, self.key.names)
        # the latest entry (highest rank) of each key row
        ranks = found.column(RANK).to_numpy()[entry_rows]
        if carried and (ranks[1:] > ranks[:-1]).all():  # read in rank order (tasks and hits are): the last one
            latest = np.full(keys.num_rows, -1, dtype=np.int64)
            np.maximum.at(latest, key_rows, np.arange(len(key_rows), dtype=np.int64))
            last = latest[latest >= 0]
        else:
            order = np.lexsort((ranks, key_rows))
            last = order[np.r_[key_rows[order][1:] != key_rows[order][:-1], True]] if len(order) else order
        if not carried:  # an entry may be the latest of several key rows (a key looked up twice)
            return self._with_row(found.take(pa.array(entry_rows[last])).select(self.schema.names), key_rows[last])
        # each entry is one key row's: kept by a mask, in found's order (a filter keeps to each
        # piece read, a take would join them first)
        row_of = np.zeros(found.num_rows, dtype=np.int64)
        row_of[entry_rows[last]] = key_rows[last]
        found = found.select(self.schema.names)
        if len(last) == found.num_rows:  # every entry read is the latest of its key (the usual case): kept whole
            return self._with_row(found, row_of)
        keep = np.zeros(found.num_rows, dtype=bool)
        keep[entry_rows[last]] = True
        return self._with_row(found.filter(pa.array(keep)), row_of[keep])

    def _read_matching(self, entry: AddIndex, seq: int, wanted: np.ndarray, key_rows: np.ndarray | None = None
                       ) -> pa.Table | None:
        """The entries of ``entry`` whose hash is wanted, ranked ``seq << 32 | row`` (unique
        across buckets, and later files rank higher); with ``key_rows`` (the key row of each
        wanted hash), the key row of each entry's hash as :data:`ROW`."""
        if entry.max_hash < int(wanted[0]) or entry.min_hash > int(wanted[-1]):
            return None
        groups_about = max(1, -(-entry.rows // ROW_GROUP_ENTRIES))
        footer = self._footer(entry, bloom=len(wanted) <= BLOOMKEY_ROWS_PER_GROUP * groups_about)
        if footer.has_bloom and len(wanted) <= BLOOMKEY_ROWS_PER_GROUP * len(footer.low):
            # few keys: the filter may spare the whole file; with many, every row group
            # holds some anyway and probing costs more than it saves
            if footer.bloom is None:
                footer = self._footer(entry, bloom=True)
            maybe = footer.bloom.might_hold(wanted)
            wanted, key_rows = wanted[maybe], key_rows[maybe] if key_rows is not None else None
            if not len(wanted):
                return None
        groups = footer.groups_for(wanted)
        if not len(groups):
            return None
        reader = self._open(entry, footer.metadata)
        sizes = footer.offsets[groups + 1] - footer.offsets[groups]
        starts = np.cumsum(sizes) - sizes  # of each group in a read of ``groups``
        if not footer.has_bloom and len(wanted) <= len(groups):
            # few keys, no filter: most groups read may hold none of them; their hashes tell
            read = reader.read_row_groups(groups.tolist(), ["_hash"]).column(0).to_numpy()
            hits = matches(read, wanted)
            hit_hashes = read[hits]
            group_of_hit = np.searchsorted(starts, hits, "right") - 1
            chosen = np.unique(group_of_hit)
            slot = np.zeros(len(groups), dtype=np.int64)
            slot[chosen] = np.cumsum(sizes[chosen]) - sizes[chosen]
            table = reader.read_row_groups(groups[chosen].tolist()) if len(hits) else None
            rows = hits - starts[group_of_hit] + slot[group_of_hit]  # in the read of the chosen groups
        else:
            # a row group's entries at a time: what a read holds is not a whole (growing) file's
            pieces, hit_hashes, seen = [], [], 0
            for batch in reader.batches(groups.tolist()):
                read = batch.column("_hash").to_numpy()
                hits = matches(read, wanted)
                if len(hits):
                    at = seen + hits  # in the read of ``groups``
                    group_of_hit = np.searchsorted(starts, at, "right") - 1
                    ranks = (seq << 32) + footer.offsets[groups[group_of_hit]] + at - starts[group_of_hit]
                    # a table's take: a record batch's is forty times slower (pyarrow 26)
                    pieces.append(pa.Table.from_batches([batch]).take(pa.array(hits))
                                  .append_column(RANK, pa.array(ranks, pa.int64())))
                    hit_hashes.append(read[hits])
                seen += batch.num_rows
            if not pieces:
                return None
            return with_key_rows(_entries(pa.concat_tables(pieces), self._ranked_schema()), wanted, key_rows,
                                  np.concatenate(hit_hashes))
        if not len(hits):
            return None
        positions = footer.offsets[groups[group_of_hit]] + hits - starts[group_of_hit]
        table = table.take(pa.array(rows)).append_column(RANK, pa.array((seq << 32) + positions, pa.int64()))
        return with_key_rows(_entries(table, self._ranked_schema()), wanted, key_rows, hit_hashes)

    def _ranked_schema(self) -> pa.Schema:
        return self.coded.append(pa.field(RANK, pa.int64()))  # ``_file`` as read: codes, not a path per entry

    def _footer(self, entry: AddIndex, bloom: bool = True) -> IndexFooter:
        """``entry``'s footer, cached; with ``bloom``, its Bloom filter decoded (the footer is
        read again if a cached one was read without)."""
        cached = FOOTERS.get((entry.path, entry.size))
        if cached is not None and (cached.bloom is not None or not cached.has_bloom or not bloom):
            return cached
        where = self.store.display(entry.path)
        try:
            with store_failures(f"reading index file {where}"):
                size = self.store.fs.info(self.store.path(entry.path))["size"]
        except FileNotFoundError:
            raise self._corrupt(entry, "is missing") from None
        if size != entry.size:
            raise self._corrupt(entry, f"has {size} bytes, the log says {entry.size}")
        try:
            with store_failures(f"reading index file {where}", unclassified=False):
                tail = self._tail(entry)
        except (OSError, ValueError) as e:
            raise self._unreadable(entry, e, f"is unreadable ({type(e).__name__}: {e}) at {where}") from None
        if entry.footer_crc32 is not None and zlib.crc32(tail) != entry.footer_crc32:
            # checked before pyarrow parses it: a damaged column type aborts the process there
            raise self._corrupt(entry, "has a damaged footer (its CRC-32 differs from the log's)")
        try:
            footer = IndexFooter.of(tail, bloom)
        except (pa.ArrowException, OSError, ValueError) as e:
            raise self._corrupt(entry, f"is unreadable ({type(e).__name__}: {e}) at {where}") from None
        FOOTERS.put((entry.path, entry.size), footer, replace=True)
        return footer

    def _tail(self, entry: AddIndex) -> bytes:
        """The footer of an index file through its end (:func:`footer_of`), read in one
        request unless the footer is over :data:`FOOTER_READ` bytes."""
        path = self.store.path(entry.path)
        start = max(0, entry.size - FOOTER_READ)
        tail = self.store.fs.cat_file(path, start=start, end=entry.size)
        length = footer_length(tail)
        if length + 8 > len(tail) and start > 0:
            tail = self.store.fs.cat_file(path, start=max(0, entry.size - length - 8), end=start) + tail
        return footer_of(tail)

    def _open(self, entry: AddIndex, metadata: pq.FileMetaData) -> "_CheckedFile":
        return _CheckedFile(self, entry, metadata)

    def _corrupt(self, entry: AddIndex, problem: str) -> CorruptIndexError:
        return CorruptIndexError(f"dataset {self.dataset!r}: index file {entry.path} of bucket {entry.bucket} {problem}; "
                                 f"run dataset.rebuild_index() to rebuild the index from the data files")

    def _unreadable(self, entry: AddIndex, error: Exception, problem: str) -> CdkdsError:
        """A failed read of an index file: the store's failure (the file may be fine), or damage."""
        return store_failure(error, f"reading index file {self.store.display(entry.path)}", unclassified=False) \
            or self._corrupt(entry, problem)

    def read_file(self, entry: AddIndex, coded: bool = False) -> pa.Table:
        """All entries of one index file, its SHA-256 checked, in :attr:`schema` (``coded``:
        in :attr:`coded`, ``_file`` dictionary-encoded as stored, a code per entry)."""
        try:
            data = self.store.read(entry.path)
        except FileNotFoundError:
            raise self._corrupt(entry, "is missing") from None
        if len(data) != entry.size or hashlib.sha256(data).hexdigest() != entry.sha256:
            raise self._corrupt(entry, "differs from the log (size or SHA-256)")
        try:
            read = parquet_in_memory(data, page_checksum_verification=True, read_dictionary=["_file"]).read()
            return _entries(checked_codes(read), self.coded if coded else self.schema)
        except (pa.ArrowException, OSError, ValueError) as e:
            raise self._corrupt(entry, f"is unreadable ({type(e).__name__}: {e})") from None

    def _with_row(self, table: pa.Table, rows: np.ndarray) -> pa.Table:
        return table.append_column(ROW, pa.array(rows, pa.int64()))

    # ---------------------------------------------------------------- liveness

    def live(self, entries: pa.Table, now_ms: int) -> np.ndarray:
        """True for each entry that is a live row at ``now_ms``: not a tombstone, its file
        live, its position not deleted, not expired."""
        files = self.snapshot.files
        positions = entries.column("_pos").to_numpy(zero_copy_only=False)
        alive = ~entries.column("_deleted").to_numpy(zero_copy_only=False)
        for path, rows in by_file(entries.column("_file")):
            add = files.get(path) if path is not None else None
            if add is None:
                alive[rows] = False
            elif add.deletes:
                alive[rows] &= ~deleted_at(positions[rows], deleted_positions(self.store, add.deletes), add.row_count)
        if self.ttl is not None and entries.num_rows:
            alive &= self.ttl.alive(entries.column("_expires").combine_chunks()
                                    if isinstance(entries.column("_expires"), pa.ChunkedArray)
                                    else entries.column("_expires"),
                                    files_timestamps(files, entries.column("_file")), now_ms)
        return alive

    def tombstone_alive(self, entries: pa.Table, now_ms: int) -> np.ndarray:
        """True for each entry that is a tombstone still within gc.grace at ``now_ms``."""
        deleted = entries.column("_deleted").to_numpy(zero_copy_only=False)
        expires = pc.fill_null(entries.column("_expires").cast(pa.int64()), np.iinfo(np.int64).max)
        return deleted & (expires.to_numpy(zero_copy_only=False) > now_ms * 1000)

    # ---------------------------------------------------------------- writing

    def write(self, entries: pa.Table, now_ms: int, merge: Collection[int] = (), moved: bool = False) -> list[Action]:
        """Index files for new ``entries`` (any buckets; later rows win for a key): per
        bucket a delta, or a new base when the bucket has reached its delta threshold or is
        one of ``merge``. ``moved``: the entries are of rows a rewrite moved (each supersedes
        one stored); a bucket they are at least half of is merged too, since a delta that
        large would nearly double what every lookup reads until the next merge (a
        rewrite of a whole 10M-row dataset slowed the upserts after it from 1.5 to 2.6 s).
        The buckets are encoded in parallel and their files stored together (:meth:`store_files`)."""
        entries = entries.cast(self.coded)
        if entries.num_rows == 0:
            return []
        if any(c.num_chunks > 1 for c in entries.columns):
            # each bucket takes its entries: from many chunks a take costs 8x a take from one
            # (40k of 2.6M entries in 26 chunks: 21 ms against 2.7; a rewrite's entries come a batch at a time)
            entries = entries.combine_chunks()
        hashes = entries.column("_hash").to_numpy(zero_copy_only=False)
        buckets = self.key.buckets(hashes, self.buckets)
        # by bucket (a radix sort: at most 4,096 buckets), then within each bucket, on the
        # threads encoding them, by hash (as files store them), equal hashes in the order
        # given (later rows win)
        order = np.argsort(buckets.astype(np.int16), kind="stable")
        sorted_buckets = buckets[order]
        starts = np.flatnonzero(np.r_[True, sorted_buckets[1:] != sorted_buckets[:-1]])
        bounds = [*starts, len(order)]

        def bucket_actions(i: int) -> list[Action | IndexFile]:
            bucket = int(sorted_buckets[starts[i]])
            picked = order[starts[i]:bounds[i + 1]]
            rows = entries.take(pa.array(picked[np.argsort(hashes[picked], kind="stable")]))
            existing = self.snapshot.index_files(bucket)
            deltas = [f for f in existing if not f.base]
            if len(deltas) + 1 >= self.merge_deltas or bucket in merge or \
                    (moved and existing and 2 * len(rows) >= sum(f.rows for f in existing)):
                return self._compact(bucket, existing, rows, now_ms)
            return [self._encode_file(bucket, self._dedupe(rows), base=False)]

        done = _reading_pool().map(bucket_actions, range(len(starts))) if len(starts) > 1 else \
            map(bucket_actions, range(len(starts)))
        return self.store_files([a for part in done for a in part])

    def store_files(self, planned: "list[Action | IndexFile]") -> list[Action]:
        """Store the index files of ``planned`` in one :meth:`ObjectStore.put_all` (durable
        when it returns: the commit that references them comes after); their actions."""
        files = [p for p in planned if isinstance(p, IndexFile)]
        self.store.put_all({f.action.path: f.data for f in files})
        for f in (f for f in files if f.footer is not None):
            FOOTERS.put((f.action.path, f.action.size), f.footer, replace=True)
        return [p.action if isinstance(p, IndexFile) else p for p in planned]

    def merge(self, buckets: Iterable[int], now_ms: int) -> list[Action]:
        """Actions replacing the files of each of ``buckets`` that has deltas by one base,
        the bases merged in parallel and stored together."""
        def merged(bucket: int) -> list[Action | IndexFile]:
            existing = self.snapshot.index_files(bucket)
            if not any(not f.base for f in existing):
                return []
            return self._compact(bucket, existing, self.schema.empty_table(), now_ms)

        buckets = list(buckets)
        done = _reading_pool().map(merged, buckets) if len(buckets) > 1 else map(merged, buckets)
        return self.store_files([a for part in done for a in part])

    def _dedupe(self, rows: pa.Table) -> pa.Table:
        if distinct_hashes(rows.column("_hash").to_numpy()):
            return rows  # each key once (equal keys hash equal)
        return rows.take(pa.array(latest_per_key(rows, self.key.names)))

    def _compact(self, bucket: int, existing: Iterable[AddIndex], rows: pa.Table, now_ms: int) -> list[Action | IndexFile]:
        """Actions replacing ``existing`` (a bucket's files, in the order they apply) and the
        entries ``rows`` of the commit being made by one base: the latest entry of each key,
        without those of removed files, deleted rows and expired ones."""
        existing = tuple(existing)
        pieces = [self.read_file(f, coded=True) for f in existing] + [rows.cast(self.coded)]
        entries = pa.concat_tables(pieces)
        latest = latest_per_key(entries, self.key.names)  # in hash order, as the base stores them
        # this commit's own entries point at files the snapshot does not have yet: all kept
        new = latest >= entries.num_rows - rows.num_rows
        entries = entries.take(pa.array(latest))
        keep = new | self.live(entries, now_ms) | self.tombstone_alive(entries, now_ms)
        actions: list[Action | IndexFile] = [RemoveIndex(f.path) for f in existing]
        actions.append(self._encode_file(bucket, entries.filter(pa.array(keep)), base=True))
        return actions

    def _encode_file(self, bucket: int, rows: pa.Table, base: bool) -> "IndexFile":
        """An index file of ``rows`` for ``bucket``, not stored yet."""
        hashes = rows.column("_hash").to_numpy()
        if (hashes[1:] < hashes[:-1]).any():
            rows = rows.sort_by([("_hash", "ascending")])
            hashes = rows.column("_hash").to_numpy()
        bloom = HashBloom.of(hashes)
        sink = io.BytesIO()
        # statistics of ``_hash`` alone: lookups prune row groups by hash range, and the
        # min/max of the key and string columns cost a quarter of the encoding
        with pq.ParquetWriter(sink, rows.schema, compression=COMPRESSION, use_dictionary=["_file", *dictionary_keys(rows)],
                              write_statistics=["_hash"], write_page_checksum=True) as writer:
            writer.write_table(rows, row_group_size=ROW_GROUP_ENTRIES)
            # in the footer only: as schema metadata it would be stored twice (in the Arrow
            # schema too) and ride along every table read from the file
            writer.add_key_value_metadata({k.decode(): v.decode() for k, v in bloom.metadata().items()})
        data = sink.getvalue()
        path = f"{INDEX_FOLDER}/{bucket}/{uuid.uuid4().hex}.parquet"
        lo, hi = (int(hashes[0]), int(hashes[-1])) if len(hashes) else (0, 0)
        footer = footer_of(data)
        return IndexFile(AddIndex(path, bucket, base, rows.num_rows, len(data), hashlib.sha256(data).hexdigest(), lo, hi,
                                  footer_crc32=zlib.crc32(footer)), data, IndexFooter.of(footer, bloom=False))

    def entries(self, rows: pa.Table | pa.RecordBatch, files: list[str] | pa.Array | pa.ChunkedArray,
                positions: np.ndarray,
                hashes: np.ndarray | None = None) -> pa.Table:
        """Index entries for live rows (with their key, ordering and TTL columns) that were
        written at ``files``/``positions``, in :attr:`coded` (``_file`` dictionary-encoded)."""
        hashes = self.key.hashes(rows) if hashes is None else hashes
        n = rows.num_rows
        order = rows.column(self.descriptor.ordering_field) if self.descriptor.ordering_field else pa.nulls(n, pa.int8())
        expires = self.ttl.expiry(rows) if self.ttl is not None else None
        return pa.table([pa.array(hashes, pa.uint64()), *(rows.column(k) for k in self.key.names),
                         files.cast(FILE_CODES) if isinstance(files, (pa.Array, pa.ChunkedArray)) else
                         pa.array(files, pa.string()).dictionary_encode(), pa.array(positions, pa.int64()), order,
                         expires if expires is not None else pa.nulls(n, EXPIRY_TYPE),
                         pa.array(np.zeros(n, dtype=bool))], schema=self.coded)

    def tombstones(self, keys: pa.Table, hashes: np.ndarray, orders: pa.Array, now_ms: int) -> pa.Table:
        """Tombstone entries for deleted ``keys`` with their ordering values, kept for gc.grace
        (in :attr:`coded`, as :meth:`entries`)."""
        n = keys.num_rows
        grace = int(self.descriptor.keyed.gc_grace.total_seconds() * 1_000_000)
        until = pa.array(np.full(n, now_ms * 1000 + grace, dtype=np.int64)).cast(EXPIRY_TYPE)
        return pa.table([pa.array(hashes, pa.uint64()), *(keys.column(k) for k in self.key.names),
                         pa.nulls(n, FILE_CODES), pa.nulls(n, pa.int64()), orders, until,
                         pa.array(np.ones(n, dtype=bool))], schema=self.coded)

    # ---------------------------------------------------------------- rebuilding

    def rebuild(self, now_ms: int) -> list[Action]:
        """Actions replacing every index file by bases built from the rows of the data files
        (deletion vectors and tombstones applied), keeping the key tombstones the index
        holds within gc.grace (:meth:`held_tombstones`) for keys no data row holds;
        :class:`InvalidKeyError` naming up to five keys when a key is live twice."""
        columns = list(dict.fromkeys([*self.key.names, *(c for c in (self.descriptor.ordering_field,
                                                                      self.ttl.ttl_field if self.ttl else None) if c)]))
        parts = []
        for f in self.snapshot.files.values():
            task = file_task(self.snapshot, f, now_ms)
            task = type(task)(task.file, task.tombstones)  # index every row, expired ones with their expiry
            for batch in read_task(self.store, self.descriptor, ALWAYS_TRUE, columns, task, positions=True):
                parts.append(self.entries(batch, [f.path] * batch.num_rows,
                                          batch.column(POSITION).to_numpy(zero_copy_only=False)))
        entries = pa.concat_tables(parts) if parts else self.coded.empty_table()
        twice = repeated_keys(entries, [*self.key.names])
        if twice.num_rows:
            names = [self.key.describe(twice, i) for i in range(min(5, twice.num_rows))]
            raise InvalidKeyError(f"dataset {self.dataset!r}: {twice.num_rows} record key(s) appear more than once in "
                                  f"the data, e.g. {', '.join(names)}; remove the duplicates before keying the dataset")
        held = self.held_tombstones(now_ms)
        if held.num_rows:
            unkeyed = held.join(entries.select(["_hash", *self.key.names]), keys=["_hash", *self.key.names],
                                join_type="left anti")
            entries = pa.concat_tables([entries, unkeyed.select(self.schema.names).cast(self.coded)])
        actions: list[Action] = [RemoveIndex(p) for p in self.snapshot.index]
        hashes = entries.column("_hash").to_numpy(zero_copy_only=False)
        buckets = self.key.buckets(hashes, self.buckets)
        planned = [self._encode_file(int(bucket), entries.filter(pa.array(buckets == bucket)), base=True)
                   for bucket in np.unique(buckets)]
        return actions + self.store_files(planned)

    def held_tombstones(self, now_ms: int) -> pa.Table:
        """The tombstones a lookup of this index finds at ``now_ms``: the latest entry of
        their key, still within gc.grace — entries as written (ordering value, expiry).
        The data files cannot tell them: a deleted row is gone from them. An index file
        that cannot be read (the reason to rebuild) gives none."""
        pieces = []
        for bucket in sorted({e.bucket for e in self.snapshot.index.values()}):
            for entry in self.snapshot.index_files(bucket):  # in the order their entries apply
                try:
                    pieces.append(self.read_file(entry, coded=True))
                except CorruptIndexError:
                    continue
        if not pieces:
            return self.schema.empty_table()
        entries = pa.concat_tables(pieces)
        latest = entries.take(pa.array(latest_per_key(entries, self.key.names)))
        return latest.filter(pa.array(self.tombstone_alive(latest, now_ms))).cast(self.schema)


def _file_rank(bucket: int, seq: int) -> int:
    """The rank of the ``seq``-th index file of ``bucket`` (in the order its entries
    apply), unique across buckets; an entry ranks ``file rank << 32 | its row``."""
    return (bucket << 16) + seq


def _entries(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Entries read from an index file, in ``schema``: columns are taken by position, as key
    columns keep the names the key fields had when the file was written (renames follow)."""
    return table.rename_columns(schema.names).cast(schema)


class _CheckedFile:
    """Reads row groups of one index file with page checksums verified."""

    def __init__(self, index: RecordIndex, entry: AddIndex, metadata: pq.FileMetaData):
        self.index, self.entry, self.metadata = index, entry, metadata

    def read_row_groups(self, groups: list[int], columns: list[str] | None = None) -> pa.Table:
        """The entries of ``groups``, read together."""
        with self._opened() as parquet:
            return checked_codes(parquet.read_row_groups(groups, columns=columns, use_threads=False))

    def batches(self, groups: list[int]) -> Iterator[pa.RecordBatch]:
        """The entries of ``groups`` in order, a row group's worth (:data:`ROW_GROUP_ENTRIES`) at a time."""
        with self._opened() as parquet:
            for batch in parquet.iter_batches(ROW_GROUP_ENTRIES, row_groups=groups, use_threads=False):
                yield checked_codes(batch)

    @contextmanager
    def _opened(self) -> Iterator[pq.ParquetFile]:
        store = self.index.store
        try:
            with store_failures(f"reading index file {store.display(self.entry.path)}", unclassified=False), \
                    open_data_file(store.fs, store.path(self.entry.path), self.entry.size) as f:
                yield pq.ParquetFile(f, metadata=self.metadata, page_checksum_verification=True,
                                     read_dictionary=["_file", *coded_columns(self.metadata)])
        except FileNotFoundError:
            raise self.index._corrupt(self.entry, "is missing") from None
        except (pa.ArrowException, OSError, ValueError) as e:
            raise self.index._unreadable(self.entry, e, f"is damaged ({type(e).__name__}: {e})") from None
