"""Spark jobs killed (SIGKILL, driver and executors) in the middle of writing: the dataset
opens at its last commit, shows no partial job, and vacuum collects what they left."""

import datetime as dt
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter

import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository

pytestmark = pytest.mark.slow
TRIALS = int(os.environ.get("CDKDS_SPARK_CRASH_TRIALS", "2"))

JOB = textwrap.dedent("""
    import os, sys
    from pyspark.sql import SparkSession
    from cdkds.connector import register
    url, seed = sys.argv[1], int(sys.argv[2])
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").getOrCreate())
    register(spark)
    job = seed * 1000
    while True:
        job += 1
        df = spark.range(0, 3000).selectExpr("id", f"{job} AS job", "CAST(id % 5 AS STRING) AS g")
        df.repartition(3).write.format("cdkds").mode("append").option("checkNulls", "values").save(url)
        print("committed", job, flush=True)
""")


def test_killed_spark_jobs_never_leave_a_partial_commit(tmp_path):
    url = f"file://{tmp_path}/lake/t"
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    repo.create("t", DatasetDescriptor({"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "job", "type": "long"}, {"name": "g", "type": "string"}]},
        "identity(g)"))
    script = tmp_path / "job.py"
    script.write_text(JOB)
    rng = random.Random(3)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    acknowledged = set()
    for trial in range(TRIALS):
        child = subprocess.Popen([sys.executable, str(script), url, str(trial)], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True, env=env, start_new_session=True)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(child.stdout), daemon=True)
        reader.start()
        deadline = time.time() + 180
        while not lines and time.time() < deadline and child.poll() is None:
            time.sleep(0.2)  # wait for the first job to commit, so later ones are caught mid-write
        assert lines, "the Spark job never committed"
        time.sleep(rng.uniform(0, 2))
        while time.time() < deadline:  # kill while a job has written files it has not committed yet
            on_disk = {k for k, _ in repo.load("t").store.walk_files("data")}
            if on_disk - {f.path for f in repo.load("t").files}:
                break
            time.sleep(0.05)
        os.killpg(child.pid, signal.SIGKILL)  # the driver, its JVM and the Python workers
        child.wait()
        reader.join(10)
        acknowledged |= {int(line.split()[1]) for line in lines if line.startswith("committed")}
        jobs = Counter(r["job"] for r in repo.load("t").reader())
        assert set(jobs) >= acknowledged
        assert all(count == 3000 for count in jobs.values()), jobs  # whole jobs only
    ds = repo.load("t")
    ds.checkpoint()
    ds.expire_log(dt.datetime.now(dt.timezone.utc), force=True)
    collected = ds.vacuum(retention=dt.timedelta(0), force=True, dry_run=False)
    assert sorted(k for k, _ in ds.store.walk_files("data")) == sorted(f.path for f in ds.files)
    assert collected  # the killed jobs had written files
    print(f"{TRIALS} Spark jobs killed; {len(acknowledged)} jobs acknowledged; {len(collected)} files collected")
