"""Checkpoints of parts (log protocol 4) in datasets: written, read, checked, expired; older
datasets keep their checkpoints of add rows."""

import dataclasses
import datetime as dt
import json
import shutil
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import CorruptLogError, UnsupportedLogVersionError
from cdkds.catalog.expressions import bind, parse
from cdkds.catalog.expressions.pruning import FileFilter
from cdkds.catalog.log import actions, checkpoint, checkpoint_key
from cdkds.catalog.log.actions import PARTED_CHECKPOINT_PROTOCOL, AddFile
from cdkds.catalog.log.live import LiveFiles
from cdkds.catalog.log.parts import PARTS_FOLDER
from cdkds.catalog.maintenance.check import check_dataset
from cdkds.formats.statistics import ColumnStatistics

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "g", "type": "string"}]}
LEGACY = Path(__file__).parent.parent.parent / "fixtures" / "legacy"


def make(repo, files=8, part_files=4, interval=1000):
    """A dataset of ``files`` files (one a partition), in one commit."""
    ds = repo.create("t", DatasetDescriptor(SCHEMA, "identity(g)", properties={
        "checkpoint.interval": str(interval), "checkpoint.partFiles": str(part_files)}))
    with ds.writer() as w:
        w.write_batch(pa.table({"id": list(range(files)), "g": [f"p{i:03d}" for i in range(files)]}))
    return ds


def rows(ds):
    return sorted(r["id"] for r in ds.reader())


def actions_in(store, revision):
    table = pq.read_table(pa.BufferReader(store.read(checkpoint_key(revision))))
    return table.column("action").to_pylist(), table.schema.metadata


def parts_named(store, revision):
    return checkpoint.part_keys(store.read(checkpoint_key(revision)), "test")


def part_objects(store):
    return sorted(f"{PARTS_FOLDER}/{n}" for n in store.list(PARTS_FOLDER))


class Puts:
    """The keys written to a store from now on."""

    def __init__(self, store):
        self.keys = []
        for name in ("put", "put_if_absent"):
            original = getattr(store, name)
            setattr(store, name, self._recording(original))
        original_all = store.put_all
        store.put_all = lambda objects: (self.keys.extend(objects), original_all(objects))[1]

    def _recording(self, original):
        def put(key, data):
            self.keys.append(key)
            return original(key, data)
        return put

    @property
    def parts(self):
        return [k for k in self.keys if k.startswith(PARTS_FOLDER)]


def test_a_new_dataset_checkpoints_its_files_in_parts(repo):
    ds = make(repo, files=10)
    assert ds.snapshot.protocol.reader_version == PARTED_CHECKPOINT_PROTOCOL
    ds.log.write_checkpoint(ds.snapshot)
    names, meta = actions_in(ds.store, 1)
    assert "add" not in names and names.count("part") == 3 and meta[b"cdkds.checkpoint.format"] == b"2"
    assert sorted(parts_named(ds.store, 1)) == part_objects(ds.store)
    fresh = repo.load("t")
    assert fresh.snapshot.files.parts and rows(fresh) == list(range(10))
    assert len(fresh.plan(where="g = 'p004'").files) == 1


def test_a_checkpoint_after_appends_writes_only_the_new_part(repo):
    ds = make(repo, files=8)
    ds.log.write_checkpoint(ds.snapshot)
    start = ds.log.listing.checkpoint(1)
    assert len(start.files.parts) == 2
    new = [AddFile(f"data/g=p1{i:02d}/x.parquet", {"g_copy": f"p1{i:02d}"}, 10, 1,
                   {"id": ColumnStatistics(0, 100 + i, 100 + i)}, revision=2) for i in range(3)]
    later = dataclasses.replace(start, version=2, files=start.files.apply(new, [], []))
    puts = Puts(ds.store)
    ds.log.write_checkpoint(later)
    assert len(puts.parts) == 1 and checkpoint_key(2) in puts.keys
    assert puts.keys.index(puts.parts[0]) < puts.keys.index(checkpoint_key(2))  # parts before the checkpoint
    named = parts_named(ds.store, 2)
    assert set(named) == {p.key for p in start.files.parts} | set(puts.parts)
    read = ds.log.listing.checkpoint(2)
    assert sorted(read.files) == sorted([*start.files, *(a.path for a in new)])


def test_a_checkpoint_after_a_removal_rewrites_only_the_part_that_held_it(repo):
    ds = make(repo, files=8)
    ds.log.write_checkpoint(ds.snapshot)
    start = ds.log.listing.checkpoint(1)
    first, second = start.files.parts
    victim = next(p for p in start.files if "p006" in p)  # the second part's range
    later = dataclasses.replace(start, version=2, files=start.files.apply([], [victim], []))
    puts = Puts(ds.store)
    ds.log.write_checkpoint(later)
    assert len(puts.parts) == 1
    assert set(parts_named(ds.store, 2)) == {first.key, *puts.parts}
    assert sorted(ds.log.listing.checkpoint(2).files) == sorted(set(start.files) - {victim})


def test_many_small_parts_are_merged(repo):
    ds = make(repo, files=2, part_files=64)  # parts under 8 files are small
    snapshot = ds.snapshot
    ds.log.write_checkpoint(snapshot)
    for revision in range(2, 20):  # a checkpoint after every append: a small part each
        start = ds.log.listing.checkpoint(revision - 1)
        add = AddFile(f"data/g=q/{revision}.parquet", {"g_copy": "q"}, 10, 1, revision=revision)
        ds.log.write_checkpoint(dataclasses.replace(start, version=revision, files=start.files.apply([add], [], [])))
    parts = ds.log.listing.checkpoint(19).files.parts
    assert len(parts) <= 17 and sum(p.files for p in parts) == 20


def test_a_damaged_or_missing_part_fails_reads_and_check_naming_it(repo):
    ds = make(repo, files=8)
    ds.log.write_checkpoint(ds.snapshot)
    with ds.writer() as w:
        w.write_batch(pa.table({"id": [99], "g": ["p999"]}))
    victim = parts_named(ds.store, 1)[1]
    data = ds.store.read(victim)
    for damage in (data[:-10], None):
        ds.store.delete(victim) if damage is None else ds.store.put(victim, damage)
        with pytest.raises(CorruptLogError, match=f"part .*{victim}.* of checkpoint .*{checkpoint_key(1)}"):
            rows(repo.load("t"))
        report = check_dataset(ds.store, "t")  # what `cdkds check` runs
        assert [(p.kind, p.object) for p in report.problems] == [("corrupt_checkpoint_part", victim)]
        assert victim in report.problems[0].message and "checkpoint 1" in report.problems[0].message


def test_expiry_deletes_the_parts_no_retained_checkpoint_names(repo):
    ds = make(repo, files=8)
    ds.log.write_checkpoint(ds.snapshot)
    start = ds.log.listing.checkpoint(1)
    first, second = start.files.parts
    with ds.writer() as w:  # commit 2, a real one, so that checkpoint 2 is the state of the log
        w.write_batch(pa.table({"id": [50], "g": ["p004"]}))
    victim = next(p for p in start.files if "p006" in p)
    ds.log.write_checkpoint(dataclasses.replace(
        ds.snapshot, files=start.files.apply([ds.snapshot.files[p] for p in ds.snapshot.files
                                              if p not in start.files], [victim], [])))
    before = part_objects(ds.store)
    assert second.key in before and first.key in parts_named(ds.store, 2)
    removed = ds.log.expire(dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=1), force=True)
    assert second.key in removed and first.key not in removed
    assert part_objects(ds.store) == sorted(parts_named(ds.store, 2))  # what the kept checkpoint names, and no more


def test_a_checkpoint_writers_fresh_parts_are_safe_from_expiry(repo):
    ds = make(repo, files=4)
    ds.log.write_checkpoint(ds.snapshot)
    with ds.writer() as w:
        w.write_batch(pa.table({"id": [50], "g": ["p004"]}))
    ds.log.write_checkpoint(ds.snapshot)
    stray = f"{PARTS_FOLDER}/{3:020d}-0-abcdef12.parquet"  # a checkpoint of revision 3 being written
    ds.store.put(stray, b"not yet named")
    ds.log.expire(dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=1), force=True)
    assert stray in part_objects(ds.store)


def test_a_writer_on_parts_of_an_expired_checkpoint_checkpoints_from_the_retained_one(repo):
    """Two writers, each going on from its own checkpoints' parts: an expiry that keeps the
    other's checkpoint deletes this one's parts, which its next checkpoint must not name."""
    repo.create("t", DatasetDescriptor(SCHEMA, "identity(g)", properties={
        "checkpoint.interval": "2", "checkpoint.partFiles": "1"}))
    a, b = repo.load("t"), repo.load("t")

    def append(ds, i):
        with ds.writer() as w:
            w.write_batch(pa.table({"id": [i], "g": [f"p{i:03d}"]}))

    append(a, 1)
    append(a, 2)  # checkpoint 2: a's parts, a goes on from them
    append(b, 3)
    append(b, 4)  # checkpoint 4: b's parts (b read revision 0, held in memory)
    append(a, 5)  # a catches up to revision 5, its files still over checkpoint 2's parts
    a.log.expire(dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=1), force=True)  # keeps checkpoint 4
    append(a, 6)  # checkpoint 6
    assert rows(repo.load("t")) == [1, 2, 3, 4, 5, 6]
    assert set(parts_named(a.store, 6)) <= set(part_objects(a.store))
    assert check_dataset(a.store, "t").ok


def test_a_state_whose_checkpoint_was_expired_since_it_was_read_says_so(repo):
    ds = make(repo, files=4, interval=2, part_files=1)
    ds.log.write_checkpoint(ds.snapshot)
    reader = repo.load("t")  # over checkpoint 1's parts, none read yet
    for i in range(2):
        repo.load("t").delete(f"id = {i}")  # rewrites the parts holding them
    ds.log.expire(dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=1), force=True)
    with pytest.raises(CorruptLogError, match="was expired since this state was read: read the dataset again"):
        rows(reader)
    assert rows(reader.refresh()) == [2, 3]


def test_expiry_refuses_to_keep_a_checkpoint_whose_part_is_missing(repo):
    """Reads around a checkpoint with a missing part need the commits before it: expiring them
    would make the damage permanent."""
    ds = make(repo, files=4, interval=1000, part_files=2)
    ds.log.write_checkpoint(ds.snapshot)
    with ds.writer() as w:
        w.write_batch(pa.table({"id": [50], "g": ["p050"]}))
    ds.log.write_checkpoint(ds.snapshot)
    lost = next(k for k in parts_named(ds.store, 2) if k not in parts_named(ds.store, 1))
    ds.store.delete(lost)
    before = sorted(ds.store.list("_log"))
    with pytest.raises(CorruptLogError, match=f"{lost}.*is missing"):
        ds.log.expire(dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=1), force=True)
    assert sorted(ds.store.list("_log")) == before  # nothing expired
    ds.store.delete(checkpoint_key(2))  # the remedy cdkds check names still works
    assert rows(repo.load("t")) == [0, 1, 2, 3, 50]


def test_a_checkpoint_does_not_name_again_a_part_that_is_missing(repo):
    """Otherwise every later checkpoint names it too, and deleting the damaged checkpoint (the
    remedy cdkds check names) no longer lets reads go around it."""
    make(repo, files=4, interval=1000, part_files=2).checkpoint()
    ds = repo.load("t")  # over checkpoint 1's parts
    lost = ds.snapshot.files.parts[0].key
    ds.store.delete(lost)
    with ds.writer() as w:
        w.write_batch(pa.table({"id": [50], "g": ["p050"]}))
    with pytest.raises(CorruptLogError, match=f"{lost}.*is missing"):
        ds.log.write_checkpoint(ds.snapshot)
    assert checkpoint_key(2) not in [f"_log/{n}" for n in ds.store.list("_log")]
    ds.store.delete(checkpoint_key(1))
    assert rows(repo.load("t")) == [0, 1, 2, 3, 50]


def test_a_dataset_goes_on_from_the_parts_of_the_checkpoint_it_was_asked_for(repo):
    ds = make(repo, files=8, interval=3)  # revision 1, its files in memory
    ds.checkpoint()
    with ds.writer() as w:  # revision 2
        w.write_batch(pa.table({"id": [100], "g": ["p100"]}))
    puts = Puts(ds.store)
    with ds.writer() as w:  # revision 3: a checkpoint of the new files only
        w.write_batch(pa.table({"id": [101], "g": ["p101"]}))
    assert len(puts.parts) == 1
    assert rows(ds) == rows(repo.load("t")) == [*range(8), 100, 101]


def test_vacuum_leaves_every_log_object(repo):
    ds = make(repo, files=4)
    ds.log.write_checkpoint(ds.snapshot)
    ds.store.put(f"{PARTS_FOLDER}/{0:020d}-0-abcdef12.parquet", b"named by nothing")
    log = sorted(k for k, _ in ds.store.walk_files("_log"))
    ds.vacuum(dt.timedelta(0), dry_run=False, force=True)
    assert set(log) <= {k for k, _ in ds.store.walk_files("_log")}


def test_an_older_reader_refuses_a_newer_log_clearly(repo, monkeypatch):
    ds = make(repo, files=2)
    monkeypatch.setattr(actions, "READER_VERSION", 3)
    with pytest.raises(UnsupportedLogVersionError, match="needs log reader version 4; this cdkds reads version 3"):
        repo.load("t")
    monkeypatch.undo()
    ds.log.write_checkpoint(ds.snapshot)
    monkeypatch.setattr(actions, "READER_VERSION", 3)
    with pytest.raises(UnsupportedLogVersionError, match="checkpoint .* needs log reader version 4"):
        checkpoint.decode(ds.store.read(checkpoint_key(1)), "checkpoint 1")


def test_an_older_dataset_reads_and_keeps_writing_checkpoints_of_add_rows(tmp_path):
    shutil.copytree(LEGACY / "lake", tmp_path / "lake")
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.load("pq")
    assert ds.snapshot.protocol.reader_version < PARTED_CHECKPOINT_PROTOCOL
    expected = json.loads((LEGACY / "expected.json").read_text())["pq"][str(ds.version)]
    ds.log.write_checkpoint(ds.snapshot)
    names, meta = actions_in(ds.store, ds.version)
    assert "part" not in names and "add" in names and meta[b"cdkds.checkpoint.format"] == b"1"
    assert not ds.store.list(PARTS_FOLDER)
    fresh = repo.load("pq")
    assert sorted(fresh.to_table().to_pylist(), key=lambda r: r["id"]) == expected


def test_checkpoints_after_commits_write_only_the_parts_that_changed(repo):
    ds = make(repo, files=8, interval=3)  # checkpoint 3 holds every file: written whole
    for i in (1, 2):
        with ds.writer() as w:
            w.write_batch(pa.table({"id": [100 + i], "g": [f"p{i:03d}"]}))
    assert parts_named(ds.store, 3)
    before = set(parts_named(ds.store, 3))
    ds = repo.load("t")
    for i in (3, 4):
        with ds.writer() as w:
            w.write_batch(pa.table({"id": [100 + i], "g": [f"p{i:03d}"]}))
    puts = Puts(ds.store)
    with ds.writer() as w:  # revision 6: a checkpoint of the appends only
        w.write_batch(pa.table({"id": [105], "g": ["p005"]}))
    assert len(puts.parts) == 1 and set(parts_named(ds.store, 6)) == before | set(puts.parts)
    ds.delete("id = 3")  # removes the file of p003: the part holding it is rewritten
    puts = Puts(ds.store)
    ds.checkpoint()
    assert len(puts.parts) == 1 and len(set(parts_named(ds.store, ds.version)) - set(parts_named(ds.store, 6))) == 1
    assert rows(repo.load("t")) == [0, 1, 2, 4, 5, 6, 7, 101, 102, 103, 104, 105]
    assert check_dataset(ds.store, "t").ok  # every part read, every checkpoint equal to the replay


def test_a_writer_goes_on_from_the_parts_of_the_checkpoint_it_wrote(repo):
    ds = make(repo, files=8, interval=2)  # revision 1; never loaded again below
    for i in range(1, 6):
        puts = Puts(ds.store)
        with ds.writer() as w:
            w.write_batch(pa.table({"id": [100 + i], "g": [f"p{i:03d}"]}))
        if ds.version == 4:  # checkpoint 2 wrote every file; checkpoint 4 only the appends since
            assert len(puts.parts) == 1 and ds.snapshot.files.parts
    assert rows(ds) == rows(repo.load("t")) == [*range(8), 101, 102, 103, 104, 105]


def test_a_checkpoint_after_a_deletion_vector_rewrites_the_part_with_it(repo):
    from cdkds.catalog.keyed.deletion import DeletionVector, DeletionVectorRef
    ds = make(repo, files=8)
    ds.log.write_checkpoint(ds.snapshot)
    start = ds.log.listing.checkpoint(1)
    path = next(p for p in start.files if "p001" in p)
    vector = DeletionVectorRef.store(ds.store, DeletionVector.of([0]))
    later = dataclasses.replace(start, version=2, files=start.files.apply([], [], [(path, vector)]))
    puts = Puts(ds.store)
    ds.log.write_checkpoint(later)
    assert len(puts.parts) == 1 and start.files.parts[1].key in parts_named(ds.store, 2)
    read = ds.log.listing.checkpoint(2).files
    assert read[path].deletes == (vector,) and read[path].live_rows == 0
    assert sorted(read) == sorted(start.files)


@pytest.fixture(scope="module")
def parted():
    """A dataset of 24 files in 6 partitions, checkpointed in parts of 4 files, read back."""
    repo = DatasetRepository(f"memory://parted-{uuid.uuid4().hex}")
    ds = make(repo, files=0)
    for i in range(4):
        with ds.writer() as w:
            w.write_batch(pa.table({"id": [i * 10 + j for j in range(6)], "g": [f"p{j:03d}" for j in range(6)]}))
    ds.checkpoint()
    return repo.load("t")


COMPARISONS = st.builds(lambda field, op, value: f"{field} {op} {value}",
                        st.sampled_from(["id", "g"]), st.sampled_from(["=", "!=", "<", "<=", ">", ">="]),
                        st.integers(-1, 40)).map(
    lambda text: text if not text.startswith("g") else text.rsplit(" ", 1)[0] + f" 'p{int(text.rsplit(' ', 1)[1]) % 8:03d}'")
PREDICATE_TEXTS = st.recursive(COMPARISONS, lambda inner: st.one_of(
    st.builds(lambda a, b: f"({a}) and ({b})", inner, inner), st.builds(lambda a, b: f"({a}) or ({b})", inner, inner),
    st.builds(lambda a: f"not ({a})", inner)), max_leaves=4)


@settings(max_examples=40, deadline=None)
@given(PREDICATE_TEXTS)
def test_a_partial_read_of_the_checkpoint_plans_the_same_files_as_a_full_one(parted, text):
    files = parted.snapshot.files
    assert len(files.parts) == 6
    f = FileFilter.of(bind(parse(text), parted.descriptor.fields), parted.descriptor)
    whole = LiveFiles.of(dict(files.items()), parted.descriptor)  # every part read
    assert sorted(a.path for a in files.matching(f)) == sorted(a.path for a in whole.values() if f.may_match(a))
    assert sorted(a.path for a in whole.matching(f)) == sorted(a.path for a in whole.values() if f.may_match(a))


@pytest.fixture(scope="module")
def multi_spec_parted():
    """A dataset whose partition strategy changed twice (spec 1 gives the name g_copy to
    another function; the last change goes back to the first strategy, spec 0), checkpointed in parts before the first change (parts without
    a spec bound), between the changes and after them, read back."""
    repo = DatasetRepository(f"memory://parted-{uuid.uuid4().hex}")
    ds = make(repo, files=0)

    def write(first):
        with ds.writer() as w:
            w.write_batch(pa.table({"id": [first + j for j in range(6)], "g": [f"p{j:03d}" for j in range(6)]}))

    for i in range(4):
        write(i * 10)
    ds.checkpoint()
    ds.alter().partition_by("hash(id, 3), range(g, ['p002', 'p004', 'p999']) as g_copy").commit()  # g_copy: another function
    for i in range(4, 6):
        write(i * 10)
    ds.checkpoint()
    ds.alter().partition_by("identity(g)").commit()
    write(60)
    ds.checkpoint()
    return repo.load("t")


def test_parts_of_several_specs_bound_their_spec_ids(multi_spec_parted):
    ds = multi_spec_parted
    assert ds.descriptor.partition_spec_id == 0 and sorted(ds.descriptor.partition_specs) == [0, 1]
    assert sorted({f.spec_id for f in ds.files}) == [0, 1]
    bounds = [p.partition.get("#spec") for p in ds.snapshot.files.parts]
    assert None in bounds  # parts written before the first change
    assert {(b.min, b.max) for b in bounds if b is not None} >= {(1, 1)}
    assert sorted(r["id"] for r in ds.reader()) == [i * 10 + j for i in range(7) for j in range(6)]


@settings(max_examples=40, deadline=None)
@given(PREDICATE_TEXTS)
def test_a_partial_read_of_a_multi_spec_checkpoint_plans_the_same_files_as_a_full_one(multi_spec_parted, text):
    ds = multi_spec_parted
    files = ds.snapshot.files
    f = FileFilter.of(bind(parse(text), ds.descriptor.fields), ds.descriptor)
    whole = LiveFiles.of(dict(files.items()), ds.descriptor)
    expected = sorted(a.path for a in whole.values() if f.may_match(a))
    assert sorted(a.path for a in files.matching(f)) == expected
    assert sorted(a.path for a in whole.matching(f)) == expected
    assert sorted(a.path for a in ds.plan(text).files) == expected


def test_a_point_query_reads_only_the_parts_that_may_match(parted):
    reads = []
    read = parted.store.read
    parted.store.read = lambda key: (reads.append(key), read(key))[1]
    files = parted.log.listing.checkpoint(parted.version).files
    f = FileFilter.of(bind(parse("g = 'p002'"), parted.descriptor.fields), parted.descriptor)
    assert len(files.matching(f)) == 4 and len([k for k in reads if k.startswith(PARTS_FOLDER)]) == 1


def test_upgrading_a_legacy_log_gives_it_checkpoints_of_parts(tmp_path):
    """``upgrade_log`` (``cdkds upgrade``) raises a dataset written before version 4 to it: one
    commit, a checkpoint of parts, the same rows; a second upgrade commits nothing."""
    shutil.copytree(LEGACY / "lake", tmp_path / "lake")
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.load("pq")
    expected = json.loads((LEGACY / "expected.json").read_text())["pq"][str(ds.version)]
    before = ds.version
    assert ds.upgrade_log() == before + 1
    assert ds.snapshot.protocol.reader_version == PARTED_CHECKPOINT_PROTOCOL
    names, meta = actions_in(ds.store, ds.version)
    assert "part" in names and "add" not in names
    assert ds.upgrade_log() == before + 1  # at the version already: nothing committed
    fresh = repo.load("pq")
    assert fresh.history()[-1].operation == "upgrade"
    assert sorted(fresh.to_table().to_pylist(), key=lambda r: r["id"]) == expected
