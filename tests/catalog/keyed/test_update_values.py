"""An update's values go through the same checked conversion as every write (issue 26)."""

import pyarrow as pa
import pytest

from cdkds.catalog import InvalidKeyError, InvalidRecordError
from tests.catalog.keyed.conftest import at, user


@pytest.mark.parametrize("rows, message", [
    ([{"tenant": "nz", "userId": 1, "score": 1.9}], r"update field 'score': value 1.9 \(float\) is not an integer"),
    (pa.table({"tenant": ["nz"], "userId": [1], "score": [1.9]}), r"update field 'score' \(row 0\): value 1.9 is not a long"),
    (pa.table({"tenant": ["nz"], "userId": [1], "updatedAt": pa.array([at(5).timestamp() * 1e6 + 1], pa.float64())
                                                             .cast(pa.int64()).cast(pa.timestamp("us", "UTC"))}),
     r"update field 'updatedAt' \(row 0\).* has a sub-millisecond part"),
])
def test_update_values_are_checked_not_truncated(users, rows, message):
    users.upsert([user("nz", 1, 1, score=7)])
    with pytest.raises(InvalidRecordError, match=message):
        users.update(rows)
    assert [r["score"] for r in users.reader()] == [7]


def test_delete_ordering_values_are_checked_not_truncated(users):
    import datetime as dt
    users.upsert([user("nz", 1, 1, score=7)])
    late = at(5) + dt.timedelta(microseconds=1500)
    for keys in ([{"tenant": "nz", "userId": 1, "updatedAt": late}],
                 pa.table({"tenant": ["nz"], "userId": [1], "updatedAt": pa.array([late], pa.timestamp("us", "UTC"))})):
        with pytest.raises(InvalidKeyError, match=r"dataset 'users': key 0: ordering field 'updatedAt': .*"
                                                  r"has a sub-millisecond part"):
            users.delete_keys(keys)
    assert [r["score"] for r in users.reader()] == [7]
