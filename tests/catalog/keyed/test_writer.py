"""The keyed writer stream returns revisions as the plain writer does."""

from cdkds.catalog import DatasetRepository
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
