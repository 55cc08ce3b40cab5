"""cdkds quick start: partitioned datasets on a local repository, end to end.

Run it with the README's first command. It creates a repository in a temporary folder
(or the folder given as the first argument). In plain Python, without a JVM, it writes a
hash- and time-partitioned dataset in two commits, reads it back with partition pruning,
deletes rows, travels in time, compacts, changes the partition strategy and reads across the change,
renames a field and adds one (metadata only), and shows the
dataset, its history and a check of its log and files with the `cdkds` command; it then
upserts into a keyed dataset (record key, ordering field, last write wins), reads rows by
key and deletes by key. Then, with Spark on local[2], it writes a dataset from a DataFrame,
reads it with pruning, travels in time, overwrites it, streams it into a copy (exactly once),
reads its change feed, queries it in SQL and upserts.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa

from cdkds.catalog import DatasetDescriptor, DatasetRepository, InvalidRecordError, PartitionStrategy

SCHEMA = {
    "type": "record", "name": "Event", "fields": [
        {"name": "id", "type": "long"},
        {"name": "userId", "type": "long"},
        {"name": "country", "type": ["null", "string"], "default": None},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "amount", "type": "double"},
    ],
}


def make_events(n: int, start: int) -> pa.Table:
    rng = random.Random(start)
    t0 = dt.datetime(2026, 2, 20, tzinfo=dt.timezone.utc)
    return pa.table({
        "id": list(range(start, start + n)),
        "userId": [rng.randrange(10_000) for _ in range(n)],
        "country": [rng.choice(["NZ", "AU", "US", "DE", None]) for _ in range(n)],
        "ts": [t0 + dt.timedelta(minutes=rng.randrange(20 * 24 * 60)) for _ in range(n)],
        "amount": [round(rng.uniform(1, 500), 2) for _ in range(n)],
    })


def main(root: str) -> None:
    repo = DatasetRepository(f"file://{root}")
    strategy = PartitionStrategy.parse("hash(userId, 16), year(ts), month(ts), day(ts)")
    events = repo.create("shop/events", DatasetDescriptor(SCHEMA, strategy))
    print(f"created {events} partitioned by {strategy.to_text()}")

    with events.writer() as writer:                       # one commit
        writer.write_batch(make_events(50_000, 0))
    with events.writer() as writer:                       # a second commit, record by record
        for row in make_events(1_000, 50_000).to_pylist():
            writer.write(row)
    print(f"wrote {events.snapshot.row_count} rows in {len(events.files)} files; version {events.version}")

    try:
        with events.writer() as writer:
            writer.write({"id": 1, "userId": None, "ts": dt.datetime.now(dt.timezone.utc), "amount": 1.0})
    except InvalidRecordError as e:
        print(f"rejected, nothing committed: {e}")

    latest = repo.load("shop/events")
    for where in ["userId = 1234", "ts >= '2026-03-08' and ts < '2026-03-09'", "country = 'NZ' and amount > 450"]:
        plan = latest.plan(where)
        rows = sum(batch.num_rows for batch in latest.scan(where))
        print(f"{where!r:45}: read {len(plan.files):3} of {plan.total_files} files, {rows} rows match")

    revision = latest.delete("country = 'DE' and amount < 100")
    remaining = sum(batch.num_rows for batch in latest.scan())
    tombstones = next(h.tombstones for h in latest.history() if h.revision == revision)
    print(f"deleted cheap German orders in one commit (revision {revision}): {remaining} rows remain "
          f"({tombstones} tombstone)")
    print(f"the table services then rewrote the files the tombstone applies to, in a commit of their own: "
          f"{latest.last_services.summary()}")

    first = repo.load("shop/events", version=1)
    print(f"time travel: version 1 has {first.snapshot.row_count} rows, latest has {remaining}")

    files_before = len(latest.refresh().files)
    latest.compact()
    print(f"compacted {files_before} files into {len(latest.files)}; "
          f"{sum(batch.num_rows for batch in latest.scan())} rows")

    found = latest.to_table(where="userId = 1234").num_rows
    latest.alter().partition_by("hash(userId, 64), year(ts), month(ts)").commit()  # metadata only: no file moves
    with latest.writer() as writer:                       # new files take the new strategy
        writer.write_batch(make_events(1_000, 60_000))
    specs = sorted({f.spec_id for f in latest.files})
    print(f"repartitioned by hash(userId, 64), year(ts), month(ts): files of partition specs {specs} read as one "
          f"('userId = 1234': {found} rows before, {latest.to_table(where='userId = 1234').num_rows} now); the "
          f"table services then rewrote the old files into the new layout: specs "
          f"{sorted({f.spec_id for f in latest.refresh().files})}")

    files = sorted(f.path for f in latest.files)
    latest.alter().rename("country", "market").add("channel", "string", default="web") \
        .move("market", after="id").commit()
    sample = next(iter(repo.load("shop/events").reader("id = 42")))
    print(f"renamed 'country' to 'market' and added 'channel' (default 'web') in one commit, no file "
          f"rewritten ({sorted(f.path for f in latest.files) == files}); old rows read as: {sample}")

    print(f"datasets in {repo.url}: {repo.list()}")
    cdkds = Path(sys.executable).with_name("cdkds")  # the command line the package installs
    for command in (["describe"], ["history", "--limit", "4"], ["check"]):
        print(f"\n$ cdkds {' '.join(command)} {repo.url}/shop/events", flush=True)
        subprocess.run([str(cdkds), *command, f"{repo.url}/shop/events"], check=True)
    keyed(repo)


USERS = {"type": "record", "name": "User", "fields": [
    {"name": "tenant", "type": "string"}, {"name": "userId", "type": "long"},
    {"name": "email", "type": ["null", "string"], "default": None},
    {"name": "updatedAt", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}


def keyed(repo: DatasetRepository) -> None:
    """A keyed dataset: each key lives once; writes reconcile by the ordering field."""
    users = repo.create("shop/users", DatasetDescriptor(
        USERS, record_key=["tenant", "userId"], ordering_field="updatedAt", partition_strategy="identity(tenant)",
        properties={"index.buckets": "16"}))
    t0 = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)
    r = users.upsert([{"tenant": t, "userId": i, "email": f"{i}@{t}.example", "updatedAt": t0}
                      for t in ("nz", "au") for i in range(5_000)])
    print(f"\nupsert into {users.name}: {r.inserted} inserted (revision {r.revision})")
    later, stale = t0 + dt.timedelta(hours=1), t0 - dt.timedelta(hours=1)
    r = users.upsert([{"tenant": "nz", "userId": i, "email": f"new{i}@nz.example", "updatedAt": later}
                      for i in range(4_000, 6_000)] +
                     [{"tenant": "au", "userId": 1, "email": "stale@au.example", "updatedAt": stale}])
    print(f"upsert: {r.inserted} inserted, {r.updated} updated, {r.unchanged} unchanged (older than what is stored)")
    print(f"get nz/4321 through the index: {users.get({'tenant': 'nz', 'userId': 4321})}")
    print(f"get au/1 kept the newer row: {users.get(('au', 1))['email']}")
    r = users.update([{"tenant": "au", "userId": 2, "email": "changed@au.example"}])
    r2 = users.delete_keys([("nz", 0), ("nz", 1)])
    print(f"update changed {r.updated} row; delete_keys deleted {r2.deleted}; "
          f"{users.snapshot.row_count} live rows, one per key")
    plan = users.refresh().services_plan()
    print(f"table services after each write ({plan.settings.deleted_fraction:.0%} of a file deleted: rewritten; "
          f"{plan.settings.small_files} small files in a partition: bin-packed): "
          f"{[h.revision for h in users.history() if h.info.get('service')]} are their commits")
    feed = users.changes(start_version=2).read_all()  # the change feed: every commit's changed rows
    kinds = {k: feed["_change_type"].to_pylist().count(k) for k in dict.fromkeys(feed["_change_type"].to_pylist())}
    print(f"change feed since revision 2: {kinds}")


def with_spark(root: str) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Spark's Python workers must import cdkds
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from cdkds.connector import load, register

    spark = (SparkSession.builder.master("local[2]").appName("cdkds-quickstart")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    url = f"file://{root}/shop/orders"
    orders = spark.range(0, 100_000).selectExpr(
        "id", "id % 5000 AS userId", "timestamp_millis(1772323200000 + id * 30000) AS ts",  # from 2026-03-01
        "CAST(id % 1000 AS DOUBLE) / 10 AS amount")
    orders.write.format("cdkds").mode("append").option("partitionBy", "hash(userId, 16), day(ts)").save(url)
    print(f"\nSpark wrote {url} in one commit")

    dataset = DatasetRepository(f"file://{root}").load("shop/orders")
    for where in ["userId = 1234", "ts >= '2026-03-30'"]:
        df = spark.read.format("cdkds").option("where", where).load(url)
        plan = dataset.plan(where)
        print(f"spark.read where {where!r:22}: {df.count():6} rows from {len(plan.files)} of {plan.total_files} files")
    # the same read, planned by cdkds and read by Spark's own Parquet source (README: Fast reads)
    fast = load(spark, url, where="userId = 1234").groupBy().sum("amount").collect()[0][0]
    slow = spark.read.format("cdkds").option("where", "userId = 1234").load(url).groupBy().sum("amount").collect()[0][0]
    print(f"cdkds.connector.load where 'userId = 1234': sum(amount) {fast:.1f}, the same as format('cdkds'): {round(fast, 6) == round(slow, 6)}")

    orders.filter("id < 1000").write.format("cdkds").mode("overwrite").save(url)
    now = spark.read.format("cdkds").load(url).count()
    before = spark.read.format("cdkds").option("versionAsOf", 1).load(url).count()
    print(f"after overwrite: {now} rows; versionAsOf 1 still has {before}")

    register(spark, f"file://{root}")  # every dataset of the repository, as a view named after it
    spark.sql("SELECT day(ts) AS day, count(*) AS n, round(sum(amount), 1) AS total "
              "FROM shop_orders GROUP BY 1 ORDER BY 1").show()

    copy = (spark.readStream.format("cdkds").load(url)  # the log as a stream: its snapshot, then new commits
            .writeStream.format("cdkds").option("checkpointLocation", f"{root}/checkpoints/orders_copy")
            .trigger(availableNow=True).start(f"file://{root}/shop/orders_copy"))  # exactly once per batch
    copy.awaitTermination()
    copied = spark.read.format("cdkds").load(f"file://{root}/shop/orders_copy").count()
    feed = spark.read.format("cdkds").option("readChangeFeed", "true").option("startingVersion", 2).load(url)
    print(f"streamed {copied} rows into shop/orders_copy; change feed of the overwrite: "
          f"{sorted(tuple(r) for r in feed.groupBy('_change_type').count().collect())}")

    from cdkds.connector import upsert

    changes = spark.range(5_000, 7_000).selectExpr(
        "'nz' AS tenant", "id AS userId", "concat('spark', id, '@nz.example') AS email",
        "timestamp_millis(1772330400000) AS updatedAt")  # 2026-03-01T02:00Z: newer than the rows above
    r = upsert(changes, f"file://{root}/shop/users")  # routed by index bucket to its tasks, one commit
    print(f"Spark upsert into shop/users: {r.inserted} inserted, {r.updated} updated (revision {r.revision})")
    spark.stop()


def run(root: str) -> None:
    main(root)
    with_spark(root)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        run(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory(prefix="cdkds-quickstart-") as folder:
            run(folder)
