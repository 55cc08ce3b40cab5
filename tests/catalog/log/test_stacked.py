"""Files held in memory across commits (a checkpoint without parts, read whole): a commit
changes what it changes without copying every file, and the files after any sequence of
commits are those a plain mapping would hold."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from unittest import mock

import hypothesis.strategies as st
from hypothesis import given

from cdkds.catalog import DatasetDescriptor
from cdkds.catalog.keyed.deletion import DeletionVectorRef
from cdkds.catalog.log import stacked
from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.log.live import LiveFiles

DESCRIPTOR = DatasetDescriptor({"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]})


def add(i: int, revision: int = 0) -> AddFile:
    return AddFile(f"data/{i}.parquet", {}, 100, 10, {}, 0, revision=revision)


class Untouchable(dict):
    """The files of a checkpoint read whole, which no commit may go through one by one."""

    def __iter__(self):
        raise AssertionError("a commit went through every file")

    keys = values = items = __iter__


def test_a_commit_onto_many_files_does_not_go_through_them():
    files = Untouchable({f.path: f for f in map(add, range(stacked.STACK_AT * 2))})
    live = LiveFiles(DESCRIPTOR, None, files)
    after = live.apply([add(-1, 5)], ["data/3.parquet"], [("data/4.parquet", DeletionVectorRef(1, b"dv"))])
    after = after.apply([add(-2, 6)], ["data/-1.parquet"], [])
    assert "data/-2.parquet" in after and "data/-1.parquet" not in after and "data/3.parquet" not in after
    assert len(after) == stacked.STACK_AT * 2 and after["data/4.parquet"].deleted_rows == 1
    assert len(live) == stacked.STACK_AT * 2 and "data/3.parquet" in live  # the earlier snapshot is as it was


ACTIONS = st.lists(st.tuples(
    st.lists(st.integers(0, 60), max_size=4),   # files added (paths; a live path is replaced)
    st.lists(st.integers(0, 60), max_size=4),   # paths removed
    st.lists(st.integers(0, 60), max_size=2)),  # paths whose rows are deleted
    max_size=25)


@given(start=st.integers(0, 40), commits=ACTIONS)
def test_stacked_files_are_the_files_a_plain_mapping_holds(start, commits):
    with mock.patch.object(stacked, "STACK_AT", 4), mock.patch.object(stacked, "COLLAPSE_FRACTION", 3):
        check_against_a_plain_mapping(start, commits)


def check_against_a_plain_mapping(start, commits):
    live = LiveFiles.of([add(i) for i in range(start)], DESCRIPTOR)
    model = dict(live.added)
    history = [(live, dict(model))]
    for revision, (adds, removes, deletes) in enumerate(commits, 1):
        vectors = [(f"data/{i}.parquet", DeletionVectorRef(1, f"dv{revision}".encode())) for i in deletes]
        live = live.apply([add(i, revision) for i in adds], [f"data/{i}.parquet" for i in removes], vectors)
        for i in removes:
            model.pop(f"data/{i}.parquet", None)
        for i in adds:
            model[f"data/{i}.parquet"] = add(i, revision)
        for path, vector in vectors:
            if path in model:
                model[path] = dataclasses.replace(model[path], deletes=model[path].deletes + (vector,))
        history.append((live, dict(model)))
    for files, want in history:  # every snapshot made on the way keeps its files
        assert dict(files.items()) == want and len(files) == len(want) and sorted(files) == sorted(want)
        assert list(files.values()) == [files[p] for p in files]
        for i in range(62):
            path = f"data/{i}.parquet"
            assert (path in files) == (path in want) and files.get(path) == want.get(path)


def test_a_mapping_is_shared_only_from_stack_at_files():
    small = stacked.FilesEdit(MappingProxyType({f.path: f for f in map(add, range(3))}))
    small["data/9.parquet"] = add(9)
    assert isinstance(small.done(), MappingProxyType)
