"""One rule per value type (issue 26): the scalar path (``write()``'s records and the keyed
operations' keys, :func:`field_validator`) and the column path (batches and imports,
:func:`conform_column`) accept and refuse the same values, with the same reason."""

import datetime as dt
import decimal
import math
import uuid

import pyarrow as pa
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from cdkds.formats import domains
from cdkds.formats.conversion import RefusedValue, conform_column
from cdkds.formats.errors import InvalidSchemaError
from cdkds.formats.records import field_validator
from cdkds.formats.schema_rules import check_schema

UTC = dt.timezone.utc


def scalar(avro, value):
    """What the scalar path makes of ``value``: ("kept", normalised) or ("refused", reason)."""
    try:
        return "kept", field_validator(avro)(value, "x")
    except RefusedValue as e:
        assert (e.path, e.value) == ("x", value)
        return "refused", e.reason


def column(avro, value, arrow_type=None):
    """What the column path makes of a column holding ``value`` (and a null before it)."""
    try:
        return "kept", conform_column(pa.array([None, value], arrow_type), ["null", avro], "x")[1].as_py()
    except RefusedValue as e:
        assert (e.path, e.row) == ("x", 1)
        return "refused", e.reason


LARGEST = domains.LARGEST["float"]
_FLOATS = st.sampled_from([LARGEST, math.nextafter(LARGEST, math.inf), LARGEST * (1 + 2**-25),
                           LARGEST * (1 + 2**-24), 1e39, -1e39, 1e300, -1e308, 0.0, -0.0, 1e-46, math.inf,
                           -math.inf]) | st.floats(allow_nan=False)


@given(_FLOATS)
def test_float_range(value):
    s, c = scalar("float", value), column("float", value, pa.float64())
    assert s[0] == c[0]
    if s[0] == "kept":
        assert domains.as_float32(s[1]) == c[1] or math.isinf(value) and c[1] == value
    else:
        assert s[1] == c[1] == domains.out_of_range("float")
        assert math.isinf(domains.as_float32(value)) and math.isfinite(value)


_INTEGERS = st.integers(-(2**63), 2**63 - 1) | st.sampled_from(
    [2**24, 2**24 + 1, -(2**24) - 1, 2**53, 2**53 + 1, 2**62 + 1, 2**63 - 1, -(2**63)])


@pytest.mark.parametrize("kind", ["float", "double"])
@given(value=_INTEGERS)
def test_an_integer_in_a_float_field_is_kept_exactly(kind, value):
    s, c = scalar(kind, value), column(kind, value, pa.int64())
    assert s == c
    if s[0] == "refused":
        assert s[1] == domains.inexact(kind)


@given(st.integers(1, 20).flatmap(lambda p: st.tuples(st.just(p), st.integers(0, p))),
       st.integers(-10**20, 10**20), st.integers(-12, 6))
def test_decimal_fits_its_precision_and_scale(shape, digits, exponent):
    precision, scale = shape
    avro = {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}
    value = decimal.Decimal(digits).scaleb(exponent)
    s, c = scalar(avro, value), column(avro, value)
    assert s == c
    if s[0] == "refused":
        assert s[1] == domains.misfit_decimal(precision, scale)


_UUID_TEXT = st.uuids().flatmap(lambda u: st.sampled_from([
    str(u), str(u).upper(), u.hex, f"{{{u}}}", f"urn:uuid:{u}", str(u)[:-1], str(u) + "0", str(u).replace("-", "_")]))


@given(_UUID_TEXT | st.text(max_size=40))
def test_uuid_canonical_form(text):
    s, c = scalar({"type": "string", "logicalType": "uuid"}, text), column(
        {"type": "string", "logicalType": "uuid"}, text, pa.string())
    assert s == c
    if s[0] == "kept":
        assert s[1] == str(uuid.UUID(s[1]))
    else:
        assert s[1] == domains.NOT_A_UUID


_MICROS = st.integers(0, 999_999) | st.sampled_from([0, 1, 999, 1000, 999_000, 999_999])
_MILLIS_CASES = {
    "time-millis": (lambda t, us: t.time().replace(microsecond=us), pa.time64("us")),
    "timestamp-millis": (lambda t, us: t.replace(microsecond=us, tzinfo=UTC), pa.timestamp("us", tz="UTC")),
    "local-timestamp-millis": (lambda t, us: t.replace(microsecond=us), pa.timestamp("us")),
}


@pytest.mark.parametrize("kind", sorted(_MILLIS_CASES))
@given(when=st.datetimes(), micros=_MICROS)
def test_whole_milliseconds(kind, when, micros):
    make, arrow_type = _MILLIS_CASES[kind]
    value = make(when, micros)
    avro = {"type": "int" if kind == "time-millis" else "long", "logicalType": kind}
    s, c = scalar(avro, value), column(avro, value, arrow_type)
    assert s == c
    assert (s[0] == "kept") == (micros % 1000 == 0)
    if s[0] == "refused":
        assert s[1] == domains.sub_millisecond(kind)


# Dates, timestamps and times outside their range have no Python value: the scalar path can
# never be given one. The column path refuses exactly the stored numbers with no Python value.

_DAYS = st.integers(domains.FIRST_DAY - 3, domains.LAST_DAY + 3) | st.sampled_from(
    [domains.FIRST_DAY - 1, domains.FIRST_DAY, 0, domains.LAST_DAY, domains.LAST_DAY + 1, -(2**31), 2**31 - 1])


def _python(make):
    try:
        return make()
    except (OverflowError, ValueError):
        return None


@given(_DAYS)
def test_date_range(days):
    c = column({"type": "int", "logicalType": "date"}, pa.scalar(days, pa.int32()).cast(pa.date32()))
    python = _python(lambda: domains.EPOCH_DAY + dt.timedelta(days=days))
    assert (c[0] == "kept") == (python is not None)
    if python is None:
        assert c[1] == domains.NOT_A_DATE
    else:
        assert scalar({"type": "int", "logicalType": "date"}, python) == c


@given(_DAYS, st.integers(0, domains.ticks_per_day("us") - 1))
def test_timestamp_range(days, micros):
    ticks = days * domains.ticks_per_day("us") + micros
    assume(-(2**63) <= ticks < 2**63)  # (what a timestamp column holds)
    avro = {"type": "long", "logicalType": "local-timestamp-micros"}
    c = column(avro, pa.scalar(ticks, pa.int64()).cast(pa.timestamp("us")))
    python = _python(lambda: dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=ticks))
    assert (c[0] == "kept") == (python is not None)
    if python is None:
        assert c[1] == domains.NOT_A_TIMESTAMP
    else:
        assert scalar(avro, python) == c


@pytest.mark.parametrize("kind", sorted(domains.TIME_UNITS))
@given(ticks=st.integers(-3, 3) | st.integers(-(2**31), 2**31 - 1) | st.sampled_from([86_400_000 - 1, 86_400_000]) |
       st.integers(86_400_000_000 - 3, 86_400_000_000 + 3))
def test_time_of_day(kind, ticks):
    unit = domains.TIME_UNITS[kind]
    if kind == "time-millis" and not -(2**31) <= ticks < 2**31:
        return
    avro = {"type": "int" if unit == "ms" else "long", "logicalType": kind}
    arrow_type = pa.time32("ms") if unit == "ms" else pa.time64("us")
    c = column(avro, pa.scalar(ticks, pa.int32() if unit == "ms" else pa.int64()).cast(arrow_type))
    per_second = domains.TICKS_PER_SECOND[unit]
    python = _python(lambda: (dt.datetime.min + dt.timedelta(seconds=ticks / per_second if unit == "ms" else 0,
                                                             microseconds=ticks if unit == "us" else 0)).time()
                     if 0 <= ticks < domains.ticks_per_day(unit) else None)
    assert (c[0] == "kept") == (python is not None)
    if python is None:
        assert c[1] == domains.NOT_A_TIME_OF_DAY
    else:
        assert scalar(avro, python) == c


_DECIMAL = {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}


@pytest.mark.parametrize("avro, default", [
    ("float", LARGEST), ("float", LARGEST * (1 + 2**-25)), ("float", LARGEST * (1 + 2**-24)), ("float", 1e39),
    ("double", 1e300), (_DECIMAL, 99), (_DECIMAL, 100), (_DECIMAL, -99), (_DECIMAL, -100),
    ({"type": "string", "logicalType": "uuid"}, "0C3B6A9E-3F1B-4C5D-8E7F-1A2B3C4D5E6F"),
    ({"type": "string", "logicalType": "uuid"}, "0c3b6a9e-3f1b-4c5d-8e7f"),
])
def test_a_default_is_held_to_the_rule_of_its_values(avro, default):
    schema = {"type": "record", "name": "T", "fields": [{"name": "x", "type": avro, "default": default}]}
    value = decimal.Decimal(default) if avro == _DECIMAL else default
    try:
        check_schema(schema)
        accepted = True
    except InvalidSchemaError:
        accepted = False
    assert accepted == (scalar(avro, value)[0] == "kept")
