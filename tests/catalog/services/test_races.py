"""A service loop racing user writers in other processes: no user write fails (a write that
lost to a service is planned again), no row is lost, and the services give up rather than
fail. The writers of the keyed dataset run the inline services too."""

from __future__ import annotations

import multiprocessing
import os
import time
import warnings

import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import ServiceWarning
from tests.catalog.keyed.conftest import state, user, users_descriptor
from tests.catalog.services.conftest import TINY
from tests.conftest import new_bucket, s3_options

WRITERS = 3
ROUNDS = 8
SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "w", "type": "long"}, {"name": "id", "type": "long"}, {"name": "v", "type": "string"}]}


def _appender(url, options, w, barrier):
    """Appends rows to its own partition and deletes some of them (a tombstone)."""
    os.environ.pop("CDKDS_INLINE_SERVICES", None)
    warnings.simplefilter("error", ServiceWarning)
    ds = DatasetRepository(url, options).load("plain")
    barrier.wait()
    for r in range(ROUNDS):
        with ds.writer() as writer:
            for j in range(10):
                writer.write({"w": w, "id": r * 10 + j, "v": f"w{w}r{r}"})
        if r % 2:
            ds.delete(f"w = {w} and id >= {r * 10 - 3} and id < {r * 10 + 2}")


def _upserter(url, options, w, barrier):
    """Upserts its own tenant's keys, overwriting some, and deletes a few."""
    os.environ.pop("CDKDS_INLINE_SERVICES", None)
    warnings.simplefilter("error", ServiceWarning)
    ds = DatasetRepository(url, options).load("keyed")
    tenant = f"t{w}"
    barrier.wait()
    for r in range(ROUNDS):
        ds.upsert([user(tenant, k, r, f"r{r}") for k in range(r, r + 6)])
        if r % 3 == 2:
            ds.delete_keys([(tenant, r)])


def _expected_plain() -> set[tuple]:
    rows = set()
    for w in range(WRITERS):
        for r in range(ROUNDS):
            rows |= {(w, r * 10 + j, f"w{w}r{r}") for j in range(10)}
            if r % 2:
                rows = {x for x in rows if not (x[0] == w and r * 10 - 3 <= x[1] < r * 10 + 2)}
    return rows


def _expected_keyed() -> dict:
    model = {}
    for w in range(WRITERS):
        for r in range(ROUNDS):
            for k in range(r, r + 6):
                model[(f"t{w}", k)] = f"r{r}"
            if r % 3 == 2:
                model.pop((f"t{w}", r), None)
    return model


def _race(url, options):
    repo = DatasetRepository(url, options)
    # the loop does all the work on one dataset; on the other, the writers' inline passes race it too
    repo.create("plain", DatasetDescriptor(SCHEMA, partition_strategy="identity(w)",
                                           properties={**TINY, "services.inline": "false"}))
    repo.create("keyed", users_descriptor(**TINY, **{"index.compaction.deltas": "2"}))
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2 * WRITERS)
    processes = [context.Process(target=target, args=(url, options, w, barrier))
                 for target in (_appender, _upserter) for w in range(WRITERS)]
    for p in processes:
        p.start()
    services = [repo.load("plain"), repo.load("keyed")]
    passes = gave_up = 0
    while any(p.is_alive() for p in processes):
        for ds in services:
            report = ds.maintain(budget=64 * 1024)  # never raises: a lost race is given up
            passes += 1
            gave_up += bool(report.gave_up)
        time.sleep(0.01)
    for p in processes:
        p.join(300)
        assert p.exitcode == 0, "a user's write failed"
    for ds in services:
        ds.maintain()
    plain, keyed = repo.load("plain"), repo.load("keyed")
    assert {(r["w"], r["id"], r["v"]) for r in plain.reader()} == _expected_plain()
    assert plain.to_table().num_rows == len(_expected_plain())
    assert {k: v[0] for k, v in state(keyed).items()} == _expected_keyed()
    assert keyed.get_many(list(_expected_keyed())).num_rows == len(_expected_keyed())
    assert sum(h.info.get("service") == "maintain" for h in plain.history()) > 1, "the service loop never raced"
    assert any(h.info.get("service") for h in keyed.history())
    for ds in (plain, keyed):
        report = ds.check(read_data=True)
        assert report.ok, report.problems
    assert passes > 0


@pytest.mark.slow
def test_services_racing_writer_processes_on_local_files(tmp_path):
    _race(f"file://{tmp_path}/lake", {})


@pytest.mark.slow
def test_services_racing_writer_processes_on_s3(s3_endpoint):
    _race(f"s3://{new_bucket(s3_endpoint)}/lake", s3_options(s3_endpoint))
