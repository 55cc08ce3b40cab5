"""What a scan asks of S3 (moto on loopback): requests counted per query, on the data files."""

import collections

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository, PartitionStrategy
from tests.conftest import EVENT_SCHEMA, new_bucket, s3_options

pytestmark = pytest.mark.slow


class Requests:
    """The S3 requests an s3fs client sends, by method, for objects under ``data/``."""

    def __init__(self, fs):
        self.counts = collections.Counter()
        fs.connect()  # the client exists once connected
        fs.s3.meta.events.register("before-send.s3", self._seen)

    def _seen(self, request, **_):
        if "/data/" in request.url:
            ranged = "Range" in request.headers
            self.counts[f"{request.method}{' range' if ranged else ''}"] += 1

    def take(self) -> dict:
        out, self.counts = dict(self.counts), collections.Counter()
        return out


def test_requests_per_query_on_s3(s3_endpoint):
    repo = DatasetRepository(f"s3://{new_bucket(s3_endpoint)}/lake", s3_options(s3_endpoint))
    ds = repo.create("events", DatasetDescriptor(
        EVENT_SCHEMA, partition_strategy=PartitionStrategy.builder().hash("userId", 4).build()))
    rows = 40_000
    with ds.writer() as writer:
        writer.write_batch(pa.table({"id": range(rows), "userId": [i % 64 for i in range(rows)],
                                     "country": ["nz"] * rows, "ts": [1_770_000_000_000_000 + i for i in range(rows)],
                                     "amount": [i * 0.5 for i in range(rows)]}))
    ds = repo.load("events")
    files = len(ds.files)
    assert files == 4
    seen = Requests(ds.store.fs)
    assert ds.to_table().num_rows == rows
    full = seen.take()
    # no HEAD (sizes come from the log), at most two reads per file (footer, then the columns)
    assert "HEAD" not in full and sum(full.values()) <= 2 * files, full
    assert ds.to_table(where="userId = 5").num_rows == rows // 64
    one = seen.take()
    assert "HEAD" not in one and sum(one.values()) <= 2, one  # one hash bucket: one file
    assert ds.to_table(where="userId = 5 and id < 0").num_rows == 0
    assert sum(seen.take().values()) <= 2  # the file's statistics let it through; its row group is skipped
