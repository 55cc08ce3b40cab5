import datetime as dt
import decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdkds.formats import values
from cdkds.formats.errors import SchemaMismatchError

UTC = dt.timezone.utc

SAMPLES = [
    ("int", st.integers(-(2**31), 2**31 - 1)),
    ("long", st.integers(-(2**63), 2**63 - 1)),
    ("double", st.floats(allow_nan=False)),
    ("string", st.text()),
    ("bytes", st.binary()),
    ("boolean", st.booleans()),
    ("date", st.dates()),
    ("timestamp-micros", st.datetimes(timezones=st.just(UTC))),
    ("local-timestamp-micros", st.datetimes()),
    ("decimal", st.decimals(allow_nan=False, allow_infinity=False, places=3)),
]


@pytest.mark.parametrize("kind, strategy", SAMPLES, ids=[k for k, _ in SAMPLES])
def test_property_json_round_trip(kind, strategy):
    @given(strategy)
    def check(value):
        assert values.from_json(values.to_json(value, kind), kind) == value
        assert values.coerce(value, kind) == value

    check()


def test_coerce_reads_loose_text():
    assert values.coerce("2026-03-01", "timestamp-micros") == dt.datetime(2026, 3, 1, tzinfo=UTC)
    assert values.coerce("2026-03-01T10:00:00Z", "timestamp-millis") == dt.datetime(2026, 3, 1, 10, tzinfo=UTC)
    assert values.coerce("2026-03-01 10:00:00+02:00", "timestamp-micros") == dt.datetime(2026, 3, 1, 8, tzinfo=UTC)
    assert values.coerce("2026-03-01", "date") == dt.date(2026, 3, 1)
    assert values.coerce(3.0, "long") == 3
    assert values.coerce("12.5", "decimal") == decimal.Decimal("12.5")
    assert values.coerce(dt.datetime(2026, 1, 1, tzinfo=UTC), "local-timestamp-micros") == dt.datetime(2026, 1, 1)


@pytest.mark.parametrize("value, kind", [
    ("abc", "long"), (2.5, "int"), (True, "int"), (2**40, "int"), ("2026-13-01", "date"),
    (dt.datetime(2026, 1, 1), "date"), ("x", "boolean"), ("nan", "decimal"), ([1], "string"), ("zz", "uuid"),
])
def test_coerce_rejects_what_cannot_stand_for_the_kind(value, kind):
    with pytest.raises(SchemaMismatchError, match=f"cannot be read as {kind}"):
        values.coerce(value, kind)
