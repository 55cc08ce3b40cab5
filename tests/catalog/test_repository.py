import datetime as dt

import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import (
    CdkdsError, DatasetExistsError, DatasetNotFoundError, IncompatibleDescriptorError, InvalidDescriptorError, InvalidNameError,
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


def _descriptor():
    return DatasetDescriptor(USER_SCHEMA)


def _write(dataset, user_id):
    with dataset.writer() as w:
        w.write({"userId": user_id, "username": "u"})


def test_a_dataset_cannot_become_a_namespace(repo):
    a = repo.create("a", _descriptor())
    with pytest.raises(InvalidNameError, match="'a/b'.*'a' is a dataset"):
        repo.create("a/b", _descriptor())
    assert repo.list() == ["a"] and not repo.exists("a/b")
    _write(a, 1)
    assert a.vacuum(retention=dt.timedelta(0), force=True) == []


def test_a_namespace_cannot_become_a_dataset(repo):
    repo.create("a/b", _descriptor())
    with pytest.raises(InvalidNameError, match="'a'.*namespace of dataset 'a/b'"):
        repo.create("a", _descriptor())
    assert repo.list() == ["a/b"] and not repo.exists("a")


@pytest.mark.parametrize("name", ["a/data", "a/_log", "a/_x"])
def test_a_dataset_s_own_folders_cannot_be_datasets(repo, name):
    """Inside dataset ``a`` every name is refused, its own folders ``data`` and ``_log`` first."""
    repo.create("a", _descriptor())
    with pytest.raises(InvalidNameError, match="'a' is a dataset"):
        repo.create(name, _descriptor())
    assert repo.list() == ["a"]


@pytest.mark.parametrize("name", ["data", "_x", "ns/data"])
def test_folder_like_names_are_datasets_where_nothing_overlaps(repo, name):
    """Existing datasets keep loading: ``data`` or ``_x`` collide with nothing outside a dataset."""
    repo.create(name, _descriptor())
    assert repo.list() == [name] and repo.load(name).version == 0
    assert repo.drop(name) is True and repo.list() == []


@pytest.mark.parametrize("name", ["x/.y", "a-b", "a/b/c", ""])
def test_malformed_names_are_refused(repo, name):
    with pytest.raises(InvalidNameError, match="dataset name"):
        repo.create(name, _descriptor())
    assert repo.list() == []


def test_drop_removes_only_its_own_folders(repo):
    """An overlap made before overlaps were refused (or by a race) survives dropping the
    outer dataset, and both are listed."""
    from cdkds.catalog.log import TransactionLog

    a = repo.create("a", _descriptor())
    _write(a, 1)
    inner = TransactionLog(repo.store.child("a/b"), "a/b")
    inner.create(_descriptor())  # as a concurrent create could have
    assert repo.list() == ["a", "a/b"]
    assert repo.drop("a") is True
    assert repo.list() == ["a/b"] and repo.load("a/b").version == 0


def test_a_create_racing_an_overlapping_create_is_undone(repo, monkeypatch):
    """Two processes create 'a' and 'a/b' at once: both pass the check before either
    exists; the one that then finds the other removes what it created and fails."""
    from cdkds.catalog import repository

    real = repository.overlapping_datasets
    calls = []

    def racing(store, name):
        found = real(store, name)
        if not calls:  # the other process creates 'a/b' right after our check
            from cdkds.catalog.log import TransactionLog
            TransactionLog(store.child("a/b"), "a/b").create(_descriptor())
        calls.append(name)
        return found

    monkeypatch.setattr(repository, "overlapping_datasets", racing)
    with pytest.raises(InvalidNameError, match="'a': it is the namespace of dataset 'a/b'; they were created concurrently"):
        repo.create("a", _descriptor())
    assert repo.list() == ["a/b"] and not repo.exists("a")


def test_a_dataset_cannot_hold_a_repository(repo):
    repo.create("a", _descriptor())
    inner = DatasetRepository(f"{repo.url}/a", repo.store.fs.storage_options)
    with pytest.raises(InvalidNameError, match=f"'b': the repository root {repo.url}/a is a dataset"):
        inner.create("b", _descriptor())


def test_a_schema_update_cannot_drop_a_field_a_live_delete_reads(repo):
    email = {"name": "email", "type": ["null", "string"], "default": None}
    dataset = repo.create("users", DatasetDescriptor({**USER_SCHEMA, "fields": USER_SCHEMA["fields"] + [email]}))
    with dataset.writer() as w:
        for i in range(4):
            w.write({"userId": i, "username": "u", "email": f"{i % 2}@x"})
    dataset.delete("email = '1@x'")
    without_email = DatasetDescriptor(USER_SCHEMA)
    refused = "dataset 'users': the live delete 'email = '1@x'' of revision 2 .*unknown field 'email'"
    with pytest.raises(IncompatibleDescriptorError, match=refused):
        repo.update("users", without_email)
    with pytest.raises(IncompatibleDescriptorError, match=refused):
        repo.metadata.save("users", without_email)
    assert repo.load("users").version == 2
    assert sorted(r["userId"] for r in repo.load("users").reader()) == [0, 2]

    repo.load("users").compact()
    assert repo.update("users", without_email).descriptor.fields.keys() == {"userId", "username"}
    assert sorted(r["userId"] for r in repo.load("users").reader()) == [0, 2]


def test_a_tombstone_compaction_has_spent_does_not_block_dropping_its_field(repo):
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "x", "type": "long"}, {"name": "p", "type": "string"},
        {"name": "y", "type": ["null", "long"], "default": None}]}
    dataset = repo.create("d", DatasetDescriptor(schema, "identity(p)"))
    with dataset.writer() as w:
        w.write({"x": 0, "p": "a", "y": 0})  # an older file the delete cannot match: it keeps the tombstone "live"
    with dataset.writer() as w:
        w.write({"x": 1, "p": "b", "y": 1})
        w.write({"x": 2, "p": "b", "y": 2})
    dataset.delete("y = 1")
    dataset.compact()  # rewrites the one file the tombstone applies to
    assert len(dataset.snapshot.tombstones) == 1 and dataset.snapshot.applying_tombstones() == ()

    updated = repo.update("d", DatasetDescriptor({**schema, "fields": schema["fields"][:2]}, "identity(p)"))
    assert updated.snapshot.tombstones == ()
    assert sorted(r["x"] for r in repo.load("d").reader()) == [0, 2]
    repo.load("d").checkpoint()
    assert sorted(r["x"] for r in repo.load("d").reader()) == [0, 2]


def test_a_log_that_already_dropped_a_tombstone_field_still_loads_and_can_be_healed(repo):
    from cdkds.catalog.log.actions import SetMetadata
    from cdkds.catalog.log.conflicts import Exclusive

    email = {"name": "email", "type": ["null", "string"], "default": None}
    with_email = DatasetDescriptor({**USER_SCHEMA, "fields": USER_SCHEMA["fields"] + [email]})
    dataset = repo.create("users", with_email)
    with dataset.writer() as w:
        for i in range(4):
            w.write({"userId": i, "username": "u", "email": f"{i % 2}@x"})
    dataset.delete("email = '1@x'")
    for descriptor in (DatasetDescriptor(USER_SCHEMA), DatasetDescriptor(USER_SCHEMA)):  # as older versions allowed
        dataset._commit("update_descriptor", [SetMetadata(descriptor)], rule=Exclusive())
    broken = repo.load("users")
    with pytest.raises(CdkdsError, match="unknown field 'email'"):
        list(broken.reader())
    repo.update("users", with_email)  # giving the field back heals it
    assert sorted(r["userId"] for r in repo.load("users").reader()) == [0, 2]
