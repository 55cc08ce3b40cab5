"""A plan's tasks (``FileScanTasks``, made lazily from the files' columns) behave as the tuple
of tasks they stand for: equal, sliced, pickled."""

from __future__ import annotations

import pickle

import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"},
                                                      {"name": "s", "type": ["null", "string"], "default": None}]}


@pytest.fixture(scope="module")
def dataset():
    repo = DatasetRepository("memory://scan-tasks")
    ds = repo.create("t", DatasetDescriptor(SCHEMA, partition_strategy="identity(s)",
                                            properties={"checkpoint.partFiles": "2"}))
    for i, s in enumerate(["a", "b", None, "é", "c"]):
        with ds.writer() as w:
            w.write({"id": i, "s": s})
    ds.checkpoint()
    return repo.load("t")


def test_tasks_pickle_as_the_tasks_they_stand_for(dataset):
    tasks = dataset.plan("s >= 'b'").tasks
    shipped = pickle.loads(pickle.dumps(tasks))
    assert shipped == tasks and tuple(shipped) == tuple(tasks) and len(shipped) == 3


def test_tasks_slice_and_compare_as_a_tuple(dataset):
    tasks = dataset.plan().tasks
    made = tuple(tasks)
    assert tasks == made and made == tasks and list(tasks) == tasks
    assert tasks[1:3] == made[1:3] and tasks[-1] == made[-1] and tasks[::-1] == made[::-1]
