import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import (
    DatasetExistsError, DatasetNotFoundError, IncompatibleDescriptorError, InvalidDescriptorError, InvalidNameError,
    StorageError,
)
from tests.conftest import USER_SCHEMA


def test_create_load_list_exists_drop(repo):
    d = DatasetDescriptor(USER_SCHEMA, "hash(userId, 4)")
    repo.create("users", d)
    repo.create("sales/orders", DatasetDescriptor(USER_SCHEMA))
    assert repo.list() == ["sales/orders", "users"]
    assert repo.exists("users") and repo.exists("sales/orders") and not repo.exists("nobody")
    loaded = repo.load("users")
    assert loaded.descriptor == d and loaded.version == 0
    with pytest.raises(DatasetExistsError, match="'users' already exists"):
        repo.create("users", d)
    with loaded.writer() as w:
        w.write({"userId": 1, "username": "a"})
    assert repo.drop("users") is True
    assert not repo.exists("users") and repo.list() == ["sales/orders"]
    assert repo.drop("users") is False
    with pytest.raises(DatasetNotFoundError, match="'users' does not exist"):
        repo.load("users")


def test_update_is_a_commit_and_old_versions_keep_their_descriptor(repo):
    d = DatasetDescriptor(USER_SCHEMA)
    repo.create("users", d)
    added = {**USER_SCHEMA, "fields": USER_SCHEMA["fields"] + [{"name": "email", "type": ["null", "string"], "default": None}]}
    updated = repo.update("users", d.replace(schema=added))
    assert updated.version == 1 and "email" in updated.descriptor.fields
    assert repo.load("users", version=0).descriptor == d
    with pytest.raises(IncompatibleDescriptorError, match="dataset 'users': the format cannot change"):
        repo.update("users", d.replace(format="avro"))
    with pytest.raises(InvalidDescriptorError, match="update takes a DatasetDescriptor"):
        repo.update("users", {"schema": USER_SCHEMA})
    assert repo.load("users").version == 1


@pytest.mark.parametrize("name", ["", "a/b/c", "../etc", "a b", "a-b", "/abs", "a/", None, 3])
def test_bad_names_are_rejected(repo, name):
    with pytest.raises(InvalidNameError, match="dataset name"):
        repo.create(name, DatasetDescriptor(USER_SCHEMA))
    assert repo.list() == []


def test_plain_local_paths_work(tmp_path):
    repo = DatasetRepository(str(tmp_path / "lake"))
    repo.create("users", DatasetDescriptor(USER_SCHEMA))
    assert DatasetRepository(f"file://{tmp_path}/lake").list() == ["users"]


def test_unusable_urls_are_clear_errors():
    with pytest.raises(StorageError, match="non-empty string"):
        DatasetRepository("")
    with pytest.raises(StorageError, match="cannot open storage"):
        DatasetRepository("nosuchprotocol://x")
