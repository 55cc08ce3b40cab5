"""A program that used cdkds exits cleanly: every public entry point, run in fresh
interpreters, ends with exit code 0 — also when a scan is left unfinished.

Before issue 25.8 a script that printed a keyed dataset's ``check()`` aborted as it exited
("terminate called without an active exception", exit code 134) in about one run of ten:
Arrow's threads were still releasing Python objects (files read through ``pq.read_table``)
or reading for the read-ahead's daemon threads while the interpreter tore down.

Each trial is a fresh subprocess (the abort happens only at interpreter exit); all trials
of all entry points run two at a time. ``CDKDS_EXIT_TRIALS`` sets the trials per entry
point (default 4, about 30 s on 2 cores; 200 for the run reported in docs/RELIABILITY.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository

TRIALS = int(os.environ.get("CDKDS_EXIT_TRIALS", "4"))
PARALLEL = 2
CDKDS = str(Path(sys.executable).with_name("cdkds"))

SCHEMA = {"type": "record", "name": "Event", "fields": [
    {"name": "k", "type": "long"}, {"name": "t", "type": "long"}, {"name": "text", "type": "string"}]}

# one run of an entry point; the interpreter then exits by itself (no sys.exit, no os._exit)
PROGRAM = """
import sys
from cdkds.catalog import DatasetRepository

repo = DatasetRepository(sys.argv[1])
what = sys.argv[2]
if what == "check":
    print(repo.load("keyed").check())
elif what == "check_read_data":
    print(repo.load("keyed").check(read_data=True).problems)
elif what == "scan":
    print(sum(b.num_rows for b in repo.load("events").scan()))
elif what == "scan_unfinished":
    scan = repo.load("events").scan(batch_rows=1000)  # held to the end, never closed
    print(next(scan).num_rows)
elif what == "batch_reader_unfinished":
    reader = repo.load("events").to_batch_reader(batch_rows=1000)
    print(reader.read_next_batch().num_rows)
elif what == "to_table":
    print(repo.load("events").to_table().num_rows, repo.load("keyed").to_table().num_rows)
elif what == "get":
    print(repo.load("keyed").get({"k": 7}))
elif what == "upsert":
    print(repo.load("written").upsert([{"k": k, "t": 1, "text": "x"} for k in range(0, 2000, 7)]))
"""

ENTRY_POINTS = ["check", "check_read_data", "scan", "scan_unfinished", "batch_reader_unfinished", "to_table",
                "get", "upsert", "cli_check", "cli_show"]


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> str:
    """A plain dataset of a few MB in several files (the read-ahead runs), and keyed ones
    with index deltas and deletion vectors."""
    url = f"file://{tmp_path_factory.mktemp('exit')}/lake"
    repo = DatasetRepository(url)
    events = repo.create("events", DatasetDescriptor(SCHEMA))
    for part in range(6):
        n = 60_000
        with events.writer() as w:
            w.write_batch(pa.table({"k": pa.array(range(part * n, (part + 1) * n), pa.int64()),
                                    "t": pa.array([part] * n, pa.int64()),
                                    "text": [f"row {i} of part {part}" for i in range(n)]}))
    for name in ("keyed", "written"):
        keyed = repo.create(name, DatasetDescriptor(SCHEMA, record_key=["k"], ordering_field="t",
                                                    properties={"index.buckets": "16"}))
        for t in range(4):
            keyed.upsert(pa.table({"k": pa.array(range(t * 500, t * 500 + 1000), pa.int64()),
                                   "t": pa.array([t] * 1000, pa.int64()), "text": [f"v{t}"] * 1000}))
        keyed.delete_keys([{"k": k, "t": 10} for k in range(0, 300, 3)])
    return url


def _command(lake: str, what: str) -> list[str]:
    if what == "cli_check":
        return [CDKDS, "check", f"{lake}/keyed"]
    if what == "cli_show":  # a scan left unfinished after 5 rows
        return [CDKDS, "show", f"{lake}/events", "--limit", "5"]
    return [sys.executable, "-c", PROGRAM, lake, what]


def _run(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def exits(lake: str, trials: int) -> dict[str, list[subprocess.CompletedProcess]]:
    """The runs of each entry point that did not exit with 0, of ``trials`` each."""
    jobs = [what for what in ENTRY_POINTS for _ in range(trials)]
    with ThreadPoolExecutor(PARALLEL) as pool:
        runs = list(pool.map(lambda what: _run(_command(lake, what)), jobs))
    return {what: [r for w, r in zip(jobs, runs) if w == what and r.returncode != 0] for what in ENTRY_POINTS}


@pytest.mark.slow
def test_every_entry_point_exits_cleanly(lake):
    failed = {what: runs for what, runs in exits(lake, TRIALS).items() if runs}
    assert not failed, "; ".join(f"{len(runs)} of {TRIALS} runs of {what} failed, first with exit code "
                                 f"{runs[0].returncode}: {runs[0].stderr[-1500:]}" for what, runs in failed.items())
