"""The keyed and TTL properties of a descriptor."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, strategies as st

from cdkds.catalog import DatasetDescriptor, DatasetRepository, InvalidDescriptorError
import importlib
from cdkds.catalog.keyed.properties import DEFAULT_BUCKETS, MAX_DURATION, MIN_DURATION, parse_duration
from tests.cli.running import run

SCHEMA = {"type": "record", "name": "u", "fields": [
    {"name": "id", "type": "long"}, {"name": "version", "type": "long"},
    {"name": "updatedAt", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "expiresAt", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None}]}


def test_defaults_and_values():
    d = DatasetDescriptor(SCHEMA, record_key="id", ordering_field="updatedAt",
                          properties={"index.buckets": "64", "ttl": "30 days", "gc.grace": "1h",
                                      "ttl.field": "expiresAt", "index.compaction.deltas": "4"})
    k = d.keyed
    assert (k.buckets, k.compaction_deltas, k.ttl, k.ttl_field, k.gc_grace) == (
        64, 4, dt.timedelta(days=30), "expiresAt", dt.timedelta(hours=1))
    assert DatasetDescriptor(SCHEMA, record_key="id").keyed.buckets == DEFAULT_BUCKETS


@pytest.mark.parametrize("props, message", [
    ({"index.buckets": "0"}, "index.buckets must be a positive integer at most 4096, got '0'"),
    ({"index.buckets": "5000"}, "got '5000'"),
    ({"index.buckets": "x"}, "got 'x'"),
    ({"index.compaction.deltas": "-1"}, "index.compaction.deltas must be a positive integer"),
    ({"ttl": "soon"}, "property ttl must be a duration such as '30 days' or '12h', got 'soon'"),
    ({"ttl": "0 days"}, "must be a positive duration"),
    ({"gc.grace": "3 fortnights"}, "property gc.grace must be a duration"),
    ({"ttl.field": "nope"}, "ttl.field names 'nope', which is not in the schema"),
    ({"ttl.field": "version"}, "ttl.field names 'version', a long; it must be a timestamp"),
])
def test_bad_properties_are_named(props, message):
    with pytest.raises(InvalidDescriptorError) as e:
        DatasetDescriptor(SCHEMA, record_key="id", properties=props)
    assert message in str(e.value)


def test_ttl_from_a_non_temporal_ordering_field_is_refused():
    with pytest.raises(InvalidDescriptorError, match="'version' is a long, not a date or timestamp"):
        DatasetDescriptor(SCHEMA, record_key="id", ordering_field="version", properties={"ttl": "1 day"})
    DatasetDescriptor(SCHEMA, record_key="id", ordering_field="version", properties={"ttl.field": "expiresAt"})


@given(st.integers(1, 50_000), st.sampled_from([("s", 1), ("sec", 1), ("minutes", 60), ("h", 3600), ("days", 86400),
                                               ("w", 604800), ("", 1)]), st.sampled_from(["", " "]))
def test_durations(n, unit, space):
    name, seconds = unit
    assert parse_duration(f"{n}{space}{name}", "ttl") == dt.timedelta(seconds=n * seconds)


# ---------------------------------------------------------------- durations and their range (issue 25.5)

UTC = dt.timezone.utc
TIMES = {  # ordering field kind -> (its Avro type, the earliest and latest values it holds)
    "timestamp-micros": ({"type": "long", "logicalType": "timestamp-micros"},
                         dt.datetime(1, 1, 1, tzinfo=UTC), dt.datetime(9999, 12, 31, 23, 59, tzinfo=UTC)),
    "date": ({"type": "int", "logicalType": "date"}, dt.date(1, 1, 1), dt.date(9999, 12, 31)),
    "local-timestamp-millis": ({"type": "long", "logicalType": "local-timestamp-millis"},
                               dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59)),
    "none": (None, None, None),
}


def _timed_schema(kind: str) -> dict:
    avro = TIMES[kind][0]
    return {"type": "record", "name": "T", "fields": [{"name": "k", "type": "long"}] + (
        [{"name": "t", "type": avro}] if avro else []) + [
        {"name": "until", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None}]}


@pytest.mark.parametrize("props", [{"ttl": "3000000 days"}, {"ttl": "200000000 days"}, {"gc.grace": "200000000 days"},
                                   {"ttl": f"{MAX_DURATION.days + 1} days"}, {"gc.grace": "1e9 days"},
                                   {"ttl": "0.0001 s"}])
def test_durations_outside_their_range_are_refused_naming_the_property(tmp_path, props):
    (name, text), = props.items()
    with pytest.raises(InvalidDescriptorError, match=f"property {name} must be"):
        DatasetDescriptor(_timed_schema("date"), record_key="k", ordering_field="t", properties=props)
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("d", DatasetDescriptor(_timed_schema("date"), record_key="k", ordering_field="t"))
    with pytest.raises(InvalidDescriptorError, match=f"property {name} must be"):
        repo.update("d", ds.descriptor.replace(properties=props))
    done = run("create", f"file://{tmp_path}/lake/e", "--schema", _schema_file(tmp_path), "--record-key", "k",
               "--ordering-field", "t", "--property", f"{name}={text}", code=1)
    assert done.stderr.startswith(f"error: dataset 'e': property {name} must be")
    assert repo.list() == ["d"] and repo.load("d").version == 0


def _schema_file(tmp_path) -> str:
    import json

    path = tmp_path / "t.avsc"
    path.write_text(json.dumps(_timed_schema("date")))
    return str(path)


@pytest.mark.parametrize("kind", sorted(TIMES))
def test_every_operation_works_at_the_longest_durations(tmp_path, kind):
    _, first, last = TIMES[kind]
    longest = f"{MAX_DURATION.days} days"
    ordering = "t" if first is not None else None
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("d", DatasetDescriptor(_timed_schema(kind), record_key="k", ordering_field=ordering,
                                            properties={"ttl": longest, "gc.grace": longest, "ttl.field": "until"}))
    rows = [{"k": 1, "until": None}, {"k": 2, "until": dt.datetime(9999, 12, 31, tzinfo=UTC)}, {"k": 3}]
    if ordering:
        rows = [{**r, "t": v} for r, v in zip(rows, [first, last, last])]
    assert ds.upsert(rows).inserted == 3
    alive = [1, 2, 3] if kind == "none" else [2, 3]  # year 1 + ~1,000 years is past; row 1 has no ttl.field value
    assert sorted(r["k"] for r in ds.reader()) == alive
    assert sorted(ds.to_table().column("k").to_pylist()) == alive
    assert ds.get({"k": 3}) is not None and len(ds.get_many([{"k": 2}, {"k": 3}])) == 2
    ds.delete_keys([{"k": 3, "t": last}] if ordering else [{"k": 3}])
    late = {"k": 3, "t": last - dt.timedelta(days=1)} if ordering else {"k": 3}
    assert ds.upsert([late]).inserted == (0 if ordering else 1)  # the tombstone is kept ~1,000 years
    if not ordering:
        ds.delete_keys([{"k": 3}])
    ds.compact()
    ds.rebuild_index()
    assert sorted(r["k"] for r in repo.load("d").reader()) == [k for k in alive if k != 3]
    assert ds.check().ok


def test_a_longer_duration_recorded_before_the_limit_reads_as_the_limit(tmp_path, monkeypatch):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    module = importlib.import_module("cdkds.catalog.keyed.properties")
    monkeypatch.setattr(module, "MAX_DURATION", dt.timedelta(days=999_999_999))  # the code before the limit
    ds = repo.create("d", DatasetDescriptor(_timed_schema("date"), record_key="k", ordering_field="t",
                                            properties={"ttl": "3000000 days", "gc.grace": "200000000 days"}))
    monkeypatch.undo()
    old = repo.load("d")
    assert (old.descriptor.keyed.ttl, old.descriptor.keyed.gc_grace) == (MAX_DURATION, MAX_DURATION)
    old.upsert([{"k": 1, "t": dt.date(2026, 1, 1)}])
    old.delete_keys([{"k": 1, "t": dt.date(2026, 1, 2)}])
    assert old.upsert([{"k": 1, "t": dt.date(2026, 1, 1)}]).unchanged == 1  # the tombstone is kept
    old.compact()
    assert old.to_table().num_rows == 0 and list(old.reader()) == []
    with pytest.raises(InvalidDescriptorError, match="property ttl must be at most"):
        old.alter().add("x", "long").commit()  # a change must bring the property within the limit
    repo.update("d", old.descriptor.replace(properties={"ttl": "36500 days", "gc.grace": "30 days"}))
    repo.load("d").alter().add("x", "long").commit()


@pytest.mark.parametrize("text", ["100000000000000000000 days", "1" + "0" * 400])
def test_a_duration_longer_than_python_holds_is_refused_as_too_long(text):
    with pytest.raises(InvalidDescriptorError, match="property gc.grace must be at most 365000 days"):
        parse_duration(text, "gc.grace")
    assert parse_duration(text, "gc.grace", recorded=True) == MAX_DURATION


def test_a_shorter_duration_recorded_before_the_limit_reads_as_the_least(tmp_path, monkeypatch):
    """A log written before the 1 ms floor may hold ttl '0.0001' (accepted then): the dataset
    still loads, reads and writes, with 1 ms; a change must bring the property within range."""
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    module = importlib.import_module("cdkds.catalog.keyed.properties")
    monkeypatch.setattr(module, "MIN_DURATION", dt.timedelta(microseconds=1))  # the code before the limit
    repo.create("d", DatasetDescriptor(_timed_schema("date"), record_key="k", ordering_field="t",
                                       properties={"ttl": "0.0001", "gc.grace": "0.0005 s"}))
    monkeypatch.undo()
    old = repo.load("d")
    assert (old.descriptor.keyed.ttl, old.descriptor.keyed.gc_grace) == (MIN_DURATION, MIN_DURATION)
    old.upsert([{"k": 1, "t": dt.date(2026, 1, 1)}])
    assert list(old.reader()) == [] and old.check(read_data=True).ok  # expired at once, as then
    with pytest.raises(InvalidDescriptorError, match="property ttl must be at least 1 millisecond"):
        old.alter().add("x", "long").commit()
