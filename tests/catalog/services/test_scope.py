"""An inline pass looks only at what its write touched (issue 32): the partitions it added
files to or deleted rows from, the files its tombstone may match. ``maintain`` and
``services_plan`` look at every file; so does a pass's planning of index buckets."""

from __future__ import annotations


import pytest

from cdkds.catalog import DatasetDescriptor
from cdkds.catalog.expressions.pruning import FileFilter
from cdkds.catalog.keyed.deletion import DeletionVectorRef
from cdkds.catalog.log.actions import AddFile, DeleteRows
from cdkds.catalog.log.files import FileTable
from cdkds.catalog.log.parts import CheckpointPart
from cdkds.catalog.log.live import LiveFiles
from cdkds.catalog.log.snapshot import Snapshot
from cdkds.catalog.services.scope import ServiceScope, key_partition, partition_key
from cdkds.formats.statistics import ColumnStatistics
from tests.catalog.services.conftest import TINY

SMALL = {**TINY, "services.file.size": "1m", "services.budget": "16m"}  # two small files are worth a rewrite

SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "p", "type": ["null", "string"]}, {"name": "v", "type": "string"}]}
PARTITION = "p_copy"


def _append(ds, p, ids):
    with ds.writer() as w:
        for i in ids:
            w.write({"id": i, "p": p, "v": f"v{i}"})


def _files_by_partition(ds) -> dict:
    out: dict = {}
    for f in ds.files:
        out.setdefault(f.partition[PARTITION], []).append(f.path)
    return out


def _crowded(mem_repo):
    """Partitions a and b with three small files each, written without inline services."""
    ds = mem_repo.create("d", DatasetDescriptor(SCHEMA, partition_strategy="identity(p)", properties=SMALL))
    for k in range(3):
        _append(ds, "a", [k])
        _append(ds, "b", [10 + k])
    return ds


def test_an_inline_pass_rewrites_only_the_partitions_its_write_touched(mem_repo, monkeypatch):
    ds = _crowded(mem_repo)
    before = _files_by_partition(ds)
    monkeypatch.delenv("CDKDS_INLINE_SERVICES")  # on, as by default
    _append(ds, "a", [3])
    assert ds.last_services.revisions, ds.last_services
    after = _files_by_partition(mem_repo.load("d"))
    assert len(after["a"]) == 1 and after["b"] == before["b"]
    assert any("small files in partition p_copy=b" in line for line in ds.services_plan().describe())
    report = mem_repo.load("d").maintain()  # looks at every file
    assert report.revisions and len(_files_by_partition(mem_repo.load("d"))["b"]) == 1
    assert sorted(r["id"] for r in mem_repo.load("d").reader()) == [0, 1, 2, 3, 10, 11, 12]


def test_a_pass_after_several_commits_of_one_writer_covers_them_all(mem_repo, monkeypatch):
    ds = _crowded(mem_repo)
    monkeypatch.delenv("CDKDS_INLINE_SERVICES")
    with ds.writer() as w:
        w.write({"id": 20, "p": "a", "v": "x"})
        w.flush()
        w.write({"id": 21, "p": "b", "v": "x"})
    after = _files_by_partition(mem_repo.load("d"))
    assert len(after["a"]) == 1 and len(after["b"]) == 1


def test_a_tombstone_scopes_the_pass_to_the_files_it_may_match(mem_repo, monkeypatch):
    ds = mem_repo.create("d", DatasetDescriptor(SCHEMA, partition_strategy="identity(p)",
                                                properties={**SMALL, "services.small.files": "100"}))
    for k in range(2):
        _append(ds, "a", [k, k + 1])
        _append(ds, "b", [10 + k, 11 + k])
    ds.delete("id = 0")  # inline services off: a's first file keeps its tombstone
    monkeypatch.delenv("CDKDS_INLINE_SERVICES")
    ds.delete("id = 10")  # the pass rewrites b's first file, the only one this tombstone may match
    assert ds.last_services.revisions and ds.last_services.rewritten_files == 1
    fresh = mem_repo.load("d")
    tombstoned = [f for f in fresh.files if fresh.snapshot.tombstones_for(f)]
    assert [f.partition[PARTITION] for f in tombstoned] == ["a"] and fresh.services_plan().tombstoned == 1
    assert sorted(r["id"] for r in fresh.reader()) == [1, 1, 2, 11, 11, 12]


def test_a_null_partition_is_in_scope(mem_repo, monkeypatch):
    ds = mem_repo.create("d", DatasetDescriptor(SCHEMA, partition_strategy="identity(p)", properties=SMALL))
    for k in range(3):
        _append(ds, None, [k])
        _append(ds, "b", [10 + k])
    monkeypatch.delenv("CDKDS_INLINE_SERVICES")
    _append(ds, None, [3])
    after = _files_by_partition(mem_repo.load("d"))
    assert len(after[None]) == 1 and len(after["b"]) == 3


# ---------------------------------------------------------------- the filter and parts


def _descriptor() -> DatasetDescriptor:
    return DatasetDescriptor(SCHEMA, partition_strategy="identity(p)")


def _add(i: int, p) -> AddFile:
    return AddFile(f"data/{i}.parquet", {PARTITION: p}, 100, 10, {"id": ColumnStatistics(0, i, i)}, 0)


@pytest.mark.parametrize("partitions, admitted", [
    ([{PARTITION: "a"}], {"a"}),
    ([{PARTITION: "a"}, {PARTITION: None}], {"a", None}),
    ([{PARTITION: None}], {None}),
    ([], set()),
])
def test_the_partition_filter_admits_the_partitions_given(partitions, admitted):
    ff = FileFilter.of_partitions(partitions, _descriptor())
    got = {p for p in ("a", "b", None) if ff.may_match(_add(0, p))}
    assert got == admitted


class _Parts:
    """Checkpoint parts held in memory, one per partition value, counting the loads."""

    def __init__(self, descriptor, groups: dict):
        self.descriptor = descriptor
        self.tables = {p: FileTable.of(files, descriptor) for p, files in groups.items()}
        self.parts = [CheckpointPart(key=f"_log/_parts/{p}.parquet", files=len(files), rows=10 * len(files), size=0,
                                     sha256="", partition={PARTITION: ColumnStatistics(0, p, p)}, statistics={})
                      for p, files in groups.items()]
        self.loaded: list = []

    def load(self, part, descriptor):
        value = part.partition[PARTITION].min
        self.loaded.append(value)
        return self.tables[value]


def test_a_scope_reads_only_the_parts_that_may_hold_its_partitions():
    descriptor = _descriptor()
    groups = {p: [_add(10 * k + i, p) for i in range(3)] for k, p in enumerate("abcd")}
    parts = _Parts(descriptor, groups)
    live = LiveFiles.over(parts.parts, parts, descriptor)
    snapshot = Snapshot(5, 0, "u", descriptor, 0, live)
    scope = ServiceScope().including([_add(99, "c")], snapshot)
    files = scope.files(snapshot)
    assert parts.loaded == ["c"]
    assert sorted(f.path for f in files) == sorted(f.path for f in groups["c"])
    assert {partition_key(f) for f in files} == {((PARTITION, "c"),)}


def test_many_partitions_are_admitted_by_their_range_and_kept_exactly():
    descriptor = _descriptor()
    many = [f"p{i:03d}" for i in range(0, 200, 2)]  # more than a set lists: their range
    ff = FileFilter.of_partitions([{PARTITION: p} for p in many], descriptor)
    assert all(ff.may_match(_add(0, p)) for p in many)
    assert not ff.may_match(_add(0, "p999")) and not ff.may_match(_add(0, None))
    files = [_add(i, f"p{i:03d}") for i in range(200)]
    snapshot = Snapshot(5, 0, "u", descriptor, 0, {f.path: f for f in files})
    scope = ServiceScope().including([_add(1000 + i, p) for i, p in enumerate(many)], snapshot)
    assert sorted(f.partition[PARTITION] for f in scope.files(snapshot)) == many  # p001 is in the range, not in scope


# ---------------------------------------------------------------- partition specs

def _two_specs() -> DatasetDescriptor:
    """Spec 0 partitioned p_copy by p, the current spec 1 by v under the same name."""
    return DatasetDescriptor(SCHEMA, partition_strategy="identity(v) as p_copy", partition_specs={0: "identity(p)"},
                             partition_spec_id=1)


def _spec_add(i: int, p, spec_id: int) -> AddFile:
    return AddFile(f"data/{spec_id}-{i}.parquet", {PARTITION: p}, 100, 10, {"id": ColumnStatistics(0, i, i)}, 0,
                   spec_id=spec_id)


def test_partitions_of_two_specs_are_distinct_and_each_is_in_scope():
    """A partition is a spec's: files of spec 0 and spec 1 with equal partition values are in
    two partitions; a write that deletes rows of a past spec's file scopes that file's partition."""
    descriptor = _two_specs()
    old = [_spec_add(i, "a", 0) for i in range(3)]
    new = [_spec_add(i, "a", 1) for i in range(3)]
    snapshot = Snapshot(5, 0, "u", descriptor, 0, {f.path: f for f in old + new})
    assert partition_key(old[0]) != partition_key(new[0])
    vector = DeletionVectorRef(1, path="dv/x.bin", size=1, sha256="")
    touched = ServiceScope().including([DeleteRows(old[1].path, vector)], snapshot)
    assert sorted(f.path for f in touched.files(snapshot)) == sorted(f.path for f in old)
    appended = ServiceScope().including([_spec_add(9, "a", 1)], snapshot)
    assert sorted(f.path for f in appended.files(snapshot)) == sorted(f.path for f in new)
    both = ServiceScope().including([DeleteRows(old[1].path, vector), _spec_add(9, "a", 1)], snapshot)
    assert len(both.files(snapshot)) == 6


def test_the_partition_filter_takes_each_partition_of_its_spec():
    descriptor = _two_specs()
    ff = FileFilter.of_partitions([key_partition(partition_key(_spec_add(0, "a", 0)))], descriptor)
    assert ff.may_match(_spec_add(1, "a", 0)) and not ff.may_match(_spec_add(1, "a", 1))
    assert not ff.may_match(_spec_add(1, "b", 0))
    current = FileFilter.of_partitions([{PARTITION: "a"}], descriptor)  # no spec given: the current one
    assert current.may_match(_spec_add(1, "a", 1)) and not current.may_match(_spec_add(1, "a", 0))
    with pytest.raises(ValueError, match="partition spec 7"):
        FileFilter.of_partitions([{PARTITION: "a", "#spec": 7}], descriptor)


def test_the_plan_names_the_spec_of_a_crowded_partition(mem_repo):
    """A partition is a spec's: small files of spec 0's p_copy=a are no crowded partition
    (an older spec's files are rewritten into the current one together, whatever their
    partition), and a crowded partition of spec 1 is named with its spec."""
    ds = mem_repo.create("d", DatasetDescriptor(SCHEMA, partition_strategy="identity(p)", properties=SMALL))
    for k in range(3):
        _append(ds, "a", [k])
    ds.alter().partition_by("identity(v) as p_copy").commit()
    for k in range(3):
        _append(ds, "a", [10 + k])  # v is "v10"...: partitions of spec 1
    lines = ds.services_plan().describe()
    assert "3 file(s) of partition spec 0, older than the current spec 1: rewrite them into it" in lines, lines
    assert not any("small files in partition" in line for line in lines), lines  # one file per v value
    for k in range(3):
        with ds.writer() as w:
            w.write({"id": 20 + k, "p": "x", "v": "same"})
    assert any("small files in partition p_copy=same (partition spec 1)" in line
               for line in ds.services_plan().describe())
