"""A keyed dataset's deletion vectors as a filter on its key (catalog/read/deleted_keys.py):
to_arrow_dataset reads files with deletion vectors lazily when the filter drops exactly
the deleted rows, holds them otherwise, and gives the rows of to_table either way
(hypothesis: random keyed writes; the binary search and is_in count alike)."""

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings, strategies as st

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.read import deleted_keys
from cdkds.catalog.read.arrow_scan import arrow_filesystem
from cdkds.catalog.read.deleted_keys import deleted_keys_filter, matching_rows
from tests.catalog.read.test_arrow_dataset import direct_files
from tests.components import imported

pytestmark = pytest.mark.needs("duckdb")
duckdb = imported("duckdb")

USERS = {"type": "record", "name": "U", "fields": [
    {"name": "tenant", "type": "string"}, {"name": "id", "type": "long"},
    {"name": "v", "type": ["null", "string"], "default": None}, {"name": "o", "type": "long"}]}


def bag(table: pa.Table) -> Counter:
    return Counter(tuple(sorted(r.items())) for r in table.to_pylist())


def users(repo: DatasetRepository, name: str = "users"):
    return repo.create(name, DatasetDescriptor(USERS, "identity(tenant)", record_key=["tenant", "id"],
                                               ordering_field="o"))


def rows(ids, tenant_of=lambda i: "ab"[i % 2], v="a", o=1):
    return [{"tenant": tenant_of(i), "id": i, "v": v, "o": o} for i in ids]


@pytest.fixture
def local(tmp_path):
    return DatasetRepository(f"file://{tmp_path}")


def same_rows(ds, **options) -> pa.Table:
    arrow = ds.to_arrow_dataset(**options)
    assert bag(arrow.to_table()) == bag(ds.to_table(**options))
    return arrow


def test_deleted_keys_are_a_filter_and_every_file_is_read_lazily(local):
    ds = users(local)
    ds.upsert(rows(range(100)))
    ds.delete_keys([{"tenant": "ab"[i % 2], "id": i} for i in (3, 10, 11, 50)])
    assert all(f.deletes for f in ds.files)
    arrow = same_rows(ds)
    assert len(direct_files(arrow)) == len(ds.files)
    assert duckdb.sql("select count(*), sum(id) from arrow").fetchall()[0] == (96, sum(range(100)) - 74)
    assert bag(ds.to_arrow_dataset(where="id < 20").to_table()) == bag(ds.to_table(where="id < 20"))


def test_a_key_written_again_elsewhere_holds_the_files(local):
    ds = users(local)
    ds.upsert(rows(range(20)))
    ds.delete_keys([{"tenant": "a", "id": 4}])
    ds.upsert(rows([4], v="again", o=2))  # the deleted key lives again, in another file
    arrow = same_rows(ds)
    assert len(direct_files(arrow)) < len(ds.files)
    assert duckdb.sql("select v from arrow where id = 4").fetchall() == [("again",)]


def test_an_update_holds_the_files_it_deleted_rows_of(local):
    ds = users(local)
    ds.upsert(rows(range(20)))
    ds.upsert(rows([1, 2], v="b", o=2))  # the old rows are deleted by position, their keys live on
    arrow = same_rows(ds)
    assert len(direct_files(arrow)) < len(ds.files)
    assert sorted(duckdb.sql("select id from arrow where v = 'b'").fetchall()) == [(1,), (2,)]


def test_a_value_shared_by_keys_of_two_tenants_filters_on_both_columns(local):
    ds = users(local)
    ds.upsert(rows(range(10), tenant_of=lambda i: "a") + rows(range(10), tenant_of=lambda i: "b"))
    ds.delete_keys([{"tenant": "a", "id": 7}])  # id 7 lives on in tenant b: the id alone is not enough
    arrow = same_rows(ds)
    assert len(direct_files(arrow)) == len(ds.files)
    assert duckdb.sql("select tenant from arrow where id = 7").fetchall() == [("b",)]


def test_without_the_key_among_the_columns_the_files_are_held(local):
    ds = users(local)
    ds.upsert(rows(range(10)))
    ds.delete_keys([{"tenant": "a", "id": 2}])
    arrow = same_rows(ds, columns=["tenant", "v"])
    assert len(direct_files(arrow)) == sum(not f.deletes for f in ds.files) == len(ds.files) - 1
    assert arrow.to_table().num_rows == 9


def test_later_snapshots_are_checked_again(local):
    ds = users(local)
    ds.upsert(rows(range(10)))
    ds.delete_keys([{"tenant": "a", "id": 2}])
    assert len(direct_files(same_rows(ds))) == len(ds.files)
    ds.upsert(rows([2], v="back", o=5))
    assert len(direct_files(same_rows(ds))) < len(ds.files)
    old = local.load("users", version=ds.version - 1)
    assert len(direct_files(same_rows(old))) == len(old.files)


def test_the_most_telling_key_column_alone_is_tried_first(local):
    ds = local.create("hashed", DatasetDescriptor(USERS, "hash(id, 2)", record_key=["tenant", "id"], ordering_field="o"))
    ds.upsert(rows(range(30)))
    ds.delete_keys([{"tenant": "ab"[i % 2], "id": i} for i in (1, 4, 9)])  # two tenants, three ids
    plan = ds.plan()
    keep = deleted_keys_filter(plan, ds.store, plan.tasks, ("tenant", "id"), arrow_filesystem(ds.store.fs))
    assert keep is not None and "id" in str(keep) and "tenant" not in str(keep)
    assert len(direct_files(same_rows(ds))) == len(ds.files)


def test_the_check_stops_at_the_first_file_it_fails_on_and_rereads_what_it_cannot_hold(local, monkeypatch):
    ds = users(local)
    ds.upsert(rows(range(40)))
    ds.delete_keys([{"tenant": "a", "id": 2}])
    for n in range(6):
        ds.upsert(rows([100 + n], o=2))  # new files, none with deletes
    ds.upsert(rows([2], v="back", o=3))  # the newest file holds a deleted key again
    monkeypatch.setattr(deleted_keys, "FOOTER_READERS", 2)
    monkeypatch.setattr(deleted_keys, "HELD_KEY_BYTES", 0)
    reads = []
    original = deleted_keys._StoredKeys._table
    monkeypatch.setattr(deleted_keys._StoredKeys, "_table", lambda self, t, c: reads.append(t) or original(self, t, c))
    plan = ds.plan()
    assert deleted_keys_filter(plan, ds.store, plan.tasks, ("tenant", "id"), arrow_filesystem(ds.store.fs)) is None
    deleting = sum(1 for f in ds.files if f.deletes)
    assert len(reads) <= 3 * (deleting + 2) < 3 * len(ds.files)  # each try: the deleting files, then two newest
    assert len(direct_files(same_rows(ds))) < len(ds.files)


def test_every_backend(repo):
    """Local files, memory:// and S3 (moto): the key columns are read through pyarrow's fsspec bridge."""
    ds = users(repo)
    ds.upsert(rows(range(40)))
    ds.delete_keys([{"tenant": "ab"[i % 2], "id": i} for i in (0, 9, 33)])
    arrow = same_rows(ds)
    assert len(direct_files(arrow)) == len(ds.files)
    assert duckdb.sql("select count(*) from arrow").fetchall()[0] == (37,)


@settings(max_examples=200, deadline=None)
@given(stored=st.lists(st.integers(-50, 50), max_size=60), among=st.lists(st.integers(-50, 50), min_size=1, max_size=20),
       ordered=st.booleans(), kind=st.sampled_from([pa.int64(), pa.int32(), pa.int8(), pa.timestamp("ms", "UTC"),
                                                    pa.date32(), pa.uint16()]))
def test_binary_search_and_is_in_count_alike(stored, among, ordered, kind):
    if pa.types.is_unsigned_integer(kind):
        stored, among = [abs(x) for x in stored], [abs(x) for x in among]
    def typed(xs):
        return pa.array(xs, pa.int32() if kind == pa.date32() else pa.int64()).cast(kind)
    values = sorted(stored) if ordered else stored
    column = pa.chunked_array([typed(values[:len(values) // 2]), typed(values[len(values) // 2:])], kind)
    wanted = pc.unique(typed(among))
    expected = int(np.asarray(pc.is_in(column, value_set=wanted).to_numpy(zero_copy_only=False)).sum())
    assert matching_rows(pa.table({"c": column}), {"c": wanted}) == expected


OPS = st.lists(st.one_of(
    st.tuples(st.just("upsert"), st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 12)), min_size=1, max_size=8,
                                          unique=True)),
    st.tuples(st.just("delete"), st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 12)), min_size=1, max_size=4,
                                          unique=True)),
    st.tuples(st.just("compact"), st.none()),
), min_size=1, max_size=7)


@settings(max_examples=30, deadline=None)
@given(ops=OPS, columns=st.sampled_from([None, ["id", "tenant", "v"], ["v", "id"]]),
       where=st.sampled_from([None, "id > 4", "tenant = 'b'"]))
def test_lazy_and_cdkds_read_the_same_rows(tmp_path_factory, ops, columns, where):
    ds = users(DatasetRepository(f"file://{tmp_path_factory.mktemp('dk')}"))
    ds.upsert(rows(range(12), tenant_of=lambda i: "ab"[i % 2]))
    for n, (op, arg) in enumerate(ops):
        if op == "upsert":
            ds.upsert([{"tenant": t, "id": i, "v": f"v{n}", "o": n + 2} for t, i in arg])
        elif op == "delete":
            ds.delete_keys([{"tenant": t, "id": i} for t, i in arg])
        else:
            ds.compact()
    same_rows(ds, columns=columns, where=where)
