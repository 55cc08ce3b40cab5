"""Zero-config discovery, and the whole path on a Spark standalone cluster on 127.0.0.1
(master, worker, driver, commit and executors in separate processes)."""

import os
import pkgutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import pyspark

from tests.components import missing

pytestmark = pytest.mark.slow

JOB = textwrap.dedent("""
    import sys
    import datetime as dt
    from pyspark.sql import SparkSession
    master, url = sys.argv[1], sys.argv[2]
    spark = (SparkSession.builder.master(master).appName("cdkds-cluster-test")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.pyspark.python", sys.executable)
             .config("spark.executor.memory", "1g").config("spark.cores.max", "2").getOrCreate())
    # no spark.dataSource.register: the pyspark_cdkds module is found by Spark itself
    df = spark.range(0, 5000).selectExpr("id", "id % 97 AS userId",
                                         "timestamp_millis(1770000000000 + id * 3600000) AS ts")
    df.repartition(4).write.format("cdkds").mode("append").option("partitionBy", "hash(userId, 8), day(ts)").save(url)
    df.filter("id < 10").write.format("cdkds").mode("append").save(url)
    back = spark.read.format("cdkds").load(url)
    from cdkds.connector import upsert  # keyed: each task plans whole index buckets
    users_url = url + "_users"
    users = spark.range(0, 1000).selectExpr("id AS userId", "'v1' AS email",
                                            "timestamp_millis(1770000000000) AS updatedAt")
    first = upsert(users, users_url, recordKey="userId", orderingField="updatedAt")
    second = upsert(spark.range(500, 1500).selectExpr("id AS userId", "'v2' AS email",
                                                      "timestamp_millis(1770000000001) AS updatedAt"), users_url)
    keyed = spark.read.format("cdkds").load(users_url)
    print("ROWS", back.count(), back.filter("userId = 5").count(),
          spark.read.format("cdkds").option("where", "userId = 5").load(url).count(),
          spark.read.format("cdkds").option("versionAsOf", 1).load(url).count(),
          first.inserted, second.inserted, second.updated, keyed.count(), keyed.filter("email = 'v2'").count())
    # the table services as a Spark job: groups rewritten in tasks (executors), one commit on the driver
    from cdkds.connector import maintain
    from cdkds.catalog import DatasetRepository
    report = maintain(spark, users_url)
    users = DatasetRepository(url.rsplit("/", 1)[0]).load("events_users")
    service = users.history()[-1].info.get("service")
    found = int(users.get(700)["email"] == "v2" and users.get(100)["email"] == "v1")
    clean = int(not any(f.deletes for f in users.snapshot.files.values()) and users.check(read_data=True).ok)
    print("MAINTAIN", len(report.revisions), int(report.rewritten_files > 0 and service == "spark"), keyed.count(),
          keyed.filter("email = 'v2'").count(), found, clean)
    # one Parquet file of 16 row groups (~10 MB): read by several tasks, each a range of row groups
    big_url = url + "_big"
    spark.range(0, 2000000).selectExpr("id", "id * 7 % 1000 AS v").coalesce(1).write.format("cdkds").mode("append").save(big_url)
    from pyspark.sql.functions import spark_partition_id
    split = spark.read.format("cdkds").option("maxPartitionBytes", "1048576").load(big_url)
    sized = spark.read.format("cdkds").option("minPartitions", "3").load(big_url)
    from cdkds.catalog import DatasetRepository
    print("SPLITS", len(DatasetRepository(url.rsplit("/", 1)[0]).load("events_big").files), split.rdd.getNumPartitions(),
          split.select(spark_partition_id()).distinct().count(), split.count(), split.selectExpr("sum(id)").first()[0],
          sized.rdd.getNumPartitions(), sized.select(spark_partition_id()).distinct().count())
    # cdkds.connector.load (Spark's Parquet reader on cdkds's plan) against the cdkds source: a
    # tombstone, a rename, an earlier revision, where/columns, and deletion vectors (users)
    from cdkds.connector import load
    events = DatasetRepository(url.rsplit("/", 1)[0]).load("events")
    events.delete("userId = 3 or id in (1, 8, 15, 22, 29, 36)")
    events.alter().rename("userId", "user").commit()
    def agree(target, **options):
        native, python = load(spark, target, **options), spark.read.format("cdkds").options(**options).load(target)
        rows = lambda df: sorted(map(repr, df.collect()))
        plan = native._jdf.queryExecution().executedPlan().toString()
        same = native.schema.simpleString() == python.schema.simpleString() and rows(native) == rows(python) and "FileScan parquet" in plan
        if not same:
            extra = sorted(set(rows(native)) ^ set(rows(python)))[:5]
            print("DISAGREE", target, options, native.count(), python.count(), extra, file=sys.stderr)
        return int(same)
    print("AGREE", agree(url), agree(url, versionAsOf="1"), agree(url, where="user = 5 or id < 40", columns="id,ts"),
          agree(users_url), agree(users_url, where="email = 'v2'"))
    spark.stop()
""")


# zero-config discovery alone: the whole path (JOB) runs once, on the standalone cluster, whose
# fresh driver session finds the source the same way
DISCOVERY = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    url = sys.argv[1]
    spark = (SparkSession.builder.master("local[2]").appName("cdkds-discovery-test")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.pyspark.python", sys.executable).getOrCreate())
    # no spark.dataSource.register: the pyspark_cdkds module is found by Spark itself
    spark.range(0, 100).selectExpr("id", "id % 7 AS g").write.format("cdkds").mode("append") \
        .option("partitionBy", "identity(g)").save(url)
    back = spark.read.format("cdkds").load(url)
    print("ROWS", back.count(), back.filter("g = 3").count())
    spark.stop()
""")


def _editable() -> bool:
    return not any(m.name == "pyspark_cdkds" for m in pkgutil.iter_modules())


@pytest.fixture
def regular_install() -> None:
    """Skip (fail under CDKDS_REQUIRE_COMPONENTS=1) in an editable install: pyspark_cdkds is not on
    a sys.path folder there; the README's test command installs cdkds normally, where Spark finds it."""
    if _editable():
        missing("pyspark_cdkds is not on a sys.path folder (an editable install of cdkds)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spark_class(*args: str, log: Path) -> subprocess.Popen:
    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    return subprocess.Popen([str(home / "bin" / "spark-class"), *args], env=env,
                            stdout=log.open("w"), stderr=subprocess.STDOUT)


def _wait_for(log: Path, text: str, seconds: float) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        time.sleep(0.5)
    raise AssertionError(f"{text!r} not seen in {log}:\n{log.read_text(errors='replace')[-3000:]}")


def _run_job(master: str, url: str, tmp_path: Path) -> list[int]:
    script = tmp_path / "job.py"
    script.write_text(JOB)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run([sys.executable, str(script), master, url], env=env, capture_output=True, text=True,
                          timeout=400)
    assert done.returncode == 0, done.stderr[-4000:]
    lines = {l.split()[0]: [int(x) for x in l.split()[1:]] for l in done.stdout.splitlines() if l[:1].isupper()}
    disagreements = [l for l in done.stderr.splitlines() if l.startswith("DISAGREE")]
    assert lines["AGREE"] == [1] * 5, f"cdkds.connector.load disagrees with the cdkds source: {disagreements}"
    files, partitions, reading, rows, total, sized, sized_reading = lines["SPLITS"]
    # a large file is read by more than one task: pieces of about maxPartitionBytes, or as
    # many as minPartitions asks for (down to 4 MB pieces, Spark's open cost); every row exactly once
    assert (files, rows, total) == (1, 2000000, 1999999 * 2000000 // 2)
    assert partitions >= 4 and reading >= 4, lines["SPLITS"]
    assert sized >= 3 and sized_reading >= 2, lines["SPLITS"]
    assert lines["MAINTAIN"] == [1, 1, 1500, 1000, 1, 1], lines["MAINTAIN"]  # cdkds.connector.maintain
    return lines["ROWS"]


@pytest.mark.usefixtures("regular_install")
def test_zero_config_discovery_in_a_fresh_session(tmp_path):
    script = tmp_path / "discovery.py"
    script.write_text(DISCOVERY)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run([sys.executable, str(script), f"file://{tmp_path}/lake/events"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "ROWS 100 14" in done.stdout, done.stdout[-2000:]


@pytest.mark.usefixtures("regular_install")
def test_standalone_cluster_on_loopback(tmp_path):
    port, web = _free_port(), _free_port()
    master_log, worker_log = tmp_path / "master.log", tmp_path / "worker.log"
    master = _spark_class("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                          "--webui-port", str(web), log=master_log)
    worker = None
    try:
        _wait_for(master_log, "I have been elected leader", 90)
        worker = _spark_class("org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                              "--host", "127.0.0.1", "--cores", "2", "--memory", "2g",
                              "--webui-port", str(_free_port()), "--work-dir", str(tmp_path / "work"), log=worker_log)
        _wait_for(worker_log, "Successfully registered with master", 90)
        counts = _run_job(f"spark://127.0.0.1:{port}", f"file://{tmp_path}/lake/events", tmp_path)
        assert counts == [5010, 53, 53, 5000, 1000, 500, 500, 1500, 1000]
        executor_logs = list((tmp_path / "work").rglob("stderr"))
        assert executor_logs, "the job ran no executor on the worker"
    finally:
        for process in (worker, master):
            if process is not None:
                process.terminate()
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
