"""Durations and sizes as text: one grammar for properties, Spark options and the command line."""

import datetime as dt

import pytest
from hypothesis import given, strategies as st

from cdkds.catalog.quantities import parse_duration, parse_size


@pytest.mark.parametrize("text, seconds", [
    ("30 days", 30 * 86400), ("12h", 43200), ("90 s", 90), ("3600", 3600), ("1.5w", 1.5 * 604800),
    ("0s", 0), (" 7 D ", 7 * 86400), ("-1d", -86400), ("2 minutes", 120),
])
def test_durations(text, seconds):
    assert parse_duration(text) == dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("text, size", [
    ("134217728", 134217728), ("512k", 512 << 10), ("10m", 10 << 20), ("1g", 1 << 30), ("1.5GB", 3 << 29),
    ("2 tb", 2 << 40), ("7b", 7),
])
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "soon", "7 fortnights", "1d2h", "d", "1e3", None])
def test_what_is_not_a_quantity(text):
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)
    with pytest.raises(ValueError, match="is not a size"):
        parse_size(text)


def test_too_large_is_a_value_error():
    with pytest.raises(ValueError, match="longer than a duration can be"):
        parse_duration("99999999999w")
    with pytest.raises(ValueError, match="larger than a size can be"):
        parse_size("9" * 400 + "g")


@given(st.integers(0, 10**6), st.sampled_from([("s", 1), ("m", 60), ("h", 3600), ("d", 86400), ("w", 604800)]))
def test_every_unit_scales(number, unit):
    suffix, scale = unit
    assert parse_duration(f"{number}{suffix}") == dt.timedelta(seconds=number * scale)
    assert parse_duration(f"{number} {suffix}") == parse_duration(f"{number}{suffix}")
