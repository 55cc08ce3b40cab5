"""Keyed writes under concurrency and crashes: never a duplicate key, never a lost update."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest

from cdkds.catalog import DatasetRepository
from tests.catalog.keyed.conftest import state, user, users_descriptor
from tests.conftest import new_bucket, s3_options

WRITERS = 4
ROUNDS = 6
KEYS = 12


def _upserter(url, options, writer, barrier):
    ds = DatasetRepository(url, options).load("users")
    barrier.wait()
    for r in range(ROUNDS):
        # overlapping keys: every writer writes every key; the ordering value decides
        ds.upsert([user("nz", k, r * 10 + writer, f"w{writer}r{r}") for k in range(KEYS)])
        if r % 2:
            ds.delete_keys([{"tenant": "nz", "userId": KEYS + writer, "updatedAt": user("nz", 0, r)["updatedAt"]}])
        ds.upsert([user("au", writer * 100 + r, 0)])  # disjoint keys


def _race(url, options):
    repo = DatasetRepository(url, options)
    repo.create("users", users_descriptor(**{"index.compaction.deltas": "3"}))
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(WRITERS)
    processes = [context.Process(target=_upserter, args=(url, options, w, barrier)) for w in range(WRITERS)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(300)
        assert p.exitcode == 0
    ds = repo.load("users")
    s = state(ds)  # fails on a duplicate key
    last = ROUNDS - 1
    winner = max(range(WRITERS))  # the greatest ordering value of the last round
    for k in range(KEYS):
        assert s[("nz", k)][0] == f"w{winner}r{last}"
    assert {k for k in s if k[0] == "au"} == {("au", w * 100 + r) for w in range(WRITERS) for r in range(ROUNDS)}
    found = ds.get_many(list(s))
    assert found.num_rows == len(s)


@pytest.mark.slow
def test_upserting_processes_on_local_files(tmp_path):
    _race(f"file://{tmp_path}/lake", {})


@pytest.mark.slow
def test_upserting_processes_on_s3(s3_endpoint):
    _race(f"s3://{new_bucket(s3_endpoint)}/lake", s3_options(s3_endpoint))


def _forever(url):
    ds = DatasetRepository(url).load("users")
    r = 0
    while True:
        r += 1
        ds.upsert([user("nz", k, r, f"r{r}") for k in range(50)])


@pytest.mark.slow
def test_a_killed_upsert_leaves_the_last_commit(tmp_path):
    url = f"file://{tmp_path}/lake"
    repo = DatasetRepository(url)
    repo.create("users", users_descriptor(**{"index.compaction.deltas": "2"}))
    context = multiprocessing.get_context("spawn")
    for delay in (0.1, 0.5, 1.0):
        before = repo.load("users").version
        p = context.Process(target=_forever, args=(url,))
        p.start()
        # killed a while after its first commit: its start-up alone takes seconds on a loaded machine
        deadline = time.monotonic() + 120
        while repo.load("users").version == before and p.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(delay)
        os.kill(p.pid, signal.SIGKILL)
        p.join()
        ds = repo.load("users")
        s = {k: v for k, v in state(ds).items() if k[0] == "nz"}
        assert len(s) == 50 and len({v[0] for v in s.values()}) == 1  # one commit's rows, whole
        got = ds.get_many([("nz", k) for k in range(50)])
        assert got.num_rows == 50 and set(got.column("email").to_pylist()) == {next(iter(s.values()))[0]}
        ds.upsert([user("au", int(delay * 10), 0, "after")])  # the dataset still takes writes
        assert ds.get(("au", int(delay * 10)))["email"] == "after"
        leftovers = ds.vacuum(retention=__import__("datetime").timedelta(0), dry_run=True, force=True)
        # a kill leaves uncommitted files and, when it lands inside a conditional create of a log
        # entry, that create's temporary file: vacuum collects both, nothing committed goes
        assert all(k.startswith(("data/", "_index/", "_deletes/")) or _log_temporary(k) for k in leftovers), leftovers
        ds.vacuum(retention=__import__("datetime").timedelta(0), dry_run=False, force=True)
        assert state(repo.load("users")) == state(ds)


def _log_temporary(key):
    name = key.rsplit("/", 1)[-1]
    return key.startswith("_log/") and name.startswith(".") and name.endswith(".tmp")
