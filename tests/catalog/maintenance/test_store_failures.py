"""A failed connection during `check` or `rebuild` is the store's failure, never taken for a
damaged file (issue 25 item 10): check does not report a healthy file unreadable, and
rebuild does not skip it — which would drop its rows from the rebuilt log."""

import pyarrow as pa
import pytest
from botocore.exceptions import ConnectionClosedError

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import StorageConnectionError
from cdkds.catalog.log import LOG_FOLDER
from cdkds.catalog.maintenance import file_check, rebuild
from cdkds.formats.files import file_format

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}


class Disconnected:
    """A file format whose every read loses the connection."""

    def __init__(self, real):
        self.real = real

    def __getattr__(self, name):
        return getattr(self.real, name)

    def read(self, *args, **kwargs):
        raise ConnectionClosedError(endpoint_url="http://s3/lake/t/data/part-0.parquet")

    metadata = read


@pytest.fixture
def repo(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    with repo.create("t", DatasetDescriptor(SCHEMA)).writer() as w:
        w.write_batch(pa.table({"id": [1, 2]}))
    return repo


def test_check_raises_the_storage_error_instead_of_reporting_the_file_unreadable(repo, monkeypatch):
    ds = repo.load("t")
    monkeypatch.setattr(file_check, "file_format", lambda name: Disconnected(file_format(name)))
    with pytest.raises(StorageConnectionError, match=r"reading data file .*/t/data/part-"):
        ds.check(read_data=True)


def test_rebuild_raises_the_storage_error_instead_of_skipping_the_file(repo, monkeypatch):
    repo.load("t").store.delete_tree(LOG_FOLDER)
    monkeypatch.setattr(rebuild, "file_format", lambda name: Disconnected(file_format(name)))
    with pytest.raises(StorageConnectionError, match=r"reading data file .*/t/data/part-"):
        repo.rebuild("t")  # before: the file was skipped as unreadable
