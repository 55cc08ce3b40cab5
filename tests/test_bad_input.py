"""Bad input across the Python API: each gets a clear error naming what is wrong, and
nothing is committed (the log does not move, no data file is left behind)."""

import datetime as dt

import pyarrow as pa
import pytest

from cdkds.catalog import (
    CdkdsError, DatasetDescriptor, DatasetRepository, PartitionStrategy, field,
)

SCHEMA = {"type": "record", "name": "E", "fields": [
    {"name": "id", "type": "long"}, {"name": "country", "type": ["null", "string"], "default": None},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}}]}
T0 = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)
GOOD = {"id": 1, "country": "NZ", "ts": T0}


def write(ds, *records):
    with ds.writer() as w:
        for r in records:
            w.write(r)


def write_batch(ds, table):
    with ds.writer() as w:
        w.write_batch(table)


CASES = [
    # records
    ("string for a long", lambda r, d: write(d, {**GOOD, "id": "7"}), r"dataset 'events': field 'id': value '7'"),
    ("float for a long", lambda r, d: write(d, {**GOOD, "id": 1.5}), r"field 'id': value 1.5"),
    ("bool for a long", lambda r, d: write(d, {**GOOD, "id": True}), r"field 'id': value True"),
    ("long out of range", lambda r, d: write(d, {**GOOD, "id": 2**70}), r"within the range of an Avro long"),
    ("null in required field", lambda r, d: write(d, {**GOOD, "ts": None}), r"field 'ts' is required"),
    ("missing required field", lambda r, d: write(d, {"id": 1}), r"'ts' is required and missing"),
    ("unknown field", lambda r, d: write(d, {**GOOD, "colour": "red"}), r"unknown field 'colour'"),
    ("not a dict", lambda r, d: write(d, [1, 2]), r"a record must be a dict"),
    ("date for a timestamp", lambda r, d: write(d, {**GOOD, "ts": dt.date(2026, 1, 1)}), r"field 'ts'.*datetime"),
    ("null partition source", lambda r, d: write(d, {**GOOD, "country": None}), r"partition source 'country' of list\(country.* is null"),
    ("value outside the value lists", lambda r, d: write(d, {**GOOD, "country": "FR"}), r"'FR' of field 'country' is in none"),
    ("text with a lone surrogate", lambda r, d: write(d, {**GOOD, "country": "N\ud800"}), r"field 'country': text .* holds a lone surrogate"),
    ("one bad record among good ones", lambda r, d: write(d, GOOD, GOOD, {**GOOD, "id": "x"}), r"field 'id'"),
    # batches
    ("batch with unknown column", lambda r, d: write_batch(d, pa.table({"id": [1], "ts": [T0], "x": [1]})), r"unknown column 'x'"),
    ("batch missing a required column", lambda r, d: write_batch(d, pa.table({"id": [1]})), r"required column 'ts' is missing"),
    ("batch with a null in a required column", lambda r, d: write_batch(d, pa.table({"id": [1, None], "ts": [T0, T0]})), r"field 'id' \(row 1\): null in a required field"),
    ("batch with an uncastable type", lambda r, d: write_batch(d, pa.table({"id": ["a"], "ts": [T0]})), r"field 'id' \(row 0\): value 'a' is not a long"),
    ("not a batch", lambda r, d: write_batch(d, {"id": [1]}), r"must be pyarrow RecordBatches or Tables"),
    # reads and predicates
    ("unknown field in where", lambda r, d: list(d.reader("colour = 'red'")), r"dataset 'events': unknown field 'colour'"),
    ("unparsable where", lambda r, d: list(d.reader("id = = 1")), r"cannot parse predicate 'id = = 1'"),
    ("where literal of the wrong type", lambda r, d: list(d.reader("id = 'abc'")), r"field 'id' \(long\).*cannot be read as long"),
    ("bad timestamp literal", lambda r, d: list(d.reader("ts >= 'yesterday'")), r"field 'ts'.*'yesterday'"),
    ("starts with on a number", lambda r, d: list(d.reader(field("id").startswith("1"))), r"'starts with' needs a string field"),
    ("unknown column", lambda r, d: list(d.scan(columns=["id", "colour"])), r"unknown column 'colour'"),
    # datasets, versions, names
    ("unknown dataset", lambda r, d: r.load("nothing"), r"dataset 'nothing' does not exist"),
    ("name with path characters", lambda r, d: r.create("../etc", d.descriptor), r"invalid dataset name '../etc'"),
    ("name with three parts", lambda r, d: r.create("a/b/c", d.descriptor), r"invalid dataset name 'a/b/c'"),
    ("existing dataset", lambda r, d: r.create("events", d.descriptor), r"dataset 'events' already exists"),
    ("version beyond the log", lambda r, d: r.load("events", version=99), r"has no revision 99"),
    ("negative version", lambda r, d: r.load("events", version=-2), r"version must be a revision number"),
    ("unreadable timestamp", lambda r, d: r.load("events", timestamp="soon"), r"cannot read 'soon' as a time"),
    ("NaN timestamp", lambda r, d: r.load("events", timestamp=float("nan")), r"cannot read nan as a time"),
    ("time before creation", lambda r, d: r.load("events", timestamp=0), r"no revision at or before 0"),
    # descriptors and updates
    ("format change", lambda r, d: r.update("events", d.descriptor.replace(format="avro")), r"dataset 'events': the format cannot change"),
    ("strategy on no field", lambda r, d: d.alter().partition_by("identity(nope)").commit(), r"dataset 'events': partition source 'nope' of identity\(nope\) is not a field"),
    ("strategy unchanged", lambda r, d: d.alter().partition_by(d.descriptor.partition_strategy).commit(), r"dataset 'events': the dataset is partitioned by .* already"),
    ("new required field", lambda r, d: r.update("events", d.descriptor.replace(schema={**SCHEMA, "fields": SCHEMA["fields"] + [{"name": "z", "type": "int"}]})), r"new field 'z' \(int\) is required and has no default"),
    ("narrowing a type", lambda r, d: r.update("events", d.descriptor.replace(schema={**SCHEMA, "fields": [{"name": "id", "type": "int"}] + SCHEMA["fields"][1:]})), r"field 'id' cannot change from long to int"),
    ("bad strategy text", lambda r, d: PartitionStrategy.parse("hash(id)"), r"takes 1 argument"),
    ("bad strategy JSON", lambda r, d: PartitionStrategy.from_json('[{"type": "bucket", "source": "id"}]'), r"unknown partition function type 'bucket'"),
    ("strategy on a missing field", lambda r, d: DatasetDescriptor(SCHEMA, "hash(user, 4)"), r"partition source 'user'"),
    ("hash on a timestamp", lambda r, d: DatasetDescriptor(SCHEMA, "hash(ts, 4)"), r"needs a source of type .* but field 'ts' is timestamp-micros"),
    ("bad schema", lambda r, d: DatasetDescriptor({"type": "record", "name": "R", "fields": [{"name": "x", "type": "money"}]}), r"invalid Avro schema"),
    # maintenance
    ("vacuum below the safety minimum", lambda r, d: d.vacuum(retention=dt.timedelta(seconds=1)), r"below the safe minimum"),
    ("unknown write mode", lambda r, d: d.writer(mode="merge"), r"unknown write mode 'merge'"),
    ("bad target file size", lambda r, d: d.writer(target_file_size=0), r"target_file_size must be a positive"),
    ("bad compaction target size", lambda r, d: d.compact(target_file_size=-1), r"dataset 'events': target_file_size must be a positive"),
    ("delete without a predicate", lambda r, d: d.delete(None), r"dataset 'events': delete needs a predicate, got None"),
    ("delete with an empty predicate", lambda r, d: d.delete(""), r"dataset 'events': delete needs a predicate, got ''"),
]


@pytest.fixture
def lake(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("events", DatasetDescriptor(SCHEMA, "list(country, [['NZ', 'AU'], ['US']])"))
    write(ds, GOOD)
    return repo, ds


@pytest.mark.parametrize("what, action, message", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_clearly_and_commits_nothing(lake, what, action, message):
    repo, ds = lake
    files_before = sorted(k for k, _ in ds.store.walk_files("data"))
    with pytest.raises(CdkdsError, match=message):
        action(repo, repo.load("events"))
    assert repo.load("events").version == 1
    assert sorted(k for k, _ in ds.store.walk_files("data")) == files_before
    assert list(repo.load("events").reader()) == [GOOD]
