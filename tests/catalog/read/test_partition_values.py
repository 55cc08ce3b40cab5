"""A data file that lacks the column of an identity partition function's source field reads
that field as the file's partition value (docs/FORMAT.md §8), on every read path: cdkds's
own reader, pyarrow's scanner, the lazy pyarrow dataset, reads by position, compaction and
the change feed (the Spark connector's: tests/connector/test_partition_values.py)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow.dataset as pads
import pytest

from cdkds.catalog import DatasetRepository
from cdkds.catalog.read.arrow_scan import native_plan
from cdkds.catalog.read.scan import read_plan, read_rows
from tests.catalog.convert.folders import sales

NZ1 = "country=NZ/day=2026-01-01/part-0.parquet"
EXPECTED = [(1, "NZ", dt.date(2026, 1, 1)), (2, "NZ", dt.date(2026, 1, 1)), (3, "NZ", dt.date(2026, 1, 1)),
            (4, "NZ", dt.date(2026, 1, 2)), (5, "AU", dt.date(2026, 1, 1)), (6, "AU", dt.date(2026, 1, 1))]


@pytest.fixture
def converted(tmp_path):
    sales(tmp_path)
    return DatasetRepository(f"file://{tmp_path}").convert("sales")


def triples(table) -> list[tuple]:
    return sorted((r["id"], r["country"], r["day"]) for r in table.to_pylist())


def test_cdkds_reader(converted):
    plan = converted.plan(columns=["id", "country", "day"])
    assert triples(_table(read_plan(converted.store, plan), plan)) == EXPECTED
    assert triples(_table(read_plan(converted.store, converted.plan("day = '2026-01-02'")),
                          converted.plan("day = '2026-01-02'"))) == [EXPECTED[3]]


def _table(batches, plan):
    import pyarrow as pa
    return pa.Table.from_batches(list(batches), schema=plan.output_schema)


def test_pyarrow_scanner(converted):
    plan = converted.plan(columns=["id", "country", "day"])
    native = native_plan(converted.store, plan)
    assert not native.fallback and native.native_files == 3  # pyarrow reads them, filling the columns itself
    assert triples(converted.to_table(columns=["id", "country", "day"])) == EXPECTED
    assert triples(converted.to_table("country = 'AU' and id > 5")) == [EXPECTED[5]]
    assert triples(converted.to_batch_reader(batch_rows=1).read_all()) == EXPECTED


def test_lazy_pyarrow_dataset(converted):
    dataset = converted.to_arrow_dataset()
    parts = dataset.children if isinstance(dataset, pads.UnionDataset) else [dataset]
    assert sum(len(p.files) for p in parts if isinstance(p, pads.FileSystemDataset)) == 3  # all lazy
    assert triples(dataset.to_table()) == EXPECTED
    import pyarrow.compute as pc
    assert triples(dataset.to_table(filter=pc.field("country") == "AU")) == EXPECTED[4:]
    assert triples(converted.to_arrow_dataset("day = '2026-01-02'").to_table()) == [EXPECTED[3]]


def test_reads_by_position(converted):
    add = next(f for f in converted.files if f.path == NZ1)
    table = read_rows(converted.store, converted.descriptor, add, np.array([0, 2]), ["id", "country", "day"])
    assert triples(table) == [EXPECTED[0], EXPECTED[2]]


def test_compaction_writes_the_partition_values_into_the_new_files(converted):
    with converted.writer() as w:
        w.write({"id": 7, "amount": 7.0, "note": "g", "country": "NZ", "day": dt.date(2026, 1, 1)})
    converted.compact()
    assert not any(f.path == NZ1 for f in converted.files)
    assert triples(converted.to_table()) == sorted([*EXPECTED, (7, "NZ", dt.date(2026, 1, 1))])
    rewritten = converted.store.path(next(f.path for f in converted.files
                                          if f.partition == {"country_copy": "NZ", "day_copy": dt.date(2026, 1, 1)}))
    assert pads.dataset(rewritten).to_table().column("country").to_pylist() == ["NZ"] * 4
    assert not converted.check(read_data=True).problems


def test_change_feed(converted):
    converted.delete("country = 'NZ' and day = '2026-01-01' and id = 2")
    converted.compact(where="country = 'NZ'")
    changes = converted.changes(1).read_all().to_pylist()
    deleted = [(c["id"], c["country"], c["day"]) for c in changes if c["_change_type"] == "delete"]
    assert deleted == [EXPECTED[1]]


@pytest.mark.parametrize("strategy", ["hash(id, 2)", None, "identity(note) as country_copy"])
def test_files_of_a_past_spec_read_their_own_partition_values(converted, strategy):
    """After the partition strategy changes, the converted files (of spec 0) still read their
    missing columns from their own spec's identity functions, on every read path; a later
    spec that reuses a partition name for another source does not lend them its."""
    converted.alter().partition_by(strategy).commit()
    assert converted.descriptor.has_past_specs
    plan = converted.plan(columns=["id", "country", "day"])
    assert triples(_table(read_plan(converted.store, plan), plan)) == EXPECTED
    assert triples(converted.to_table(columns=["id", "country", "day"])) == EXPECTED
    assert triples(converted.to_table("country = 'AU' and id > 5")) == [EXPECTED[5]]
    assert triples(converted.to_arrow_dataset().to_table()) == EXPECTED
    add = next(f for f in converted.files if f.path == NZ1)
    table = read_rows(converted.store, converted.descriptor, add, np.array([0, 2]), ["id", "country", "day"])
    assert triples(table) == [EXPECTED[0], EXPECTED[2]]
    assert not converted.check(read_data=True).problems
