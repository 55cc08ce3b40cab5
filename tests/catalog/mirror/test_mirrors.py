"""The mirrors' framework: the properties, the update after every commit (a failure warns,
the commit stands, the next commit catches up), updates on demand, vacuum and check
(issue 31, section 1). The formats' own tests are test_delta.py and test_iceberg.py."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository, InvalidDescriptorError, MirrorWarning
from cdkds.catalog.errors import CdkdsError
from cdkds.catalog.log.expiry import RetainedFiles
from cdkds.catalog.mirror.delta import DeltaMirror
from cdkds.catalog.mirror.iceberg import IcebergMirror
from tests.cli.running import run, run_script

SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "p", "type": "string"}, {"name": "ts", "type": "long"}]}


def delta_rows(url: str, version: int | None = None) -> list[int]:
    from deltalake import DeltaTable, QueryBuilder  # delta-rs reads deletion vectors and column mapping there
    table = QueryBuilder().register("t", DeltaTable(url, version=version)).execute("select id from t").read_all()
    return sorted(table.column("id").to_pylist())


def iceberg_rows(ds) -> list[int]:
    from pyiceberg.table import StaticTable
    table = StaticTable.from_metadata(ds.store.url)  # the newest version, by metadata/version-hint.text
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def ids(ds) -> list[int]:
    return sorted(ds.to_table().column("id").to_pylist())


def write(ds, start: int, count: int = 3) -> None:
    with ds.writer() as w:
        w.write_batch(pa.table({"id": list(range(start, start + count)), "p": ["a", "b", "a"][:count],
                                "ts": [1] * count}))


@pytest.mark.parametrize("props, words", [
    ({"mirror.delta": "yes"}, "mirror.delta must be true or false"),
    ({"mirror.hudi": "true"}, "mirror.hudi is not a mirror"),
    ({"mirror.iceberg": "true", "ttl": "1d"}, "property mirror.iceberg:"),
    ({"mirror.delta": "true", "ttl": "1d"}, "property mirror.delta:"),
])
def test_a_bad_or_refused_property_names_itself(props, words):
    with pytest.raises(InvalidDescriptorError, match=words):
        schema = SCHEMA if "ttl" not in props else {**SCHEMA, "fields": [
            *SCHEMA["fields"][:2], {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
        DatasetDescriptor(schema, properties=props, **({"ordering_field": "ts"} if "ttl" in props else {}))


def test_an_avro_dataset_cannot_have_a_delta_mirror():
    with pytest.raises(InvalidDescriptorError, match="property mirror.delta:"):
        DatasetDescriptor(SCHEMA, format="avro", properties={"mirror.delta": "true"})


def test_enabled_mirrors_follow_every_commit(tmp_path):
    repo = DatasetRepository(tmp_path.as_uri())
    ds = repo.create("t", DatasetDescriptor(SCHEMA, partition_strategy="identity(p)",
                                            properties={"mirror.delta": "true", "mirror.iceberg": "true"}))
    assert ds.descriptor.mirrors == ("delta", "iceberg")
    write(ds, 0)
    write(ds, 10)
    ds.delete("id = 11")
    assert DeltaMirror(ds.store, "t").version() == IcebergMirror(ds.store, "t").version() == ds.version == 3
    assert delta_rows(ds.url) == iceberg_rows(ds) == ids(ds) == [0, 1, 2, 10, 12]
    assert delta_rows(ds.url, version=1) == [0, 1, 2]
    assert ds.check().ok


def test_a_failed_mirror_warns_the_commit_stands_and_the_next_commit_catches_up(tmp_path, monkeypatch):
    ds = DatasetRepository(tmp_path.as_uri()).create("t", DatasetDescriptor(SCHEMA, properties={"mirror.delta": "true"}))
    real = DeltaMirror.update

    def failing(self, log, snapshot):
        raise OSError("the disk is full")
    monkeypatch.setattr(DeltaMirror, "update", failing)
    with pytest.warns(MirrorWarning, match="delta mirror of revision 1 failed .*the disk is full"):
        write(ds, 0)
    assert ds.version == 1 and ids(ds) == [0, 1, 2]  # the commit stands
    monkeypatch.setattr(DeltaMirror, "update", real)
    write(ds, 10)
    assert DeltaMirror(ds.store, "t").version() == 2
    assert delta_rows(ds.url, version=1) == [0, 1, 2]  # revision 1 was written too
    assert delta_rows(ds.url) == ids(ds)


def test_a_mirror_on_demand_and_a_property_set_later(tmp_path):
    repo = DatasetRepository(tmp_path.as_uri())
    ds = repo.create("t", DatasetDescriptor(SCHEMA))
    write(ds, 0)
    write(ds, 10)
    assert DeltaMirror(ds.store, "t").version() is None
    reports = ds.mirror("iceberg")
    assert [(r.name, r.version, r.written) for r in reports] == [("iceberg", 2, 3)]
    assert ds.mirror("iceberg")[0].written == 0  # up to date: nothing to write
    assert iceberg_rows(ds) == ids(ds)
    ds.update_descriptor(ds.descriptor.replace(properties={"mirror.delta": "true"}))
    assert DeltaMirror(ds.store, "t").version() == ds.version  # the whole history, at the property's commit
    assert delta_rows(ds.url, version=1) == [0, 1, 2]
    with pytest.raises(CdkdsError, match="unknown mirror 'hudi'"):
        ds.mirror("hudi")


def test_check_finds_a_mirror_that_disagrees_with_the_log(tmp_path):
    ds = DatasetRepository(tmp_path.as_uri()).create("t", DatasetDescriptor(SCHEMA, properties={"mirror.delta": "true"}))
    write(ds, 0)
    write(ds, 10)
    assert ds.check().ok
    first, *_, newest = sorted(k for k in ds.store.list("_delta_log") if k.endswith(".json"))
    ds.store.put(f"_delta_log/{newest}", ds.store.read(f"_delta_log/{first}"))
    report = ds.check()
    assert [p.kind for p in report.problems] == ["mirror_mismatch"], report.problems
    assert report.problems[0].object == "_delta_log"


def test_vacuum_keeps_what_a_retained_mirror_version_references(tmp_path, monkeypatch):
    ds = DatasetRepository(tmp_path.as_uri()).create("t", DatasetDescriptor(SCHEMA, properties={"mirror.delta": "true"}))
    write(ds, 0)
    write(ds, 10)
    ds.compact()
    removed = sorted(f.path for f in ds.repository.load("t", version=2).files)
    referenced = DeltaMirror.referenced
    monkeypatch.setattr(DeltaMirror, "referenced", lambda self: referenced(self) | set(removed))
    monkeypatch.setattr("cdkds.catalog.log.expiry.LogExpiry.retained",
                        lambda self: RetainedFiles(frozenset(ds.snapshot.files), {}, {}))
    assert not set(ds.vacuum(dt.timedelta(0), dry_run=True, force=True)) & set(removed)
    monkeypatch.setattr(DeltaMirror, "referenced", lambda self: set())
    assert set(ds.vacuum(dt.timedelta(0), dry_run=True, force=True)) >= set(removed)


def test_cdkds_mirror_command(tmp_path):
    repo = DatasetRepository(tmp_path.as_uri())
    ds = repo.create("t", DatasetDescriptor(SCHEMA))
    write(ds, 0)
    url = f"{tmp_path.as_uri()}/t"
    out = run("mirror", url, "--delta", "--iceberg").stdout
    assert "t: delta: revision 1 (2 versions written" in out and "t: iceberg: revision 1" in out, out
    assert delta_rows(url) == [0, 1, 2]
    assert "no mirror" in run("mirror", url, code=2).stderr
    assert run_script("mirror", f"{tmp_path.as_uri()}/nothing", "--delta", code=1).stderr.count("\n") == 1
    assert ds.refresh().version == 1  # nothing committed by the failures


def test_a_converted_delta_tables_own_log_is_not_taken_for_a_mirror(tmp_path):
    from deltalake import write_deltalake
    write_deltalake(str(tmp_path / "t"), pa.table({"id": [1, 2], "p": ["a", "b"], "ts": [1, 1]}))
    ds = DatasetRepository(tmp_path.as_uri()).convert("t")
    assert DeltaMirror(ds.store, "t").version() is None and ds.check(read_data=True).ok
    with pytest.raises(CdkdsError, match="cannot mirror as delta: .*before field ids"):  # adopted files: by name
        ds.mirror("delta")
    assert ds.check().ok and ds.version == 0


def test_a_dataset_opened_by_a_relative_path_gets_absolute_iceberg_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ds = DatasetRepository("lake").create("t", DatasetDescriptor(SCHEMA, properties={"mirror.iceberg": "true"}))
    write(ds, 0)
    assert DatasetRepository((tmp_path / "lake").as_uri()).load("t").check().ok
    assert DatasetRepository("lake").load("t").check().ok
    monkeypatch.chdir("/")
    from pyiceberg.table import StaticTable
    table = StaticTable.from_metadata((tmp_path / "lake" / "t").as_uri())
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2]
