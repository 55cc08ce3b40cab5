"""Spark's ``abort`` runs in a fresh worker after a failed ``commit``: it deletes the written
files only when a complete read of the log shows the commit absent (issue 10 item 1).
No Spark session is needed: the writer is a plain Python object."""

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.connector.options import Location
from cdkds.connector.writer import CdkdsWriter

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}


@pytest.fixture
def written(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("t", DatasetDescriptor(SCHEMA))
    writer = CdkdsWriter(Location(ds.url), ds.descriptor, ds.descriptor_version, ds.version, "c0ffee" * 5 + "ab",
                         "append", 1 << 20)
    message = writer.write(iter([pa.record_batch({"id": [1, 2]})]))
    return repo, ds, writer, message


def files(ds):
    return sorted(k for k, _ in ds.store.walk_files("data"))


def test_abort_after_a_commit_that_landed_keeps_the_files(written):
    repo, ds, writer, message = written
    writer.commit([message])  # suppose it then failed on the way back: Spark calls abort
    writer.abort([message])
    assert len(files(ds)) == 1 and sorted(r["id"] for r in repo.load("t").reader()) == [1, 2]


def test_abort_of_a_commit_that_never_landed_deletes_the_files(written):
    repo, ds, writer, message = written
    writer.abort([message])
    assert files(ds) == [] and repo.load("t").version == 0


def test_abort_that_cannot_read_the_log_keeps_the_files(written, monkeypatch):
    repo, ds, writer, message = written
    from cdkds.catalog.storage import ObjectStore

    def failing(self, key):
        raise OSError("503 Slow Down (injected)")

    monkeypatch.setattr(ObjectStore, "read", failing)
    with pytest.warns(UserWarning, match="cannot tell whether the aborted write"):
        writer.abort([message])
    monkeypatch.undo()
    assert len(files(ds)) == 1


def test_a_clustered_keyed_task_writes_its_index_files_and_abort_deletes_them(tmp_path):
    """A clustered keyed task owns whole buckets and writes their index files itself; a job
    that never committed leaves neither its data files nor those."""
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("k", DatasetDescriptor(SCHEMA, record_key="id", properties={"index.buckets": "4"}))
    ds.upsert(pa.table({"id": [1, 2]}))
    writer = CdkdsWriter(Location(ds.url), ds.descriptor, ds.descriptor_version, ds.version, "c0ffee" * 5 + "cd",
                         "append", 1 << 20, operation="upsert", clustered=True)
    message = writer.write(iter([pa.record_batch({"id": [2, 3, 4]})]))
    index_paths = [p for p in message.written if p.startswith("_index")]
    assert index_paths and all(ds.store.exists(p) for p in message.written)
    assert message.change.entries is None  # sent to the driver as actions, not entries
    writer.abort([message])
    assert not any(ds.store.exists(p) for p in message.written)
    assert repo.load("k").version == ds.version and sorted(repo.load("k").to_table()["id"].to_pylist()) == [1, 2]
