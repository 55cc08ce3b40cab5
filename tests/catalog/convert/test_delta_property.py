"""Random Delta histories (appends, delta-rs deletes, deletion vectors inline and in files,
checkpoints, partitioned or not) convert and read as delta-rs reads the table (hypothesis)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from cdkds.catalog import DatasetRepository
from tests.catalog.convert.delta_tables import delete_rows, delta_rows
from tests.catalog.convert.folders import bag

pytestmark = pytest.mark.needs("deltalake")

STEPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 6)),
    st.tuples(st.just("delete"), st.integers(0, 20)),  # delta-rs: rewrites the files holding the row
    st.tuples(st.just("vector"), st.integers(0, 10), st.booleans(), st.lists(st.integers(0, 5), max_size=3)),
    st.tuples(st.just("checkpoint")),
), min_size=1, max_size=6)


@settings(max_examples=15, deadline=None)
@given(STEPS, st.booleans())
def test_random_delta_histories_read_as_delta_rs_reads_them(steps, partitioned):
    from deltalake import DeltaTable, write_deltalake

    with tempfile.TemporaryDirectory() as root:
        table = Path(root) / "t"
        next_id = 0
        options = {"partition_by": ["g"]} if partitioned else {}
        write_deltalake(str(table), _rows(next_id, 3), configuration={"delta.enableDeletionVectors": "true"},
                        **options)
        next_id += 3
        for step in steps:
            if step[0] == "append":
                write_deltalake(str(table), _rows(next_id, step[1]), mode="append", **options)
                next_id += step[1]
            elif step[0] == "delete":
                DeltaTable(str(table)).delete(f"id = {step[1]}")
            elif step[0] == "vector":
                adds = pa.table(DeltaTable(str(table)).get_add_actions(flatten=True)).to_pylist()
                if not adds:
                    continue
                add = sorted(adds, key=lambda a: a["path"])[step[1] % len(adds)]
                positions = sorted({p % add["num_records"] for p in step[3]}) if add["num_records"] else []
                if positions:
                    delete_rows(table, add["path"], positions, inline=step[2])
            else:
                DeltaTable(str(table)).create_checkpoint()
        ds = DatasetRepository(Path(root).as_uri()).convert("t")
        assert bag(ds.to_table()) == bag(delta_rows(str(table)))
        assert not ds.check(read_data=True).problems


def _rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)), "g": [f"p{i % 2}" for i in range(start, start + n)]})
