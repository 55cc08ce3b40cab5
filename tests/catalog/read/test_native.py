"""plan_native: a scan's files grouped by file layout and rules for an engine's own Parquet
reader, the others left to cdkds; what the log knows about file layouts (schema_since)."""

import dataclasses
import datetime as dt
import io
import json
from types import MappingProxyType
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.expressions import ALWAYS_TRUE
from cdkds.catalog.log import checkpoint
from cdkds.catalog.log.snapshot import schema_of_files
from cdkds.catalog.read import native
from cdkds.catalog.read.arrow_scan import PYARROW
from cdkds.catalog.read.native import NativeReader, plan_native
from cdkds.catalog.read.scan import plan_scan
from cdkds.formats.projection import AsStored, CastTo, FileColumn, MissingField
from tests.catalog.read.test_changes import KEYED, PLAIN

EVERYTHING = NativeReader("everything", deletion_vectors=True, predicates=True, conversions=lambda p: None)
AS_IS = NativeReader("as-is", deletion_vectors=False, predicates=False,
                     conversions=lambda p: None if p.is_identity else "not as stored")
UTC = dt.timezone.utc


def append(ds, rows):
    with ds.writer() as w:
        for r in rows:
            w.write(r)


def plan(ds, reader=EVERYTHING, where=None, columns=None):
    return plan_native(ds.store, plan_scan(ds.name, ds.snapshot, where, columns), reader)


def paths(tasks):
    return sorted(t.file.path for t in tasks)


@pytest.fixture
def repo(tmp_path):
    return DatasetRepository(f"file://{tmp_path}")


@pytest.fixture
def footers():
    """The footers plan_native reads, by path."""
    seen = []
    original = native.footer_schema

    def spy(store, task):
        seen.append(task.file.path)
        return original(store, task)

    with mock.patch.object(native, "footer_schema", spy):
        yield seen


def test_an_append_only_dataset_is_one_group_and_no_footer_is_read(repo, footers):
    ds = repo.create("d", DatasetDescriptor(PLAIN, "identity(g)"))
    append(ds, [{"id": i, "g": "ab"[i % 2], "x": i} for i in range(10)])
    append(ds, [{"id": 10, "g": "c", "x": None}])
    out = plan(ds)
    assert len(out.groups) == 1 and not out.fallback and out.native_files == 3
    (group,) = out.groups
    assert group.projection.is_identity and group.layout.equals(schema_of_files(ds.descriptor), check_metadata=True)
    assert group.tombstones == () and group.visible is ALWAYS_TRUE
    assert footers == []
    assert out.read_columns == ("id", "g", "x")


def test_read_columns_are_the_output_then_what_the_rules_use(repo):
    ds = repo.create("d", DatasetDescriptor(PLAIN))
    append(ds, [{"id": i, "g": "a", "x": i} for i in range(10)])
    ds.delete("x = 3")
    out = plan(ds, where="g = 'a'", columns=["id"])
    assert out.read_columns == ("id", "g", "x")
    assert [f.name for f in out.groups[0].projection.schema] == ["id", "g", "x"]


def test_files_of_each_schema_revision_are_grouped_by_layout(repo, footers):
    ds = repo.create("d", DatasetDescriptor(PLAIN))
    append(ds, [{"id": 1, "g": "a", "x": 1}])
    append(ds, [{"id": 2, "g": "a", "x": 2}])
    first = paths(plan(ds).groups[0].tasks)
    ds.alter().rename("x", "y").commit()
    append(ds, [{"id": 3, "g": "b", "y": 3}])
    out = plan(ds)
    assert len(out.groups) == 2
    old = next(g for g in out.groups if paths(g.tasks) == first)
    new = next(g for g in out.groups if paths(g.tasks) != first)
    assert len(footers) == 1 and footers[0] in first  # one footer for the revision both old files were written under
    assert new.projection.is_identity and not old.projection.is_identity
    renamed = old.projection.readers[2]
    assert isinstance(renamed, FileColumn) and renamed.name == "x" and isinstance(renamed.convert, AsStored)
    # a reader that reads columns only as they are stored leaves the renamed files to cdkds
    as_is = plan(ds, AS_IS)
    assert paths(as_is.fallback) == first and as_is.reasons[first[0]] == "not as stored"


def test_adds_with_defaults_and_widenings_resolve_per_layout(repo):
    ds = repo.create("d", DatasetDescriptor({"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "int"}, {"name": "f", "type": "float"}]}))
    append(ds, [{"id": 1, "f": 1.5}])
    ds.alter().add("z", "long", default=7).widen("id", "long").widen("f", "double").commit()
    out = plan(ds)
    (group,) = out.groups
    readers = dict(zip(group.projection.schema.names, group.projection.readers))
    assert isinstance(readers["z"], MissingField)
    assert isinstance(readers["id"].convert, CastTo) and readers["id"].convert.target == pa.int64()
    assert isinstance(readers["f"].convert, CastTo) and readers["f"].convert.target == pa.float64()
    assert group.layout.field("id").type == pa.int32()


def test_a_property_change_keeps_files_known_and_a_checkpoint_keeps_schema_since(repo, footers):
    ds = repo.create("d", DatasetDescriptor(PLAIN))
    append(ds, [{"id": 1, "g": "a", "x": 1}])
    since = ds.snapshot.schema_since
    ds.update_descriptor(ds.descriptor.replace(properties={"owner": "me"}))
    assert ds.snapshot.schema_since == since  # same file layout: the old files are still known
    assert ds.snapshot.written_as_current(ds.files[0])
    ds.alter().rename("x", "y").commit()
    renamed_at = ds.version
    assert ds.snapshot.schema_since == renamed_at and not ds.snapshot.written_as_current(ds.files[0])
    append(ds, [{"id": 2, "g": "a", "y": 2}])
    ds.checkpoint()
    loaded = repo.load("d")
    assert loaded.snapshot.schema_since == renamed_at
    assert [loaded.snapshot.written_as_current(f) for f in sorted(loaded.files, key=lambda f: f.revision)] == [False, True]
    plan(loaded)
    assert len(footers) == 1


def test_a_checkpoint_without_schema_since_knows_only_files_of_its_descriptor(repo, footers):
    ds = repo.create("d", DatasetDescriptor(PLAIN))
    append(ds, [{"id": 1, "g": "a", "x": 1}])
    ds.update_descriptor(ds.descriptor.replace(properties={"owner": "me"}))  # same layout, a later revision
    append(ds, [{"id": 2, "g": "a", "x": 2}])
    table = pq.read_table(io.BytesIO(checkpoint.encode(ds.snapshot)))
    rows = []
    for action, revision, text in zip(*(table.column(c).to_pylist() for c in ("action", "revision", "json"))):
        if action == "metadata":
            item = json.loads(text)
            del item["metadata"]["schemaSince"]
            text = json.dumps(item)
        rows.append((action, revision, text))
    table = pa.table({"action": [r[0] for r in rows], "revision": [r[1] for r in rows], "json": [r[2] for r in rows]},
                     schema=table.schema.remove_metadata()).replace_schema_metadata(
        {**table.schema.metadata, b"cdkds.checksum": checkpoint._checksum(rows).encode()})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    old = checkpoint.decode(sink.getvalue(), "test")
    assert old.schema_since == ds.snapshot.descriptor_version
    first, second = sorted(old.files.values(), key=lambda f: f.revision)
    assert not old.written_as_current(first) and old.written_as_current(second)
    scan = plan_native(ds.store, plan_scan("d", old), EVERYTHING)
    assert footers == [first.path] and len(scan.groups) == 1  # the footer says it is the same layout after all


def test_rebuilt_files_read_their_own_footer(repo, footers):
    ds = repo.create("d", DatasetDescriptor(PLAIN))
    append(ds, [{"id": 1, "g": "a", "x": 1}])
    append(ds, [{"id": 2, "g": "a", "x": 2}])
    rebuilt = {p: dataclasses.replace(f, schema_version=-1) for p, f in ds.snapshot.files.items()}
    snapshot = dataclasses.replace(ds.snapshot, files=MappingProxyType(rebuilt))
    assert not any(snapshot.written_as_current(f) for f in rebuilt.values())
    out = plan_native(ds.store, plan_scan("d", snapshot), EVERYTHING)
    assert sorted(footers) == sorted(rebuilt) and out.native_files == 2  # one per file: no revision to share


def test_avro_files_are_all_read_by_cdkds(repo):
    ds = repo.create("d", DatasetDescriptor(PLAIN, format="avro"))
    append(ds, [{"id": 1, "g": "a", "x": 1}])
    out = plan(ds)
    assert not out.groups and len(out.fallback) == 1
    assert out.reasons[out.fallback[0].file.path] == "avro files are read by cdkds"


def test_deletion_vectors_fall_back_for_readers_that_cannot_drop_rows_by_position(repo):
    ds = repo.create("u", DatasetDescriptor(KEYED, record_key=["k"], ordering_field="o"))
    ds.upsert([{"k": i, "v": "a", "o": 1} for i in range(10)])
    ds.upsert([{"k": 1, "v": "b", "o": 2}])  # a deletion vector on the first file
    with_vector = [f.path for f in ds.files if f.deletes]
    assert len(with_vector) == 1
    out = plan(ds, AS_IS)
    assert paths(out.fallback) == with_vector and "deletion vectors" in out.reasons[with_vector[0]]
    assert out.native_files == len(ds.files) - 1
    assert plan(ds, EVERYTHING).native_files == len(ds.files)  # a reader that drops rows by position reads it
    assert plan(ds, PYARROW).native_files == len(ds.files)  # pyarrow's scanner does (catalog/read/positions.py)


def test_tombstones_and_ttl_group_files_by_rule(repo):
    ds = repo.create("d", DatasetDescriptor(PLAIN, "identity(g)"))
    append(ds, [{"id": i, "g": "ab"[i % 2], "x": i} for i in range(10)])
    ds.delete("x = 3")  # may match only the files of g = 'b' (x odd)... statistics decide
    append(ds, [{"id": 20, "g": "a", "x": 3}])
    out = plan(ds)
    rules = sorted((len(g.tombstones), len(g.tasks)) for g in out.groups)
    assert sum(n for _, n in rules) == 3 and any(t for t, _ in rules) and any(not t for t, _ in rules)
    assert not out.fallback
    assert paths(plan(ds, AS_IS).fallback) == paths(next(g for g in out.groups if g.tombstones).tasks)

    expiring = repo.create("e", DatasetDescriptor(
        {"type": "record", "name": "E", "fields": [
            {"name": "id", "type": "long"},
            {"name": "until", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None}]},
        properties={"ttl.field": "until"}))
    append(expiring, [{"id": 1, "until": dt.datetime(2999, 1, 1, tzinfo=UTC)}])
    append(expiring, [{"id": 2, "until": None}])
    out = plan(expiring, columns=["id"])
    (group,) = out.groups
    assert group.visible is not ALWAYS_TRUE and len(group.tasks) == 2
    assert out.read_columns == ("id", "until")
    assert len(plan(expiring, AS_IS).fallback) == 2
    later = int(dt.datetime(3000, 1, 1, tzinfo=UTC).timestamp() * 1000)
    after = plan_native(expiring.store, plan_scan("e", expiring.snapshot, now_ms=later), EVERYTHING)
    assert after.native_files == 1  # the file whose every row expired is not read at all


def test_a_file_written_as_current_has_the_layout_of_its_footer(repo):
    """What the log says of a file's layout is what its footer holds, for every kind of type."""
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "i", "type": "int"}, {"name": "l", "type": ["null", "long"], "default": None},
        {"name": "d", "type": "double"}, {"name": "s", "type": "string"}, {"name": "b", "type": "bytes"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 4}},
        {"name": "rec", "type": ["null", {"type": "record", "name": "In", "fields": [
            {"name": "a", "type": "long"}, {"name": "t", "type": ["null", "string"], "default": None}]}],
         "default": None},
        {"name": "arr", "type": {"type": "array", "items": "long"}},
        {"name": "m", "type": {"type": "map", "values": ["null", "double"]}},
    ]}
    ds = repo.create("d", DatasetDescriptor(schema))
    import decimal
    append(ds, [{"i": 1, "l": None, "d": 0.5, "s": "x", "b": b"\x00", "ts": dt.datetime(2026, 1, 1, tzinfo=UTC),
                 "day": dt.date(2026, 1, 1), "dec": decimal.Decimal("1.25"), "fx": b"abcd",
                 "rec": {"a": 1, "t": None}, "arr": [1, 2], "m": {"k": None}}])
    (task,) = plan_scan("d", ds.snapshot).tasks
    assert ds.snapshot.written_as_current(task.file)
    footer, current = native.footer_schema(ds.store, task), schema_of_files(ds.descriptor)
    assert footer.names == current.names
    for read, logged in zip(footer, current):
        assert read.metadata == logged.metadata and read.nullable == logged.nullable
        if pa.types.is_map(logged.type):  # pyarrow names a map's entries after the column when it reads them back
            assert (read.type.key_field, read.type.item_field) == (logged.type.key_field, logged.type.item_field)
        else:
            assert read.type == logged.type and read.equals(logged, check_metadata=True)


def test_files_of_a_log_begun_before_field_ids_read_their_own_footers(tmp_path, footers):
    """The log says such files are laid out as the current descriptor, but they carry no ids
    (files written since do): an engine matching columns by id must learn it from each footer."""
    import shutil
    from pathlib import Path

    from cdkds.formats.projection import file_has_ids

    shutil.copytree(Path(__file__).parent.parent.parent / "fixtures" / "legacy" / "lake", tmp_path / "lake")
    ds = DatasetRepository(f"file://{tmp_path}/lake").load("pq")
    assert ds.descriptor.files_may_lack_ids
    append(ds, [ds.to_table().to_pylist()[0]])  # a file with ids
    footers.clear()
    out = plan(ds)
    assert sorted(footers) == sorted(f.path for f in ds.files) and out.native_files == len(ds.files)
    with_ids = {t.file.path: file_has_ids(g.layout) for g in out.groups for t in g.tasks}
    assert sum(with_ids.values()) == 1 and not all(with_ids.values())
    assert not DatasetRepository(f"file://{tmp_path}/new").create("d", DatasetDescriptor(PLAIN)).descriptor \
        .files_may_lack_ids


def test_a_file_whose_arrow_schema_holds_view_types_is_filtered(tmp_path):
    """Other engines (delta-rs, Polars) store string and binary columns as Arrow's view types
    in a Parquet file's Arrow schema, which pyarrow's scanner reads them as (it wins over the
    dataset's schema) and cannot filter: such files are read by cdkds's reader."""
    from tests.catalog.convert.folders import write_file
    write_file(tmp_path / "t", {"k": "a"}, pa.table({
        "id": [1, 2, 3], "v": pa.array(["x", "y", "z"], pa.string_view()),
        "b": pa.array([b"1", b"2", b"3"], pa.binary_view()),
        "l": pa.array([["p"], ["q"], []], pa.list_(pa.string_view()))}))
    ds = DatasetRepository(f"file://{tmp_path}").convert("t")
    plan = plan_native(ds.store, plan_scan(ds.name, ds.snapshot), PYARROW)
    assert not plan.groups and "cannot filter field 'v' stored as string_view" in next(iter(plan.reasons.values()))
    assert ds.to_table("v = 'x'", columns=["id", "b"]).to_pylist() == [{"id": 1, "b": b"1"}]
    ds.delete("id = 2")  # a tombstone
    assert [r["id"] for r in ds.to_table().to_pylist()] == [1, 3]
    assert [r["l"] for batch in ds.scan() for r in batch.to_pylist()] == [["p"], []]
    assert ds.to_arrow_dataset().to_table(filter=pa.compute.field("v") == "z").column("id").to_pylist() == [3]
    assert not ds.check(read_data=True).problems
