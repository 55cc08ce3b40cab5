"""A Kite dataset converted in place (issue 31 section 2): ``repo.convert`` and ``cdkds
convert`` adopt its files, it passes ``check --read-data``, reads what fastavro reads,
prunes ``userId = 1234`` to the bucket Kite put it in, and takes writes."""

from __future__ import annotations

from collections import Counter

import pytest

from cdkds.catalog import DatasetRepository
from cdkds.catalog.errors import CdkdsError
from tests.catalog.convert.kite_layouts import KiteFolder, java_long_hash, kite_bucket, read_all
from tests.catalog.convert.test_kite import EVENT_V1, EVENT_V2, EVENTS_EXPRESSION, _event_rows, _events_folder
from tests.cli.running import run_script


def _kite(root, fmt: str = "avro") -> KiteFolder:
    kite = KiteFolder(root, "analytics", "events")
    kite.write_metadata([EVENT_V1, EVENT_V2], format=fmt, partition_expression=EVENTS_EXPRESSION,
                        properties={"owner": "data team"})
    kite.write_rows(_event_rows(0, 60), _events_folder, EVENT_V1, fmt)
    kite.write_rows(_event_rows(60, 40, v2=True), _events_folder, EVENT_V2, fmt)
    return kite


def _bag(rows) -> Counter:
    return Counter(tuple(sorted((k, v) for k, v in r.items())) for r in rows)


@pytest.mark.parametrize("fmt", ["avro", "parquet"])
def test_a_kite_dataset_converts_in_place_and_prunes_as_kite_did(tmp_path, fmt):
    kite = _kite(tmp_path, fmt)
    expected = [{**r, "source": r.get("source")} for r in read_all(kite.path, fmt)]
    repo = DatasetRepository(tmp_path.as_uri())
    ds = repo.convert(kite.path.as_uri())
    assert ds.name == "analytics/events" and ds.version == 0
    assert ds.descriptor.format == fmt and ds.descriptor.properties["owner"] == "data team"
    assert _bag(ds.to_table().to_pylist()) == _bag(expected)
    assert ds.check(read_data=True).ok
    bucket = kite_bucket(java_long_hash(1234), 16)
    planned = ds.plan("userId = 1234").files
    assert planned and {f.partition["userId_hash"] for f in planned} == {bucket}
    assert sorted(r["id"] for r in ds.reader(where="userId = 1234")) == sorted(
        r["id"] for r in expected if r["userId"] == 1234)
    with ds.writer() as w:  # and it takes writes, under cdkds's own layout
        w.write({"id": 1000, "userId": 1234, "ts": 1_764_547_200_000, "country": "NZ", "payload": "new", "source": None})
    assert ds.to_table().num_rows == len(expected) + 1
    assert len(ds.plan("userId = 1234").files) == len(planned) + 1
    with pytest.raises(CdkdsError, match="already"):
        repo.convert(kite.path.as_uri())  # converted once: its log is there


@pytest.mark.slow
def test_cdkds_convert_a_kite_dataset(tmp_path):
    kite = _kite(tmp_path)
    out = run_script("convert", kite.path.as_uri(), "--into", tmp_path.as_uri()).stdout
    assert "analytics/events" in out and "kite" in out, out
    ds = DatasetRepository(tmp_path.as_uri()).load("analytics/events")
    assert ds.to_table().num_rows == 100


def test_a_field_kite_renamed_reads_from_files_written_before(tmp_path):
    renamed = {**EVENT_V2, "fields": [*(f for f in EVENT_V2["fields"] if f["name"] != "payload"),
                                      {"name": "body", "type": "string", "aliases": ["payload"]}]}
    kite = KiteFolder(tmp_path, "analytics", "events")
    kite.write_metadata([EVENT_V1, renamed], partition_expression=EVENTS_EXPRESSION)
    kite.write_rows(_event_rows(0, 20), _events_folder, EVENT_V1)
    ds = DatasetRepository(tmp_path.as_uri()).convert(kite.path.as_uri())
    assert sorted(ds.to_table().column("body").to_pylist()) == sorted(f"p{i}" for i in range(20))
