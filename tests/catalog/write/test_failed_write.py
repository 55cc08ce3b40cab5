"""A write that fails while a file is being closed leaves nothing behind (issue 26.7)."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from tests.conftest import EVENT_SCHEMA


class Boom(Exception):
    pass


@pytest.mark.parametrize("sort_by", [None, "id"])
def test_a_file_whose_close_fails_is_deleted(tmp_path, monkeypatch, sort_by):
    ds = DatasetRepository(f"file://{tmp_path}/lake").create("events", DatasetDescriptor(EVENT_SCHEMA))

    def fail(*args, **kwargs):
        raise Boom("disk full")

    # rows are buffered into a row group, so the failure comes when the file closes
    monkeypatch.setattr(pq.ParquetWriter, "write_table", fail)
    with pytest.raises(Boom):
        with ds.writer(sort_by=sort_by) as w:
            w.write_batch(pa.table({"id": [1, 2], "userId": [1, 1], "ts": pa.array([0, 1], pa.timestamp("us", "UTC"))}))
    assert sorted(k for k, _ in ds.store.walk_files("data")) == []
    assert ds.refresh().version == 0


def test_sorted_files_closed_together_are_all_deleted_when_one_fails(tmp_path, monkeypatch):
    descriptor = DatasetDescriptor(EVENT_SCHEMA, partition_strategy="identity(userId)")
    ds = DatasetRepository(f"file://{tmp_path}/lake").create("events", descriptor)
    real = pq.ParquetWriter.write_table
    calls = []

    def fail_once(self, table, *args, **kwargs):
        calls.append(table.num_rows)
        if len(calls) == 2:  # one of the files, while the others are encoded on other threads
            raise Boom("disk full")
        return real(self, table, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", fail_once)
    with pytest.raises(Boom):
        with ds.writer(sort_by="id") as w:
            w.write_batch(pa.table({"id": list(range(40)), "userId": [i % 4 for i in range(40)],
                                    "ts": pa.array(range(40), pa.timestamp("us", "UTC"))}))
    assert len(calls) == 4  # every file was finished before the failure was raised
    assert sorted(k for k, _ in ds.store.walk_files("data")) == []
    assert ds.refresh().version == 0
