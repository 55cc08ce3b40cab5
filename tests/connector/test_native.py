"""cdkds.connector.load: planned by cdkds, read by Spark's own Parquet source, with the rows
and schema of the cdkds source for every rule (schema changes, tombstones, deletion
vectors, TTL), and the files it cannot read exactly left to the cdkds source."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections import Counter

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.connector import load, register
from cdkds.connector.s3a import NoS3aEquivalent, s3a_options
from tests.conftest import new_bucket, s3_options

pytestmark = pytest.mark.slow

EVENTS = {"type": "record", "name": "E", "fields": [
    {"name": "id", "type": "long"},
    {"name": "amount", "type": ["null", "int"], "default": None},
    {"name": "country", "type": ["null", "string"], "default": None},
    {"name": "price", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}],
     "default": None},
    {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None},
    {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None},
    {"name": "local", "type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}], "default": None},
    {"name": "uid", "type": ["null", {"type": "string", "logicalType": "uuid"}], "default": None},
    {"name": "code", "type": ["null", {"type": "fixed", "name": "Code", "size": 2}], "default": None},
    {"name": "kind", "type": ["null", {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}], "default": None},
    {"name": "address", "type": ["null", {"type": "record", "name": "Address", "fields": [
        {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "int"], "default": None}]}],
     "default": None},
    {"name": "tags", "type": ["null", {"type": "array", "items": "string"}], "default": None},
]}


def event(i: int) -> dict:
    import decimal
    import uuid

    null = i % 4 == 3
    return {"id": i, "amount": None if null else i * 10, "country": None if null else f"c{i % 3}",
            "price": None if null else decimal.Decimal(i) / 4, "day": dt.date(1000 + i * 50, 1, 2),
            "ts": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(hours=i),
            "local": dt.datetime(1900, 1, 1) + dt.timedelta(days=i), "uid": str(uuid.UUID(int=i)),
            "code": bytes([65 + i % 26, 66]), "kind": "AB"[i % 2],
            "address": None if null else {"city": f"x{i}", "zip": None if i % 2 else i},
            "tags": None if null else [f"t{i}"] * (i % 3)}


def rows(df) -> Counter:
    return Counter(json.dumps(r.asDict(recursive=True), default=repr, sort_keys=True) for r in df.collect())


def agrees(spark, url: str, **options):
    """load(...) has the schema and the rows of the cdkds source with the same options."""
    native = load(spark, url, **options)
    python = spark.read.format("cdkds").options(**{k: v if isinstance(v, str) else json.dumps(v)
                                                   for k, v in options.items()}).load(url)
    assert [(f.name, f.dataType.simpleString(), f.nullable, f.metadata) for f in native.schema.fields] == \
        [(f.name, f.dataType.simpleString(), f.nullable, f.metadata) for f in python.schema.fields]
    assert native.schema == python.schema
    assert rows(native) == rows(python)
    return native


def split(caplog) -> tuple[int, int]:
    """(files read natively, files left to the cdkds source) of the last load."""
    import re

    found = re.findall(r"(\d+) files read by Spark's Parquet source, (\d+) by the cdkds source", caplog.text)
    return int(found[-1][0]), int(found[-1][1])


@pytest.fixture
def lake(tmp_path):
    return f"file://{tmp_path}/a lake %20#+=é,x"  # Hadoop encodes these in its paths; cdkds must not care


def create(lake: str, name: str, descriptor: DatasetDescriptor, batches) -> str:
    ds = DatasetRepository(lake).create(name, descriptor)
    for batch in batches:
        with ds.writer() as w:
            w.write_batch(pa.Table.from_pylist(batch, schema=ds.descriptor.arrow_schema))
    return f"{lake}/{name}"


def test_a_clean_dataset_is_a_parquet_file_scan_with_spark_pruning_columns(spark, lake, caplog):
    caplog.set_level(logging.INFO, "cdkds.connector")
    url = create(lake, "events", DatasetDescriptor(EVENTS, partition_strategy="identity(country)"),
                 [[event(i) for i in range(8)], [event(i) for i in range(8, 12)]])
    df = agrees(spark, url)
    assert split(caplog) == (len(DatasetRepository(lake).load("events").files), 0)
    plan = df.select("amount").groupBy().sum("amount")._jdf.queryExecution().executedPlan().toString()
    assert "FileScan parquet" in plan and "ReadSchema: struct<amount:int>" in plan
    assert "PythonDataSource" not in plan and "BatchEvalPython" not in plan
    filtered = df.where("amount > 50")._jdf.queryExecution().executedPlan().toString()
    assert "PushedFilters: [IsNotNull(amount), GreaterThan(amount,50)]" in filtered
    agrees(spark, url, where="country = 'c1' or amount is null", columns="id, address, amount")
    agrees(spark, f"view:{url}?country=c2")


def test_renames_adds_widenings_and_drops_are_read_by_field_id(spark, lake, caplog):
    caplog.set_level(logging.INFO, "cdkds.connector")
    url = create(lake, "events", DatasetDescriptor(EVENTS), [[event(i) for i in range(6)]])
    ds = DatasetRepository(lake).load("events")
    ds.alter().rename("country", "region").rename("address.city", "town").add("address.street", "string") \
        .drop("tags").add("score", "long", default=7).add("note", "string").widen("amount", "long").commit()
    with ds.refresh().writer() as w:
        w.write_batch(pa.Table.from_pylist([{"id": 100, "amount": 2**40, "region": "nz", "score": 1}],
                                           schema=ds.descriptor.arrow_schema))
    df = agrees(spark, url)
    assert df.columns[:3] == ["id", "amount", "region"] and "tags" not in df.columns
    assert split(caplog) == (2, 0)
    agrees(spark, url, where="region = 'c1' or score = 1", columns="amount,score")
    agrees(spark, url, versionAsOf=1)  # the revision before the schema change


def test_a_cast_spark_could_do_differently_falls_back_for_those_files_only(spark, lake, caplog):
    caplog.set_level(logging.INFO, "cdkds.connector")
    url = create(lake, "events", DatasetDescriptor(EVENTS), [[event(i) for i in range(5)]])
    ds = DatasetRepository(lake).load("events")
    ds.alter().widen("id", "double").commit()  # long -> double: pyarrow refuses what does not fit, Spark rounds
    with ds.refresh().writer() as w:
        w.write_batch(pa.Table.from_pylist([{**event(7), "id": 7.5}], schema=ds.descriptor.arrow_schema))
    agrees(spark, url)
    assert split(caplog) == (1, 1)
    assert "Spark's cast of int64 to double may differ from cdkds's" in caplog.text


def test_predicate_deletes_keep_rows_whose_predicate_is_null(spark, lake, caplog):
    caplog.set_level(logging.INFO, "cdkds.connector")
    url = create(lake, "events", DatasetDescriptor(EVENTS), [[event(i) for i in range(12)]])
    ds = DatasetRepository(lake).load("events")
    ds.delete("amount > 40")
    ds.delete("country = 'c0'")
    df = agrees(spark, url)
    assert sorted(r.id for r in df.collect()) == [1, 2, 3, 4, 7, 11]  # 3, 7, 11: null amount and country
    assert split(caplog) == (1, 0)
    agrees(spark, url, versionAsOf=1)


USERS = {"type": "record", "name": "User", "fields": [
    {"name": "tenant", "type": "string"}, {"name": "userId", "type": "long"},
    {"name": "email", "type": ["null", "string"], "default": None},
    {"name": "updatedAt", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "expiresAt", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None}]}


def test_upserts_deletion_vectors_drop_rows_by_position(spark, lake, caplog):
    caplog.set_level(logging.INFO, "cdkds.connector")
    repo = DatasetRepository(lake)
    ds = repo.create("users", DatasetDescriptor(USERS, record_key=["tenant", "userId"], ordering_field="updatedAt",
                                                partition_strategy="identity(tenant)"))
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    ds.upsert([{"tenant": t, "userId": i, "email": f"{t}{i}", "updatedAt": now} for t in ("a b", "c") for i in range(30)])
    ds.upsert([{"tenant": "a b", "userId": i, "email": "new", "updatedAt": now} for i in range(0, 30, 3)])
    ds.delete_keys([("c", i) for i in range(5)])
    assert any(f.deletes for f in ds.refresh().files)
    df = agrees(spark, f"{lake}/users")
    assert df.count() == 55 and df.where("email = 'new'").count() == 10
    assert split(caplog)[1] == 0
    assert "SortMergeJoin" not in df._jdf.queryExecution().executedPlan().toString()  # broadcast
    agrees(spark, f"{lake}/users", where="userId < 10", columns="email")


@pytest.fixture
def committed_at(monkeypatch):
    """Commits made as if at a given time (ms): reads, here and in Spark's workers, use the real clock."""
    import importlib
    import sys

    def at(ms):
        for name in ("cdkds.catalog.log.commit", "cdkds.catalog.keyed.operations", "cdkds.catalog.dataset"):
            module = sys.modules.get(name) or importlib.import_module(name)
            if hasattr(module, "clock"):
                monkeypatch.setattr(module, "clock", lambda: ms)
    return at


def test_ttl_by_field_and_by_commit_time(spark, lake, caplog, committed_at):
    caplog.set_level(logging.INFO, "cdkds.connector")
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    rows_of = lambda first: [{"tenant": "t", "userId": first + i, "updatedAt": now,  # noqa: E731
                              "expiresAt": [None, now - dt.timedelta(hours=1), now + dt.timedelta(days=1)][i % 3]}
                             for i in range(6)]
    committed_at(int(now.timestamp() * 1000) - 2 * 3600_000)
    ds = DatasetRepository(lake).create("users", DatasetDescriptor(USERS, record_key=["tenant", "userId"],
                                                                   properties={"ttl": "1h", "ttl.field": "expiresAt"}))
    ds.upsert(rows_of(0))  # committed two hours ago: its rows without an expiry have expired
    committed_at(int(now.timestamp() * 1000))
    ds.refresh().upsert(rows_of(100))
    df = agrees(spark, f"{lake}/users")
    assert sorted(r.userId for r in df.collect()) == [2, 5, 100, 102, 103, 105]
    assert split(caplog)[1] == 0


def test_avro_files_are_read_by_the_cdkds_source(spark, lake, caplog):
    caplog.set_level(logging.INFO, "cdkds.connector")
    url = create(lake, "events", DatasetDescriptor(EVENTS, format="avro"), [[event(i) for i in range(4)]] * 2)
    agrees(spark, url, where="amount > 0")
    assert split(caplog) == (0, 2) and "2 because avro files are read by cdkds" in caplog.text


def test_an_empty_plan_is_an_empty_frame_of_the_schema(spark, lake):
    url = create(lake, "events", DatasetDescriptor(EVENTS), [[event(i) for i in range(4)]])
    assert agrees(spark, url, where="id > 100").count() == 0


@pytest.mark.parametrize("options, message", [
    ({"versionAsOf": "x"}, "option versionAsOf must be an integer >= 0, got 'x'"),
    ({"colums": "id"}, "unknown option 'colums' \\(did you mean columns\\?"),
    ({"where": "id >>> 1"}, "option where: "),
    ({"columns": "id, nope"}, "nope"),
    ({"versionAsOf": "9"}, "9"),
    ({"storageOptions": "{bad"}, "storageOptions must be a JSON object"),
])
def test_bad_options_raise_the_errors_of_the_cdkds_source(spark, lake, options, message):
    url = create(lake, "events", DatasetDescriptor(EVENTS), [[event(0)]])
    with pytest.raises(Exception, match=message):
        spark.read.format("cdkds").options(**options).load(url).collect()
    with pytest.raises(Exception, match=message):
        load(spark, url, **options)


def test_s3_without_hadoop_aws_falls_back_to_the_cdkds_source(spark, s3_endpoint, caplog):
    caplog.set_level(logging.INFO, "cdkds.connector")
    lake = f"s3://{new_bucket(s3_endpoint)}/lake"
    storage = {**s3_options(s3_endpoint), "key": "testing", "secret": "testing"}
    ds = DatasetRepository(lake, storage).create("events", DatasetDescriptor(EVENTS))
    with ds.writer() as w:
        w.write_batch(pa.Table.from_pylist([event(i) for i in range(4)], schema=ds.descriptor.arrow_schema))
    df = agrees(spark, f"{lake}/events", storageOptions=storage)
    assert "PythonDataSource" in df._jdf.queryExecution().executedPlan().toString() or df.count() == 4
    assert "dataset 'events' read by the cdkds source, not Spark's Parquet source: the Spark session has no s3a " \
           "file system (hadoop-aws)" in caplog.text


def test_s3a_options_of_fsspec_storage_options():
    assert s3a_options({"client_kwargs": {"endpoint_url": "http://h:9000", "region_name": "eu-west-1"}, "key": "k",
                        "secret": "s", "use_listings_cache": False}) == {
        "fs.s3a.endpoint": "http://h:9000", "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false", "fs.s3a.endpoint.region": "eu-west-1",
        "fs.s3a.access.key": "k", "fs.s3a.secret.key": "s"}
    with pytest.raises(NoS3aEquivalent, match="storage option 'requester_pays' has no s3a equivalent"):
        s3a_options({"requester_pays": True})


def test_register_native_views_are_pinned_to_their_revision(spark, lake):
    url = create(lake, "events", DatasetDescriptor(EVENTS), [[event(i) for i in range(4)]])
    assert register(spark, lake, native=True) == ["events"]
    plan = spark.sql("SELECT sum(amount) FROM events")._jdf.queryExecution().executedPlan().toString()
    assert "FileScan parquet" in plan
    assert spark.sql("SELECT count(*) AS n FROM events").first().n == 4
    with DatasetRepository(lake).load("events").writer() as w:
        w.write_batch(pa.Table.from_pylist([event(9)], schema=DatasetDescriptor(EVENTS).arrow_schema))
    assert spark.sql("SELECT count(*) AS n FROM events").first().n == 4  # pinned
    register(spark, lake, native=True)
    assert spark.sql("SELECT count(*) AS n FROM events").first().n == 5
    assert url


ORDERS = {"type": "record", "name": "O", "fields": [
    {"name": "id", "type": "long"},
    {"name": "lines", "type": ["null", {"type": "array", "items": ["null", {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}]}], "default": None},
    {"name": "notes", "type": ["null", {"type": "map", "values": {"type": "record", "name": "Note", "fields": [
        {"name": "text", "type": ["null", "string"], "default": None}, {"name": "stars", "type": "float"}]}}],
     "default": None},
]}


def test_records_in_lists_and_maps_are_converted_with_null_parents_kept_null(spark, lake, caplog):
    caplog.set_level(logging.INFO, "cdkds.connector")
    rows = [{"id": 1, "lines": [{"sku": "a", "qty": 2}, None], "notes": {"x": {"text": None, "stars": 1.5}}},
            {"id": 2, "lines": None, "notes": None}, {"id": 3, "lines": [], "notes": {}}]
    url = create(lake, "orders", DatasetDescriptor(ORDERS), [rows])
    ds = DatasetRepository(lake).load("orders")
    ds.alter().rename("lines.sku", "product").widen("lines.qty", "long").add("lines.unit", "string") \
        .widen("notes.stars", "double").rename("notes.text", "body").commit()
    with ds.refresh().writer() as w:
        w.write_batch(pa.Table.from_pylist([{"id": 4, "lines": [{"product": "b", "qty": 2**40, "unit": "kg"}],
                                             "notes": {"y": {"body": "hi", "stars": 0.1}}}],
                                           schema=ds.descriptor.arrow_schema))
    df = agrees(spark, url)
    assert split(caplog) == (2, 0)
    assert df.where("id = 2").first().lines is None


def test_ancient_dates_and_times_read_as_cdkds_reads_them_whatever_the_rebase_mode(spark, lake):
    url = create(lake, "events", DatasetDescriptor(EVENTS), [[event(i) for i in range(4)]])
    key = "spark.sql.parquet.datetimeRebaseModeInRead"
    before = spark.conf.get(key)
    spark.conf.set(key, "LEGACY")  # Spark would shift dates before 1582 from the hybrid calendar
    try:
        df = agrees(spark, url)
    finally:
        spark.conf.set(key, before)
    assert sorted(r.day for r in df.collect())[0] == dt.date(1000, 1, 2)
