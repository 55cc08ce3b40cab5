"""A process forked while another of its threads is inside a cache of the keyed read path
(index footers, deleted positions, data-file footers) looks keys up: the child has none
of the parent's threads, so a lock one of them held must not stay held in the child."""

from __future__ import annotations

import os
import threading
import time

import pytest

from cdkds.catalog import DatasetRepository
from cdkds.catalog.keyed import caches
from cdkds.formats import parquet
from tests.catalog.keyed.conftest import user, users_descriptor


@pytest.mark.slow
@pytest.mark.parametrize("cache", ["index footers", "deleted positions", "data footers"])
def test_a_child_forked_while_a_thread_holds_a_cache_looks_keys_up(tmp_path, cache):
    ds = DatasetRepository(f"file://{tmp_path}").create("d", users_descriptor(**{"index.buckets": "1"}))
    ds.upsert([user("nz", i, 1) for i in range(100)])
    ds.delete_keys([("nz", 1)])  # a deletion vector: get() reads the deleted positions
    lock = {"index footers": caches.FOOTERS, "deleted positions": caches.DELETED,
            "data footers": parquet.FOOTERS}[cache]._lock
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait()

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait()
    pid = os.fork()
    if pid == 0:  # the child: no pytest from here on
        try:
            fresh = DatasetRepository(f"file://{tmp_path}").load("d")
            os._exit(0 if fresh.get(("nz", 5))["userId"] == 5 and fresh.get(("nz", 1)) is None else 1)
        finally:
            os._exit(2)
    release.set()
    thread.join()
    deadline = time.time() + 30
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail(f"the child hung on the {cache} cache's lock")
