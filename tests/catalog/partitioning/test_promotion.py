"""A partition source promoted from int to long keeps its partitions (issue 10 item 11)."""

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import IncompatibleDescriptorError, InvalidPartitionStrategyError
from cdkds.catalog.partitioning import PartitionStrategy, java_hash

INT_SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "x", "type": "int"}]}
LONG_SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "x", "type": "long"}]}
STRATEGY = "hash(x, 16), identity(x) as copy, range(x, 10)"


def folders(dataset):
    return sorted({f.path.rsplit("/", 1)[0] for f in dataset.files})


@pytest.mark.parametrize("update", ["from scratch", "replace"])
def test_int_to_long_promotion_keeps_every_value_in_its_partition(tmp_path, update):
    assert java_hash(-5, "int") != java_hash(-5, "long")  # why the type must be kept
    repo = DatasetRepository(f"file://{tmp_path}")
    ds = repo.create("p", DatasetDescriptor(INT_SCHEMA, STRATEGY))
    with ds.writer() as w:
        w.write({"x": -5})
    before = folders(ds)

    new = DatasetDescriptor(LONG_SCHEMA, STRATEGY) if update == "from scratch" else ds.descriptor.replace(schema=LONG_SCHEMA)
    repo.update("p", new)
    ds = repo.load("p")
    assert ds.descriptor.fields["x"].kind == "long"
    assert list(ds.reader("x = -5")) == [{"x": -5}]
    assert list(ds.reader("x in (-5, 3)")) == [{"x": -5}]
    assert ds.descriptor.partition_strategy.to_json()[0] == {"type": "hash", "source": "x", "buckets": 16, "sourceType": "int"}

    with ds.writer() as w:
        w.write({"x": -5})
    with ds.writer() as w:
        w.write_batch(pa.table({"x": pa.array([-5, 2**40], pa.int64())}))
    assert set(before) < set(folders(ds)) and len(folders(ds)) == 2  # -5 stayed in its folder
    assert list(ds.reader("x = -5")) == [{"x": -5}] * 3
    assert list(ds.reader(f"x = {2**40}")) == [{"x": 2**40}] and ds.delete("x = -5") is not None
    assert list(repo.load("p").reader()) == [{"x": 2**40}]


def test_the_creation_type_is_recorded_and_read_back():
    d = DatasetDescriptor(INT_SCHEMA, "hash(x, 16)")
    assert d.to_json()["partitionStrategy"] == [{"type": "hash", "source": "x", "buckets": 16, "sourceType": "int"}]
    assert DatasetDescriptor.from_json(d.to_json()) == d
    # descriptors written before the type was recorded take their schema's type
    old = {k: v for k, v in d.to_json().items() if k != "partitionStrategy"}
    assert DatasetDescriptor.from_json({**old, "partitionStrategy": [{"type": "hash", "source": "x", "buckets": 16}]}) == d
    # a strategy given by the user is the same strategy whatever type it was created with
    assert d.partition_strategy == PartitionStrategy.parse("hash(x, 16)")


def test_a_hash_source_cannot_leave_its_creation_type():
    d = DatasetDescriptor(INT_SCHEMA, "hash(x, 16)")
    with pytest.raises(InvalidPartitionStrategyError, match="hashes 'x' as the long it was created with, but the field is now int"):
        DatasetDescriptor(INT_SCHEMA, [{"type": "hash", "source": "x", "buckets": 16, "sourceType": "long"}])
    with pytest.raises(InvalidPartitionStrategyError, match="sourceType must be one of"):
        PartitionStrategy.from_json([{"type": "hash", "source": "x", "buckets": 16, "sourceType": "float"}])
    with pytest.raises(IncompatibleDescriptorError, match="cannot change from int to string"):
        d.evolve(DatasetDescriptor({**INT_SCHEMA, "fields": [{"name": "x", "type": "string"}]}, "hash(x, 16)"))
