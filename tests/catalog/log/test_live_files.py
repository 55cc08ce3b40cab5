"""The live files of a snapshot (:class:`LiveFiles`, layered over checkpoint parts) against a
model replay: random logs of adds, removes, deletion vectors and schema changes (a rename,
a widening, an added field), with checkpoints at random points; every revision, read afresh
from the log, holds the model's files, and pruning with random predicates picks the files
the per-file filter picks."""

from __future__ import annotations

import copy
import dataclasses
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from cdkds.catalog import DatasetDescriptor
from cdkds.catalog.expressions import bind, parse
from cdkds.catalog.expressions.pruning import FileFilter
from cdkds.catalog.keyed.deletion import DeletionVectorRef
from cdkds.catalog.log.actions import AddFile, DeleteRows, RemoveFile, SetMetadata, evolve_statistics
from cdkds.catalog.log.transaction import TransactionLog
from cdkds.catalog.storage import ObjectStore
from cdkds.formats.statistics import ColumnStatistics

SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "g", "type": "string"}, {"name": "v", "type": ["null", "int"]}]}
GROUPS = ("a", "b", "c", "d")
PREDICATES = ("g = 'a'", "g in ('b', 'c')", "g > 'b'", "id < 20", "id >= 35 and g = 'd'", "id = 7 or g = 'c'",
              "g is null", "v > 3 or v is null")


def _stats(lo: int, span: int, nulls: int, rows: int, v: str) -> dict:
    return {"id": ColumnStatistics(0, lo, lo + span), "g": ColumnStatistics(0),
            v: ColumnStatistics(nulls, lo if nulls < rows else None, lo + 1 if nulls < rows else None)}


step = st.one_of(
    st.tuples(st.just("add"), st.integers(1, 4), st.sampled_from(GROUPS), st.integers(0, 50), st.integers(0, 9)),
    st.tuples(st.just("remove"), st.integers(0, 1000)),
    st.tuples(st.just("dv"), st.integers(0, 1000), st.integers(1, 3)),
    st.tuples(st.just("schema"), st.sampled_from(["rename", "widen", "add"])),
    st.tuples(st.just("checkpoint"),),
)


def _evolved(descriptor: DatasetDescriptor, change: str) -> DatasetDescriptor:
    schema = copy.deepcopy(descriptor.schema)
    fields = schema["fields"]
    if change == "rename":
        f = next(f for f in fields if f["name"] in ("v", "w"))
        f["name"] = "w" if f["name"] == "v" else "v"
    elif change == "widen":
        f = next(f for f in fields if f["name"] in ("v", "w"))
        f["type"] = ["null", "long"]
    else:
        fields.append({"name": f"x{len(fields)}", "type": ["null", "string"], "default": None,
                       "field-id": max(x["field-id"] for x in fields) + 1})
    return descriptor.evolve(descriptor.with_schema(schema))


@settings(max_examples=25, deadline=None)
@given(st.lists(step, min_size=1, max_size=14), st.data())
def test_live_files_equal_a_model_replay(steps, data):
    store = ObjectStore.open(f"memory://live-{uuid.uuid4().hex}")
    log = TransactionLog(store, "t")
    snapshot = log.create(DatasetDescriptor(SCHEMA, "identity(g)", format="parquet",
                                            properties={"checkpoint.interval": "1000"}))
    part = next(iter(snapshot.descriptor.partition_strategy.kinds(snapshot.descriptor.fields)))
    model: dict[str, AddFile] = {}
    descriptor = snapshot.descriptor
    history = {0: ({}, descriptor)}
    n = 0
    for s in steps:
        actions = []
        if s[0] == "add":
            _, count, group, lo, nulls = s
            for _ in range(count):
                n += 1
                rows = 10
                actions.append(AddFile(f"g={group}/f{n}.parquet", {part: group}, 100 + n, rows,
                                       _stats(lo + n % 5, 3, min(nulls, rows), rows,
                                              "w" if "w" in snapshot.descriptor.fields else "v"), snapshot.descriptor_version))
        elif s[0] == "remove" and model:
            actions.append(RemoveFile(sorted(model)[s[1] % len(model)]))
        elif s[0] == "dv" and model:
            path = sorted(model)[s[1] % len(model)]
            actions.append(DeleteRows(path, DeletionVectorRef(s[2], inline=b"\x00")))
        elif s[0] == "schema":
            actions.append(SetMetadata(_evolved(snapshot.descriptor, s[1])))
        elif s[0] == "checkpoint":
            log.write_checkpoint(snapshot)
            continue
        if not actions:
            continue
        snapshot = log.commit(snapshot, "test", actions)
        for a in actions:  # the model: the per-file replay, in dicts
            if isinstance(a, AddFile):
                model[a.path] = a.at(snapshot.version, snapshot.timestamp)
            elif isinstance(a, RemoveFile):
                model.pop(a.path, None)
            elif isinstance(a, DeleteRows):
                model[a.path] = dataclasses.replace(model[a.path], deletes=model[a.path].deletes + (a.vector,))
            elif isinstance(a, SetMetadata):
                model = dict(evolve_statistics(model, descriptor, a.descriptor))
                descriptor = a.descriptor
        history[snapshot.version] = (dict(model), descriptor)

    for version in data.draw(st.lists(st.sampled_from(sorted(history)), min_size=1, max_size=3, unique=True)):
        files, descriptor = history[version]
        read = TransactionLog(store, "t").snapshot(version)  # afresh: from the newest checkpoint at or before it
        assert len(read.files) == len(files)  # counted before the files are made
        assert dict(read.files.items()) == files, f"revision {version}"
        assert read.row_count == sum(f.live_rows for f in files.values())
        for path in list(files)[:3]:
            assert path in read.files and read.files[path] == files[path]
        assert "nowhere.parquet" not in read.files
        for text in PREDICATES:
            text = text.replace("v", "w") if "w" in read.descriptor.fields else text
            matches = FileFilter.of(bind(parse(text), read.descriptor.fields), read.descriptor)
            assert sorted(f.path for f in read.files.matching(matches)) == \
                sorted(p for p, f in files.items() if matches.may_match(f)), (version, text)


def _parted(files: int, groups: int):
    """A repository and a dataset of ``files`` one-row files over ``groups`` partitions,
    checkpointed in parts of two files."""
    from cdkds.catalog import DatasetRepository

    repo = DatasetRepository(f"memory://live-parts-{uuid.uuid4().hex}")
    ds = repo.create("t", DatasetDescriptor(SCHEMA, partition_strategy="identity(g)",
                                            properties={"checkpoint.partFiles": "2"}))
    for i in range(files):
        with ds.writer() as w:
            w.write({"id": i, "g": GROUPS[i % groups], "v": i})
    ds.checkpoint()
    return repo, ds


def _count_made(monkeypatch) -> list[int]:
    """The sizes of the file tables whose AddFiles are made from now on."""
    from cdkds.catalog.log.files import FileTable

    made: list[int] = []
    real = FileTable.files
    monkeypatch.setattr(FileTable, "files", lambda self: made.append(len(self)) or real(self))
    return made


def test_counting_the_files_after_removals_makes_no_file_objects(monkeypatch):
    """``len()`` of files over parts some of whose files were removed since (a plan's
    ``total_files``) counts column-wise: it made an AddFile of every live file."""
    repo, ds = _parted(6, 3)
    ds.delete("g = 'a'")  # removes two files of the parts
    with ds.writer() as w:
        w.write({"id": 9, "g": "d", "v": None})
    expected = len(list(repo.load("t").snapshot.files.values()))
    files = repo.load("t").snapshot.files
    made = _count_made(monkeypatch)
    assert len(files) == expected == 5 and sum(made) == 0


def test_a_delete_reads_only_the_files_it_may_match(monkeypatch):
    """Planning a delete over parts makes the AddFiles of the files it may match, not of
    every file (it went through every file one by one)."""
    repo, _ = _parted(8, 4)
    ds = repo.load("t")
    made = _count_made(monkeypatch)
    ds.delete("g = 'b' and id > 2")
    assert sum(made) == 1  # of the two files of partition b, only the one holding id 5 (the other: id 1)
    monkeypatch.undo()
    assert sorted(r["id"] for r in repo.load("t").reader()) == [0, 1, 2, 3, 4, 6, 7]
