"""Compaction and the table services converge a dataset whose partition strategy changed to
its current spec: files of older specs are rewritten into it, no row changes."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor
from cdkds.catalog.errors import InvalidDescriptorError
from tests.catalog.services.conftest import memory_repo

SCHEMA = {"type": "record", "name": "E", "fields": [
    {"name": "id", "type": "long"}, {"name": "userId", "type": "long"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}}]}
START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def batch(first: int, count: int) -> pa.Table:
    ids = list(range(first, first + count))
    return pa.table({"id": ids, "userId": [i % 13 for i in ids],
                     "ts": pa.array([START + dt.timedelta(days=3 * i) for i in ids], pa.timestamp("us", "UTC"))})


def sorted_rows(ds, version: int | None = None) -> list[dict]:
    table = (ds if version is None else ds.repository.load(ds.name, version=version)).to_table()
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def write(ds, table: pa.Table, **options) -> None:
    with ds.writer(**options) as w:
        w.write_batch(table)


def evolved(properties: dict | None = None):
    """A dataset written under hash(userId, 4) (spec 0), then month(ts) (spec 1)."""
    repo = memory_repo()
    ds = repo.create("events", DatasetDescriptor(SCHEMA, "hash(userId, 4)",
                                                 properties={"services.inline": "false", **(properties or {})}))
    write(ds, batch(0, 40))
    write(ds, batch(40, 20))
    ds.alter().partition_by("month(ts)").commit()
    write(ds, batch(60, 30))
    return ds


def revisions_keep_rows(ds, before: dict[int, list[dict]]) -> None:
    for version, rows in before.items():
        assert sorted_rows(ds, version) == rows, version
    assert sorted_rows(ds) == before[max(before)]


def test_compact_rewrites_older_specs_into_the_current_one():
    ds = evolved()
    before = {v: sorted_rows(ds, v) for v in range(ds.version + 1)}
    assert {f.spec_id for f in ds.files} == {0, 1}
    revision = ds.compact()
    assert revision is not None
    assert {f.spec_id for f in ds.files} == {1}
    assert all(set(f.partition) == {"month"} for f in ds.files)
    revisions_keep_rows(ds, before)
    ds.compact()  # may merge the month files the first wrote beside those of spec 1
    assert {f.spec_id for f in ds.files} == {1}
    assert ds.services_plan().outdated == ()


def test_compact_where_picks_old_files_by_their_own_spec():
    ds = evolved()
    before = sorted_rows(ds)
    ds.compact(where="userId = 3")  # spec 0 files of userId's bucket; spec 1 files may hold it too
    assert sorted_rows(ds) == before
    left = [f for f in ds.files if f.spec_id == 0]
    assert len({f.partition["userId_hash"] for f in left}) == 3  # the other buckets' old files stay


def test_maintain_converges_and_says_why():
    ds = evolved()
    before = {v: sorted_rows(ds, v) for v in range(ds.version + 1)}
    plan = ds.services_plan()
    assert any(r.startswith("partition spec 0") for r in plan.reasons)
    assert any("of partition spec 0" in line and "rewrite them into it" in line for line in plan.describe())
    report = ds.maintain()
    assert report.revisions
    assert {f.spec_id for f in ds.files} == {1}
    revisions_keep_rows(ds, before)
    assert not any("partition spec" in line for line in ds.services_plan().describe())


def test_maintain_within_a_budget_takes_older_files_a_budget_at_a_time():
    ds = evolved({"services.file.size": "8k"})  # groups of about 8k
    rows = sorted_rows(ds)
    old = [f for f in ds.files if f.spec_id == 0]
    report = ds.maintain(budget=min(g.bytes for g in ds.services_plan().groups))
    assert report.left and report.revisions
    assert 0 < sum(f.spec_id == 0 for f in ds.files) < len(old)
    assert sorted_rows(ds) == rows


def test_inline_passes_rewrite_older_files_after_any_write(inline_services):
    ds = evolved({"services.inline": "true"})  # the write after the change touched no old file
    assert {f.spec_id for f in ds.refresh().files} == {1}
    assert ds.history()[-1].info["reasons"] == ["partition spec 0"]
    assert sorted_rows(ds) == batch(0, 90).to_pylist()


def test_the_switch_leaves_older_files_and_says_so():
    ds = evolved({"services.partition.specs": "false"})
    plan = ds.services_plan()
    assert not any(r.startswith("partition spec") for r in plan.reasons)
    assert any("left (services.partition.specs is false)" in line for line in plan.describe())
    ds.maintain()
    assert 0 in {f.spec_id for f in ds.files}


def test_a_bad_switch_value_is_refused_naming_it():
    with pytest.raises(InvalidDescriptorError, match="services.partition.specs.*'sometimes'"):
        DatasetDescriptor(SCHEMA, "hash(userId, 4)", properties={"services.partition.specs": "sometimes"})
