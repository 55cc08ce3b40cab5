"""Checkpoints, the hint, time travel across them, log expiry, vacuum and rebuild."""

import datetime as dt
import json
import time

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor
from cdkds.catalog.errors import CorruptLogError, DatasetNotFoundError, CorruptLogWarning, InvalidDescriptorError, InvalidTimeTravelError
from cdkds.catalog.log import checkpoint_key, commit_key

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "g", "type": "string"}]}
HINT = "_log/_last_checkpoint"


def make(repo, commits, interval=3):
    ds = repo.create("t", DatasetDescriptor(SCHEMA, "identity(g)", properties={"checkpoint.interval": str(interval)}))
    for i in range(commits):
        with ds.writer() as w:
            w.write_batch(pa.table({"id": [i], "g": ["ab"[i % 2]]}))
    return ds


def ids(ds):
    return sorted(r["id"] for r in ds.reader())


class CountingReads:
    def __init__(self, store):
        self.keys = []
        self._read = store.read
        store.read = self

    def __call__(self, key):
        self.keys.append(key)
        return self._read(key)


def test_checkpoints_every_interval_and_opening_reads_one_plus_few_commits(repo):
    ds = make(repo, 10)
    names = ds.store.list("_log")
    assert [n for n in names if n.endswith(".parquet")] == [f"{r:020d}.checkpoint.parquet" for r in (3, 6, 9)]
    assert json.loads(ds.store.read(HINT)) == {"revision": 9}
    reads = CountingReads(ds.store)
    fresh = type(ds)(repo, "t", ds.store, ds.log, ds.log.snapshot())
    assert fresh.version == 10 and ids(fresh) == list(range(10))
    commits_read = [k for k in reads.keys if k.endswith(".json") and k != commit_key(0)]
    assert checkpoint_key(9) in reads.keys and commits_read == [commit_key(10), commit_key(11)]


def test_every_revision_reads_the_same_through_checkpoints(repo):
    make(repo, 8)
    for v in range(9):
        assert ids(repo.load("t", version=v)) == list(range(v))


@pytest.mark.parametrize("damage", ["missing hint", "stale hint", "garbage hint"])
def test_a_bad_hint_falls_back_to_listing(repo, damage):
    ds = make(repo, 7)
    if damage == "missing hint":
        ds.store.delete(HINT)
    elif damage == "stale hint":
        ds.store.put(HINT, json.dumps({"revision": 3}).encode())
    else:
        ds.store.put(HINT, b"{{{")
    with pytest.warns(CorruptLogWarning) if damage == "garbage hint" else _no_warning():
        assert ids(repo.load("t")) == list(range(7))


def test_a_corrupt_checkpoint_warns_and_falls_back_to_the_previous_one(repo):
    ds = make(repo, 7)
    ds.store.put(checkpoint_key(6), ds.store.read(checkpoint_key(6))[:100])
    with pytest.warns(CorruptLogWarning, match="checkpoint .*00000000000000000006.checkpoint.parquet.* corrupt"):
        assert ids(repo.load("t")) == list(range(7))


def test_time_travel_by_timestamp_uses_checkpoints(repo):
    ds = repo.create("t", DatasetDescriptor(SCHEMA, properties={"checkpoint.interval": "2"}))
    stamps = []
    for i in range(6):
        with ds.writer() as w:
            w.write_batch(pa.table({"id": [i], "g": ["a"]}))
        stamps.append(ds.history()[-1].timestamp)
        time.sleep(0.002)
    for i, stamp in enumerate(stamps):
        assert ids(repo.load("t", timestamp=stamp)) == list(range(i + 1))
    with pytest.raises(InvalidTimeTravelError, match="no revision at or before"):
        repo.load("t", timestamp=stamps[0] - 10**6)


def test_expire_keeps_every_later_revision_readable(repo):
    ds = make(repo, 10)
    cutoff = ds.history()[7].timestamp  # revision 7
    removed = ds.expire_log(cutoff, force=True)
    assert commit_key(1) in removed and checkpoint_key(3) in removed and commit_key(6) not in removed
    assert checkpoint_key(6) not in removed and commit_key(0) not in removed
    assert [h.revision for h in ds.history()] == [0, 6, 7, 8, 9, 10]
    for v in range(6, 11):
        assert ids(repo.load("t", version=v)) == list(range(v))
    assert ids(repo.load("t", version=0)) == []
    with pytest.raises(InvalidTimeTravelError, match="revision 4 has been expired"):
        repo.load("t", version=4)
    ds.store.delete(HINT)
    assert ids(repo.load("t")) == list(range(10))
    assert ds.expire_log(dt.timedelta(days=1)) == []  # nothing older than a day


def test_vacuum_collects_only_unreferenced_old_files(repo):
    ds = make(repo, 6)
    with ds.writer(mode="overwrite") as w:
        w.write_batch(pa.table({"id": [100], "g": ["a"]}))
    orphan = ds.store.open_output("data/g=a/part-orphan.parquet")
    ds.store.fs.pipe_file(orphan, b"written by a writer that never committed")
    # the overwritten files are still referenced by earlier revisions; only the orphan goes
    assert ds.vacuum(retention=dt.timedelta(0), force=True) == ["data/g=a/part-orphan.parquet"]
    ds.checkpoint()
    ds.expire_log(ds.history()[-1].timestamp, force=True)
    doomed = ds.vacuum(retention=dt.timedelta(0), force=True)
    assert len(doomed) == 6 + 1 and "data/g=a/part-orphan.parquet" in doomed
    assert ds.vacuum(retention=dt.timedelta(days=1)) == []  # all too young
    assert ds.vacuum(retention=dt.timedelta(0), force=True, dry_run=False) == doomed
    assert ids(repo.load("t")) == [100]
    assert sorted(k for k, _ in ds.store.walk_files("data")) == sorted(f.path for f in ds.files)


def test_rebuild_restores_a_lost_log(repo):
    ds = make(repo, 5)
    with ds.writer(mode="overwrite_partitions") as w:
        w.write_batch(pa.table({"id": [50], "g": ["a"]}))
    ds.compact()
    expected = ids(ds)
    ds.store.delete_tree("_log")
    with pytest.raises(DatasetNotFoundError):
        repo.load("t")
    rebuilt = repo.rebuild("t")
    assert ids(rebuilt) == expected == [1, 3, 50]
    assert [h.operation for h in rebuilt.history()] == ["create", "append", "append", "append", "append", "append",
                                                        "overwrite_partitions", "compact"]


def test_rebuild_after_corruption_keeps_the_broken_log_aside(repo):
    ds = make(repo, 4)
    ds.store.put(commit_key(4), b"garbage")
    with pytest.raises(CorruptLogError, match="00000000000000000004.json of dataset 't' is corrupt"):
        repo.load("t")
    assert ids(repo.rebuild("t")) == [0, 1, 2, 3]
    assert any(name.startswith("_log.broken-") for name in ds.store.list(""))


def test_bad_checkpoint_interval():
    with pytest.raises(InvalidDescriptorError, match="checkpoint.interval must be a positive integer"):
        DatasetDescriptor(SCHEMA, properties={"checkpoint.interval": "0"})


@pytest.mark.parametrize("value", ["abc", "0", "1.5", "-3"])
def test_bad_checkpoint_part_files(value):
    with pytest.raises(InvalidDescriptorError, match="checkpoint.partFiles must be a positive integer"):
        DatasetDescriptor(SCHEMA, properties={"checkpoint.partFiles": value})


def test_checkpoint_part_files_is_a_known_property():
    from cdkds.catalog.descriptor import KNOWN_PROPERTIES
    assert "checkpoint.partFiles" in KNOWN_PROPERTIES  # the CLI and Spark options take it


class _no_warning:
    def __enter__(self):
        import warnings
        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("error", CorruptLogWarning)

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)


@pytest.mark.parametrize("damage, message", [
    ("truncate", "is damaged|not a readable"),
    ("garble", "is damaged|not a readable"),
    ("delete", "is missing"),
])
def test_damaged_data_files_are_named(repo, damage, message):
    from cdkds.catalog.errors import DataFileError

    ds = make(repo, 2)
    victim = ds.files[0].path
    data = ds.store.read(victim)
    if damage == "truncate":
        ds.store.put(victim, data[: len(data) // 2])
    elif damage == "garble":
        ds.store.put(victim, data[:4] + bytes(b ^ 0x5A for b in data[4:-8]) + data[-8:])
    else:
        ds.store.delete(victim)
    with pytest.raises(DataFileError, match=message) as info:
        list(repo.load("t").reader())
    assert victim in str(info.value) and "added at revision 1" in str(info.value)
