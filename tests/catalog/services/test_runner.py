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


def test_an_empty_dataset_has_nothing_to_do(mem_repo):
    ds = mem_repo.create("e", DatasetDescriptor(SCHEMA, properties=TINY))
    report = ds.maintain()
    assert not report.did_work and report.summary().startswith("nothing to do")
    assert ds.services_plan().describe()[-1] == "nothing to do" and ds.version == 0
    assert not ds.maintain(budget=0).left


def test_every_row_deleted_leaves_no_file(mem_repo, inline_services):
    from tests.catalog.keyed.conftest import state, user, users_descriptor

    plain = mem_repo.create("p", DatasetDescriptor(SCHEMA, properties=TINY))
    with plain.writer() as w:
        for i in range(10):
            w.write({"id": i, "v": "ab"[i % 2]})
    plain.delete("v = 'a' or v = 'b'")  # statistics cannot prove it: a tombstone
    keyed = mem_repo.create("k", users_descriptor(**TINY))
    keyed.upsert([user("nz", i, 0) for i in range(10)])
    keyed.delete_keys([("nz", i) for i in range(10)])
    for name in ("p", "k"):
        latest = mem_repo.load(name)
        assert not latest.files and latest.to_table().num_rows == 0 and latest.check(read_data=True).ok
        assert latest.history()[-1].info["service"] == "inline" and not latest.snapshot.tombstones
    keyed.upsert([user("nz", 1, 5, "again")])
    assert state(mem_repo.load("k")) == {("nz", 1): ("again", None, user("nz", 1, 5)["updatedAt"])}
