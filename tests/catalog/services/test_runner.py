"""One pass of the services: what it commits, within its budget, and the log expiry and
vacuum it runs when the dataset asks for them."""

from __future__ import annotations

import datetime as dt
import os
import time

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from tests.catalog.services.conftest import TINY, rows

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "string"}]}
HOUR_MS = 3_600_000


def test_inline_passes_expire_the_log_and_vacuum_once_an_interval(tmp_path, clock, inline_services):
    """Every write is followed by a service commit here, so the revision after a pass always
    has the same parity: the passes must still expire and vacuum every checkpoint interval."""
    clock.ms = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000) - 6 * HOUR_MS
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("d", DatasetDescriptor(SCHEMA, properties={
        **TINY, "checkpoint.interval": "2", "services.log.retention": "1h", "services.vacuum.retention": "1h"}))
    expired = vacuumed = 0
    for r in range(10):
        if r == 8:  # files older than the retention (vacuum goes by the store's times)
            for f in (tmp_path / "lake" / "d" / "data").iterdir():
                os.utime(f, (time.time() - 3 * 3600,) * 2)
        with ds.writer() as w:
            for i in range(4):
                w.write({"id": 4 * r + i, "v": "x"})
        expired += ds.last_services.expired
        vacuumed += ds.last_services.vacuumed
        clock.ms += HOUR_MS // 2
    assert expired and vacuumed, "the inline passes never expired the log nor vacuumed"
    latest = repo.load("d")
    assert [r["id"] for r in rows(latest)] == list(range(40)) and latest.check(read_data=True).ok
