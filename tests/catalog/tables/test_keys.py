import pytest
from hypothesis import given, strategies as st

from cdkds.catalog.errors import InvalidFieldError, NoSuchFieldError
from cdkds.catalog.tables import Fields, KeyCodec, Range, TableSpecification

SPEC = TableSpecification.builder("t").fields(
    Fields.int("k1"), Fields.string("k2"), Fields.long("k3"), Fields.int("c1")).primary_key("k1", "k2", "k3").build()
CODEC = KeyCodec(SPEC)
NAMES = SPEC.primary_key
keys = st.tuples(st.integers(-(2**31), 2**31 - 1), st.text(alphabet=st.sampled_from("a\x00\xff\u00e9\U0001f600b"), max_size=4),
                 st.integers(-(2**63), 2**63 - 1))


def as_dict(key, n=3):
    return dict(zip(NAMES[:n], key[:n]))


def in_bounds(encoded, bounds):
    low, high = bounds
    return (low is None or encoded >= low) and (high is None or encoded < high)


@given(keys, keys)
def test_bytes_sort_as_keys_and_decode_back(a, b):
    ea, eb = CODEC.encode(as_dict(a)), CODEC.encode(as_dict(b))
    assert (ea < eb) == (a < b) and (ea == eb) == (a == b)
    assert CODEC.decode(ea) == as_dict(a)


@given(keys, st.integers(1, 3))
def test_a_leftmost_prefix_encodes_to_a_byte_prefix(key, n):
    assert CODEC.encode(as_dict(key)).startswith(CODEC.prefix(as_dict(key, n)))


@given(st.lists(keys, min_size=1, max_size=20), keys, st.integers(0, 3), st.sampled_from(["inclusive", "exclusive"]),
       keys, st.integers(0, 3), st.sampled_from(["inclusive", "exclusive"]))
def test_range_bounds_hold_exactly_the_keys_of_the_range(stored, begin, nb, bb, end, ne, eb):
    def compare(key, bound, n):  # key's first n parts against the bound prefix
        return (key[:n] > bound[:n]) - (key[:n] < bound[:n])

    range_ = Range.of(as_dict(begin, nb) if nb else None, bb, as_dict(end, ne) if ne else None, eb)
    bounds = CODEC.bounds(range_)
    for key in stored:
        above = nb == 0 or (compare(key, begin, nb) >= 0 if bb == "inclusive" else compare(key, begin, nb) > 0)
        below = ne == 0 or (compare(key, end, ne) <= 0 if eb == "inclusive" else compare(key, end, ne) < 0)
        assert in_bounds(CODEC.encode(as_dict(key)), bounds) == (above and below), (key, range_)


@pytest.mark.parametrize("key, error, message", [
    ({"k1": 1, "k2": "a"}, InvalidFieldError, "key field 'k3' is missing"),
    ({"k1": 1, "k3": 5}, InvalidFieldError, "'k3' is given without 'k2'"),
    ({"k1": None, "k2": "a", "k3": 1}, InvalidFieldError, "'k1' is null"),
    ({"k1": 2**31, "k2": "a", "k3": 1}, InvalidFieldError, "not an int"),
    ({"k1": True, "k2": "a", "k3": 1}, InvalidFieldError, "not an int"),
    ({"k1": 1, "k2": 5, "k3": 1}, InvalidFieldError, "'k2': value 5 .* not a string"),
    ({"k1": 1, "k2": "a", "k3": 1, "c1": 2}, InvalidFieldError, "'c1' is not a key field"),
    ({"k1": 1, "k2": "a", "k3": 1, "zz": 2}, NoSuchFieldError, "no field 'zz'"),
])
def test_bad_keys_name_the_table_field_and_value(key, error, message):
    with pytest.raises(error, match=message) as e:
        CODEC.encode(key)
    assert "table 't'" in str(e.value)


def test_bad_specifications_are_refused():
    with pytest.raises(InvalidFieldError, match="primary key field 'c' is a double"):
        TableSpecification.builder("t").fields(Fields.double("c")).primary_key("c").build()
    with pytest.raises(InvalidFieldError, match="index field 'k' is part of the primary key"):
        TableSpecification.builder("t").fields(Fields.int("k")).primary_key("k").indexes("k").build()
    with pytest.raises(InvalidFieldError, match="field 'k' is declared twice"):
        TableSpecification.builder("t").fields(Fields.int("k"), Fields.long("k")).primary_key("k").build()
    with pytest.raises(InvalidFieldError, match="needs a primary key"):
        TableSpecification.builder("t").fields(Fields.int("k")).build()
    assert TableSpecification.from_json(SPEC.to_json()) == SPEC
