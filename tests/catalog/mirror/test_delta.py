"""The Delta Lake mirror, proven with delta-rs (``deltalake``), not our own reader: after each
operation its rows at every retained version are cdkds's rows at that revision.

delta-rs 1.6.6 reads column-mapped tables with deletion vectors through its DataFusion
``QueryBuilder`` only: ``DeltaTable.to_pyarrow_table()`` and polars 2.1 (``read_delta`` /
``scan_delta``) refuse the ``columnMapping`` reader feature (checked below, so the day they
read it this test says so)."""

import datetime as dt
import decimal
import json
import shutil
import threading
import uuid
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder
from hypothesis import given, settings, strategies as st

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import MirrorError
from cdkds.catalog.mirror import delta as delta_module
from cdkds.catalog.mirror.delta import DeltaMirror
from cdkds.catalog.mirror.delta_log import DeltaListing
from cdkds.catalog.mirror.delta_schema import field_paths, parquet_fields
from tests.components import imported

kernel = imported("delta_kernel_rust_sharing_wrapper")

SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "g", "type": "string"},
    {"name": "v", "type": ["null", "int"], "default": None}]}


def rows(ids, g=None):
    return pa.table({"id": pa.array(list(ids), pa.int64()), "g": [g or "abc"[i % 3] for i in ids],
                     "v": pa.array([i % 7 if i % 5 else None for i in ids], pa.int32())})


def write(ds, table, mode="append"):
    with ds.writer(mode=mode) as w:
        w.write_batch(table)


def mirror(ds) -> DeltaMirror:
    """The framework's post-commit hook, by hand: the mirror brought up to the dataset."""
    m = DeltaMirror(ds.store, ds.name)
    m.update(ds.log, ds.snapshot)
    return m


def delta_table(url, version=None, options=None) -> pa.Table:
    dt_ = DeltaTable(url, version=version, storage_options=options)
    return pa.table(QueryBuilder().register("t", dt_).execute("select * from t").read_all())


def kernel_table(url) -> pa.Table:
    """The latest version as delta-kernel-rs reads it (the kernel DuckDB's delta extension is
    built on), through the Python wrapper delta-sharing uses; it resolves columns by field id."""
    url = url.rstrip("/") + "/"
    engine = kernel.PythonInterface(url)
    return pa.table(kernel.ScanBuilder(kernel.Table(url).snapshot(engine)).build().execute(engine))


def canonical(table: pa.Table) -> list:
    return sorted(table.to_pylist(), key=repr)


def assert_mirrors(repo, ds, versions=None, options=None, skip=()):
    """delta-rs reads every (or each given, but those to ``skip``) version as cdkds reads
    that revision, delta-kernel-rs the latest, and verify agrees."""
    ds = ds.refresh()
    assert DeltaMirror(ds.store, ds.name).verify(ds.log) == []
    oldest = DeltaListing.of(ds.store).oldest
    for version in versions if versions is not None else range(oldest, ds.version + 1):
        if version in skip:
            continue
        expected = repo.load(ds.name, version=version).to_table()
        got = delta_table(ds.store.url, version, options)
        assert got.column_names == expected.column_names, version
        assert canonical(got) == canonical(expected), f"version {version}"
    if kernel is not None and options is None:
        assert canonical(kernel_table(ds.store.url)) == canonical(ds.to_table())


@pytest.fixture
def lake(tmp_path):
    return DatasetRepository(f"file://{tmp_path}/lake")


def test_appends_overwrites_and_deletes_read_the_same_at_every_version(lake):
    ds = lake.create("t", DatasetDescriptor(SCHEMA, "identity(g)"))
    mirror(ds)
    for op in (lambda: write(ds, rows(range(20))), lambda: write(ds, rows(range(20, 26))),
               lambda: write(ds, rows([100, 101], g="a"), "overwrite_partitions"),
               lambda: ds.delete("id < 3 or v = 4"),  # whole files and tombstones: deletion vectors
               lambda: ds.delete("g = 'b'"), lambda: ds.compact(),
               lambda: write(ds, rows(range(200, 210)), "overwrite")):
        op()
        mirror(ds)
    assert_mirrors(lake, ds)
    log = (ds.store.read("_delta_log/00000000000000000000.json")).decode().splitlines()
    metadata = next(json.loads(a)["metaData"] for a in log if "metaData" in a)
    # a string identity partition is not a Delta partition (Delta reads "" as null): its statistics prune
    assert metadata["partitionColumns"] == [] and metadata["configuration"]["delta.columnMapping.mode"] == "id"


def test_hash_and_calendar_partitions_are_unpartitioned_files_with_statistics(lake):
    schema = {"type": "record", "name": "E", "fields": [
        {"name": "id", "type": "long"}, {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}}]}
    ds = lake.create("e", DatasetDescriptor(schema, "hash(id, 4), day(ts)"))
    base = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    write(ds, pa.table({"id": list(range(12)), "ts": [base + dt.timedelta(hours=7 * i, microseconds=i)
                                                      for i in range(12)]}))
    mirror(ds)
    assert_mirrors(lake, ds)
    actions = [json.loads(a) for a in ds.store.read("_delta_log/00000000000000000001.json").decode().splitlines()]
    adds = [a["add"] for a in actions if "add" in a]
    assert all(a["partitionValues"] == {} for a in adds)
    stats = json.loads(adds[0]["stats"])
    assert stats["nullCount"] == {"id": 0, "ts": 0} and set(stats["minValues"]) == {"id", "ts"}
    # filters that use the statistics still find every row
    t = DeltaTable(ds.store.url)
    got = pa.table(QueryBuilder().register("t", t).execute(
        "select id from t where ts >= '2026-01-02T11:00:00.000005Z'").read_all())
    assert sorted(got.column("id").to_pylist()) == [5, 6, 7, 8, 9, 10, 11]


def test_identity_partition_values_of_every_kind_and_paths_that_need_encoding(lake):
    schema = {"type": "record", "name": "P", "fields": [
        {"name": "id", "type": "long"}, {"name": "s", "type": ["null", "string"]},
        {"name": "n", "type": "int"}, {"name": "ok", "type": "boolean"},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "price", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}]}]}
    ds = lake.create("p", DatasetDescriptor(schema, "identity(s), identity(n), identity(ok), identity(day), "
                                                    "identity(at), identity(local), identity(price)"))
    at = dt.datetime(2026, 5, 6, 7, 8, 9, 123456, tzinfo=dt.timezone.utc)
    write(ds, pa.table({"id": [1, 2, 3, 4], "s": ["a b/c%d=e", "ü+?&#", None, ""], "n": pa.array([-1, 0, 7, 7], pa.int32()),
                        "ok": [True, False, True, True], "day": [dt.date(2026, 1, 2)] * 4,
                        "at": [at, at + dt.timedelta(seconds=1), at, at],
                        "local": pa.array([dt.datetime(2026, 1, 1, 0, 0, 0, 1)] * 4, pa.timestamp("us")),
                        "price": pa.array([decimal.Decimal("100.00"), decimal.Decimal("-0.05"), None,
                                           decimal.Decimal("1234567.89")], pa.decimal128(9, 2))}))
    mirror(ds)
    assert_mirrors(lake, ds)
    actions = [json.loads(a) for a in ds.store.read("_delta_log/00000000000000000001.json").decode().splitlines()]
    values = [a["add"]["partitionValues"] for a in actions if "add" in a]
    assert {"n": "-1", "ok": "true", "day": "2026-01-02", "at": "2026-05-06T07:08:09.123456Z",
            "local": "2026-01-01 00:00:00.000001", "price": "100.00"} in values  # delta-rs takes them from here, not the files
    metadata = json.loads(ds.store.read("_delta_log/00000000000000000000.json").decode().splitlines()[2])["metaData"]
    assert metadata["partitionColumns"] == ["n", "ok", "day", "at", "local", "price"]  # not the string: "" would read null
    got = pa.table(QueryBuilder().register("t", DeltaTable(ds.store.url)).execute(
        "select id from t where n = 7 and day = '2026-01-02'").read_all())
    assert sorted(got.column("id").to_pylist()) == [3, 4]


def test_keyed_upserts_and_deletes_are_deletion_vectors(lake):
    ds = lake.create("k", DatasetDescriptor(SCHEMA, record_key="id"))
    for op in (lambda: ds.upsert(rows(range(30))), lambda: ds.upsert(rows(range(10, 15), g="z")),
               lambda: ds.delete_keys(pa.table({"id": [1, 2, 20]})), lambda: ds.delete("v = 3"),
               lambda: ds.upsert(rows([2, 40], g="y"))):
        op()
        mirror(ds)
    assert_mirrors(lake, ds)
    assert ds.store.list("_delta_dv")
    protocol = json.loads(ds.store.read("_delta_log/00000000000000000000.json").decode().splitlines()[1])["protocol"]
    assert protocol["minReaderVersion"] == 3 and {"deletionVectors", "columnMapping"} <= set(protocol["readerFeatures"])


def test_large_deletion_vectors(lake):
    """Vectors over many roaring containers (positions past 65,535), and of every container kind."""
    ds = lake.create("big", DatasetDescriptor(SCHEMA, record_key="id"))
    n = 140_000
    ds.upsert(pa.table({"id": pa.array(range(n), pa.int64()), "g": pa.array(["x"] * n),
                        "v": pa.array([1] * n, pa.int32())}))
    mirror(ds)
    doomed = [i for i in range(n) if i % 3 == 0 or 70_000 <= i < 75_000] + list(range(131_072, 131_100, 2))
    ds.delete_keys(pa.table({"id": pa.array(doomed, pa.int64())}))
    mirror(ds)
    got = delta_table(ds.refresh().store.url)
    assert got.num_rows == n - len(set(doomed))
    assert sorted(got.column("id").to_pylist()) == sorted(ds.to_table().column("id").to_pylist())
    assert DeltaMirror(ds.store, ds.name).verify(ds.log) == []


def test_schema_changes_read_by_field_id(lake):
    ds = lake.create("s", DatasetDescriptor(SCHEMA))
    write(ds, rows(range(8)))
    mirror(ds)
    for change in (lambda a: a.drop("g"), lambda a: a.add("extra", "string", nullable=True), lambda a: a.widen("v", "long")):
        change(ds.alter()).commit()
        ds = ds.refresh()
        mirror(ds)
        write(ds, pa.table({"id": [50 + ds.version], **({"extra": ["x"]} if "extra" in ds.descriptor.fields else {})}))
        mirror(ds)
    assert_mirrors(lake, ds)


def test_a_rename_reads_right_once_the_files_before_it_are_rewritten(lake):
    """delta-rs 1.6.6 resolves columns by physical name even in id mode (the protocol says by
    field id): files written before a rename hold the field under its old name, so delta-rs
    reads it as null there until compaction rewrites them. Readers that follow the protocol
    (Spark's Delta in id mode) read it right at once."""
    ds = lake.create("r", DatasetDescriptor(SCHEMA))
    write(ds, rows(range(6)))
    ds.alter().rename("v", "w").commit()
    ds = ds.refresh()
    write(ds, pa.table({"id": [9], "g": ["q"], "w": pa.array([5], pa.int32())}))
    mirror(ds)
    schema = json.loads(json.loads(ds.store.read(f"_delta_log/{ds.version - 1:020d}.json").decode()
                                   .splitlines()[1])["metaData"]["schemaString"])
    w = schema["fields"][2]
    assert w["name"] == "w" and w["metadata"]["delta.columnMapping.id"] == 3
    got = {r["id"]: r["w"] for r in delta_table(ds.store.url).to_pylist()}
    assert got[9] == 5 and got[1] is None  # by physical name: the old files' column is "v"
    ds.compact()
    mirror(ds)
    assert_mirrors(lake, ds, versions=[ds.refresh().version])


@pytest.mark.needs("delta_kernel_rust_sharing_wrapper")
def test_delta_kernel_reads_a_renamed_field_by_id_at_once(lake):
    """delta-kernel-rs follows the protocol (id mode: columns by Parquet field id), so the
    files written before a rename read right without compaction."""
    ds = lake.create("rk", DatasetDescriptor(SCHEMA, record_key="id"))
    ds.upsert(rows(range(6)))
    ds.delete_keys(pa.table({"id": [2]}))
    ds.alter().rename("v", "w").commit()
    ds = ds.refresh()
    ds.upsert(pa.table({"id": [4, 9], "g": ["q", "q"], "w": pa.array([5, 6], pa.int32())}))
    mirror(ds)
    got = kernel_table(ds.store.url)
    assert got.column_names == ["id", "g", "w"] and canonical(got) == canonical(ds.to_table())
    assert {r["id"]: r["w"] for r in got.to_pylist()}[1] == 1


def test_a_field_added_with_a_default_is_refused_until_the_files_before_it_are_rewritten(lake):
    """Delta has no defaults for missing columns: files written before a field with a
    non-null default came would read null (or fail, if required) through Delta."""
    ds = lake.create("d", DatasetDescriptor(SCHEMA))
    write(ds, rows(range(6)))
    mirror(ds)
    before = ds.version
    ds.alter().add("region", "string", default="nz").commit()
    ds = ds.refresh()
    write(ds, pa.table({"id": [50], "g": ["q"], "region": ["au"]}))
    with pytest.raises(MirrorError, match=r"revision 2: field 'region' has a default.*stays at version 1"):
        mirror(ds.refresh())
    assert DeltaMirror(ds.store, ds.name).version() == before
    ds.compact()
    ds = ds.refresh()
    assert mirror(ds).version() == ds.version
    assert DeltaListing.of(ds.store).oldest == ds.version  # the mirror starts again there
    assert_mirrors(lake, ds)
    assert {r["region"] for r in delta_table(ds.store.url).to_pylist()} == {"nz", "au"}


@pytest.mark.parametrize("reuse", ["drop and add", "swap"])
def test_a_name_reused_by_another_field_is_refused_until_the_files_before_it_are_rewritten(lake, reuse):
    """Files written before hold the old field's column under the name: delta-rs (by name)
    would read it as the new field, silently."""
    ds = lake.create("n", DatasetDescriptor(SCHEMA))
    write(ds, rows(range(6)))
    mirror(ds)
    if reuse == "drop and add":
        ds.alter().drop("v").commit()
        ds.refresh().alter().add("v", "string", nullable=True).commit()
    else:
        ds.alter().rename("v", "tmp").commit()
        ds.refresh().alter().rename("g", "v").rename("tmp", "g").commit()
    ds = ds.refresh()
    write(ds, pa.table({"id": [99], "g": ["z"], "v": ["new"]}) if reuse == "drop and add" else
          pa.table({"id": [99], "v": ["new"], "g": pa.array([7], pa.int32())}))
    with pytest.raises(MirrorError, match=r"holds column '[vg]' of another field.*stays at version [12] "):
        mirror(ds)
    ds.compact()
    ds = ds.refresh()
    assert mirror(ds).version() == ds.version
    assert_mirrors(lake, ds)


def test_types(lake):
    schema = {"type": "record", "name": "T", "fields": [
        {"name": "id", "type": "int"},
        {"name": "d", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "local", "type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}]},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "raw", "type": "bytes"}, {"name": "f", "type": "float"}, {"name": "ok", "type": "boolean"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "point", "type": {"type": "record", "name": "P", "fields": [
            {"name": "x", "type": "double"}, {"name": "tags", "type": {"type": "array", "items": "string"}}]}},
        {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
    ]}
    ds = lake.create("types", DatasetDescriptor(schema, "identity(d)"))
    day = dt.date(2026, 3, 1)
    write(ds, pa.table({
        "id": pa.array([1, 2], pa.int32()), "d": [day, day],
        "ts": pa.array([dt.datetime(2026, 3, 1, 1, tzinfo=dt.timezone.utc)] * 2, pa.timestamp("ms", "UTC")),
        "local": pa.array([dt.datetime(2026, 3, 1, 2, 3, 4, 5), None], pa.timestamp("us")),
        "amount": pa.array([decimal.Decimal("1.25"), decimal.Decimal("-3.50")], pa.decimal128(12, 2)),
        "raw": [b"\x00\x01", b""], "f": pa.array([1.5, -2.0], pa.float32()), "ok": [True, False],
        "kind": ["A", "B"], "u": [str(uuid.UUID(int=1)), str(uuid.UUID(int=2))],
        "point": [{"x": 1.0, "tags": ["a"]}, {"x": 2.0, "tags": []}],
        "attrs": pa.array([[("k", 1)], [("k", None)]], pa.map_(pa.string(), pa.int64())),
    }))
    m = mirror(ds)
    assert_mirrors(lake, ds)
    protocol = json.loads(ds.store.read("_delta_log/00000000000000000000.json").decode().splitlines()[1])["protocol"]
    assert "timestampNtz" in protocol["readerFeatures"]
    assert m.version() == ds.version


def test_fixed_is_binary(lake):
    """Avro fixed is Parquet FIXED_LEN_BYTE_ARRAY in the files, Delta binary in the schema:
    delta-rs (and Spark) read it; delta-kernel-rs 0.x refuses the file's type."""
    schema = {"type": "record", "name": "F", "fields": [
        {"name": "id", "type": "int"}, {"name": "fx", "type": {"type": "fixed", "name": "F4", "size": 4}}]}
    ds = lake.create("fixed", DatasetDescriptor(schema))
    write(ds, pa.table({"id": pa.array([1, 2], pa.int32()), "fx": pa.array([b"abcd", b"wxyz"], pa.binary(4))}))
    mirror(ds)
    assert canonical(delta_table(ds.store.url)) == canonical(ds.to_table())
    if kernel is not None:
        with pytest.raises(Exception, match="FixedSizeBinary"):
            kernel_table(ds.store.url)


def test_refusals():
    assert "Parquet" in DeltaMirror.refusal(DatasetDescriptor(SCHEMA, format="avro"))
    keyed = {"type": "record", "name": "K", "fields": [
        {"name": "id", "type": "long"}, {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}}]}
    assert "ttl" in DeltaMirror.refusal(DatasetDescriptor(keyed, record_key="id", ordering_field="at",
                                                          properties={"ttl": "1d"}))
    timed = {"type": "record", "name": "T", "fields": [{"name": "t", "type": {"type": "int", "logicalType": "time-millis"}}]}
    assert "'t'" in DeltaMirror.refusal(DatasetDescriptor(timed))
    cased = {"type": "record", "name": "C", "fields": [{"name": "a", "type": "int"}, {"name": "A", "type": "int"}]}
    assert "'a' and 'A' differ only in case" in DeltaMirror.refusal(DatasetDescriptor(cased))
    wide = {"type": "record", "name": "W", "fields": [
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 0}}]}
    assert "precision 40" in DeltaMirror.refusal(DatasetDescriptor(wide))
    assert DeltaMirror.refusal(DatasetDescriptor(SCHEMA, "identity(g)")) is None


def test_update_refuses_what_cannot_be_mirrored(lake):
    ds = lake.create("avro", DatasetDescriptor(SCHEMA, format="avro"))
    write(ds, rows(range(3)))
    with pytest.raises(MirrorError, match="dataset 'avro': revision 1 cannot be mirrored.*Parquet"):
        mirror(ds)
    assert not ds.store.list("_delta_log")


def test_a_mirror_set_up_late_skips_the_revisions_it_cannot_describe(lake):
    timed = {"type": "record", "name": "T", "fields": [
        {"name": "id", "type": "long"}, {"name": "t", "type": ["null", {"type": "int", "logicalType": "time-millis"}]}]}
    ds = lake.create("late", DatasetDescriptor(timed))
    write(ds, pa.table({"id": [1, 2], "t": pa.array([1000, None], pa.time32("ms"))}))
    ds.alter().drop("t").commit()
    ds = ds.refresh()
    write(ds, pa.table({"id": [3]}))
    ds = ds.refresh()
    assert DeltaMirror(ds.store, ds.name).update(ds.log, ds.snapshot) == 1  # a checkpoint at the latest
    assert DeltaListing.of(ds.store).oldest == ds.version
    assert_mirrors(lake, ds)


def test_update_refuses_a_dataset_written_before_field_ids(tmp_path):
    shutil.copytree(Path(__file__).parent.parent.parent / "fixtures" / "legacy" / "lake", tmp_path / "lake")
    ds = DatasetRepository(f"file://{tmp_path}/lake").load("pq")
    with pytest.raises(MirrorError, match="before field ids"):
        mirror(ds)
    ds.alter().rename("region", "area").commit()  # records the name mapping
    assert "before field ids" in DeltaMirror.refusal(ds.refresh().descriptor)


def test_checkpoints_expiry_and_restarts(lake):
    ds = lake.create("c", DatasetDescriptor(SCHEMA, properties={"checkpoint.interval": "5",
                                                                "delta.checkpointInterval": "5"}))
    for i in range(12):
        write(ds, rows(range(i * 3, i * 3 + 3)))
        if i % 4 == 3:
            ds.delete(f"id = {i * 3}")
        mirror(ds)
    ds = ds.refresh()
    listing = DeltaListing.of(ds.store)
    assert 5 in listing.checkpoints and 10 in listing.checkpoints
    assert json.loads(ds.store.read("_delta_log/_last_checkpoint"))["version"] == max(listing.checkpoints)
    delta_module._STATES.clear()  # a new process: the state comes from the logs
    write(ds, rows([500]))
    assert DeltaMirror(ds.store, ds.name).update(ds.log, ds.refresh().snapshot) == 1
    assert DeltaMirror(ds.store, ds.name).update(ds.log, ds.refresh().snapshot) == 0  # idempotent
    assert_mirrors(lake, ds)
    # cdkds expires its log: the mirror drops the versions before the oldest retained revision
    ds.expire_log(dt.timedelta(0), force=True)
    for i in range(5):
        write(ds, rows([600 + i]))
        mirror(ds)
    ds = ds.refresh()
    oldest = ds.log.replay.oldest().version
    assert DeltaListing.of(ds.store).oldest == oldest > 0
    assert DeltaMirror(ds.store, ds.name).referenced() <= ds.log.retained_files()
    assert_mirrors(lake, ds)
    # a mirror that fell behind an expiry starts again at the oldest retained revision
    for i in range(12):
        write(ds, rows([700 + i]))
    ds.expire_log(dt.timedelta(0), force=True)
    ds = ds.refresh()
    oldest = ds.log.replay.oldest().version
    assert DeltaMirror(ds.store, ds.name).version() < oldest
    mirror(ds)
    assert DeltaListing.of(ds.store).oldest == oldest
    assert_mirrors(lake, ds)
    # a mirror started on an expired log begins with a checkpoint at the oldest retained revision
    ds.store.delete_tree("_delta_log")
    ds.store.delete_tree("_delta_dv")
    assert DeltaMirror(ds.store, ds.name).update(ds.log, ds.snapshot) == ds.version - oldest + 1
    assert DeltaListing.of(ds.store).oldest == oldest
    assert_mirrors(lake, ds)


def test_a_cleanup_cut_short_leaves_every_version_from_the_oldest_readable(lake, monkeypatch):
    """The versions an expiry leaves behind are deleted one object at a time: wherever that
    stops, the oldest version a reader (and vacuum) starts from still has every later one."""
    props = {"checkpoint.interval": "4", "delta.checkpointInterval": "4"}
    real_delete, k = type(lake.create("probe", DatasetDescriptor(SCHEMA)).store).delete, 0
    while True:
        k += 1
        ds = lake.create(f"c{k}", DatasetDescriptor(SCHEMA, properties=props))
        for i in range(9):
            write(ds, rows([i]))
            mirror(ds)
        ds.refresh().expire_log(dt.timedelta(0), force=True)
        calls = []

        def failing(store, key, *args, **kwargs):
            if key.startswith("_delta_log/"):
                calls.append(key)
                if len(calls) == k:
                    raise OSError("the store went away")
            return real_delete(store, key, *args, **kwargs)
        monkeypatch.setattr(type(ds.store), "delete", failing)
        for i in range(3):  # up to the next Delta checkpoint, where the cleanup runs
            write(ds.refresh(), rows([100 + i]))
            try:
                mirror(ds.refresh())
            except OSError:
                pass
        monkeypatch.setattr(type(ds.store), "delete", real_delete)
        ds = ds.refresh()
        assert DeltaMirror(ds.store, ds.name).referenced() >= set(ds.snapshot.files)
        oldest = ds.log.replay.oldest().version
        for version in range(DeltaListing.of(ds.store).oldest, ds.version + 1):
            got = delta_table(ds.store.url, version)  # older versions than cdkds retains still read
            if version >= oldest:
                assert canonical(got) == canonical(lake.load(ds.name, version=version).to_table()), version
        if len(calls) < k:  # the cleanup ran to its end
            break
    assert k > 2


def test_a_version_another_updater_wrote_is_taken_as_it_is(lake):
    ds = lake.create("two", DatasetDescriptor(SCHEMA))
    write(ds, rows(range(5)))
    ds.delete("id = 2")
    write(ds, rows(range(5, 9)))
    ds = ds.refresh()
    DeltaMirror(ds.store, ds.name).update(ds.log, ds.log.snapshot(version=1))
    late = DeltaMirror(ds.store, ds.name)
    late.version = lambda: 1  # it listed the mirror before the other updater went on
    assert DeltaMirror(ds.store, ds.name).update(ds.log, ds.snapshot) == ds.version - 1
    delta_module._STATES.clear()
    assert late.update(ds.log, ds.snapshot) == 0  # every version was there already: taken as it is
    assert_mirrors(lake, ds)


def test_updaters_racing_write_each_version_once(lake):
    ds = lake.create("race", DatasetDescriptor(SCHEMA, record_key="id", properties={"delta.checkpointInterval": "4"}))
    for i in range(9):
        ds.upsert(rows(range(i, i + 5)))
    ds = ds.refresh()
    counts = []

    def update():
        counts.append(DeltaMirror(ds.store, ds.name).update(ds.log, ds.snapshot))

    threads = [threading.Thread(target=update) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(counts) == ds.version + 1 and len(counts) == 3
    assert_mirrors(lake, ds)


def test_verify_names_what_disagrees(lake):
    ds = lake.create("v", DatasetDescriptor(SCHEMA))
    write(ds, rows(range(5)))
    m = mirror(ds)
    key = f"_delta_log/{ds.version:020d}.json"
    actions = [json.loads(a) for a in ds.store.read(key).decode().splitlines()]
    for a in actions:
        if "add" in a:
            a["add"]["size"] += 1
    ds.store.put(key, "".join(json.dumps(a) + "\n" for a in actions).encode())
    problems = m.verify(ds.log)
    assert problems and "size" in problems[0] and key in problems[0]

    keyed = lake.create("vk", DatasetDescriptor(SCHEMA, record_key="id"))
    keyed.upsert(rows(range(5)))
    keyed.delete_keys(pa.table({"id": [1]}))
    m = mirror(keyed)
    (vector,) = keyed.store.list("_delta_dv")
    keyed.store.delete(f"_delta_dv/{vector}")
    assert "the deletion vector of" in " ".join(m.verify(keyed.log))
    keyed.store.delete_tree("_delta_log")
    assert m.verify(keyed.log) == []  # no mirror: nothing to disagree


def test_polars_and_pyarrow_paths_refuse_column_mapping(lake):
    ds = lake.create("p", DatasetDescriptor(SCHEMA))
    write(ds, rows(range(3)))
    mirror(ds)
    with pytest.raises(Exception, match="columnMapping"):
        DeltaTable(ds.store.url).to_pyarrow_table()
    with pytest.raises(Exception, match="columnMapping"):
        pl.read_delta(ds.store.url)
    with pytest.raises(Exception, match="columnMapping"):
        pl.scan_delta(ds.store.url).collect()


OPERATIONS = st.sampled_from(["append", "overwrite", "overwrite_partitions", "delete", "compact", "add", "widen",
                              "drop", "upsert", "delete_keys", "add_default", "readd", "rename"])


def rewrite_everything(ds, keyed):
    """Every live file rewritten with the current schema (the rows unchanged)."""
    everything = ds.to_table()
    if keyed:
        ds.delete_keys(everything.select(["id"]))
        ds.refresh().compact()  # drops the files whose rows are all deleted
        ds.refresh().upsert(everything)
    else:
        write(ds, everything, "overwrite")
    return ds.refresh()


@settings(max_examples=10)
@given(st.booleans(), st.lists(st.tuples(OPERATIONS, st.integers(0, 40), st.booleans()), min_size=1, max_size=6))
def test_random_sequences_read_the_same_through_delta(tmp_path_factory, keyed, steps):
    """Any sequence of writes, deletes (tombstones, or vectors when keyed), upserts,
    compactions and schema changes reads the same through delta-rs at every version the
    mirror holds (and through delta-kernel-rs at the latest), with checkpoints every 3
    versions and the mirror's state sometimes rebuilt from the logs. A revision it cannot
    describe (a field added with a default, a name reused) is refused; once the files before
    it are rewritten, the mirror goes on. delta-rs reads a renamed field as null in files
    written before the rename (by physical name): it is not compared at those versions; the
    kernel (by field id) is, at the latest."""
    repo = DatasetRepository(f"file://{tmp_path_factory.mktemp('lake')}")
    properties = {"delta.checkpointInterval": "3"}
    ds = repo.create("h", DatasetDescriptor(SCHEMA, "identity(g)", record_key="id" if keyed else None,
                                            properties=properties))
    write(ds, rows(range(10)))
    mirror(ds)
    added, renames, v = 0, 0, "v"  # v: the name the field first called "v" has now
    for op, n, restart in steps:
        ds = ds.refresh()
        present = dict(ds.descriptor.fields)
        batch = rows(range(n, n + 4)).rename_columns(["id", "g", v])
        if v in present and present[v].kind == "string":
            batch = batch.set_column(2, v, pa.array([str(i) for i in range(n, n + 4)]))
        batch = batch.select([c for c in batch.column_names if c in present])
        if op in ("append", "overwrite", "overwrite_partitions") and not keyed or op == "upsert" and keyed:
            write(ds, batch, op) if op != "upsert" else ds.upsert(batch)
        elif op == "delete":
            ds.delete(f"id = {n} or id = {n + 1}")
        elif op == "delete_keys" and keyed:
            ds.delete_keys(pa.table({"id": pa.array([n, n + 2], pa.int64())}))
        elif op == "compact":
            ds.compact()
        elif op in ("add", "add_default"):
            added += 1
            default = {"default": f"d{n}"} if op == "add_default" else {"nullable": True}
            ds.alter().add(f"new{added}_{n}", "string", **default).commit()
        elif op == "widen" and v in present and present[v].kind == "int":
            ds.alter().widen(v, "long").commit()
        elif op == "drop" and v in present:
            ds.alter().drop(v).commit()
        elif op == "readd" and v in present:
            ds.alter().drop(v).commit()
            ds.refresh().alter().add(v, "string", nullable=True).commit()
        elif op == "rename" and v in present:
            renames += 1
            ds.alter().rename(v, f"r{renames}_{n}").commit()
            v = f"r{renames}_{n}"
        if restart:  # another process: the mirror's state is read back from the Delta log
            delta_module._STATES.clear()
        try:
            mirror(ds.refresh())
        except MirrorError as e:
            assert "stays at version" in str(e)
    ds = ds.refresh()
    if DeltaMirror(ds.store, ds.name).version() != ds.version:
        ds = rewrite_everything(ds, keyed)
        mirror(ds)
    by_name = {r for r in range(DeltaListing.of(ds.store).oldest, ds.version + 1) if renamed_in_files(repo, ds.name, r)}
    assert_mirrors(repo, ds, skip=by_name)


def renamed_in_files(repo, name, version) -> bool:
    """Whether a live file of the revision holds a field under a name it no longer has: readers
    resolving columns by physical name (delta-rs) read it as null there."""
    ds = repo.load(name, version=version)
    current = {i: p for p, i in field_paths(ds.descriptor.schema).items()}
    return any(current.get(i, p) != p for f in ds.snapshot.files.values()
               for p, i in parquet_fields(pq.read_schema(ds.store.path(f.path))).items())


@pytest.mark.slow
def test_on_s3(s3_endpoint):
    from tests.conftest import new_bucket, s3_options

    repo = DatasetRepository(f"s3://{new_bucket(s3_endpoint)}/lake", s3_options(s3_endpoint))
    ds = repo.create("s", DatasetDescriptor(SCHEMA, record_key="id"))
    for op in (lambda: ds.upsert(rows(range(20))), lambda: ds.delete_keys(pa.table({"id": [3, 4]})),
               lambda: ds.upsert(rows([5, 50], g="n"))):
        op()
        mirror(ds)
    options = {"AWS_ENDPOINT_URL": s3_endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
               "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    assert_mirrors(repo, ds, options=options)
