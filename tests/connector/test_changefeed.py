"""The change feed through Spark: option("readChangeFeed", "true"), batch and streaming,
against Dataset.changes (one implementation: the same plan, read on executors)."""

from __future__ import annotations

import time


import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.connector.changefeed import ChangeFeedStreamReader
from cdkds.connector.feed import StreamingReadError
from cdkds.connector.options import InvalidOptionError, change_feed_options, location
from cdkds.connector.source import CdkdsDataSource

KEYED = {"type": "record", "name": "K", "fields": [
    {"name": "k", "type": "long"}, {"name": "v", "type": ["null", "string"], "default": None},
    {"name": "o", "type": "long"}]}


def keyed(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("k", DatasetDescriptor(KEYED, record_key=["k"], ordering_field="o",
                                            properties={"index.buckets": "4"}))
    ds.upsert([{"k": i, "v": "a", "o": 1} for i in range(20)])  # 1
    ds.upsert([{"k": i, "v": "b", "o": 2} for i in range(5, 25)])  # 2
    ds.delete_keys([0, 1])  # 3
    ds.compact()  # 4: nothing
    ds.delete("k >= 23")  # 5
    return repo, ds


def rows(df_or_table):
    items = df_or_table.collect() if hasattr(df_or_table, "collect") else df_or_table.to_pylist()
    out = []
    for r in items:
        r = r.asDict() if hasattr(r, "asDict") else r
        out.append((r["_commit_version"], r["_change_type"], r["k"], r["v"]))
    return sorted(out)


@pytest.mark.slow
def test_batch_change_feed_equals_the_python_one(spark, tmp_path):
    repo, ds = keyed(tmp_path)
    url = f"{repo.url}/k"
    df = spark.read.format("cdkds").option("readChangeFeed", "true").option("startingVersion", 2).load(url)
    assert df.schema.names == ["k", "v", "o", "_change_type", "_commit_version", "_commit_timestamp"]
    assert rows(df) == rows(ds.changes(2).read_all())
    assert {r[1] for r in rows(df)} == {"update_preimage", "update_postimage", "insert", "delete"}
    ranged = spark.read.format("cdkds").option("readChangeFeed", "true").option("startingVersion", 1) \
        .option("endingVersion", 2).option("columns", "k,v").load(url)
    assert ranged.schema.names == ["k", "v", "_change_type", "_commit_version", "_commit_timestamp"]
    assert rows(ranged) == rows(ds.changes(1, 2, ["k", "v"]).read_all())
    stamp = {h.revision: h.timestamp for h in ds.history()}
    by_time = spark.read.format("cdkds").option("readChangeFeed", "true") \
        .option("startingTimestamp", str(stamp[3])).option("endingTimestamp", str(stamp[3])).load(url)
    assert {r[0] for r in rows(by_time)} == {3}
    first = df.orderBy("_commit_version").first()
    assert abs(first["_commit_timestamp"].timestamp() * 1000 - stamp[first["_commit_version"]]) < 1


@pytest.mark.slow
@pytest.mark.parametrize("options, message", [
    ({}, "needs option startingVersion or startingTimestamp"),
    ({"startingVersion": "1", "startingTimestamp": "2026-01-01"}, "not both"),
    ({"startingVersion": "x"}, "startingVersion must be 'latest' or a revision"),
    ({"startingVersion": "latest"}, "startingVersion=latest is for streams"),
    ({"startingVersion": "1", "endingTimestamp": "soon"}, "endingTimestamp must be a time"),
    ({"startingVersion": "1", "versionAsOf": "2"}, "versionAsOf cannot be combined with readChangeFeed"),
    ({"startingVersion": "1", "where": "k = 1"}, "where cannot be combined"),
    ({"startingVersion": "1", "endingVersion": "2", "endingTimestamp": "2026-01-01"}, "not both"),
    ({"startingVersion": "9"}, "no revision 9"),
    ({"startingVersion": "1", "columns": "k,nope"}, "unknown column 'nope'"),
])
def test_bad_change_feed_options(spark, tmp_path, options, message):
    repo, _ = keyed(tmp_path)
    reader = spark.read.format("cdkds").option("readChangeFeed", "true")
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception, match=message):
        reader.load(f"{repo.url}/k").collect()


@pytest.mark.slow
def test_streaming_change_feed_resumes_from_its_checkpoint(spark, tmp_path):
    repo, ds = keyed(tmp_path)
    url = f"{repo.url}/k"
    sink = tmp_path / "sink"
    checkpoint = str(tmp_path / "checkpoint")

    def run():
        query = (spark.readStream.format("cdkds").option("readChangeFeed", "true").option("startingVersion", 1)
                 .option("maxFilesPerTrigger", 2).load(url)
                 .writeStream.format("parquet").option("path", str(sink)).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        return query

    query = run()
    assert len([p for p in query.recentProgress if p["numInputRows"]]) > 1  # rate limited: several batches
    assert rows(spark.read.parquet(str(sink))) == rows(ds.changes(1).read_all())
    ds.upsert([{"k": 99, "v": "new", "o": 1}])
    run()
    assert rows(spark.read.parquet(str(sink))) == rows(ds.changes(1).read_all())  # each change once


@pytest.mark.slow
def test_streaming_change_feed_options(spark, tmp_path):
    repo, _ = keyed(tmp_path)
    for options, message in [({"startingVersion": "1", "endingVersion": "2"}, "a streaming change feed has no end"),
                             ({"startingVersion": "soon"}, "startingVersion must be 'latest' or a revision")]:
        reader = spark.readStream.format("cdkds").option("readChangeFeed", "true")
        for k, v in options.items():
            reader = reader.option(k, v)
        query = reader.load(f"{repo.url}/k").writeStream.format("noop") \
            .option("checkpointLocation", str(tmp_path / f"ck-{len(message)}")).start()
        with pytest.raises(Exception, match=message):
            query.awaitTermination(60)


@pytest.mark.slow
def test_streaming_change_feed_from_latest_reads_only_later_commits(spark, tmp_path):
    repo, ds = keyed(tmp_path)
    seen = []
    query = (spark.readStream.format("cdkds").option("readChangeFeed", "true").option("startingVersion", "latest")
             .load(f"{repo.url}/k").writeStream
             .foreachBatch(lambda df, _: seen.extend(rows(df)))
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        deadline = time.time() + 60
        while not query.recentProgress and time.time() < deadline:
            time.sleep(0.2)
        ds.upsert([{"k": 7, "v": "c", "o": 3}])
        while not seen and time.time() < deadline:
            time.sleep(0.2)
    finally:
        query.stop()
    assert sorted(seen) == [(6, "update_postimage", 7, "c"), (6, "update_preimage", 7, "b")]


# ---------------------------------------------------------------- the readers as Spark drives them (no session)

def stream_reader(url, **options):
    given = {"path": url, "readChangeFeed": "true", **{k: str(v) for k, v in options.items()}}
    schema = CdkdsDataSource(given).schema()
    return ChangeFeedStreamReader(location(given), change_feed_options(given, "k", True), schema)


def batch_rows(reader, start, end):
    return sorted((r["_commit_version"], r["_change_type"], r["k"]) for p in reader.partitions(start, end)
                  for b in reader.read(p) for r in b.to_pylist())


def test_a_replayed_first_batch_reads_what_it_read_first(tmp_path):
    """Found in review: with startingTimestamp, the replayed first batch (Spark plans it from
    initialOffset() again) started at a later revision and lost the first commits' rows."""
    repo, ds = keyed(tmp_path)
    url = f"{repo.url}/k"
    after = ds.history()[-1].timestamp + 1
    time.sleep(0.01)
    ds.upsert([{"k": 50, "v": "x", "o": 1}])  # 6
    first = stream_reader(url, startingTimestamp=after)
    start = first.initialOffset()
    end = first.latestOffset(start, first.getDefaultReadLimit())
    assert batch_rows(first, start, end) == [(6, "insert", 50)]
    ds.upsert([{"k": 51, "v": "y", "o": 1}])  # 7: lands before the restart
    again = stream_reader(url, startingTimestamp=after)
    assert again.initialOffset() == start  # a constant: resolved by the first batch's end
    assert batch_rows(again, again.initialOffset(), end) == [(6, "insert", 50)]
    assert again.latestOffset(end, again.getDefaultReadLimit()) != end  # then revision 7
    assert first.latestOffset(end, first.getDefaultReadLimit()) != end
    nothing_new = first.latestOffset(end, first.getDefaultReadLimit())
    assert first.latestOffset(nothing_new, first.getDefaultReadLimit()) == nothing_new  # no empty batches


def test_a_renamed_column_fails_the_stream(tmp_path):
    repo, ds = keyed(tmp_path)
    reader = stream_reader(f"{repo.url}/k", startingVersion=1)
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    ds.alter().rename("v", "w").add("v", "string", nullable=True).commit()
    ds.upsert([{"k": 60, "w": "old v", "v": "new v", "o": 1}])
    with pytest.raises(StreamingReadError, match=r"renames column 'v' to 'w'.*restart the query"):
        reader.latestOffset(end, reader.getDefaultReadLimit())


def test_a_batch_feed_has_the_schema_of_its_end(tmp_path):
    repo, ds = keyed(tmp_path)
    ds.alter().add("z", "long", nullable=True).commit()
    given = {"path": f"{repo.url}/k", "readChangeFeed": "true", "startingVersion": "1", "endingVersion": "2"}
    assert CdkdsDataSource(given).schema().names == ["k", "v", "o", "_change_type", "_commit_version",
                                                     "_commit_timestamp"]
    assert "z" in CdkdsDataSource({**given, "endingVersion": str(ds.version)}).schema().names
    with pytest.raises(Exception, match="option endingTimestamp=1000: .*no revision at or before"):
        CdkdsDataSource({**given, "endingVersion": None, "endingTimestamp": "1000"}).schema()


def test_a_field_named_like_a_change_column_fails_the_feed_unless_left_out(tmp_path):
    repo, ds = keyed(tmp_path)
    ds.alter().add("_COMMIT_VERSION", "long", nullable=True).commit()
    given = {"path": f"{repo.url}/k", "readChangeFeed": "true", "startingVersion": "1"}
    with pytest.raises(InvalidOptionError, match="field '_COMMIT_VERSION' has the name of a change feed column"):
        CdkdsDataSource(given).schema()
    assert CdkdsDataSource({**given, "columns": "k,v"}).schema().names == ["k", "v", "_change_type", "_commit_version",
                                                                          "_commit_timestamp"]
