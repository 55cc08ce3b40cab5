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
    assert "compacted 1 file into 1 (2 rows into 1): revision 3" in out
    ds.delete("id = 3")
    done = json.loads(run("compact", url, "--json").stdout)
    entry = repo.load("t").history()[-1]
    assert (done["files_rewritten"], done["files_written"]) == (entry.removed_files, entry.added_files) == (1, 1)
    assert (done["files_before"], done["files_after"]) == (2, 2)  # the dataset's, not the commit's
    assert (done["rows_rewritten"], done["rows_written"]) == (2, 1)
    assert repo.load("t").check(read_data=True).ok


def test_delete_reports_the_rows_and_files_it_deleted(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("t", DatasetDescriptor(SCHEMA, "identity(p)"))
    with ds.writer() as w:
        w.write_batch(pa.table({"id": range(10), "p": [i % 3 for i in range(10)]}))  # 4, 3 and 3 rows
    ds.delete("id = 0")
    url = f"file://{tmp_path}/lake/t"
    # partition 0's file goes whole (its row id 0 already tombstoned), partition 1's loses one row
    done = json.loads(run("delete", url, "--where", "p = 0 or id = 4", "--json").stdout)
    assert (done["deleted_rows"], done["files"], done["revision"]) == (4, 2, 3)
    assert sorted(r["id"] for r in json.loads(run("show", url, "--json").stdout)) == [1, 2, 5, 7, 8]
    assert run("delete", url, "--where", "id = 1").stdout.strip() == "deleted 1 row in 1 file: revision 4"
    # a row already deleted: the statistics cannot rule the file out, so a tombstone is committed
    assert run("delete", url, "--where", "id = 1").stdout.strip() == "deleted 0 rows in 0 files: revision 5"
    assert run("delete", url, "--where", "p = 7").stdout.strip() == "deleted 0 rows in 0 files: nothing to do"


def test_delete_and_history_count_the_rows_of_a_keyed_dataset(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("u", DatasetDescriptor(SCHEMA, "hash(id, 2)", record_key=["id"]))
    ds.upsert([{"id": i, "p": i} for i in range(20)])
    ds.upsert([{"id": i, "p": -i} for i in range(5)])  # deletion vectors mark the 5 replaced rows
    url = f"file://{tmp_path}/lake/u"
    done = json.loads(run("delete", url, "--where", "p >= 10 or id = 0", "--json").stdout)
    assert (done["deleted_rows"], done["revision"]) == (11, 3)
    assert [h["removed_rows"] for h in json.loads(run("history", url, "--json").stdout)] == [0, 0, 5, 11]
    assert len(json.loads(run("show", url, "--limit", "100", "--json").stdout)) == 9
