"""A stream's feed across a partition-spec change (issue 33), driven without Spark: files
written after the change are pruned and read by their own spec, which the stream takes on
from the commits it reads (its query started on the old descriptor)."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.expressions import parse
from cdkds.catalog.read.scan import read_task
from cdkds.connector.feed import Budget, StreamFeed, StreamLog, StreamPosition

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "s", "type": "string"}]}


def _append(ds, ids, s):
    with ds.writer() as w:
        w.write_batch(pa.table({"id": list(ids), "s": [s] * len(ids)}))


def _streamed(feed, start, store):
    end = feed.advance(start, Budget())
    tasks = feed.tasks(start, end, 0)
    return sorted(r["id"] for t in tasks for b in read_task(store, feed.descriptor, feed.predicate, ["id", "s"], t)
                  for r in b.to_pylist()), end


def test_a_stream_reads_the_files_of_a_spec_added_after_it_started():
    repo = DatasetRepository(f"memory://feed-{uuid.uuid4().hex}")
    ds = repo.create("t", DatasetDescriptor(SCHEMA, "hash(id, 4)"))
    _append(ds, range(10), "a")
    log = StreamLog(ds.log)
    feed = StreamFeed(log, log.latest(), ["id", "s"], parse("id in (5, 15, 16, 17, 25) or s = 'c'"), False)
    start = StreamPosition(ds.version + 1)
    ds.alter().partition_by("hash(id, 8)").commit()  # the same partition name, id_hash, of 8 buckets
    _append(ds, range(10, 20), "b")
    ds.alter().partition_by("identity(s)").commit()
    _append(ds, range(20, 30), "c")
    streamed, end = _streamed(feed, start, ds.store)
    assert streamed == [15, 16, 17, *range(20, 30)]
    assert sorted(feed.descriptor.partition_specs) == [0, 1, 2]
    assert feed.descriptor.field_ids == ds.descriptor.field_ids and feed.descriptor.schema == ds.descriptor.schema
    _append(ds, range(30, 33), "c")
    assert _streamed(feed, end, ds.store)[0] == [30, 31, 32]


def test_a_stream_that_cannot_take_on_a_spec_says_so():
    """A spec partitioning by a field added after the stream started: the stream does not
    have the field, so it stops there naming the revision."""
    from cdkds.connector.feed import StreamingReadError
    repo = DatasetRepository(f"memory://feed-{uuid.uuid4().hex}")
    ds = repo.create("t", DatasetDescriptor(SCHEMA, "hash(id, 4)"))
    _append(ds, range(3), "a")
    log = StreamLog(ds.log)
    feed = StreamFeed(log, log.latest(), ["id", "s"], parse("id > 0"), False)
    start = StreamPosition(ds.version + 1)
    ds.alter().add("w", "string", nullable=True).partition_by("identity(w)").commit()
    with ds.writer() as w:
        w.write({"id": 9, "s": "b", "w": "x"})
    with pytest.raises(StreamingReadError, match="revision 3 changed the partitioning"):
        feed.advance(start, Budget())
