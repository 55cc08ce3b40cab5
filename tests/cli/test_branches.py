"""``cdkds branch`` and ``cdkds branches`` (issue 33 §2)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from tests.cli.running import run

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}


@pytest.fixture
def url(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("t", DatasetDescriptor(SCHEMA))
    with ds.writer() as w:
        w.write_batch(pa.table({"id": [1, 2]}))
    return f"file://{tmp_path}/lake/t"


def test_branch_branches_publish_and_drop(url, tmp_path):
    assert "started branch 'audit': revision 2" in run("branch", url, "audit").stdout
    done = json.loads(run("branch", url, "other", "--json").stdout)
    assert (done["branch"], done["revision"]) == ("other", 3)
    assert [line.split() for line in run("branches", url).stdout.splitlines()] == [["audit", "2"], ["other", "3"]]
    audit = DatasetRepository(f"file://{tmp_path}/lake").load("t", branch="audit")
    with audit.writer() as w:
        w.write_batch(pa.table({"id": [3]}))
    assert "published branch 'audit': revision 4" in run("branch", url, "audit", "--publish").stdout
    assert "dropped branch 'other': revision 5" in run("branch", url, "other", "--drop").stdout
    assert json.loads(run("branches", url, "--json").stdout) == {"dataset": "t", "branches": {}}
    assert "3 rows shown" in run("show", url).stdout
    assert "give --publish or --drop" in run("branch", url, "x", "--publish", "--drop", code=2).stderr
    assert "no branch 'nope'" in run("branch", url, "nope", "--publish", code=1).stderr
