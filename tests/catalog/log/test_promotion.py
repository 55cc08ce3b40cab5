"""Statistics keep the column types of the current descriptor across promotions, so
checkpoints encode them and read them back exactly (issue 10 item 5)."""

import uuid

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import IncompatibleDescriptorError
from cdkds.catalog.log import checkpoint

PYTHON_TYPES = {"int": int, "long": int, "float": float, "double": float, "string": str, "bytes": bytes}
VALUES = {
    "int": st.integers(-2**31, 2**31 - 1), "long": st.integers(-2**53, 2**53),
    "float": st.floats(-1e6, 1e6, allow_nan=False, width=32), "double": st.floats(-1e12, 1e12, allow_nan=False),
    "string": st.text("abcé€", max_size=6), "bytes": st.binary(max_size=6).map(lambda b: b.decode("latin-1").encode()),
}


def schema(kinds):
    return {"type": "record", "name": "R", "fields": [{"name": n, "type": k} for n, k in kinds.items()]}


def roundtrip(snapshot):
    return checkpoint.decode(checkpoint.encode(snapshot), "test")


def assert_typed(snapshot):
    kinds = {name: f.kind for name, f in snapshot.descriptor.fields.items()}
    for add in snapshot.files.values():
        for name, stats in add.statistics.items():
            for bound in (stats.min, stats.max):
                assert bound is None or type(bound) is PYTHON_TYPES[kinds[name]], (name, kinds[name], bound)


def test_a_string_to_bytes_promotion_keeps_checkpoints_writable():
    repo = DatasetRepository(f"memory://promotion-{uuid.uuid4().hex}")
    ds = repo.create("t", DatasetDescriptor(schema({"s": "string"}), properties={"checkpoint.interval": "3"}))
    with ds.writer() as w:
        w.write_batch(pa.table({"s": ["apple", "pear"]}))
    ds = repo.update("t", ds.descriptor.replace(schema=schema({"s": "bytes"})))
    for chunk in ([b"fig"], [b"kiwi"]):
        with ds.writer() as w:
            w.write_batch(pa.table({"s": chunk}))
    assert ds.version == 4 and ds.store.exists("_log/00000000000000000003.checkpoint.parquet")
    assert_typed(ds.snapshot)
    assert roundtrip(ds.snapshot) == ds.snapshot
    assert sorted(r["s"] for r in repo.load("t").reader("s >= 'b'")) == [b"fig", b"kiwi", b"pear"]


@st.composite
def histories(draw):
    kinds = draw(st.dictionaries(st.sampled_from("abc"), st.sampled_from(sorted(VALUES)), min_size=1, max_size=3))
    steps = draw(st.lists(st.tuples(st.sampled_from(sorted(kinds)), st.sampled_from(sorted(VALUES))), max_size=4))
    return kinds, steps


@settings(max_examples=25, deadline=None)
@given(histories(), st.data())
def test_promotions_then_a_checkpoint_round_trip_give_the_same_snapshot(history, data):
    kinds, steps = history
    repo = DatasetRepository(f"memory://promotion-{uuid.uuid4().hex}")
    ds = repo.create("t", DatasetDescriptor(schema(kinds)))
    current = dict(kinds)

    def append():
        rows = data.draw(st.lists(st.fixed_dictionaries({n: VALUES[k] for n, k in current.items()}), min_size=1,
                                  max_size=3))
        with ds.writer() as w:
            for row in rows:
                w.write(row)

    append()
    for name, target in steps:
        proposed = {**current, name: target}
        try:
            ds.descriptor.check_update(DatasetDescriptor(schema(proposed)))
        except IncompatibleDescriptorError:
            continue  # not a promotion the update rules allow
        repo.update("t", ds.descriptor.replace(schema=schema(proposed)))
        ds = repo.load("t")
        current = proposed
        append()
    assert_typed(ds.snapshot)
    assert roundtrip(ds.snapshot) == ds.snapshot
    ds.checkpoint()
    assert repo.load("t").snapshot == ds.snapshot
