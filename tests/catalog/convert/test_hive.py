"""Converting Hive-style partitioned Parquet folders in place: rows as pyarrow reads the
folder, pruning by partition, writes after conversion, and bad input refused naming the
file with nothing committed."""

from __future__ import annotations

import datetime as dt
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdkds.catalog import ConversionError, DatasetExistsError, DatasetRepository
from cdkds.formats.schema import NAME_MAPPING, PARQUET_FIELD_ID
from tests.catalog.convert.folders import bag, hive_rows, sales, write_file

PARTITIONS = pa.schema([("country", pa.string()), ("day", pa.date32())])


@pytest.fixture
def lake(tmp_path):
    return tmp_path / "lake"


def committed(folder) -> bool:
    return (folder / "_log").exists()


def test_a_converted_folder_reads_as_pyarrow_reads_it_and_passes_check(lake):
    folder = sales(lake)
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*.parquet")}
    ds = DatasetRepository(f"file://{lake}").convert("sales")
    assert ds.name == "sales" and ds.version == 0 and ds.history()[0].operation == "create"
    assert not ds.check(read_data=True).problems
    assert bag(ds.to_table()) == bag(hive_rows(folder, PARTITIONS))
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*.parquet")} == before  # nothing rewritten
    assert not (folder / "data").exists()  # nor copied
    assert sorted(f.path for f in ds.files) == sorted(str(p.relative_to(folder)) for p in before)
    fields = {f["name"]: f["type"] for f in ds.descriptor.schema["fields"]}
    assert fields["day"] == ["null", {"type": "int", "logicalType": "date"}] and fields["country"] == ["null", "string"]
    assert ds.descriptor.partition_strategy.to_text() == "identity(country), identity(day)"
    assert [m["names"] for m in ds.descriptor.schema[NAME_MAPPING]] == [["id"], ["amount"], ["note"], ["country"],
                                                                         ["day"]]


def test_statistics_come_from_the_footers_and_partition_values(lake):
    sales(lake)
    ds = DatasetRepository(f"file://{lake}").convert("sales")
    add = next(f for f in ds.files if f.path == "country=NZ/day=2026-01-01/part-0.parquet")
    assert add.row_count == 3 and add.size == os.path.getsize(lake / "sales" / add.path)
    assert (add.statistics["id"].min, add.statistics["id"].max, add.statistics["id"].null_count) == (1, 3, 0)
    assert add.statistics["amount"].min is None and add.statistics["amount"].null_count == 1  # floats keep no bounds
    assert add.statistics["day"].min == dt.date(2026, 1, 1) == add.statistics["day"].max
    assert add.partition == {"country_copy": "NZ", "day_copy": dt.date(2026, 1, 1)}


def test_a_predicate_on_a_partition_column_prunes(lake):
    sales(lake)
    ds = DatasetRepository(f"file://{lake}").convert("sales")
    assert len(ds.plan("country = 'NZ'").files) == 2
    assert [f.path for f in ds.plan("country = 'AU'").files] == ["country=AU/day=2026-01-01/part-0.parquet"]
    assert len(ds.plan("day > '2026-01-01'").files) == 1
    assert sorted(ds.to_table("country = 'NZ' and day = '2026-01-02'").column("id").to_pylist()) == [4]


def test_writes_after_conversion_carry_field_ids_and_read_with_the_adopted_files(lake):
    folder = sales(lake)
    ds = DatasetRepository(f"file://{lake}").convert("sales")
    with ds.writer() as w:
        w.write({"id": 7, "amount": 7.0, "note": "g", "country": "NZ", "day": dt.date(2026, 1, 3)})
    new = [f for f in ds.files if f.path.startswith("data/")]
    assert len(new) == 1
    schema = pq.read_schema(folder / new[0].path)
    assert schema.field("id").metadata[PARQUET_FIELD_ID] == b"1"
    assert sorted(ds.to_table().column("id").to_pylist()) == [1, 2, 3, 4, 5, 6, 7]
    assert ds.to_table("day = '2026-01-03'").column("country").to_pylist() == ["NZ"]
    ds.alter().rename("note", "remark").commit()  # a schema change reads the adopted files by id too
    assert sorted(ds.refresh().to_table(columns=["remark"]).column("remark").to_pylist(),
                  key=str) == sorted(["a", "b", None, "d", "e", "f", "g"], key=str)
    assert not ds.check(read_data=True).problems


def test_partition_types_given_and_null_partitions(lake):
    folder = lake / "t"
    write_file(folder, {"k": "0042"}, pa.table({"x": [1]}))
    write_file(folder, {"k": None}, pa.table({"x": [2]}))
    repo = DatasetRepository(f"file://{lake}")
    ds = repo.convert("t", partition_types={"k": "string"})
    assert sorted(ds.to_table().to_pylist(), key=lambda r: r["x"]) == [{"x": 1, "k": "0042"}, {"x": 2, "k": None}]
    assert [f.path for f in ds.plan("k is null").files] == ["k=__HIVE_DEFAULT_PARTITION__/part-0.parquet"]
    write_file(lake / "u", {"k": "0042"}, pa.table({"x": [1]}))
    assert repo.convert("u").to_table("k = 42").column("x").to_pylist() == [1]  # inferred: int


def test_files_that_hold_their_partition_column_read_it(lake):
    folder = lake / "t"
    write_file(folder, {"g": "a"}, pa.table({"x": [1], "g": ["a"]}))
    write_file(folder, {"g": "b"}, pa.table({"x": [2]}))
    ds = DatasetRepository(f"file://{lake}").convert("t")
    assert sorted(ds.to_table().to_pylist(), key=lambda r: r["x"]) == [{"x": 1, "g": "a"}, {"x": 2, "g": "b"}]
    assert not ds.check(read_data=True).problems


@pytest.mark.parametrize("texts", [["+5", "6"], ["\u0663", "6"], ["99999999999999999999999", "3"],
                                   ["03000000000", "3"]])
def test_folder_values_pyarrow_keeps_as_text_are_not_inferred_as_numbers(lake, texts):
    """pyarrow infers an integer only from ASCII digits with an optional '-' and within an
    int: '+5', Arabic-Indic digits and numbers beyond a long stay text, as they are in the
    folder names; cdkds's longs beyond an int keep their text too (no leading zero lost)."""
    for i, text in enumerate(texts):
        write_file(lake / "t", {"k": text}, pa.table({"x": [i]}))
    ds = DatasetRepository(f"file://{lake}").convert("t")
    assert ds.descriptor.schema["fields"][-1]["type"] == ["null", "string"]
    assert bag(ds.to_table()) == bag(hive_rows(lake / "t"))


def test_a_given_numeric_or_date_type_takes_only_plain_text(lake):
    """Python's int() and date.fromisoformat() take '1_000', ' 7' and '20260101'; a folder
    value is a number or a date only as written plainly."""
    repo = DatasetRepository(f"file://{lake}")
    for name, text, kind in [("a", "1_000", "int"), ("b", "\u0663", "long"), ("c", "20260101", "date")]:
        write_file(lake / name, {"k": text}, pa.table({"x": [1]}))
        with pytest.raises(ConversionError, match=f"partition folder k={text} is not a {kind}"):
            repo.convert(name, partition_types={"k": kind})
        assert not committed(lake / name)


@pytest.mark.parametrize("held", [pa.array(["a", "zzz"]), pa.array(["a", None])])
def test_a_file_whose_partition_column_disagrees_with_its_folder_is_refused(lake, held):
    """pyarrow reads the folder's value, cdkds the file's column: such a file is named, not
    adopted to read otherwise."""
    folder = lake / "t"
    write_file(folder, {"g": "a"}, pa.table({"x": [1, 2], "g": held}))
    write_file(folder, {"g": "b"}, pa.table({"x": [3]}))
    with pytest.raises(ConversionError, match=f"g=a/part-0.parquet holds {held[1].as_py()!r} in partition column "
                                              f"'g', under folder g=a"):
        DatasetRepository(f"file://{lake}").convert("t")
    assert not committed(folder)


# ---------------------------------------------------------------- bad input: named, nothing committed

def test_an_unreadable_file_is_named(lake):
    folder = sales(lake)
    (folder / "country=NZ" / "day=2026-01-01" / "broken.parquet").write_bytes(b"not parquet")
    with pytest.raises(ConversionError, match="broken.parquet is not a readable Parquet file"):
        DatasetRepository(f"file://{lake}").convert("sales")
    assert not committed(folder)


def test_files_whose_schemas_disagree_are_named_with_the_field(lake):
    folder = sales(lake)
    write_file(folder, {"country": "FR", "day": "2026-01-01"},
               pa.table({"id": ["x"], "amount": [1.0], "note": ["n"]}), "odd.parquet")
    with pytest.raises(ConversionError, match=r"odd.parquet has field 'id' as string.*as int64"):
        DatasetRepository(f"file://{lake}").convert("sales")
    write_file(folder, {"country": "FR", "day": "2026-01-01"}, pa.table({"id": [1], "amount": [1.0]}), "odd.parquet")
    with pytest.raises(ConversionError, match=r"odd.parquet has field 'note' as absent"):
        DatasetRepository(f"file://{lake}").convert("sales")
    assert not committed(folder)


def test_files_outside_partition_folders_or_under_other_ones_are_named(lake):
    folder = sales(lake)
    pq.write_table(pa.table({"id": [1]}), folder / "stray.parquet")
    with pytest.raises(ConversionError, match="stray.parquet lies under partition folders"):
        DatasetRepository(f"file://{lake}").convert("sales")
    os.remove(folder / "stray.parquet")
    write_file(folder / "plain", {}, pa.table({"id": [1]}))
    with pytest.raises(ConversionError, match="plain/part-0.parquet lies in folder 'plain'"):
        DatasetRepository(f"file://{lake}").convert("sales")
    assert not committed(folder)
    write_file(lake / "twice" / "k=1", {"k": 2}, pa.table({"id": [1]}))
    with pytest.raises(ConversionError, match=r"twice/k=1/k=2/part-0.parquet lies under partition folders \['k', "
                                              r"'k'\]: a partition column may appear once"):
        DatasetRepository(f"file://{lake}").convert("twice")
    assert not committed(lake / "twice")


@pytest.mark.parametrize("what", ["file", "folder"])
def test_a_symbolic_link_is_named(lake, tmp_path, what):
    """pyarrow follows a link (here to a file outside the source); the dataset cannot adopt
    the file where the link is, and must not silently leave it out."""
    folder = sales(lake)
    outside = write_file(tmp_path / "elsewhere", {"country": "FR", "day": "2026-01-01"},
                         pa.table({"id": [9], "amount": [9.0], "note": ["z"]}))
    link = folder / "country=FR" / "day=2026-01-01" if what == "folder" else folder / "country=NZ" / \
        "day=2026-01-01" / "linked.parquet"
    os.makedirs(link.parent, exist_ok=True)
    os.symlink(outside.parent if what == "folder" else outside, link)
    target = outside.parent if what == "folder" else outside
    with pytest.raises(ConversionError, match=f"{link.relative_to(lake)} is a symbolic link to {target}"):
        DatasetRepository(f"file://{lake}").convert("sales")
    assert not committed(folder)
    os.rename(link, link.parent / ("_" + link.name))  # hidden: left out, as pyarrow leaves it out
    assert DatasetRepository(f"file://{lake}").convert("sales").to_table().num_rows == 6


def test_nanosecond_timestamps_are_adopted_when_whole_microseconds_and_refused_otherwise(lake):
    """cdkds keeps timestamps in microseconds: Spark's INT96 files (nanoseconds to pyarrow,
    whole microseconds in fact) read as they are; a file holding nanoseconds is named at
    conversion, not committed to fail every read."""
    micros = pa.array([1_000, 2_000_000, None], pa.timestamp("ns"))
    write_file(lake / "t", {"k": "a"}, pa.table({"ts": micros}))
    ds = DatasetRepository(f"file://{lake}").convert("t")
    expected = hive_rows(lake / "t").column("ts").cast(pa.timestamp("us"))
    assert ds.to_table().column("ts").to_pylist() == expected.to_pylist()
    assert not ds.check(read_data=True).problems
    write_file(lake / "u", {"k": "a"}, pa.table({"ts": pa.array([1_000, 1_001], pa.timestamp("ns"))}))
    with pytest.raises(ConversionError, match=r"u/k=a/part-0.parquet cannot be adopted: .*column 'ts' of type "
                                              r"timestamp\[ns\] cannot be read as timestamp\[us\]"):
        DatasetRepository(f"file://{lake}").convert("u")
    assert not committed(lake / "u")
    nested = pa.array([{"at": 1_000}, {"at": 1}], pa.struct([("at", pa.timestamp("ns"))]))
    write_file(lake / "v", {"k": "a"}, pa.table({"s": nested}))
    with pytest.raises(ConversionError, match=r"v/k=a/part-0.parquet cannot be adopted: .*column 's'.at of type "
                                              r"timestamp\[ns\] cannot be read"):
        DatasetRepository(f"file://{lake}").convert("v")
    assert not committed(lake / "v")


@pytest.mark.parametrize("column", [pa.array([1, 2 ** 64 - 1], pa.uint64()), pa.nulls(2)])
def test_a_column_of_a_type_no_dataset_holds_is_named_with_the_file(lake, column):
    write_file(lake / "t", {"k": "a"}, pa.table({"x": [1, 2], "odd": column}))
    with pytest.raises(ConversionError, match=rf"t/k=a/part-0.parquet \(and the others\) cannot be adopted: "
                                              rf"field 'odd': Arrow type {column.type} has no Avro form"):
        DatasetRepository(f"file://{lake}").convert("t")
    assert not committed(lake / "t")


@pytest.mark.parametrize("text", ["a\\b", "a\tb"])
def test_a_folder_name_a_log_cannot_hold_is_named_for_what_it_is(lake, text):
    write_file(lake / "t", {"k": text}, pa.table({"x": [1]}))
    with pytest.raises(ConversionError, match="has a name a log cannot hold .* a backslash or a control character"):
        DatasetRepository(f"file://{lake}").convert("t")
    assert not committed(lake / "t")


@pytest.mark.parametrize("folder", ["_staging", "_deletes", "_index"])
def test_files_in_a_folder_vacuum_collects_are_refused(lake, folder):
    """Hidden, so not adopted — but vacuum would delete them after the conversion."""
    source = sales(lake)
    os.makedirs(source / folder / "x")
    (source / folder / "x" / "theirs.bin").write_bytes(b"someone's")
    with pytest.raises(ConversionError, match=f"sales/{folder}/x/theirs.bin lies in {folder}/, a folder where "
                                              f"cdkds's vacuum deletes"):
        DatasetRepository(f"file://{lake}").convert("sales")
    assert not committed(source)


def test_files_with_field_ids_of_their_own_are_refused(lake):
    folder = sales(lake)
    odd = pa.schema([pa.field("id", pa.int64(), metadata={PARQUET_FIELD_ID: "7"}), ("amount", pa.float64()),
                     ("note", pa.string())])
    write_file(folder, {"country": "FR", "day": "2026-01-01"},
               pa.table({"id": [9], "amount": [1.0], "note": ["n"]}, schema=odd), "iceberg.parquet")
    with pytest.raises(ConversionError, match="iceberg.parquet carries field id 7 for column 'id', which the "
                                              "converted dataset gives id 1"):
        DatasetRepository(f"file://{lake}").convert("sales")
    assert not committed(folder)


def test_an_empty_or_missing_folder_is_refused(lake):
    os.makedirs(lake / "empty" / "_temporary")
    with pytest.raises(ConversionError, match="holds no data file"):
        DatasetRepository(f"file://{lake}").convert("empty")
    assert not committed(lake / "empty")
    with pytest.raises(ConversionError, match="nothing is not a folder"):
        DatasetRepository(f"file://{lake}").convert("nothing")
    with pytest.raises(ConversionError, match="cannot become dataset 'my-table': invalid dataset name"):
        DatasetRepository(f"file://{lake}").convert("my-table")


def test_a_folder_that_is_a_dataset_already_is_refused(lake):
    sales(lake)
    repo = DatasetRepository(f"file://{lake}")
    repo.convert("sales")
    with pytest.raises(DatasetExistsError, match="already a cdkds dataset"):
        repo.convert("sales")
    assert [p.name for p in (lake / "sales" / "_log").iterdir()] == ["00000000000000000000.json"]


def test_a_source_outside_the_repository_or_another_name_is_refused(lake, tmp_path):
    outside = sales(tmp_path / "elsewhere")
    os.makedirs(lake)
    repo = DatasetRepository(f"file://{lake}")
    with pytest.raises(ConversionError, match=f"source file://{outside} lies outside repository"):
        repo.convert(f"file://{outside}")
    with pytest.raises(ConversionError, match="outside"):
        repo.convert(str(outside))
    with pytest.raises(ConversionError, match="not a folder inside repository"):
        repo.convert("../elsewhere/sales")
    sales(lake)
    with pytest.raises(ConversionError, match="not in the source"):
        repo.convert("sales", name="other")
    assert not committed(outside) and not committed(lake / "sales")
    assert repo.convert(f"file://{lake}/sales").name == "sales"  # a URL inside the repository


def test_bad_partition_types_are_refused(lake):
    sales(lake)
    repo = DatasetRepository(f"file://{lake}")
    with pytest.raises(ConversionError, match="must be one of"):
        repo.convert("sales", partition_types={"day": "datetime"})
    with pytest.raises(ConversionError, match="must be one of int, long, string, boolean, date$"):
        repo.convert("sales", partition_types={"country": "double"})  # no identity partition of a floating type
    with pytest.raises(ConversionError, match=r"partition type given for \['nope'\]"):
        repo.convert("sales", partition_types={"nope": "int"})
    with pytest.raises(ConversionError,
                       match=r"country=AU/day=2026-01-01/part-0.parquet: partition folder country=AU is not a int"):
        repo.convert("sales", partition_types={"country": "int"})
    assert not committed(lake / "sales")


def test_the_commit_records_what_was_converted(lake):
    sales(lake)
    DatasetRepository(f"file://{lake}").convert("sales")
    commit = json.loads((lake / "sales" / "_log" / "00000000000000000000.json").read_text())
    assert commit["operation"] == "create" and commit["info"]["converted"] == "hive"
    assert [next(iter(a)) for a in commit["actions"]] == ["protocol", "metadata", "add", "add", "add"]


@pytest.mark.slow
def test_a_folder_on_s3(s3_endpoint, tmp_path):
    import fsspec

    from tests.conftest import new_bucket, s3_options

    options = s3_options(s3_endpoint)
    bucket = new_bucket(s3_endpoint)
    local = sales(tmp_path)
    fs = fsspec.filesystem("s3", **options)
    for path in local.rglob("*"):
        if path.is_file():
            fs.put_file(str(path), f"{bucket}/lake/{path.relative_to(tmp_path)}")
    repo = DatasetRepository(f"s3://{bucket}/lake", options)
    ds = repo.convert(f"s3://{bucket}/lake/sales")
    assert bag(ds.to_table()) == bag(hive_rows(local, PARTITIONS))
    assert not ds.check(read_data=True).problems
    with pytest.raises(ConversionError, match="outside repository"):
        repo.convert(f"s3://{bucket}/elsewhere/sales")
