"""Converting Delta tables (made with deltalake) in place: the current version reads as
delta-rs reads it, deletion vectors (inline, in files, through checkpoints) and column
mapping included; Delta's deletion-vector format decoded as its protocol defines it."""

from __future__ import annotations

import datetime as dt
import json
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cdkds.catalog import ConversionError, DatasetRepository
from cdkds.catalog.convert.delta import decode_bitmap_array, read_vector, vector_file, z85_decode
from tests.catalog.convert.delta_tables import bitmap_array, delete_rows, delta_rows, z85
from tests.catalog.convert.folders import bag

pytestmark = pytest.mark.needs("deltalake")


@pytest.fixture
def lake(tmp_path):
    return tmp_path


def write(path: Path, table: pa.Table, **options) -> None:
    from deltalake import write_deltalake
    write_deltalake(str(path), table, **options)


def live_paths(path: Path) -> list[str]:
    from deltalake import DeltaTable
    return sorted(pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).column("path").to_pylist())


def events(start: int, n: int) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)), "day": [dt.date(2026, 1, 1 + i % 2) for i in range(n)],
                     "kind": ["a", "b", None][start % 3:][:1] * n, "score": [i * 0.5 for i in range(n)]})


def test_a_partitioned_table_after_appends_overwrites_and_deletes(lake):
    from deltalake import DeltaTable
    table = lake / "events"
    write(table, events(0, 6), partition_by=["day"])
    write(table, events(6, 4), partition_by=["day"], mode="append")
    DeltaTable(str(table)).delete("id = 3")  # delta-rs rewrites the file
    late = pa.table({"id": [10, 11], "day": [dt.date(2026, 1, 2)] * 2, "kind": ["c", None], "score": [1.0, 2.0]})
    write(table, late, partition_by=["day"], mode="overwrite", predicate="day = '2026-01-02'")
    ds = DatasetRepository(f"file://{lake}").convert("events")
    assert bag(ds.to_table()) == bag(delta_rows(str(table)))
    assert sorted(f.path for f in ds.files) == live_paths(table)
    assert not ds.check(read_data=True).problems
    assert ds.descriptor.partition_strategy.to_text() == "identity(day)"
    assert all(f.partition["day_copy"] == dt.date(2026, 1, 1) for f in ds.plan("day = '2026-01-01'").files)
    assert len(ds.plan("day = '2026-01-02'").files) < len(ds.files)
    assert ds.history()[0].info["converted"] == "delta"
    with ds.writer() as w:  # the dataset goes on taking writes
        w.write({"id": 99, "day": dt.date(2026, 1, 3), "kind": "z", "score": 1.0})
    assert ds.to_table("id = 99").column("day").to_pylist() == [dt.date(2026, 1, 3)]


def test_an_unpartitioned_table(lake):
    write(lake / "t", pa.table({"x": [1, 2, 3], "s": ["p", None, "r"]}))
    ds = DatasetRepository(f"file://{lake}").convert("t")
    assert bag(ds.to_table()) == bag(delta_rows(str(lake / "t"))) and ds.descriptor.partition_strategy is None


def test_deletion_vectors_inline_and_in_files_become_ours(lake):
    from deltalake import DeltaTable
    table = lake / "dv"
    write(table, pa.table({"id": list(range(20)), "g": ["a", "b"] * 10}), partition_by=["g"],
          configuration={"delta.enableDeletionVectors": "true"})
    first, second = live_paths(table)
    delete_rows(table, first, [0, 3, 9], inline=True)
    delete_rows(table, second, [1], inline=False, prefix="xy")
    delete_rows(table, second, [1, 2, 7], inline=False)  # a later vector of the same file replaces it
    ds = DatasetRepository(f"file://{lake}").convert("dv")
    assert bag(ds.to_table()) == bag(delta_rows(str(table)))
    theirs = {r["filepath"].rsplit("/dv/", 1)[1]: np.flatnonzero(~np.array(r["selection_vector"])).tolist()
              for r in pa.table(DeltaTable(str(table)).deletion_vectors()).to_pylist()}
    ours = {f.path: sorted(p for d in f.deletes for p in d.load(ds.store).to_numpy().tolist()) for f in ds.files}
    assert ours == theirs == {first: [0, 3, 9], second: [1, 2, 7]}
    first_commit = json.loads((table / "_log" / "00000000000000000000.json").read_text())
    assert first_commit["actions"][0] == {"protocol": {"reader": 4, "writer": 4}}
    assert not ds.check(read_data=True).problems


def test_partition_values_that_need_escaping(lake):
    table = lake / "esc"
    write(table, pa.table({"x": [1, 2, 3], "g": ["a b", "c%d=e", "é/f"]}), partition_by=["g"],
          configuration={"delta.enableDeletionVectors": "true"})
    delete_rows(table, next(p for p in live_paths(table) if p.startswith("g=a%2520b/")), [0], inline=True)
    ds = DatasetRepository(f"file://{lake}").convert("esc")  # the log's paths are URIs of escaped folder names
    assert bag(ds.to_table()) == bag(delta_rows(str(table))) == bag([{"x": 2, "g": "c%d=e"}, {"x": 3, "g": "é/f"}])
    assert sorted(f.path.split("/")[0] for f in ds.files) == ["g=%C3%A9%2Ff", "g=a%20b", "g=c%25d%3De"]
    assert ds.to_table("g = 'é/f'").column("x").to_pylist() == [3]


def test_deletion_vectors_through_a_checkpoint(lake):
    from deltalake import DeltaTable
    table = lake / "cp"
    write(table, pa.table({"id": list(range(8))}), configuration={"delta.enableDeletionVectors": "true"})
    write(table, pa.table({"id": list(range(8, 12))}), mode="append")
    first, second = live_paths(table)
    delete_rows(table, first, [1, 2], inline=True)
    DeltaTable(str(table)).create_checkpoint()
    delete_rows(table, second, [0], inline=False)
    ds = DatasetRepository(f"file://{lake}").convert("cp")
    assert bag(ds.to_table()) == bag(delta_rows(str(table)))
    assert sum(f.deleted_rows for f in ds.files) == 3


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapping_reads_the_physical_columns(lake, mode):
    table = lake / "cm"
    write(table, pa.table({"a": [1, 2, 3], "p": ["x", "y", "x"], "s": pa.array([{"q": 1}, None, {"q": 3}])}),
          partition_by=["p"], configuration={"delta.columnMapping.mode": mode})
    ds = DatasetRepository(f"file://{lake}").convert("cm")
    assert bag(ds.to_table()) == bag(delta_rows(str(table)))
    mapping = ds.descriptor.schema["cdkds.name-mapping"]
    assert all(m["names"][0].startswith("col-") for m in mapping)  # Delta's physical names
    assert [f["field-id"] for f in ds.descriptor.schema["fields"]] == [1, 2, 3]  # Delta's column ids
    assert ds.to_table("p = 'y'").column("a").to_pylist() == [2]
    assert not ds.check(read_data=True).problems


def test_a_column_renamed_in_delta_reads_its_physical_column(lake):
    table = lake / "renamed"
    write(table, pa.table({"a": [1, 2], "b": ["x", "y"]}), configuration={"delta.columnMapping.mode": "name"})
    log = table / "_delta_log"
    metadata = next(json.loads(line) for line in (log / "00000000000000000000.json").read_text().splitlines()
                    if "metaData" in line)
    schema = json.loads(metadata["metaData"]["schemaString"])
    schema["fields"][0]["name"] = "amount"  # Delta's RENAME COLUMN: the physical name stays
    metadata["metaData"]["schemaString"] = json.dumps(schema)
    (log / "00000000000000000001.json").write_text(json.dumps(metadata) + "\n")
    ds = DatasetRepository(f"file://{lake}").convert("renamed")
    assert bag(ds.to_table()) == bag(delta_rows(str(table))) == bag([{"amount": 1, "b": "x"}, {"amount": 2, "b": "y"}])


def test_a_file_outside_the_table_is_refused(lake):
    table = lake / "abs"
    write(table, pa.table({"x": [1]}))
    log = table / "_delta_log" / "00000000000000000000.json"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    outside = lake / "elsewhere.parquet"
    (table / live_paths(table)[0]).rename(outside)
    for a in lines:
        if "add" in a:
            a["add"]["path"] = f"file://{outside}"
    log.write_text("\n".join(json.dumps(a) for a in lines) + "\n")
    with pytest.raises(ConversionError, match=f"data file file://{outside} lies outside the table folder"):
        DatasetRepository(f"file://{lake}").convert("abs")
    assert not (table / "_log").exists()


def test_a_table_with_files_under_data_is_refused(lake):
    """A Delta table laid out as Iceberg's (XTable, UniForm) keeps its files under data/,
    where cdkds's vacuum deletes the files no revision references: its other versions' files."""
    table = lake / "ice"
    write(table, pa.table({"x": [1, 2]}))
    (path,) = live_paths(table)
    (table / "data").mkdir()
    (table / path).rename(table / "data" / path)
    log = table / "_delta_log" / "00000000000000000000.json"
    log.write_text(log.read_text().replace(f'"path":"{path}"', f'"path":"data/{path}"'))
    assert bag(delta_rows(str(table))) == bag([{"x": 1}, {"x": 2}])
    with pytest.raises(ConversionError, match=f"ice/data/{path} lies in data/, a folder where cdkds's vacuum"):
        DatasetRepository(f"file://{lake}").convert("ice")
    assert not (table / "_log").exists()


def test_a_damaged_deletion_vector_file_is_named(lake):
    table = lake / "bad"
    write(table, pa.table({"id": list(range(4))}), configuration={"delta.enableDeletionVectors": "true"})
    delete_rows(table, live_paths(table)[0], [1], inline=False)
    vector = next(table.glob("deletion_vector_*.bin"))
    vector.write_bytes(vector.read_bytes()[:-1] + b"\0")
    with pytest.raises(ConversionError, match="cannot be read: deletion vector in .* fails its CRC-32 check"):
        DatasetRepository(f"file://{lake}").convert("bad")
    assert not (table / "_log").exists()


# ---------------------------------------------------------------- the format, against Delta's own examples

def test_the_protocol_examples_decode():
    inline = {"storageType": "i", "pathOrInlineDv": "^Bg9^0rr910000000000iXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
              "sizeInBytes": 44, "cardinality": 6}
    assert read_vector(None, inline).tolist() == [3, 4, 7, 11, 18, 29]
    relative = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 4, "sizeInBytes": 40,
                "cardinality": 6}
    assert vector_file(relative) == "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    with pytest.raises(ValueError, match="absolute path"):
        vector_file({"storageType": "p", "pathOrInlineDv": "s3://t/deletion_vector_x.bin"})


def test_positions_beyond_32_bits_and_bad_input():
    positions = [5, 2 ** 32 + 1, 3 * 2 ** 32]
    assert decode_bitmap_array(bitmap_array(positions)).tolist() == positions
    assert z85_decode(z85(b"\x86\x4f\xd2\x6f\xb5\x59\xf7\x5b")) == b"\x86\x4f\xd2\x6f\xb5\x59\xf7\x5b"
    assert z85(b"\x86\x4f\xd2\x6f\xb5\x59\xf7\x5b") == "HelloWorld"  # ZeroMQ's own example
    with pytest.raises(ValueError, match="magic"):
        decode_bitmap_array(struct.pack("<IQ", 1681511376, 0))
    with pytest.raises(ValueError, match="after its bitmaps"):
        decode_bitmap_array(bitmap_array([1]) + b"\0")


@pytest.mark.slow
def test_a_delta_table_on_s3(s3_endpoint):
    from deltalake import write_deltalake
    from tests.conftest import new_bucket, s3_options

    bucket = new_bucket(s3_endpoint)
    delta_options = {"AWS_ENDPOINT_URL": s3_endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
                     "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                     "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    url = f"s3://{bucket}/lake/events"
    write_deltalake(url, events(0, 6), partition_by=["day"], storage_options=delta_options)
    repo = DatasetRepository(f"s3://{bucket}/lake", s3_options(s3_endpoint))
    ds = repo.convert("events")  # delta-rs is given the endpoint fsspec was given
    assert sorted(ds.to_table().column("id").to_pylist()) == list(range(6))
    assert not ds.check(read_data=True).problems
