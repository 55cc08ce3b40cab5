"""Datasets, a fixed clock and row comparisons for the tests of the table services."""

from __future__ import annotations

import importlib
import sys
import uuid

import pytest

from cdkds.catalog import DatasetRepository
from cdkds.catalog.log import commit as log_commit
from tests.catalog.keyed.conftest import EPOCH

EPOCH_MS = int(EPOCH.timestamp() * 1000)
# the services at thresholds so low that nearly every write is followed by a rewrite
TINY = {"services.small.files": "2", "services.deleted.fraction": "0.01", "services.budget": "16k",
        "services.file.size": "8k"}
OFF = {"services.inline": "false"}
# every module that reads the time (`from cdkds.catalog.log.commit import clock`)
CLOCK_READERS = ("cdkds.catalog.keyed.operations", "cdkds.catalog.maintenance.rewrite", "cdkds.catalog.read.scan",
                 "cdkds.catalog.dataset", "cdkds.catalog.maintenance.compaction", "cdkds.catalog.services.runner")


class Clock:
    """The time every module of cdkds reads, moved by hand."""

    def __init__(self, ms: int = EPOCH_MS):
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def patch_clock(monkeypatch, clock: Clock) -> None:
    monkeypatch.setattr(log_commit, "clock", clock)
    for name in CLOCK_READERS:
        module = sys.modules.get(name) or importlib.import_module(name)
        monkeypatch.setattr(module, "clock", clock)


@pytest.fixture
def clock(monkeypatch) -> Clock:
    now = Clock()
    patch_clock(monkeypatch, now)
    return now


def memory_repo() -> DatasetRepository:
    return DatasetRepository(f"memory://services-{uuid.uuid4().hex}")


@pytest.fixture
def mem_repo() -> DatasetRepository:
    return memory_repo()


def rows(ds, sort_by: str | list[str] = "id") -> list[dict]:
    """The dataset's rows as dicts, in key order."""
    keys = [sort_by] if isinstance(sort_by, str) else sort_by
    table = ds.to_table()
    return sorted(table.to_pylist(), key=lambda r: tuple((r[k] is None, r[k]) for k in keys))


def service_revisions(ds) -> list[int]:
    """The revisions the services committed (``compact`` commits marked ``service``)."""
    return [h.revision for h in ds.history() if h.operation == "compact" and "service" in h.info]
