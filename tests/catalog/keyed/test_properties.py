"""The keyed and TTL properties of a descriptor."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, strategies as st

from cdkds.catalog import DatasetDescriptor, InvalidDescriptorError
from cdkds.catalog.keyed.properties import DEFAULT_BUCKETS, parse_duration

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


@given(st.integers(1, 10**6), st.sampled_from([("s", 1), ("sec", 1), ("minutes", 60), ("h", 3600), ("days", 86400),
                                               ("w", 604800), ("", 1)]), st.sampled_from(["", " "]))
def test_durations(n, unit, space):
    name, seconds = unit
    assert parse_duration(f"{n}{space}{name}", "ttl") == dt.timedelta(seconds=n * seconds)
