"""Kite datasets read for conversion: real Kite layouts (see kite_layouts.py) in, the
descriptor and the files with their partition values out, pruning as Kite did."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from cdkds.catalog.convert.kite import KiteDatasetError, is_kite, read_kite
from cdkds.catalog.expressions import parse
from cdkds.catalog.expressions.binding import bind
from cdkds.catalog.expressions.pruning import FileFilter
from cdkds.catalog.storage import ObjectStore
from tests.catalog.convert.kite_layouts import (
    KiteFolder, java_long_hash, java_properties, julian_month, kite_fixed_range, java_string_hash, java_utf8_hash, kite_bucket, read_file,
    url_encode, utc,
)

EVENT_V1 = {"type": "record", "name": "Event", "namespace": "com.example", "fields": [
    {"name": "id", "type": "long"},
    {"name": "userId", "type": "long"},
    {"name": "ts", "type": "long"},
    {"name": "country", "type": "string"},
    {"name": "payload", "type": "string"},
]}
EVENT_V2 = {**EVENT_V1, "fields": [*EVENT_V1["fields"], {"name": "source", "type": ["null", "string"], "default": None}]}
EVENTS_EXPRESSION = ('[hash("userId", "userId_hash", 16), identity("country", "country_copy", "java.lang.String", -1), '
                     'year("ts", "year"), month("ts", "month")]')
# Long.hashCode of 2**31 is Integer.MIN_VALUE, of -1 is 0, of -(2**40)-3 negative
USER_IDS = [1234, -5, 2**31, 2**32 + 7, -(2**40) - 3, 0, 99, -1, 7_000_000_123]
COUNTRIES = ["NZ", "New Zealand", "Côte d'Ivoire"]
TIMES = [1_735_689_600_000, 1_764_547_200_000, 1_767_225_600_000 + 3_600_000, 1_700_000_000_000]  # 2025-01, 2025-12, 2026-01, 2023-11


def _events_folder(row: dict) -> str:
    t = utc(row["ts"])
    return (f"userId_hash={kite_bucket(java_long_hash(row['userId']), 16)}/country_copy={url_encode(row['country'])}"
            f"/year={t.year}/month={t.month:02d}")


def _event_rows(start: int, count: int, v2: bool = False) -> list[dict]:
    rows = []
    for i in range(start, start + count):
        row = {"id": i, "userId": USER_IDS[i % len(USER_IDS)], "ts": TIMES[i % len(TIMES)] + i,
               "country": COUNTRIES[i % len(COUNTRIES)], "payload": f"p{i}"}
        if v2:
            row["source"] = None if i % 2 else f"s{i}"
        rows.append(row)
    return rows


@pytest.fixture(scope="module")
def events(tmp_path_factory) -> tuple[KiteFolder, dict[str, dict]]:
    """An Avro dataset in namespace ``analytics`` with two schema versions and four
    partition levels: data files by folder, with the partition values Java gives them."""
    kite = KiteFolder(tmp_path_factory.mktemp("repo"), "analytics", "events")
    kite.write_metadata([EVENT_V1, EVENT_V2], partition_expression=EVENTS_EXPRESSION,
                        properties={"kite.writer.cache-size": "10", "owner": "data team: ünï", "a key=x": "v#1"})
    partitions = {}
    for schema, rows in ((EVENT_V1, _event_rows(0, 60)), (EVENT_V2, _event_rows(60, 40, v2=True))):
        for folder, group in kite.write_rows(rows, _events_folder, schema).items():
            t = utc(group[0]["ts"])
            partitions[folder] = {"userId_hash": kite_bucket(java_long_hash(group[0]["userId"]), 16),
                                  "country_copy": group[0]["country"], "year": t.year, "month": t.month}
    (kite.path / "userId_hash=3").mkdir(exist_ok=True)
    (kite.path / "userId_hash=3" / ".5f0e.avro.tmp").write_bytes(b"half written")  # Kite's temporary files
    (kite.path / "_SUCCESS").write_bytes(b"")
    return kite, partitions


def _store(folder: Path) -> ObjectStore:
    return ObjectStore.open(str(folder))


def test_an_avro_dataset_becomes_its_descriptor_and_files(events):
    kite, partitions = events
    found = read_kite(_store(kite.path))
    d = found.descriptor
    assert found.kind == "kite"
    assert (d.format, d.compression) == ("avro", "snappy")
    assert list(d.fields) == ["id", "userId", "ts", "country", "payload", "source"]  # schemas/2.avsc, the newest
    assert dict(d.field_ids) == {"id": 1, "userId": 2, "ts": 3, "country": 4, "payload": 5, "source": 6}
    assert d.partition_strategy.to_json() == [
        {"type": "hash", "source": "userId", "buckets": 16, "sourceType": "long"},
        {"type": "identity", "source": "country"}, {"type": "year", "source": "ts"}, {"type": "month", "source": "ts"}]
    assert dict(d.properties) == {"kite.writer.cache-size": "10", "owner": "data team: ünï", "a key=x": "v#1"}
    by_folder = {f.path.rsplit("/", 1)[0]: dict(f.partition) for f in found.files}
    assert by_folder == partitions
    assert all(f.path.endswith(".avro") and f.deleted is None for f in found.files)
    assert "Côte d'Ivoire" in {p["country_copy"] for p in by_folder.values()}  # from C%C3%B4te+d%27Ivoire


def test_each_row_is_in_the_partition_cdkds_computes(events):
    kite, _ = events
    found = read_kite(_store(kite.path))
    strategy, fields = found.descriptor.partition_strategy, found.descriptor.fields
    for file in found.files:
        rows = read_file(kite.path / file.path, "avro")
        batch = pa.RecordBatch.from_pylist(rows, schema=pa.schema([("userId", pa.int64()), ("ts", pa.int64()),
                                                                   ("country", pa.string())]))
        computed = strategy.partition_arrays(batch, fields)
        for name, array in zip(strategy.names, computed):
            assert set(array.to_pylist()) == {file.partition[name]}, (file.path, name)


@pytest.mark.parametrize("user_id", [1234, 2**31, -(2**40) - 3, -5])
def test_a_user_id_prunes_to_the_bucket_kite_put_it_in(events, user_id):
    kite, _ = events
    found = read_kite(_store(kite.path))
    d = found.descriptor
    kept = FileFilter.of(bind(parse(f"userId = {user_id}"), d.fields), d)
    bucket = kite_bucket(java_long_hash(user_id), 16)
    holding = {f.path for f in found.files if any(r["userId"] == user_id for r in read_file(kite.path / f.path, "avro"))}
    may = {f.path for f in found.files if kept.may_match(_Summary(f.partition))}
    assert holding and holding <= may
    assert may == {f.path for f in found.files if f.partition["userId_hash"] == bucket}


class _Summary:
    def __init__(self, partition):
        self.partition, self.row_count, self.statistics = partition, 1, {}


def test_kite_string_hashes_with_negative_hash_codes(tmp_path):
    schema = {"type": "record", "name": "Visit", "fields": [{"name": "user", "type": "string"},
                                                             {"name": "n", "type": "int"}]}
    users = ["polygenelubricants", "Aa", "BB", "zzzzzzzzzz", "ünïcödé", "😀 smile", "GydZG_", ""]
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert sum(java_string_hash(u) < 0 for u in users) >= 3
    kite = KiteFolder(tmp_path, "web", "visits")
    kite.write_metadata([schema], format="parquet", compression="deflate",
                        partition_expression='hash("user", "user_hash", 7)')
    kite.write_rows([{"user": u, "n": i} for i, u in enumerate(users * 3)],
                    lambda r: f"user_hash={kite_bucket(java_string_hash(r['user']), 7)}", schema, "parquet", "gzip")
    found = read_kite(_store(kite.path))
    assert (found.descriptor.format, found.descriptor.compression) == ("parquet", "gzip")
    d = found.descriptor
    for user in users:
        kept = FileFilter.of(bind(parse(f"user = '{user}'"), d.fields), d)
        may = {f.partition["user_hash"] for f in found.files if kept.may_match(_Summary(f.partition))}
        assert may == {kite_bucket(java_string_hash(user), 7)}, user
    assert {f.partition["user_hash"] for f in found.files if "user_hash=0/" in f.path} == {0}


def test_text_kite_hashed_as_avro_utf8_is_refused_naming_the_file(tmp_path):
    schema = {"type": "record", "name": "Visit", "fields": [{"name": "user", "type": "string"}]}
    user = "é"
    as_string, as_utf8 = kite_bucket(java_string_hash(user), 16), kite_bucket(java_utf8_hash(user), 16)
    assert as_string != as_utf8 and java_utf8_hash("ascii_only") == java_string_hash("ascii_only")
    kite = KiteFolder(tmp_path, "web", "visits")
    kite.write_metadata([schema], partition_expression='[hash("user", "user_hash", 16)]')
    kite.write_file("user_hash=" + str(kite_bucket(java_string_hash("plain"), 16)), [{"user": "plain"}], schema)
    path = kite.write_file(f"user_hash={as_utf8}", [{"user": user}], schema)
    with pytest.raises(KiteDatasetError, match=rf"{path}.*user='é'.*user_hash={as_utf8}.*Utf8"):
        read_kite(_store(kite.path))


def test_old_layout_parquet_with_ranges_and_date_format(tmp_path):
    schema = {"type": "record", "name": "Person", "fields": [
        {"name": "id", "type": "long"}, {"name": "age", "type": "int"}, {"name": "name", "type": "string"},
        {"name": "ts", "type": "long"}]}
    expression = ('[range("age", "age_bound", 18, 65, 120), fixedSizeRange("id", "id_range", 1000), '
                  "range('name', null, \"g\", \"p\", \"zzz\"), dateFormat(\"ts\", \"day\", \"yyyy-MM-dd\")]")
    kite = KiteFolder(tmp_path, "default", "people")
    kite.write_metadata([schema], format="parquet", compression="uncompressed", partition_expression=expression,
                        numbered=False, location=None)
    rows = [{"id": i * 377 - 900, "age": (i * 13) % 120, "name": "abcdefghijklmnopqrstuvwxyz"[i % 26] + "x",
             "ts": 1_767_225_600_000 + i * 40_000_000} for i in range(30)]

    def folder(r):
        index = next(i for i, b in enumerate((18, 65, 120)) if r["age"] <= b)
        name_bound = next(b for b in ("g", "p", "zzz") if r["name"] <= b)
        return (f"age_bound={index}/id_range={(r['id'] // 1000) * 1000}/name_bound={name_bound}"
                f"/day={utc(r['ts']).strftime('%Y-%m-%d')}")

    groups = kite.write_rows(rows, folder, schema, "parquet", "none")
    found = read_kite(_store(kite.path))
    d = found.descriptor
    assert (d.format, d.compression) == ("parquet", "none")
    assert d.partition_strategy.to_json() == [
        {"type": "range", "source": "age", "bounds": [18, 65, 120], "name": "age_bound"},
        {"type": "range", "source": "id", "size": 1000},
        {"type": "range", "source": "name", "bounds": ["g", "p", "zzz"], "name": "name_bound"},
        {"type": "dateFormat", "source": "ts", "format": "yyyy-MM-dd", "name": "day"}]
    assert len(found.files) == len(groups)
    for f in found.files:
        row = groups[f.path.rsplit("/", 1)[0]][0]
        assert dict(f.partition) == {"age_bound": next(b for b in (18, 65, 120) if row["age"] <= b),
                                     "id_range": (row["id"] // 1000) * 1000,
                                     "name_bound": next(b for b in ("g", "p", "zzz") if row["name"] <= b),
                                     "day": utc(row["ts"]).strftime("%Y-%m-%d")}
    kept = FileFilter.of(bind(parse("age = 30"), d.fields), d)
    assert {f.partition["age_bound"] for f in found.files if kept.may_match(_Summary(f.partition))} == {65}


def test_single_call_old_form_unpartitioned_and_bzip2(tmp_path):
    schema = {"type": "record", "name": "R", "fields": [{"name": "userId", "type": "int"}]}
    kite = KiteFolder(tmp_path, "ns", "one")
    kite.write_metadata([schema], compression="bzip2", partition_expression='hash("userId", 4)')
    kite.write_rows([{"userId": v} for v in (-7, 3, 2**31 - 1, -(2**31))],
                    lambda r: f"userId_hash={kite_bucket(r['userId'], 4)}", schema, codec="bzip2")
    found = read_kite(_store(kite.path))
    assert found.descriptor.compression == "deflate"  # cdkds writes no bzip2; Kite's bzip2 files read as they are
    assert found.descriptor.partition_strategy.to_json() == [
        {"type": "hash", "source": "userId", "buckets": 4, "sourceType": "int"}]
    assert {f.partition["userId_hash"] for f in found.files} == {kite_bucket(v, 4) for v in (-7, 3, 2**31 - 1, -(2**31))}

    flat = KiteFolder(tmp_path, "ns", "flat")
    flat.write_metadata([schema], partition_expression="[]", properties={"note": "no partitions"})
    flat.write_file("", [{"userId": 1}], schema)
    found = read_kite(_store(flat.path))
    assert found.descriptor.partition_strategy is None and [f.partition for f in found.files] == [{}]


def test_properties_as_people_edit_them(tmp_path):
    """Comments, other separators, continuations and escapes, read as Java reads them."""
    kite = KiteFolder(tmp_path, "ns", "edited")
    kite.write_metadata([EVENT_V1])
    text = ("# edited by hand\n! another comment\n"
            "version : 1\n"
            "format parquet\r\n"
            "compressionType=\\\n    snappy\n"
            "partitionExpression = [hash(\"userId\", \"userId_hash\", 16), \\\n"
            "                       year(\"ts\", \"year\")]\n"
            "owner\\ name=Zo\\u00eb \\u2603 \\uD83D\\uDE00\\t!\n"
            "   empty\n"
            "path=C:\\\\data\\:x\n")
    kite.write_properties(text.encode("latin-1"))
    row = {"id": 1, "userId": 1234, "ts": TIMES[0], "country": "NZ", "payload": "x"}
    kite.write_file(f"userId_hash={kite_bucket(java_long_hash(1234), 16)}/year=2025", [row], EVENT_V1, "parquet")
    found = read_kite(_store(kite.path))
    d = found.descriptor
    assert (d.format, d.compression) == ("parquet", "snappy")
    assert d.partition_strategy.names == ["userId_hash", "year"]
    assert dict(d.properties) == {"owner name": "Zoë ☃ 😀\t!", "empty": "", "path": "C:\\data:x"}


def test_is_kite(tmp_path, events):
    assert is_kite(_store(events[0].path))
    (tmp_path / "plain" / "country=NZ").mkdir(parents=True)
    assert not is_kite(_store(tmp_path / "plain"))
    (tmp_path / "broken" / ".metadata" / "schemas").mkdir(parents=True)
    (tmp_path / "broken" / ".metadata" / "schemas" / "1.avsc").write_text(json.dumps(EVENT_V1))
    assert is_kite(_store(tmp_path / "broken"))  # so read_kite says what is missing
    with pytest.raises(KiteDatasetError, match="descriptor.properties is missing"):
        read_kite(_store(tmp_path / "broken"))


# ---------------------------------------------------------------- refusals

def _dataset(tmp_path: Path, expression: str | None = '[hash("userId", "userId_hash", 16), year("ts", "year")]',
             **metadata) -> KiteFolder:
    kite = KiteFolder(tmp_path, "ns", "bad")
    kite.write_metadata(metadata.pop("schemas", [EVENT_V1]), partition_expression=expression, **metadata)
    return kite


def _event(user_id: int = 1234) -> dict:
    return {"id": 1, "userId": user_id, "ts": TIMES[0], "country": "NZ", "payload": "x"}


def _refused(kite: KiteFolder, match: str) -> None:
    with pytest.raises(KiteDatasetError, match=match):
        read_kite(_store(kite.path))


@pytest.mark.parametrize("text, match", [
    (b"\x00\x01\x02garbage\xff\xfe", "has no version: it is not a Kite descriptor"),
    (b'{"format": "avro", "version": 1}', "has no version"),
    (b"version=2\nformat=avro\n", "has version=2"),
    (b"version=1\nformat=avro\nowner=\\u00e", r"line 3: malformed \\uxxxx escape"),
])
def test_garbled_properties(tmp_path, text, match):
    kite = _dataset(tmp_path)
    kite.write_properties(text)
    _refused(kite, rf"descriptor\.properties.*{match}")


@pytest.mark.parametrize("fmt, compression, match", [
    ("csv", "uncompressed", "format=csv: Kite reads csv datasets but cannot write them"),
    ("json", "uncompressed", "format=json"),
    ("orc", "snappy", "unknown format 'orc'"),
    ("parquet", "lzo", "compressionType=lzo is not one Kite writes parquet with"),
    ("parquet", "bzip2", "compressionType=bzip2"),
])
def test_formats_and_compressions_without_a_counterpart(tmp_path, fmt, compression, match):
    _refused(_dataset(tmp_path, format=fmt, compression=compression), match)


@pytest.mark.parametrize("expression, match", [
    ('[hash("userId", "userId_hash", 16), provided("batch", "string")]', "provided.*no counterpart"),
    ('bucket("userId", 16)', "unknown Kite partition function 'bucket'"),
    ('[hash("userId", "userId_hash", 16), year("ts", "year")', r"expected '\]', found the end"),
    ("hash(userId, 16)", "expected a string, an integer or null"),
    ('hash("userId", "h", 16.5)', "unexpected '.'|not a JEXL integer"),
    ('hash("userId", "h", 16) + 1', "unexpected '\\+'"),
    ('year("ts")', r"Kite's year takes \(s n\)"),
    ('hash("userId", "h", 16, 2)', "Kite's hash takes"),
    ('range("userId", "r", 10, 5)', "bounds must be strictly increasing"),
    ('dateFormat("ts", "d", "yyyy-MM-dd EEE")', "'E' is not supported"),
    ('[hash("payload", "p", 8), hash("payload", "p", 4)]', "partition names must be unique"),
    ('identity("ts", "ts", "java.lang.Long", -1)', "equals a schema field"),
    ('hash("address.city", "c", 4)', "nested field 'address.city'"),
    ('year("country", "year")', "needs a source of type"),
])
def test_partition_expressions_without_a_counterpart(tmp_path, expression, match):
    _refused(_dataset(tmp_path, expression), rf"descriptor\.properties.*{match}")


def test_a_schema_breaking_cdkds_rules_is_refused_naming_the_file(tmp_path):
    address = {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]}
    twice = {**EVENT_V1, "fields": [*EVENT_V1["fields"], {"name": "home", "type": address},
                                    {"name": "work", "type": "Address"}]}
    _refused(_dataset(tmp_path, schemas=[EVENT_V1, twice]), r"schemas/2\.avsc: the schema breaks a rule.*work")


def test_an_unreadable_schema_is_refused_naming_the_file(tmp_path):
    kite = _dataset(tmp_path)
    (kite.path / ".metadata" / "schemas" / "3.avsc").write_text('{"type": "record", "name": ')
    _refused(kite, r"schemas/3\.avsc: not an Avro schema in JSON")
    (kite.path / ".metadata" / "schemas" / "3.avsc").unlink()
    (kite.path / ".metadata" / "schemas" / "latest.avsc").write_text("{}")
    _refused(kite, r"schemas/latest\.avsc: not a numbered schema")


@pytest.mark.parametrize("folder, match", [
    ("user_hash=1/year=2025", r"folder 'user_hash=1' should be userId_hash=<value>"),
    ("userId_hash=1/2025", r"folder '2025' should be year=<value>"),
    ("userId_hash=1", "puts this dataset's data files in userId_hash=.../year=..."),
    ("userId_hash=1/year=2025/extra=1", "puts this dataset's data files in"),
    ("userId_hash=16/year=2025", "has no bucket 16"),
    ("userId_hash=x/year=2025", "'x' is not an integer"),
    ("userId_hash=1/year=20%G5", "a '%' that starts no %XX escape"),
])
def test_files_outside_kites_layout(tmp_path, folder, match):
    kite = _dataset(tmp_path)
    path = kite.write_file(folder, [_event()], EVENT_V1)
    _refused(kite, rf"{path}: .*{match}")


def test_a_row_in_another_bucket_is_refused(tmp_path):
    kite = _dataset(tmp_path)
    right = kite_bucket(java_long_hash(1234), 16)
    kite.write_file(f"userId_hash={right}/year=2025", [_event()], EVENT_V1)
    path = kite.write_file(f"userId_hash={(right + 1) % 16}/year=2025", [_event(), _event()], EVENT_V1)
    _refused(kite, rf"{path}: row 0 has userId=1234, whose userId_hash is {right}.*in userId_hash={(right + 1) % 16}")


def test_a_stray_file_is_refused(tmp_path):
    kite = _dataset(tmp_path)
    (kite.path / "notes.txt").write_text("hello")
    _refused(kite, r"notes\.txt: not a avro data file")


def test_a_corrupt_data_file_is_refused_naming_it(tmp_path):
    kite = _dataset(tmp_path)
    (kite.path / "userId_hash=1" / "year=2025").mkdir(parents=True)
    (kite.path / "userId_hash=1" / "year=2025" / "x.avro").write_bytes(b"not avro at all")
    _refused(kite, r"x\.avro: cannot be read")


@pytest.mark.parametrize("location", ["hdfs://namenode:8020/data/ns/bad", "file:/somewhere/else/ns/bad",
                                      "s3a://bucket/ns/bad"])
def test_a_location_elsewhere_is_refused(tmp_path, location):
    _refused(_dataset(tmp_path, location=location), rf"location={location} is not this dataset's folder")


@pytest.mark.parametrize("form", ["file:{}", "file://{}", "{}", "file:{}/"])
def test_a_location_naming_the_folder_itself_is_accepted(tmp_path, form):
    kite = KiteFolder(tmp_path, "ns", "here")
    kite.write_metadata([EVENT_V1], location=form.format(tmp_path / "ns" / "here"))
    assert read_kite(_store(kite.path)).files == ()


def test_a_kite_property_cdkds_reads_is_refused(tmp_path):
    _refused(_dataset(tmp_path, properties={"ttl": "7d"}), "Kite property 'ttl' has a meaning in cdkds")


def test_properties_store_text_round_trips():
    """The test's Properties.store matches Java's escaping (checked against known output)."""
    text = java_properties({"k": "a=b:c", "key with space": " lead", "u": "é☃"}, "c").decode("latin-1")
    assert "k=a\\=b\\:c\n" in text and "key\\ with\\ space=\\ lead\n" in text and "u=\\u00E9\\u2603\n" in text


@pytest.mark.parametrize("backend", ["memory", pytest.param("s3", marks=pytest.mark.slow)])
def test_a_kite_dataset_on_object_stores(events, backend, request):
    """The same folder uploaded to fsspec's memory store and to S3 (moto): the same files and
    values; on S3 a location ``s3a://`` naming the folder is its own, another is refused."""
    import uuid

    import fsspec

    from tests.conftest import new_bucket, s3_options

    kite, partitions = events
    if backend == "memory":
        url, options = f"memory://kite-{uuid.uuid4().hex}/analytics/events", {}
    else:
        endpoint = request.getfixturevalue("s3_endpoint")
        url, options = f"s3://{new_bucket(endpoint)}/repo/analytics/events", s3_options(endpoint)
    fs, root = fsspec.core.url_to_fs(url, **options)
    fs.put(f"{kite.path}/", root, recursive=True)
    expected = {(f.path, tuple(f.partition.items())) for f in read_kite(_store(kite.path)).files}

    def uploaded(location: str | None) -> ObjectStore:
        stored = {"version": "1", "format": "avro", "compressionType": "snappy",
                  "partitionExpression": EVENTS_EXPRESSION, "owner": "x"}
        if location is not None:
            stored["location"] = location
        fs.pipe(f"{root}/.metadata/descriptor.properties", java_properties(stored, "Dataset descriptor for events"))
        return ObjectStore.open(url, options)

    assert is_kite(uploaded(None)) and not is_kite(ObjectStore.open(url.rsplit("/", 1)[0], options))
    found = read_kite(uploaded(None))
    assert {(f.path, tuple(f.partition.items())) for f in found.files} == expected
    if backend == "s3":
        assert len(read_kite(uploaded(f"s3a://{root}")).files) == len(expected)
        with pytest.raises(KiteDatasetError, match="location=s3a://elsewhere/repo/analytics/events is not"):
            read_kite(uploaded("s3a://elsewhere/repo/analytics/events"))


def test_a_time_kite_placed_by_the_julian_calendar_is_refused(tmp_path):
    kite = _dataset(tmp_path, 'month("ts", "month")')
    ts = -12_219_724_800_000  # 1582-10-10 (proleptic Gregorian), Julian 1582-09-30 in Java
    assert julian_month(ts) == 9
    path = kite.write_file(f"month={julian_month(ts):02d}", [{**_event(), "ts": ts}], EVENT_V1)
    _refused(kite, rf"{path}: row 0 has ts={ts}, whose month is 10 .* in month=9: Java's calendar is Julian")


def test_a_fixed_size_range_kite_computed_in_doubles_is_refused(tmp_path):
    kite = _dataset(tmp_path, 'fixedSizeRange("id", "id_range", 3)')
    big = 2**62 + 1
    path = kite.write_file(f"id_range={kite_fixed_range(big, 3)}", [{**_event(), "id": big}], EVENT_V1)
    kite.write_file(f"id_range={kite_fixed_range(-7, 3)}", [{**_event(), "id": -7}], EVENT_V1)
    _refused(kite, rf"{path}: row 0 has id={big}, .*: Kite divides by the size in doubles")


def test_cdkds_reads_each_file_as_fastavro_does(events):
    """Kite's files carry no field ids: read by name through the descriptor, each gives the
    rows fastavro gives (files of schema 1 with schema 2's default for the field added)."""
    from cdkds.formats.files import file_format

    kite, _ = events
    found = read_kite(_store(kite.path))
    d, store = found.descriptor, _store(kite.path)
    fmt = file_format(d.format)
    for f in found.files:
        rows = [r for _, batch in fmt.scan(store.fs, store.path(f.path), d.projection()) for r in batch.to_pylist()]
        assert rows == [{"source": None, **r} for r in read_file(kite.path / f.path, "avro")]
