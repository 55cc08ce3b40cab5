"""Writers killed (SIGKILL) at random points: the dataset always opens at its last commit,
never shows part of a commit, and vacuum removes what the dead writers left behind."""

import datetime as dt
from collections import Counter
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository

TRIALS = int(os.environ.get("CDKDS_CRASH_TRIALS", "6"))
SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "batch", "type": "long"}, {"name": "g", "type": "string"},
    {"name": "group_rows", "type": "long"}]}  # how many rows of its batch share its g

WRITER = textwrap.dedent("""
    import collections, random, sys, time
    import pyarrow as pa
    from cdkds.catalog import DatasetRepository
    ds = DatasetRepository(sys.argv[1]).load("t")
    rng = random.Random(int(sys.argv[2]))
    batch = int(sys.argv[2]) * 1000
    while True:
        batch += 1
        n = rng.randrange(1, 400)
        groups = [rng.choice("abcd") for _ in range(n)]
        counts = collections.Counter(groups)
        table = pa.table({"id": list(range(n)), "batch": [batch] * n, "g": groups,
                          "group_rows": [counts[g] for g in groups]})
        op = rng.random()
        if op < 0.1:
            ds.compact(target_file_size=10_000)
        else:
            with ds.writer(mode="overwrite_partitions" if op < 0.2 else "append", target_file_size=2_000) as w:
                w.write_batch(table)
        print(ds.version, flush=True)
        time.sleep(rng.uniform(0, 0.02))
""")


@pytest.mark.slow
def test_sigkill_at_random_points_never_loses_or_splits_a_commit(tmp_path):
    url = f"file://{tmp_path}/lake"
    repo = DatasetRepository(url)
    repo.create("t", DatasetDescriptor(SCHEMA, "identity(g)", properties={"checkpoint.interval": "4"}))
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    rng = random.Random(7)
    acknowledged, checked = 0, 0
    for trial in range(TRIALS):
        child = subprocess.Popen([sys.executable, str(script), url, str(trial)], stdout=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(1.2, 2.5))  # start-up (imports) takes about a second
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate()
        versions = [int(v) for v in out.split()]
        acknowledged = max([acknowledged, *versions])
        ds = repo.load("t")
        assert ds.version >= acknowledged  # every acknowledged commit is there
        for revision in range(checked + 1, ds.version + 1):
            # commits are all or nothing: every (batch, g) a revision shows is complete
            seen = Counter((r["batch"], r["g"], r["group_rows"]) for r in repo.load("t", version=revision).reader())
            assert all(count == expected for (_, _, expected), count in seen.items()), revision
        checked = ds.version
    ds = repo.load("t")
    before = sorted((r["batch"], r["id"], r["g"]) for r in ds.reader())
    ds.checkpoint()
    ds.expire_log(dt.datetime.now(dt.timezone.utc), force=True)
    orphans = ds.vacuum(retention=dt.timedelta(0), force=True, dry_run=False)
    assert sorted(k for k, _ in ds.store.walk_files("data")) == sorted(f.path for f in ds.files)
    assert sorted((r["batch"], r["id"], r["g"]) for r in repo.load("t").reader()) == before
    print(f"{TRIALS} kills, {acknowledged} acknowledged commits, {len(orphans)} files collected by vacuum")
