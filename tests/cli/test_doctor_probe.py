"""``cdkds doctor``'s probe object never stays behind: not when reading it back fails, nor when
creating it failed after the store had stored it (a reply lost on the way back); a dataset's URL
is checked without changing its files."""

from __future__ import annotations

import pytest

from cdkds.catalog.storage import ObjectStore
from cdkds.cli.doctor import probe_writing


def failing(method):
    def wrapped(self, key, *args):
        if key.startswith(".cdkds-doctor-probe-"):
            if method == "put_if_absent":
                original_put(self, key, *args)  # stored, then the reply is lost
            raise OSError(f"{method} failed")
        return getattr(ObjectStore, f"_original_{method}")(self, key, *args)
    return wrapped


original_put = ObjectStore.put_if_absent


@pytest.mark.parametrize("method", ["read", "put_if_absent"])
def test_the_probe_is_removed_whatever_failed(tmp_path, monkeypatch, method):
    monkeypatch.setattr(ObjectStore, f"_original_{method}", getattr(ObjectStore, method), raising=False)
    monkeypatch.setattr(ObjectStore, method, failing(method))
    (tmp_path / "lake").mkdir()
    store = ObjectStore.open(f"file://{tmp_path}/lake", {})
    check = probe_writing(store, "fix")
    assert not check.ok and f"{method} failed" in check.detail
    assert list((tmp_path / "lake").iterdir()) == []


def test_a_dataset_url_is_left_as_it_was(tmp_path):
    from cdkds.catalog import DatasetDescriptor, DatasetRepository
    from cdkds.cli.doctor import repository_checks

    repo = DatasetRepository(f"file://{tmp_path}/lake")
    events = repo.create("events", DatasetDescriptor({"type": "record", "name": "E", "fields": [
        {"name": "id", "type": "long"}]}))
    with events.writer() as writer:
        writer.write({"id": 1})

    def state():  # every file and folder, the files' times (the probe comes and goes in the dataset's folder)
        return {(p.relative_to(tmp_path), p.is_file() and p.stat().st_mtime_ns) for p in tmp_path.rglob("*")}

    before = state()
    assert all(c.ok for c in repository_checks(events.url, {}))
    assert state() == before and repo.load("events").version == 1
