"""A service pass killed (SIGKILL) in the middle of its rewrite leaves a dataset that reads
the same rows and checks clean; vacuum removes what it left."""

from __future__ import annotations

import datetime as dt
import multiprocessing
import os
import signal
import time

import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from tests.catalog.keyed.conftest import state, user, users_descriptor
from tests.catalog.services.conftest import TINY

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "string"}]}
PROPS = {**TINY, "services.inline": "false", "services.file.size": "1k"}


def _stopped_service(url, name, marker, point):
    """Runs a pass that stops, for good, right before its commit or once it wrote a data file."""
    from cdkds.catalog.dataset import Dataset
    from cdkds.catalog.maintenance import rewrite

    def stop():
        open(marker, "w").close()
        time.sleep(600)

    if point == "commit":
        commit = Dataset._commit

        def stopping_commit(self, operation, *args, **kwargs):
            if operation == "compact":
                stop()
            return commit(self, operation, *args, **kwargs)
        Dataset._commit = stopping_commit
    else:  # as soon as the first file of the rewrite is on disk (sorted files: when the writer closes)
        writer = rewrite.PartitionedWriter
        data = os.path.join(url.removeprefix("file://"), name, "data")
        known = _files(data)

        def stopping(method):
            def run(self, *args):
                result = method(self, *args)
                if _files(data) - known:
                    stop()
                return result
            return run
        writer.write_batch, writer.close = stopping(writer.write_batch), stopping(writer.close)
    DatasetRepository(url).load(name).maintain()


def _files(root) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
            if not os.path.relpath(d, root).startswith("_log")}


def _kill_a_pass(tmp_path, url, name, point):
    marker = str(tmp_path / f"{name}-{point}.stopped")
    context = multiprocessing.get_context("spawn")
    p = context.Process(target=_stopped_service, args=(url, name, marker, point))
    p.start()
    deadline = time.time() + 60
    while not os.path.exists(marker):
        assert p.is_alive() and time.time() < deadline, "the pass never reached its stopping point"
        time.sleep(0.02)
    os.kill(p.pid, signal.SIGKILL)
    p.join(10)
    assert p.exitcode == -signal.SIGKILL


def _assert_recovers(repo, root, name, before_files, read):
    ds = repo.load(name)
    assert read(ds) == read(repo.load(name, version=ds.version))
    report = ds.check(read_data=True)
    assert report.ok, report.problems
    assert _files(root) > before_files, "the killed pass left nothing: it was killed too early to test anything"
    ds.vacuum(dt.timedelta(0), dry_run=False, force=True)
    assert _files(root) == before_files
    assert repo.load(name).check(read_data=True).ok
    assert ds.maintain().revisions  # the work was left, and is done now


@pytest.mark.slow
@pytest.mark.parametrize("point", ["write", "commit"])
def test_a_killed_pass_over_a_plain_dataset(tmp_path, point):
    url = f"file://{tmp_path}/lake"
    repo = DatasetRepository(url)
    ds = repo.create("d", DatasetDescriptor(SCHEMA, partition_strategy="hash(id, 2)", properties=PROPS))
    for i in range(12):
        with ds.writer() as w:
            for j in range(20):
                w.write({"id": i * 20 + j, "v": f"value {i} {j}" * 3})
    ds.delete("id >= 100 and id < 130")

    def read(d):
        return sorted((r["id"], r["v"]) for r in d.reader())
    expected, before = read(ds), _files(tmp_path / "lake" / "d")
    _kill_a_pass(tmp_path, url, "d", point)
    assert read(repo.load("d")) == expected and repo.load("d").version == ds.version
    _assert_recovers(repo, tmp_path / "lake" / "d", "d", before, read)
    assert read(repo.load("d")) == expected


@pytest.mark.slow
@pytest.mark.parametrize("point", ["write", "commit"])
def test_a_killed_pass_over_a_keyed_dataset(tmp_path, point):
    url = f"file://{tmp_path}/lake"
    repo = DatasetRepository(url)
    ds = repo.create("k", users_descriptor(**PROPS, **{"index.compaction.deltas": "2"}))
    for r in range(8):
        ds.upsert([user(t, k, r, f"r{r}" * 20) for t in ("nz", "au") for k in range(r, r + 15)])
    ds.delete_keys([("nz", 3), ("au", 4)])
    expected, before = state(ds), _files(tmp_path / "lake" / "k")
    _kill_a_pass(tmp_path, url, "k", point)
    assert state(repo.load("k")) == expected and repo.load("k").version == ds.version
    _assert_recovers(repo, tmp_path / "lake" / "k", "k", before, state)
    after = repo.load("k")
    assert state(after) == expected
    assert after.get_many(list(expected)).num_rows == len(expected)
