"""Several writer processes on one dataset (local files and S3), and overwrite, delete and
compaction racing appends: every commit lands once in a gap-free chain, or the loser
gets CommitConflictError and nothing of it is visible."""

import json
import multiprocessing
import os
import threading
import time

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import CommitConflictError
from tests.conftest import new_bucket, s3_options

SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "writer", "type": "long"}, {"name": "g", "type": "string"}]}
WRITERS = 8
COMMITS_EACH = int(os.environ.get("CDKDS_COMMITS_PER_WRITER", "5"))


def _writer_process(url, options, index, rows, barrier):
    ds = DatasetRepository(url, options).load("t")
    barrier.wait()
    for k in range(COMMITS_EACH):
        start = (index * COMMITS_EACH + k) * rows
        with ds.writer() as w:
            w.write_batch(pa.table({"id": list(range(start, start + rows)), "writer": [index] * rows,
                                    "g": ["abc"[i % 3] for i in range(rows)]}))


def _run_writers(url, options):
    repo = DatasetRepository(url, options)
    repo.create("t", DatasetDescriptor(SCHEMA, "identity(g)"))
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(WRITERS)
    processes = [context.Process(target=_writer_process, args=(url, options, i, 10, barrier)) for i in range(WRITERS)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(300)
    assert [p.exitcode for p in processes] == [0] * WRITERS
    ds = repo.load("t")
    history = ds.history()
    raw = [json.loads(ds.store.read(f"_log/{h.revision:020d}.json")) for h in history]
    assert ds.version == WRITERS * COMMITS_EACH and [h.revision for h in history] == list(range(ds.version + 1))
    assert all(raw[i]["previous"] == raw[i - 1]["uuid"] for i in range(1, len(raw)))
    assert len({c["uuid"] for c in raw}) == len(raw)  # every commit landed exactly once
    ids = sorted(r["id"] for r in ds.reader())
    assert ids == list(range(WRITERS * COMMITS_EACH * 10))
    print("CONCURRENCY", json.dumps({"backend": url.split(":")[0], "writers": WRITERS,
                                     "commits_landed": ds.version, "rows": len(ids)}))


@pytest.mark.slow
def test_eight_writer_processes_on_local_files(tmp_path):
    _run_writers(f"file://{tmp_path}/lake", {})


@pytest.mark.slow
def test_eight_writer_processes_on_s3(s3_endpoint):
    _run_writers(f"s3://{new_bucket(s3_endpoint)}/lake", s3_options(s3_endpoint))


RACES = ["overwrite", "delete", "compact", "overwrite_partitions"]


@pytest.mark.parametrize("operation", RACES)
def test_operations_racing_appends_are_serialisable_or_conflict(repo, operation):
    """Half the time the operation is planned before the append commits (so it must conflict
    or be serialisable after it), half the time after."""
    outcomes = {"conflict": 0, "committed": 0}
    for trial in range(6):
        name = f"t{trial}"
        ds = repo.create(name, DatasetDescriptor(SCHEMA, "identity(g)"))
        for k in range(3):
            with ds.writer() as w:
                w.write_batch(pa.table({"id": [k], "writer": [0], "g": ["a"]}))
        before = sorted(r["id"] for r in ds.reader())
        racer = repo.load(name)
        appender = repo.load(name)
        barrier = threading.Barrier(2)
        errors: dict[str, BaseException] = {}

        def do_append():
            barrier.wait()
            with appender.writer() as w:
                w.write_batch(pa.table({"id": [100], "writer": [1], "g": ["a"]}))

        def do_operation():
            barrier.wait()
            try:
                if operation == "overwrite":
                    with racer.writer(mode="overwrite") as w:
                        w.write_batch(pa.table({"id": [200], "writer": [2], "g": ["a"]}))
                elif operation == "overwrite_partitions":
                    with racer.writer(mode="overwrite_partitions") as w:
                        w.write_batch(pa.table({"id": [200], "writer": [2], "g": ["a"]}))
                elif operation == "delete":
                    racer.delete("id >= 0")
                else:
                    racer.compact()
            except CommitConflictError as e:
                errors["op"] = e

        threads = [threading.Thread(target=do_append), threading.Thread(target=do_operation)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        after = sorted(r["id"] for r in repo.load(name).reader())
        history = [h.operation for h in repo.load(name).history()][4:]
        if "op" in errors:
            outcomes["conflict"] += 1
            assert history == ["append"] and after == sorted(before + [100])  # nothing of the loser visible
            continue
        outcomes["committed"] += 1
        applied = {
            "overwrite": {"append": [200], "op_first": [100, 200]},
            "overwrite_partitions": {"append": [200], "op_first": [100, 200]},
            "delete": {"append": [], "op_first": [100]},
            "compact": {"append": sorted(before + [100]), "op_first": sorted(before + [100])},
        }[operation]
        # serialisable: the result equals running them one after the other in log order
        expected = applied["append"] if history[0] == "append" else applied["op_first"]
        assert after == expected, (history, after)
    assert sum(outcomes.values()) == 6


def _stale_writer_process(url, index, rows, barrier, altered):
    barrier.wait()
    for k in range(COMMITS_EACH):
        if k == COMMITS_EACH - 1:
            altered.wait(120)  # the last append of each writer lands after a schema change, surely
        ds = DatasetRepository(url).load("t", version=0)  # planned on the first schema, whatever it is now
        start = (index * COMMITS_EACH + k) * rows
        with ds.writer() as w:
            w.write_batch(pa.table({"id": list(range(start, start + rows)), "writer": [index] * rows,
                                    "g": ["abc"[i % 3] for i in range(rows)]}))


@pytest.mark.slow
def test_appends_with_the_old_schema_racing_schema_changes_all_land(tmp_path):
    url = f"file://{tmp_path}/lake"
    repo = DatasetRepository(url)
    repo.create("t", DatasetDescriptor(SCHEMA, "identity(g)"))
    context = multiprocessing.get_context("spawn")
    writers = 4
    barrier, altered = context.Barrier(writers + 1), context.Event()
    processes = [context.Process(target=_stale_writer_process, args=(url, i, 10, barrier, altered))
                 for i in range(writers)]
    for p in processes:
        p.start()
    barrier.wait()
    changes = [lambda a: a.rename("writer", "w"), lambda a: a.add("note", "string"),
               lambda a: a.rename("g", "grp").move("grp", first=True), lambda a: a.drop("note")]
    while repo.load("t").version < 2:  # appends are landing
        time.sleep(0.01)
    for change in changes:
        change(repo.load("t").alter()).commit()
        altered.set()
    for p in processes:
        p.join(300)
    assert [p.exitcode for p in processes] == [0] * writers
    ds = repo.load("t")
    assert ds.version == writers * COMMITS_EACH + len(changes)
    operations = [h.operation for h in ds.history()]
    assert "append" in operations[operations.index("alter") + 1:]  # appends planned on revision 0 landed after
    rows = sorted(ds.to_table().to_pylist(), key=lambda r: r["id"])
    assert list(rows[0]) == ["grp", "id", "w"]
    assert [r["id"] for r in rows] == list(range(writers * COMMITS_EACH * 10))
    assert all(r["w"] == r["id"] // (COMMITS_EACH * 10) and r["grp"] == "abc"[r["id"] % 10 % 3] for r in rows)
    assert len(ds.plan(where="grp = 'a'").files) < len(ds.files)  # partition pruning on the renamed source
    assert all(set(f.statistics) == {"grp", "id", "w"} for f in ds.files)  # statistics follow the renames
