"""A finite literal beyond a float field's range is not infinity (issue 26.5)."""

import math

import pytest

from tests.conftest import one_column_dataset, write_xs, xs


@pytest.mark.parametrize("kind, big", [("float", "1e39"), ("double", "1e400")])
def test_a_literal_beyond_the_range_compares_below_infinity(tmp_path, kind, big):
    ds = one_column_dataset(tmp_path, ["null", kind], "parquet")
    write_xs(ds, [1.0, math.inf, -math.inf, None])
    assert xs(ds, f"x = {big}") == []
    assert sorted(xs(ds, f"x <= {big}")) == [-math.inf, 1.0]
    assert xs(ds, f"x > {big}") == [math.inf]
    assert sorted(xs(ds, f"x >= -{big}")) == [1.0, math.inf]
    assert xs(ds, f"x < -{big}") == [-math.inf]
    assert xs(ds, f"x != {big}") == [1.0, math.inf, -math.inf]


def test_binding_a_literal_beyond_a_float_warns_of_nothing():  # review: numpy's "overflow encountered in cast"
    import fractions
    import warnings

    from cdkds.catalog.expressions.literals import _float
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _float(fractions.Fraction(10) ** 39, "float").value == math.inf
