"""The keyed writer stream returns revisions as the plain writer does."""

import pyarrow as pa
import pytest

from cdkds.catalog import CdkdsError, DatasetRepository
from tests.catalog.keyed.conftest import user, users_descriptor


def test_flush_and_close_return_the_revision_committed(tmp_path):
    ds = DatasetRepository(f"file://{tmp_path}").create("users", users_descriptor())
    writer = ds.writer()
    writer.write(user("nz", 1, 1))
    assert writer.flush() == 1
    assert writer.flush() is None  # nothing new
    writer.write(user("nz", 2, 1))
    assert writer.close() == 2 and writer.close() is None
    assert ds.writer(mode="overwrite").close() == 3  # an overwrite of nothing still commits


def test_the_writer_honours_target_file_size_and_max_open_files(tmp_path):
    ds = DatasetRepository(f"file://{tmp_path}").create("users", users_descriptor())
    rows = [user("nz", i, 1, f"e{i}" * 20) for i in range(3000)]
    with ds.writer() as w:  # the default target: one file
        for r in rows[:1500]:
            w.write(r)
    assert len(ds.snapshot.files) == 1
    with ds.writer(target_file_size=8_000) as w:
        for r in rows[1500:]:
            w.write(r)
    small = [f for f in ds.snapshot.files.values() if f.revision == ds.version]
    assert len(small) > 3 and all(f.size < 4 * 8_000 for f in small)
    with ds.writer(mode="overwrite", target_file_size=8_000, max_open_files=1) as w:
        w.write_batch(pa.Table.from_pylist(rows[:1000], schema=ds.descriptor.arrow_schema))
    assert len(ds.snapshot.files) > 3 and ds.snapshot.row_count == 1000
    assert ds.get(("nz", 999))["email"] == "e999" * 20
    report = ds.check(read_data=True)
    assert report.ok, report.to_json()
    for bad in ({"target_file_size": 0}, {"max_open_files": 0}, {"target_file_size": "1m"}):
        with pytest.raises(CdkdsError, match="dataset 'users': (target_file_size|max_open_files) must be a positive"):
            ds.writer(**bad)
    with pytest.raises(TypeError):
        ds.writer(target_filesize=1)  # a misspelt option is not silently ignored
