"""A state-machine test of the log against an in-memory model.

Random sequences of append, overwrite, partition overwrite, delete, compaction,
checkpoint, log expiry (forced, or refused until its cut-off is an hour old), the clock
moving on by hours, a stale writer appending on a revision it read long ago (also across
a forced expiry: issue 25 item 7), and vacuum (which commits its trace when it deletes);
after every step, every retained revision must read exactly the rows the model says it
holds, and expired revisions must be refused. The stale writer's append either lands or
is refused as a conflict (it was planned below the expired part of the log), never lost.
"""

import datetime as dt
import uuid

import pyarrow as pa
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import CdkdsError, CommitConflictError, InvalidTimeTravelError
from cdkds.catalog.log import commit as commits
from cdkds.catalog.log.expiry import MINIMUM_LOG_AGE

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "g", "type": "string"}]}
INTERVAL = 3
GROUPS = ["a", "b", "c"]


class LogModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.repo = DatasetRepository(f"memory://model-{uuid.uuid4().hex}")
        self.ds = self.repo.create("t", DatasetDescriptor(
            SCHEMA, "identity(g)", format="parquet", properties={"checkpoint.interval": str(INTERVAL)}))
        self.versions = {0: []}  # revision -> sorted list of (id, g)
        self.stamps = {0: self.ds.history()[0].timestamp}
        self.checkpoints: set[int] = set()
        self.expired_below = 1  # revisions 1 .. expired_below-1 are gone
        self.next_id = 0
        self.stale = None  # a dataset handle some writer read long ago
        self.offset = 0  # how far the log's clock has moved on (ms)
        self._clock = commits.clock
        commits.clock = lambda: self._clock() + self.offset

    def teardown(self):
        commits.clock = self._clock

    def _new_rows(self, n, group):
        out = [(self.next_id + i, group or GROUPS[(self.next_id + i) % 3]) for i in range(n)]
        self.next_id += n
        return out

    def _committed(self, rows):
        version = self.ds.version
        if version in self.versions:
            return  # nothing was committed
        self.versions[version] = sorted(rows)
        self.stamps[version] = self.ds.history()[-1].timestamp
        if version % INTERVAL == 0:
            self.checkpoints.add(version)

    @property
    def current(self):
        return self.versions[self.ds.version]

    def _write(self, rows, mode, ds=None):
        with (ds or self.ds).writer(mode=mode, max_open_files=2) as w:
            half = len(rows) // 2
            for i, g in rows[:half]:
                w.write({"id": i, "g": g})
            if rows[half:]:
                w.write_batch(pa.table({"id": [r[0] for r in rows[half:]], "g": [r[1] for r in rows[half:]]}))

    @rule(n=st.integers(1, 12), group=st.sampled_from([None, *GROUPS]))
    def append(self, n, group):
        rows = self._new_rows(n, group)
        before = self.current
        self._write(rows, "append")
        self._committed(before + rows)

    @rule(n=st.integers(0, 6))
    def overwrite(self, n):
        rows = self._new_rows(n, None)
        self._write(rows, "overwrite")
        self._committed(rows)

    @rule(n=st.integers(1, 6), group=st.sampled_from(GROUPS))
    def overwrite_partition(self, n, group):
        rows = self._new_rows(n, group)
        kept = [r for r in self.current if r[1] != group]
        self._write(rows, "overwrite_partitions")
        self._committed(kept + rows)

    @rule(kind=st.sampled_from(["lt", "group", "in", "ge_and_group"]), k=st.integers(0, 60),
          group=st.sampled_from(GROUPS), picks=st.lists(st.integers(0, 60), max_size=4))
    def delete(self, kind, k, group, picks):
        where, test = {
            "lt": (f"id < {k}", lambda r: r[0] < k),
            "group": (f"g = '{group}'", lambda r: r[1] == group),
            "in": (f"id in ({', '.join(map(str, picks or [k]))})", lambda r: r[0] in (picks or [k])),
            "ge_and_group": (f"id >= {k} and g = '{group}'", lambda r: r[0] >= k and r[1] == group),
        }[kind]
        kept = [r for r in self.current if not test(r)]
        self.ds.delete(where)
        self._committed(kept)

    @rule(size=st.sampled_from([1, 2000, 10**9]))
    def compact(self, size):
        rows = self.current
        self.ds.compact(target_file_size=size)
        self._committed(rows)

    @rule()
    def checkpoint(self):
        self.ds.checkpoint()
        self.checkpoints.add(self.ds.version)

    @rule(hours=st.sampled_from([0.5, 2]))
    def wait(self, hours):
        self.offset += int(hours * 3600 * 1000)

    @rule()
    def read_for_later(self):
        self.stale = self.repo.load("t")

    @rule(n=st.integers(1, 4))
    def stale_append(self, n):
        if self.stale is None:
            return
        rows = self._new_rows(n, None)
        before = self.current
        try:
            self._write(rows, "append", self.stale)
        except CommitConflictError as e:
            assert "expired past it" in str(e)
            assert self.ds.refresh().version == max(self.versions)  # nothing of it landed
            return
        finally:
            self.stale = None
        self.ds.refresh()
        self._committed(before + rows)

    @rule(data=st.data(), force=st.booleans())
    def expire(self, data, force):
        retained = sorted(v for v in self.versions if v == 0 or v >= self.expired_below)
        cutoff_version = data.draw(st.sampled_from(retained))
        cutoff = self.stamps[cutoff_version]
        if not force and commits.clock() - cutoff < MINIMUM_LOG_AGE.total_seconds() * 1000:
            with pytest.raises(CdkdsError, match="safe minimum"):
                self.ds.expire_log(cutoff)
            return
        self.ds.expire_log(cutoff, force=force)
        eligible = [c for c in self.checkpoints if self.stamps[c] <= cutoff and c >= self.expired_below]
        if eligible:
            keep = max(eligible)
            self.expired_below = max(self.expired_below, keep)
            self.checkpoints = {c for c in self.checkpoints if c >= keep}

    @rule()
    def vacuum(self):
        rows = self.current
        self.ds.vacuum(retention=dt.timedelta(0), force=True, dry_run=False)
        self._committed(rows)  # a vacuum that deletes commits its trace, which changes no row

    @invariant()
    def every_retained_revision_reads_the_model(self):
        latest = self.repo.load("t")
        assert latest.version == self.ds.version
        for version, rows in self.versions.items():
            if version != 0 and version < self.expired_below:
                with pytest.raises(InvalidTimeTravelError):
                    self.repo.load("t", version=version)
                continue
            ds = self.repo.load("t", version=version)
            assert sorted((r["id"], r["g"]) for r in ds.reader()) == rows, f"revision {version}"


TestLogModel = LogModel.TestCase
TestLogModel.settings = settings(max_examples=20, stateful_step_count=12, deadline=None)
