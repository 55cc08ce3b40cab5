"""What the maintenance commands say is what they did (issue 25 item 12): ``cdkds compact``
counts the files its commit rewrote and wrote, as the history shows them."""

from __future__ import annotations

import json

import pyarrow as pa

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from tests.cli.running import run

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "p", "type": "long"}]}


def test_compact_reports_the_files_its_commit_rewrote(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("t", DatasetDescriptor(SCHEMA, "identity(p)"))
    with ds.writer() as w:
        w.write_batch(pa.table({"id": [1, 2, 3, 4], "p": [0, 0, 1, 1]}))  # a file per partition
    ds.delete("id = 1")  # only partition 0's file has a delete to apply
    url = f"file://{tmp_path}/lake/t"
    out = run("compact", url).stdout
    entry = repo.load("t").history()[-1]
    assert (entry.operation, entry.removed_files, entry.added_files) == ("compact", 1, 1)
    assert "compacted 1 file into 1: revision 3" in out
    ds.delete("id = 3")
    done = json.loads(run("compact", url, "--json").stdout)
    entry = repo.load("t").history()[-1]
    assert (done["files_rewritten"], done["files_written"]) == (entry.removed_files, entry.added_files) == (1, 1)
    assert (done["files_before"], done["files_after"]) == (2, 2)  # the dataset's, not the commit's
    assert repo.load("t").check(read_data=True).ok
