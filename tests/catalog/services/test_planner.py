"""What a pass would do: the plan, its share within a budget, and its description."""

from __future__ import annotations

from cdkds.catalog import DatasetDescriptor
from tests.catalog.services.conftest import TINY

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "string"}]}


def _small_files(repo, name="d", count=4, props=None):
    ds = repo.create(name, DatasetDescriptor(SCHEMA, properties={**TINY, "services.inline": "false", **(props or {})}))
    for i in range(count):
        with ds.writer() as w:
            w.write({"id": 2 * i, "v": "x" * 10})
            w.write({"id": 2 * i + 1, "v": "y" * 10})
    return ds


def test_a_plan_within_a_budget_keeps_what_it_leaves_and_its_counts(mem_repo):
    ds = _small_files(mem_repo)
    ds.delete("id = 0")  # a tombstone
    whole = ds.services_plan()
    assert whole.groups and whole.tombstoned == 1
    share = whole.within(0)
    assert not share.groups and not share.buckets
    assert share.left and share.tombstoned == whole.tombstoned and share.next_checkpoint == whole.next_checkpoint
    assert (share.expire_log, share.vacuum) == (False, False)
    assert any("nothing to do" in line for line in share.describe())
    assert whole.within(None) is whole and whole.within(whole.bytes).groups == whole.groups


def test_a_pass_reports_the_work_over_its_budget(mem_repo):
    ds = _small_files(mem_repo)
    report = ds.maintain(budget=1)
    assert not report.revisions and report.left, report
    assert "left for later" in report.summary()
    report = ds.maintain()
    assert report.revisions and not report.left
