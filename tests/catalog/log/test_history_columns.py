"""The history counts removed rows from the files its commits touch, looked up column-wise:
no {path: rows} of every live file."""

import datetime as dt

import pyarrow as pa

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.log.live import LiveFiles

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "p", "type": "long"}]}


def test_history_and_entry_do_not_visit_every_file(tmp_path, monkeypatch):
    repo = DatasetRepository(f"file://{tmp_path}")
    ds = repo.create("t", DatasetDescriptor(SCHEMA, "identity(p)"))
    for i in range(4):
        with ds.writer() as w:
            w.write_batch(pa.table({"id": range(i * 10, i * 10 + 10), "p": [j % 5 for j in range(10)]}))
    ds.checkpoint()
    ds.expire_log(dt.timedelta(0), force=True)
    before = ds.log.snapshot()
    ds.delete("p = 0")  # whole files: 2 rows in each of 4 files
    expected = [(e.revision, e.removed_rows) for e in ds.history()]
    entry = ds.log.entry(ds.version, before)
    assert expected[-2:] == [(4, None), (5, 8)] and entry.removed_rows == 8

    def every_file(self):
        raise AssertionError("the history visited every live file")

    for name in ("items", "values", "keys", "__iter__"):
        monkeypatch.setattr(LiveFiles, name, every_file)
    assert [(e.revision, e.removed_rows) for e in ds.history()] == expected
    assert ds.log.entry(ds.version, before) == entry
