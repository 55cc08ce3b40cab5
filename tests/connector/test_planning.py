"""The source's planner without a Spark job: input partitions carry their files column-wise
(pickled as Arrow rows) and an executor reading them gets the rows of the plan."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.expressions import as_expression
from cdkds.catalog.read.scan import FileScanTasks
from cdkds.connector.options import FallbackFiles, location
from cdkds.connector.source import CdkdsReader, open_dataset, read_schema

SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "p", "type": "long"}, {"name": "v", "type": ["null", "string"]}]}


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("planning")
    ds = DatasetRepository(f"file://{root}").create("t", DatasetDescriptor(SCHEMA, "identity(p)"))
    for i in range(4):
        with ds.writer() as w:
            w.write_batch(pa.table({"id": range(i * 100, i * 100 + 100), "p": [j % 5 for j in range(100)],
                                    "v": [None if j % 7 == 0 else str(j) for j in range(100)]}))
    ds.delete("id = 3")  # a tombstone the executor applies
    return f"file://{root}/t"


def _reader(url: str, where: str | None, parallelism: int = 3) -> CdkdsReader:
    where_ = location({"path": url})
    schema = read_schema(open_dataset(where_), None, {})
    return CdkdsReader(where_, None, None, as_expression(where, "t"), schema, 128 * 1024 * 1024, 1000, parallelism)


def _rows(reader: CdkdsReader) -> list[tuple]:
    out = []
    for partition in reader.partitions():
        shipped = pickle.loads(pickle.dumps(partition))  # as Spark sends it to an executor
        out += [tuple(r.values()) for b in reader.read(shipped) for r in b.to_pylist()]
    return sorted(out)


@pytest.mark.parametrize("where", [None, "p = 1", "p in (0, 3) and id > 150", "id = 3"])
def test_partitions_carry_their_files_column_wise_and_read_the_plans_rows(lake, where):
    reader = _reader(lake, where)
    partitions = reader.partitions()
    assert all(isinstance(p.tasks, FileScanTasks) for p in partitions)
    expected = sorted(tuple(r.values()) for r in open_dataset(location({"path": lake})).to_table(where).to_pylist())
    assert _rows(reader) == expected and (where == "id = 3") == (not expected)


def test_a_read_restricted_to_fallback_files_reads_those_files(lake):
    ds = open_dataset(location({"path": lake}))
    plan = ds.plan("p = 2")
    kept = [t.file for t in plan.tasks][:2]
    reader = _reader(lake, "p = 2")
    reader.only = FallbackFiles(ds.version, plan.now, frozenset(f.path for f in kept))
    assert sum(len(p.tasks) for p in reader.partitions()) == 2
    expected = sorted(tuple(r.values()) for r in ds.to_table("p = 2").to_pylist() if any(
        r["id"] // 100 == f.revision - 1 for f in kept))
    assert _rows(reader) == expected


@pytest.fixture(scope="module")
def changed_lake(tmp_path_factory):
    """Files of three partition specs: identity(p), then hash(id, 3) under another name, then
    range(id, 50) as p_copy (p_copy names another function)."""
    root = tmp_path_factory.mktemp("planning-specs")
    ds = DatasetRepository(f"file://{root}").create("t", DatasetDescriptor(
        SCHEMA, "identity(p)", properties={"checkpoint.partFiles": "3"}))
    for i, strategy in enumerate(["hash(id, 3)", "range(id, 50) as p_copy", None]):
        with ds.writer() as w:
            w.write_batch(pa.table({"id": range(i * 100, i * 100 + 30), "p": [j % 5 for j in range(30)],
                                    "v": [str(j % 4) for j in range(30)]}))
        ds.checkpoint()
        if strategy:
            ds.alter().partition_by(strategy).commit()
    ds.delete("id = 3 or id = 203")
    return f"file://{root}/t"


@pytest.mark.parametrize("where", [None, "p = 1", "v = '2'", "p in (0, 3) and id > 15", "id = 3", "id = 107",
                                   "v = '1' or p = 4"])
def test_partitions_of_files_of_several_specs_read_the_plans_rows(changed_lake, where):
    ds = open_dataset(location({"path": changed_lake}))
    assert {f.spec_id for f in ds.files} == {0, 1, 2}
    everything = ds.to_table().to_pylist()
    expected = sorted(tuple(r.values()) for r in ds.to_table(where).to_pylist())
    if where is not None:
        assert expected == sorted(tuple(r.values()) for r in everything if _holds(where, r))
    assert _rows(_reader(changed_lake, where)) == expected


def _holds(where: str, row: dict) -> bool:
    from cdkds.catalog.expressions import bind, evaluate, parse
    return evaluate(bind(parse(where), _FIELDS), row) is True


_FIELDS = DatasetDescriptor(SCHEMA).fields
