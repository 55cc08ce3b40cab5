"""``cdkds check``: the summary of a healthy dataset, the problems of a damaged one (exit 1, one
line on standard error), --json, and S3 (through the installed console script)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cdkds.catalog import DatasetRepository
from cdkds.catalog.log import commit_key
from tests.cli.running import run, run_script
from tests.cli.test_main import make
from tests.conftest import new_bucket


@pytest.fixture
def lake(tmp_path):
    make(DatasetRepository(f"file://{tmp_path}/lake"))  # sales/events: create, append (4 files), delete
    return f"file://{tmp_path}/lake"


def test_check_a_healthy_then_a_damaged_dataset(lake):
    url = f"{lake}/sales/events"
    done = run("check", url, "--read-data")
    assert done.stderr == ""
    assert done.stdout.startswith("checked revisions 0 to 2 of events: 3 commits, 0 checkpoints, 4 data files (")
    assert done.stdout.rstrip().endswith("KB), contents read: 0 problems")
    report = json.loads(run("check", url, "--json").stdout)
    assert report["ok"] and report["problems"] == [] and (report["commits"], report["data_files"]) == (3, 4)

    folder = Path(url.removeprefix("file://"))
    removed = sorted(folder.glob("data/*/*.parquet"))[0]
    removed.unlink()
    (folder / commit_key(2)).write_text('{"revision": 2')
    done = run("check", url, code=1)
    assert done.stderr == "error: check found 2 problems in dataset events\n"
    key = str(removed.relative_to(folder))
    flat = re.sub(r"[\s│]", "", done.stdout)  # a table cell may fold a long key
    for text in ("corrupt_commit", commit_key(2), "missing_file", key, "3commits", ":2problems", "cannotbeopened"):
        assert text in flat, text
    report = json.loads(run("check", url, "--json", code=1).stdout)
    assert [(p["kind"], p["object"]) for p in report["problems"]] == [("corrupt_commit", commit_key(2)),
                                                                      ("missing_file", key)]
    assert report["checked_revision"] == 1 and not report["ok"]

    done = run("check", f"{lake}/sales/nope", code=1)
    assert done.stderr.startswith("error: dataset 'nope' does not exist") and len(done.stderr.splitlines()) == 1


@pytest.mark.slow
def test_check_on_s3(s3_endpoint):
    root = f"s3://{new_bucket(s3_endpoint)}/lake"
    repo = DatasetRepository(root, {"client_kwargs": {"endpoint_url": s3_endpoint}})
    make(repo)
    options = ["--storage-option", f"client_kwargs.endpoint_url={s3_endpoint}", "--json"]
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    assert json.loads(run_script("check", f"{root}/sales/events", *options, "--read-data", env=env).stdout)["ok"]
    ds = repo.load("sales/events")
    path = ds.files[0].path
    ds.store.put(path, ds.store.read(path)[:-1])
    report = json.loads(run_script("check", f"{root}/sales/events", *options, env=env, code=1).stdout)
    assert [(p["kind"], p["object"]) for p in report["problems"]] == [("size_mismatch", path)]
