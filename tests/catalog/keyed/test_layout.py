"""Keyed data files are laid out for reads by key: smaller Parquet row groups (a get
decodes one), and their footers are read once per process."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.keyed import index as index_module
from cdkds.formats import parquet as parquet_module
from cdkds.formats.parquet import KEYED_ROW_GROUP_ROWS, ROW_GROUP_ROWS

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "long"}]}
ROWS = KEYED_ROW_GROUP_ROWS + 1000


def _rows() -> pa.Table:
    ids = np.arange(ROWS, dtype=np.int64)
    return pa.table({"id": ids, "v": ids * 2})


def _row_groups(ds) -> list[int]:
    (add,) = ds.snapshot.files.values()
    with ds.store.fs.open(ds.store.path(add.path), "rb") as f:
        meta = pq.read_metadata(f)
    return [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]


def test_keyed_data_files_have_smaller_row_groups_than_others(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}")
    keyed = repo.create("keyed", DatasetDescriptor(SCHEMA, record_key=["id"]))
    keyed.insert(_rows())
    assert _row_groups(keyed) == [KEYED_ROW_GROUP_ROWS, ROWS - KEYED_ROW_GROUP_ROWS]
    plain = repo.create("plain", DatasetDescriptor(SCHEMA))
    with plain.writer() as writer:
        writer.write_batch(_rows())
    assert _row_groups(plain) == [ROWS] and ROWS < ROW_GROUP_ROWS
    assert keyed.get(ROWS - 1) == {"id": ROWS - 1, "v": 2 * (ROWS - 1)}


def test_a_get_reads_a_data_file_footer_once(tmp_path, monkeypatch):
    ds = DatasetRepository(f"file://{tmp_path}").create("keyed", DatasetDescriptor(
        SCHEMA, record_key=["id"], properties={"index.buckets": "1"}))
    ds.insert(_rows())
    parquet_module.FOOTERS.clear()
    footers = []
    real = pq.ParquetFile.__init__
    real_tail = index_module.RecordIndex._tail

    def counting(self, source, *args, metadata=None, **kwargs):
        footers.append(metadata is None and not isinstance(source, pa.BufferReader))  # a file's, not bytes read
        real(self, source, *args, metadata=metadata, **kwargs)

    def tail(self, entry):
        footers.append(True)  # an index file's footer, parsed from the bytes read here
        return real_tail(self, entry)

    monkeypatch.setattr(pq.ParquetFile, "__init__", counting)
    monkeypatch.setattr(index_module.RecordIndex, "_tail", tail)
    for i in (5, 7, ROWS - 1):
        assert ds.get(i)["v"] == 2 * i
    assert sum(footers) == 2  # the index file's and the data file's footers, read by the first get only
