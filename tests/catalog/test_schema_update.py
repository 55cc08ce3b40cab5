"""dataset.alter(): schema changes by field id, committed as metadata only."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import CdkdsError, CommitConflictError, IncompatibleDescriptorError, SchemaMismatchError

SCHEMA = {"type": "record", "name": "E", "fields": [
    {"name": "id", "type": "long"},
    {"name": "a", "type": "int"},
    {"name": "c", "type": ["null", "string"], "default": None},
    {"name": "g", "type": "string"},
    {"name": "s", "type": {"type": "record", "name": "S", "fields": [
        {"name": "x", "type": "int"}, {"name": "y", "type": ["null", "string"], "default": None}]}},
    {"name": "items", "type": {"type": "array", "items": {"type": "record", "name": "I", "fields": [
        {"name": "sku", "type": "string"}]}}},
]}


def row(i, **extra):
    return {"id": i, "a": i * 10, "c": f"c{i}", "g": "gh"[i % 2], "s": {"x": i, "y": f"y{i}"},
            "items": [{"sku": f"k{i}"}], **extra}


def make(repo, fmt="parquet", rows=range(4), **kwargs):
    ds = repo.create("e", DatasetDescriptor(SCHEMA, partition_strategy="identity(g)", format=fmt, **kwargs))
    with ds.writer() as w:
        for i in rows:
            w.write(row(i))
    return ds


def data_files(ds):
    return sorted((k, s) for k, s in ds.store.walk_files("data"))


def table(ds, **kwargs):
    return sorted(ds.to_table(**kwargs).to_pylist(), key=lambda r: r["id"])


@pytest.mark.parametrize("fmt", ["parquet", "avro"])
def test_every_change_is_metadata_only_and_old_files_read_by_id(repo, backend, fmt):
    ds = make(repo, fmt)
    files = data_files(ds)
    revision = ds.alter().rename("a", "b").drop("c").add("d", "long", default=0).widen("b", "double") \
        .move("b", first=True).rename("s.x", "xx").add("s.z", "string").add("items.qty", "int", default=1) \
        .move("s.y", first=True).commit()
    assert revision == ds.version == 2 and data_files(ds) == files  # no data file written or rewritten
    assert ds.history()[-1].operation == "alter" and len(ds.history()[-1].info["changes"]) == 9
    rows = table(ds)
    assert list(rows[0]) == ["b", "id", "g", "s", "items", "d"]
    assert rows[1] == {"b": 10.0, "id": 1, "g": "h", "s": {"y": "y1", "xx": 1, "z": None},
                       "items": [{"sku": "k1", "qty": 1}], "d": 0}
    assert table(repo.load("e", version=1))[1] == row(1)  # an old revision reads with its own schema
    fresh = DatasetRepository(*backend).load("e")
    assert table(fresh) == rows


def test_a_dropped_field_never_comes_back_under_a_new_field_of_its_name(repo):
    ds = make(repo)
    ds.alter().drop("c").commit()
    ds.alter().add("c", "string").commit()
    assert {r["c"] for r in table(ds)} == {None}
    assert ds.plan(where="c = 'c1'").files == [] or table(ds, where="c = 'c1'") == []
    assert len(table(ds, where="c is null")) == 4  # old statistics of the dropped field do not prune these
    with ds.writer() as w:
        w.write({**{k: v for k, v in row(9).items() if k != "c"}, "c": "new"})
    assert [r["id"] for r in table(ds, where="c = 'new'")] == [9]
    compaction = ds.compact()
    rewritten = [f for f in ds.files if f.revision == compaction]
    assert rewritten
    for f in rewritten:  # compaction left the dropped values out: only the new field's column is there
        with ds.store.fs.open(ds.store.path(f.path)) as stream:
            ids = [c.metadata[b"PARQUET:field_id"] for c in pq.ParquetFile(stream).schema_arrow if c.name == "c"]
        assert ids == [str(ds.descriptor.field_ids["c"]).encode()]
    assert {r["id"]: r["c"] for r in table(ds)} == {0: None, 1: None, 2: None, 3: None, 9: "new"}


@pytest.mark.parametrize("fmt", ["parquet", "avro"])
def test_a_field_dropped_and_added_in_one_alter_is_a_new_field(repo, fmt):
    ds = make(repo, fmt)
    ds.alter().drop("c").add("c", "string").drop("s.y").add("s.y", "string").rename("a", "old_a") \
        .add("a", "int", default=-1).commit()
    assert {(r["c"], r["s"]["y"], r["a"]) for r in table(ds)} == {(None, None, -1)}
    assert table(ds, where="c = 'c1'") == [] and len(table(ds, where="c is null")) == 4
    assert [r["old_a"] for r in table(ds)] == [0, 10, 20, 30]


def test_partition_source_key_and_ordering_follow_a_rename(repo):
    ds = make(repo, record_key="id", ordering_field="a")
    ds.alter().rename("g", "group").rename("id", "key").rename("a", "version").commit()
    d = ds.descriptor
    assert d.record_key == ("key",) and d.ordering_field == "version"
    assert d.partition_strategy.to_text() == "identity(group) as g_copy"  # the partition keeps its name: paths stay
    assert len(ds.plan(where="group = 'g'").files) == 1
    result = ds.upsert([{"key": 1, "version": 99, "group": "h", "s": {"x": 0}, "items": []}])
    assert result.updated == 1 and ds.get(1)["version"] == 99 and ds.get(2)["version"] == 20
    assert all("g_copy=" in f.path for f in ds.files)


def test_tombstones_follow_renames_and_block_drops_until_compacted(repo, backend):
    ds = make(repo, rows=range(6))
    ds.delete("a = 10")  # a tombstone: the file holds other rows too
    assert ds.snapshot.tombstones
    ds.alter().rename("a", "b").commit()
    ds.checkpoint()
    for d in (ds, DatasetRepository(*backend).load("e")):
        assert [r["id"] for r in table(d)] == [0, 2, 3, 4, 5]
    with pytest.raises(IncompatibleDescriptorError, match="live delete 'b = 10'.*compact"):
        ds.alter().drop("b").commit()
    with pytest.raises(IncompatibleDescriptorError, match="live delete 'b = 10'.*'b' was dropped.*compact"):
        ds.alter().drop("b").add("b", "long").commit()  # another field under its name: row 1 would come back
    assert [r["id"] for r in table(ds)] == [0, 2, 3, 4, 5]
    ds.compact()
    ds.alter().drop("b").commit()
    assert [r["id"] for r in table(ds)] == [0, 2, 3, 4, 5]


def test_statistics_follow_renames_and_widening(repo, backend):
    ds = make(repo, rows=range(4))
    with ds.writer() as w:
        for i in range(100, 104):
            w.write(row(i))
    assert len(ds.plan(where="a >= 1000").files) == 2  # of 4: the first write's files are pruned by statistics
    ds.alter().rename("a", "amount").widen("amount", "double").commit()
    assert len(ds.plan(where="amount >= 1000.5").files) == 2
    assert [r["id"] for r in table(ds, where="amount >= 1000.5")] == [101, 102, 103]
    fresh = DatasetRepository(*backend).load("e")
    assert len(fresh.plan(where="amount >= 1000.5").files) == 2 and len(fresh.plan().files) == 4


BAD = [
    ("narrowing", lambda a: a.widen("a", "long").widen("a", "int"), r"cannot widen field 'a' from long to int"),
    ("a new type", lambda a: a.widen("c", "long"), r"cannot widen field 'c' from string to long"),
    ("rename onto an existing name", lambda a: a.rename("a", "c"), r"field 'c' already exists"),
    ("nested rename onto an existing name", lambda a: a.rename("s.x", "y"), r"field 's.y' already exists"),
    ("drop a partition source", lambda a: a.drop("g"), r"'g' is the dataset's partition source"),
    ("drop a key field", lambda a: a.drop("id"), r"'id' is the dataset's record key field"),
    ("required without a default", lambda a: a.add("z", "int", nullable=False), r"required field 'z' without a default"),
    ("a default of the wrong type", lambda a: a.add("z", "int", default="x"), r"default 'x'"),
    ("an unknown field", lambda a: a.rename("nope", "n"), r"no field 'nope'"),
    ("an unknown nested field", lambda a: a.drop("s.nope"), r"no field 's.nope'"),
    ("a field that is no record", lambda a: a.add("a.z", "int"), r"field 'a' is a int, not a record"),
    ("a bad name", lambda a: a.rename("a", "1x"), r"cannot rename field 'a' to '1x'"),
    ("an unknown type", lambda a: a.add("z", "varchar"), r"unknown type 'varchar'"),
    ("drop the last nested field", lambda a: a.drop("items.sku"), r"last field of its record"),
    ("move after a stranger", lambda a: a.move("a", after="s.x"), r"is not another field of the same record"),
    ("move two ways", lambda a: a.move("a", first=True, after="c"), r"exactly one of"),
    ("nothing", lambda a: a, r"no changes"),
    ("no path", lambda a: a.add(None, "int"), r"a field path is names joined by dots, got None"),
    ("an empty path segment", lambda a: a.add(".z", "int"), r"got '.z'"),
    ("a non-finite default", lambda a: a.add("z", "double", default=float("nan")), r"a default must be finite"),
    ("a doc that is no text", lambda a: a.add("z", "int", doc=5), r"doc must be text"),
    ("a record type name used twice", lambda a: a.add("z", {"type": "record", "name": "S", "fields": [
        {"name": "q", "type": "int"}]}), r"field 'z': record name 'S' is already the name of another type"),
    ("a key field's type", lambda a: a.widen("id", "double"), r"record key field 'id' cannot change its type"),
    ("a key field named as an index column", lambda a: a.rename("id", "_hash"),
     r"record key field '_hash': the record index stores its own columns"),
]


@pytest.mark.parametrize("what, change, message", BAD, ids=[b[0] for b in BAD])
def test_bad_alters_are_refused_clearly_and_commit_nothing(repo, backend, what, change, message):
    ds = make(repo, record_key="id")
    before, rows = ds.version, table(ds)
    with pytest.raises(CdkdsError, match=message) as e:
        change(ds.alter()).commit()
    assert "dataset 'e'" in str(e.value)
    fresh = DatasetRepository(*backend).load("e")
    assert fresh.version == before and table(fresh) == rows and fresh.descriptor == ds.descriptor


def test_renames_and_drops_raise_the_log_version_so_older_readers_refuse(repo, monkeypatch):
    from cdkds.catalog.log import actions, transaction
    monkeypatch.setattr(transaction, "PARTED_CHECKPOINT_PROTOCOL", 1)  # a dataset created before protocol 4
    ds = make(repo)
    monkeypatch.undo()
    ds.alter().add("z", "string").widen("a", "long").move("z", first=True).commit()
    assert ds.snapshot.protocol.reader_version == 1  # a reader matching names still reads these right
    ds.alter().rename("s.x", "xx").commit()
    assert (ds.snapshot.protocol.reader_version, ds.snapshot.protocol.writer_version) == (3, 3)
    monkeypatch.setattr(actions, "READER_VERSION", 2)  # a reader of before field ids
    with pytest.raises(CdkdsError, match="needs log reader version 3"):
        repo.load("e")


def test_changes_apply_in_order_and_are_checked_as_a_whole(repo):
    ds = make(repo)
    ds.alter().rename("a", "b").rename("c", "a").rename("b", "c").commit()  # a swap
    rows = table(ds)
    assert (rows[1]["c"], rows[1]["a"]) == (10, "c1")
    assert ds.snapshot.files and all(set(f.statistics) >= {"a", "c"} for f in ds.files)
    assert len(ds.plan(where="a = 'c3'").files) == 1  # the statistics swapped with the names (c0..c2 | c1..c3)


def test_writing_with_old_names_fails_naming_the_new_ones(repo):
    ds = make(repo)
    ds.alter().rename("a", "amount").commit()
    with pytest.raises(SchemaMismatchError, match="'a' was renamed to 'amount'"):
        with ds.writer() as w:
            w.write(row(5))
    old = pa.table({"id": [5], "a": [1], "g": ["g"], "s": [{"x": 1}], "items": [[]]})
    with pytest.raises(SchemaMismatchError, match="'a' was renamed to 'amount'"):
        with ds.writer() as w:
            w.write_batch(old)
    assert ds.refresh().version == 2


def test_update_matches_fields_by_id_when_the_schema_carries_them(repo):
    ds = make(repo)
    schema = ds.descriptor.schema
    schema["fields"][1]["name"] = "amount"  # a rename: the field keeps its id
    schema["fields"].append({"name": "new", "type": ["null", "long"], "default": None})  # no id: a new field
    repo.update("e", ds.descriptor.replace(schema=schema))
    d = repo.load("e")
    assert [r["amount"] for r in table(d)] == [0, 10, 20, 30] and d.descriptor.field_ids["new"] == 10
    by_name = {**SCHEMA, "fields": [{"name": f["name"], "type": f["type"], **({"default": f["default"]} if "default" in f else {})}
                                     for f in d.descriptor.schema["fields"] if f["name"] != "c"]}
    by_name["fields"][3]["type"]["fields"] = [{"name": "x", "type": "int"}]  # nested fields without ids: by name too
    repo.update("e", DatasetDescriptor(by_name, partition_strategy="identity(g)"))  # no ids: by name; c dropped
    d = repo.load("e")
    assert "c" not in d.descriptor.fields and d.descriptor.field_ids["amount"] == 2
    assert [r["s"] for r in table(d)][:2] == [{"x": 0}, {"x": 1}]


def test_alter_racing_alter_conflicts_and_drop_racing_an_append_is_defined(repo):
    ds = make(repo)
    stale = repo.load("e")
    ds.alter().drop("c").commit()
    with pytest.raises(CommitConflictError, match="changed the descriptor"):
        stale.alter().rename("a", "b").commit()
    # an append planned before the drop, with values for the dropped field, lands after it: its
    # values of the dropped field are hidden as those of every older file
    writer_base = repo.load("e", version=1)
    with writer_base.writer() as w:
        w.write(row(7))
    fresh = repo.load("e")
    assert fresh.version == 3 and [r for r in table(fresh) if r["id"] == 7][0].get("c", "absent") == "absent"
    fresh.alter().add("c", "string").commit()
    assert {r["c"] for r in table(fresh)} == {None}


def test_a_hash_partition_keeps_hashing_with_its_creation_type_after_widening(repo):
    schema = {"type": "record", "name": "H", "fields": [{"name": "k", "type": "int"}, {"name": "v", "type": "string"}]}
    ds = repo.create("h", DatasetDescriptor(schema, partition_strategy="hash(k, 8)"))
    with ds.writer() as w:
        for i in range(20):
            w.write({"k": i, "v": "old"})
    before = {f.partition["k_hash"] for f in ds.files}
    ds.alter().widen("k", "long").rename("k", "key").commit()
    with ds.writer() as w:
        for i in range(20):
            w.write({"key": i, "v": "new"})
    by_bucket: dict = {}
    for f in ds.files:
        by_bucket.setdefault(f.partition["k_hash"], set()).add(f.path)
    assert set(by_bucket) == before and all(len(paths) == 2 for paths in by_bucket.values())  # same buckets
    assert sorted(r["v"] for r in ds.to_table(where="key = 7").to_pylist()) == ["new", "old"]
    assert len(ds.plan(where="key = 7").files) == 2


def test_ttl_field_follows_a_rename_and_rebuild_reads_files_of_every_schema(repo, backend):
    schema = {"type": "record", "name": "T", "fields": [
        {"name": "id", "type": "long"}, {"name": "exp", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}],
                                         "default": None}]}
    ds = repo.create("t", DatasetDescriptor(schema, record_key="id", properties={"ttl.field": "exp"}))
    ds.upsert([{"id": 1}, {"id": 2}])
    ds.alter().rename("exp", "expires_at").add("note", "string").commit()
    assert ds.descriptor.properties["ttl.field"] == "expires_at"
    ds.upsert([{"id": 3, "note": "n"}])
    assert sorted(r["id"] for r in ds.to_table().to_pylist()) == [1, 2, 3]
    import warnings
    ds.store.delete_tree("_log")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rebuilt = repo.rebuild("t")
    assert rebuilt.descriptor.field_ids == ds.descriptor.field_ids
    assert sorted((r["id"], r["note"]) for r in rebuilt.to_table().to_pylist()) == [(1, None), (2, None), (3, "n")]
