"""Appends do not read the file list (issue 32): a dataset of many files, loaded and then
appended to, commits from its descriptor and latest revision. Counted, not timed: what the
store is asked for while the append runs, which checkpoint parts are loaded and whether
the live files are made into one mapping of AddFile objects.

The dataset is built cheaply: one commit of Add actions for generated paths (no data file
is written: nothing here opens them), then a checkpoint. Its files are large, so the
services find no work in them; only the appended partition's files are theirs to look at.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow.compute as pc
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.log import live
from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.log.conflicts import BlindAppend
from cdkds.catalog.storage import ObjectStore
from cdkds.formats.statistics import ColumnStatistics

FILES = 100_000  # the size: every test of the module shares one build
PARTITIONS = 100
SCHEMA = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"}, {"name": "p", "type": "string"}, {"name": "v", "type": "double"}]}
PARTITION = "p_copy"  # identity(p)'s partition name
BIG = 512 << 20  # no file of the build is small: the services have no work in them


def value(i: int) -> str:
    return f"p{i % PARTITIONS:03d}"


def build(url: str, name: str = "events", files: int = FILES) -> DatasetRepository:
    """A dataset of ``files`` Add actions in one commit, then a checkpoint (at revision 1)."""
    repo = DatasetRepository(url)
    # checkpoints are written every 100 commits here, so that no append of the tests writes one
    # (a checkpoint does read every file, once an interval; the appends in between must not)
    ds = repo.create(name, DatasetDescriptor(SCHEMA, partition_strategy="identity(p)",
                                             properties={"checkpoint.interval": "100"}))
    adds = [AddFile(f"data/{PARTITION}={value(i)}/gen-{i:07d}.parquet", {PARTITION: value(i)}, BIG, 1000,
                    {"id": ColumnStatistics(0, i * 1000, i * 1000 + 999), "p": ColumnStatistics(0, value(i), value(i)),
                     "v": ColumnStatistics(0, 0.0, 1.0)}, 0)
            for i in range(files)]
    ds._commit("append", adds, rule=BlindAppend())
    ds.checkpoint()
    return repo


@dataclass
class Reads:
    """What was read while counting: object keys, checkpoint parts loaded, mappings made."""

    keys: list[str] = field(default_factory=list)
    parts: list[object] = field(default_factory=list)
    materialised: int = 0
    counting: bool = False

    def checkpoints(self) -> list[str]:
        return [k for k in self.keys if k.endswith(".checkpoint.parquet")]

    def part_keys(self) -> list[str]:
        return [k for k in self.keys if "/_parts/" in k or k.startswith("_log/_parts/")]


@pytest.fixture
def reads(monkeypatch) -> Reads:
    """Counts every object read through an ObjectStore, every checkpoint part a LiveFiles
    loads and every time one makes the mapping of all its files — while ``counting``."""
    seen = Reads()
    read, table, everything = ObjectStore.read, live._Parts.table, live.LiveFiles._all

    def counted_read(self, key):
        if seen.counting:
            seen.keys.append(key)
        return read(self, key)

    def counted_table(self, i):
        if seen.counting and i not in self._tables:
            seen.parts.append(self.parts[i])
        return table(self, i)

    def counted_all(self):
        if seen.counting and self._materialised is None:
            seen.materialised += 1
        return everything(self)

    monkeypatch.setattr(ObjectStore, "read", counted_read)
    monkeypatch.setattr(live._Parts, "table", counted_table)
    monkeypatch.setattr(live.LiveFiles, "_all", counted_all)
    return seen


def may_hold(part, partition: str) -> bool:
    """Whether a checkpoint part's partition bounds admit ``partition`` (the parts an inline
    pass after an append to ``partition`` may read, once checkpoints are parted)."""
    bounds = part.partition.get(PARTITION)
    return bounds is None or bounds.min is None or bounds.min <= partition <= bounds.max


def assert_read_nothing_of_the_file_list(seen: Reads, loaded, touched: str | None) -> None:
    """No checkpoint read again, no mapping of every file made, and no part loaded but those
    an inline pass over partition ``touched`` may need (``None``: the services are off)."""
    assert seen.checkpoints() == [], seen.checkpoints()
    assert seen.materialised == 0
    allowed = [p for p in loaded.snapshot.files.parts if touched is not None and may_hold(p, touched)]
    assert all(p in allowed for p in seen.parts), (seen.parts, allowed)
    assert set(seen.part_keys()) <= {p.key for p in allowed}


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> str:
    url = f"file://{tmp_path_factory.mktemp('append-reads')}/lake"
    build(url)
    return url


@pytest.mark.parametrize("services", ["on", "off"])
def test_an_append_commits_without_reading_the_file_list(lake, reads, monkeypatch, services):
    monkeypatch.setenv("CDKDS_INLINE_SERVICES", services)
    ds = DatasetRepository(lake).load("events")
    assert len(ds.snapshot.files) >= FILES
    before = ds.version
    reads.counting = True
    with ds.writer() as w:
        w.write({"id": -1, "p": value(7), "v": 0.5})
    reads.counting = False
    assert ds.version == before + 1
    assert (ds.last_services is not None) == (services == "on")
    if services == "on":
        assert not ds.last_services.did_work and not ds.last_services.gave_up, ds.last_services
    assert_read_nothing_of_the_file_list(reads, ds, value(7) if services == "on" else None)
    assert all(k.startswith("_log/") and k.endswith(".json") or k.startswith("_log/_") for k in reads.keys), reads.keys


def test_the_count_sees_a_pass_over_every_file(lake, reads, monkeypatch):
    """The counting itself: describing what the services would do next looks at every file."""
    ds = DatasetRepository(lake).load("events")
    reads.counting = True
    ds.services_plan()
    assert reads.materialised >= 1 or reads.parts == list(ds.snapshot.files.parts)


def test_an_append_with_a_transaction_does_not_read_it_either(lake, reads, monkeypatch):
    """A streaming-style append from Python: files written by a PartitionedWriter, committed
    with a SetTransaction through the dataset (as the Spark driver does)."""
    from cdkds.catalog.log.actions import SetTransaction
    from cdkds.catalog.write.writer import PartitionedWriter
    import pyarrow as pa

    monkeypatch.delenv("CDKDS_INLINE_SERVICES", raising=False)
    ds = DatasetRepository(lake).load("events")
    reads.counting = True
    files = PartitionedWriter(ds.store, ds.name, ds.descriptor, ds.descriptor_version, ds.version, "t" * 32)
    files.write_batch(pa.table({"id": [-2], "p": [value(9)], "v": [0.25]}))
    adds = files.close()
    ds._commit("append", [*adds, SetTransaction("query", 4)], {"rows": 1}, rule=BlindAppend())
    ds._after_write()
    reads.counting = False
    assert ds.transaction_version("query") == 4
    assert_read_nothing_of_the_file_list(reads, ds, value(9))


def test_a_partition_overwrite_reads_only_the_partitions_it_replaces(lake, reads, monkeypatch):
    """Not an append, but the same question: a dynamic partition overwrite finds the files it
    replaces by pruning, not by going through every file. (Last: it changes the dataset.)"""
    monkeypatch.setenv("CDKDS_INLINE_SERVICES", "off")
    before = _paths_in(DatasetRepository(lake).load("events"), value(11))
    ds = DatasetRepository(lake).load("events")
    reads.counting = True
    with ds.writer(mode="overwrite_partitions") as w:
        w.write({"id": -3, "p": value(11), "v": 0.5})
    reads.counting = False
    assert_read_nothing_of_the_file_list(reads, ds, value(11))
    (entry,) = [e for e in ds.history() if e.revision == ds.version]
    assert entry.operation == "overwrite_partitions" and entry.removed_files == len(before) == FILES // PARTITIONS
    assert not before & _paths_in(DatasetRepository(lake).load("events"), value(11))


def _paths_in(ds, partition: str) -> set[str]:
    """The paths of the live files of one partition (from the columns: faster than a file object each)."""
    table = ds.snapshot.files.table().table
    return set(table.filter(pc.equal(pc.struct_field(table.column("partition"), PARTITION), partition))
               .column("path").to_pylist())
