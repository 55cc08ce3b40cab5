"""``cdkds tag`` and ``cdkds tags`` (issue 33 §2); vacuum and expire-log say what they kept for a tag."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from tests.cli.running import run, run_script

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}


@pytest.fixture
def url(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("t", DatasetDescriptor.builder().schema(SCHEMA).property("checkpoint.interval", "3").build())
    for i in range(3):
        with ds.writer() as w:
            w.write_batch(pa.table({"id": [i]}))
    return f"file://{tmp_path}/lake/t"


def test_tag_tags_and_untag(url):
    assert "tagged revision 3 'q3': revision 4" in run("tag", url, "q3").stdout
    done = json.loads(run("tag", url, "first", "--version", "1", "--json").stdout)
    assert (done["tag"], done["tagged"], done["revision"]) == ("first", 1, 5)
    assert [line.split() for line in run("tags", url).stdout.splitlines()] == [["first", "1"], ["q3", "3"]]
    assert json.loads(run("tags", url, "--json").stdout) == {"dataset": "t", "tags": {"first": 1, "q3": 3}}
    assert "1 rows shown (revision 1" in run("show", url, "--tag", "first").stdout
    assert "untagged 'first' (revision 1): revision 6" in run("tag", url, "first", "--delete").stdout
    assert [line.split() for line in run("tags", url).stdout.splitlines()] == [["q3", "3"]]
    assert "give --version or --delete" in run("tag", url, "x", "--version", "1", "--delete", code=2).stderr


def test_vacuum_and_expire_log_say_what_they_kept_for_a_tag(url):
    run("tag", url, "q3")
    for i in range(3):  # revisions 5 to 7; expiry keeps checkpoint 6, whose state still holds id 2's file
        run("delete", url, "--where", f"id = {i}")
    assert "kept checkpoint 3 and the parts it names for tag 'q3'" in \
        run("expire-log", url, "--older-than", "0s", "--force").stdout
    out = run("vacuum", url, "--retention", "0s", "--force").stdout
    assert "kept 2 file(s) live at revision 3 for tag 'q3'" in out and "would delete 0 files" in out
    assert json.loads(run("vacuum", url, "--retention", "0s", "--force", "--json").stdout)["kept"] == [
        "kept 2 file(s) live at revision 3 for tag 'q3'"]


@pytest.mark.slow
def test_the_script_reports_a_bad_tag_in_one_line(url):
    run_script("tag", url, "q3")
    err = run_script("tag", url, "q3", code=1).stderr
    assert err == "error: dataset 't': tag 'q3' exists already (revision 3); untag it first to move it\n"
    err = run_script("tag", url, "nope", "--delete", code=1).stderr
    assert err == "error: dataset 't' has no tag 'nope' (its tags: 'q3')\n"
