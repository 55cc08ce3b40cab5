"""Every file a log names lies inside its dataset (issue 25 item 9): a commit or checkpoint
naming a data file, deletion vector or index file outside it — `..`, absolute, with a
scheme — is a CorruptLogError naming the commit and the path, and `check` reports it."""

import dataclasses
import datetime as dt
import hashlib
import json
import re

import pyarrow as pa
import pytest
from hypothesis import given, strategies as st

from cdkds.catalog import CorruptLogError, DatasetDescriptor, DatasetRepository
from cdkds.catalog.log import checkpoint, checkpoint_key, commit_key
from cdkds.catalog.log.actions import dataset_path, decode_actions
from cdkds.catalog.maintenance.check import check_dataset

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}
OUTSIDE = ["../b/data/part-0.parquet", "data/../../b/data/part-0.parquet", "/tmp/lake/b/data/part-0.parquet",
           "s3://other-bucket/b/data/part-0.parquet", "file:///etc/passwd", "C:/lake/b/part-0.parquet",
           "data\\..\\..\\b\\part-0.parquet", "./data/part-0.parquet", "data//part-0.parquet", ""]


@pytest.mark.parametrize("path", OUTSIDE)
def test_a_path_outside_the_dataset_is_refused(path):
    with pytest.raises(ValueError, match="outside the dataset|not a non-empty string"):
        dataset_path(path, "data file")


@pytest.mark.parametrize("path", ["data/part-0.parquet", "data/country=nz/day=2026-01-01/part-0.avro",
                                  "_index/3/0a.parquet", "_deletes/9b.roaring", "data/a%2F..%2Fb/part-0.parquet"])
def test_a_path_inside_the_dataset_is_accepted(path):
    assert dataset_path(path, "data file") == path


def _vector(path):
    return {"cardinality": 1, "path": path, "size": 8, "sha256": "0" * 64}


@pytest.mark.parametrize("action", [
    lambda p: {"add": {"path": p, "partition": {}, "size": 1, "rows": 1}},
    lambda p: {"add": {"path": "data/part-0.parquet", "partition": {}, "size": 1, "rows": 1, "deletes": [_vector(p)]}},
    lambda p: {"remove": {"path": p}},
    lambda p: {"deleteRows": {"path": p, "vector": {"cardinality": 1, "inline": ""}}},
    lambda p: {"deleteRows": {"path": "data/part-0.parquet", "vector": _vector(p)}},
    lambda p: {"addIndex": {"path": p, "bucket": 0, "base": True, "rows": 1, "size": 1, "sha256": "0" * 64}},
    lambda p: {"removeIndex": {"path": p}},
], ids=["add", "add-deletes", "remove", "deleteRows", "deleteRows-sidecar", "addIndex", "removeIndex"])
def test_every_action_naming_a_file_checks_it_once_when_decoded(action):
    descriptor = DatasetDescriptor(SCHEMA)
    decode_actions([action("data/part-0.parquet")], descriptor, 1)
    with pytest.raises(ValueError, match=r"'\.\./b/x' lies outside the dataset"):
        decode_actions([action("../b/x")], descriptor, 1)


def rewrite_commit(ds, revision, edit):
    """Edit commit ``revision``'s JSON in place, its checksum recomputed (as a hand edit would)."""
    raw = json.loads(ds.store.read(commit_key(revision)))
    raw.pop("checksum")
    edit(raw)
    raw["checksum"] = hashlib.sha256(json.dumps(raw, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    ds.store.put(commit_key(revision), json.dumps(raw, separators=(",", ":")).encode())


@pytest.fixture
def two(tmp_path):
    """Datasets a (ids 1, 2) and b (ids 100, 200) in one repository."""
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    a, b = (repo.create(name, DatasetDescriptor(SCHEMA)) for name in "ab")
    for ds, ids in ((a, [1, 2]), (b, [100, 200])):
        with ds.writer() as w:
            w.write_batch(pa.table({"id": ids}))
    return repo, a, b


def point_at_b(a, b):
    """Make a's commit 1 add b's data file, by a relative path that leaves a's folder."""
    (theirs,) = b.files

    def edit(raw):
        (add,) = [x["add"] for x in raw["actions"] if "add" in x]
        add["path"] = f"../b/{theirs.path}"
        add["size"] = theirs.size
    rewrite_commit(a, 1, edit)
    return f"../b/{theirs.path}"


def test_a_commit_adding_another_datasets_file_is_corrupt_and_reported(two):
    repo, a, b = two
    path = point_at_b(a, b)
    with pytest.raises(CorruptLogError, match=rf"{commit_key(1)}.*'{path}' lies outside the dataset"):
        repo.load("a")  # before: a read b's rows 100 and 200
    report = check_dataset(a.store, "a")
    assert [(p.kind, p.object) for p in report.problems] == [("corrupt_commit", commit_key(1))]
    assert path in report.problems[0].message
    with pytest.raises(CorruptLogError, match="lies outside the dataset"):
        a.vacuum(retention=dt.timedelta(0), force=True, dry_run=False)  # refuses a log it cannot read whole
    assert repo.drop("a")
    assert sorted(r["id"] for r in repo.load("b").reader()) == [100, 200] and not repo.load("b").check().problems


def test_a_checkpoint_naming_a_file_outside_is_damaged_and_read_around(two):
    repo, a, b = two
    a.checkpoint()
    snapshot = a.snapshot
    (ours,) = snapshot.files.values()
    outside = dataclasses.replace(ours, path=f"../b/{b.files[0].path}")
    a.store.put(checkpoint_key(1), checkpoint.encode(dataclasses.replace(snapshot, files={outside.path: outside})))
    with pytest.raises(CorruptLogError, match="lies outside the dataset"):
        checkpoint.decode(a.store.read(checkpoint_key(1)), "checkpoint 1")
    with pytest.warns(Warning, match="outside the dataset"):
        assert sorted(r["id"] for r in repo.load("a").reader()) == [1, 2]  # from the commits, not b's rows
    report = check_dataset(a.store, "a")
    assert [(p.kind, p.object) for p in report.problems] == [("corrupt_checkpoint", checkpoint_key(1))]
    assert "lies outside the dataset" in report.problems[0].message


def _inside_by_the_rule(path: str) -> bool:
    """FORMAT.md §1's rule spelt out step by step: the one regular expression must agree."""
    return not ("\\" in path or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", path)
                or any(s in ("", ".", "..") for s in path.split("/")) or any(ord(c) < 32 for c in path))


@given(st.text(alphabet=st.sampled_from(list("ab./\\:c1_-\x00\x1f\n %é")), min_size=1, max_size=12))
def test_the_path_check_is_the_rule(path):
    try:
        dataset_path(path, "data file")
        accepted = True
    except ValueError:
        accepted = False
    assert accepted == _inside_by_the_rule(path), path
