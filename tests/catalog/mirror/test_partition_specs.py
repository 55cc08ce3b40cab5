"""The mirrors across a partition change: a Delta or Iceberg table has one partitioning,
so a change of the partitions a mirror describes (identity functions) is refused with the
reason, nothing committed; a change of functions it does not describe (hash...) is not."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import InvalidDescriptorError

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "n", "type": "long"}]}


def mirrored(mirror: str):
    repo = DatasetRepository(f"memory://mirror-specs-{uuid.uuid4().hex}")
    ds = repo.create("t", DatasetDescriptor(SCHEMA, "identity(n), hash(id, 4)", properties={f"mirror.{mirror}": "true"}))
    with ds.writer() as w:
        w.write_batch(pa.table({"id": list(range(20)), "n": [i % 2 for i in range(20)]}))
    return repo, ds


@pytest.mark.parametrize("mirror, table", [("delta", "a Delta table"), ("iceberg", "a mirrored Iceberg table")])
def test_a_change_of_the_partitions_a_mirror_describes_is_refused_with_the_reason(mirror, table):
    repo, ds = mirrored(mirror)
    version = ds.version
    with pytest.raises(InvalidDescriptorError) as e:
        ds.alter().partition_by("hash(id, 8)").commit()
    message = str(e.value)
    assert f"dataset 't': property mirror.{mirror}: the partition strategy changed" in message
    assert "identity(n), hash(id, 4), partition spec 0, to hash(id, 8), spec 1" in message
    assert f"{table} has one partitioning for all its files" in message
    assert "the partitions it would describe differ (n" in message and ") -> none)" in message
    assert repo.load("t").version == version
    with pytest.raises(InvalidDescriptorError, match=f"property mirror.{mirror}: the partition strategy changed"):
        repo.update("t", DatasetDescriptor(SCHEMA, "hash(id, 8)", properties={f"mirror.{mirror}": "true"}))
    assert repo.load("t").version == version


@pytest.mark.parametrize("mirror", ["delta", "iceberg"])
def test_a_change_a_mirror_does_not_see_keeps_it(mirror):
    repo, ds = mirrored(mirror)
    ds.alter().partition_by("identity(n), hash(id, 16)").commit()
    with ds.writer() as w:
        w.write_batch(pa.table({"id": [100, 101], "n": [0, 1]}))
    reports = ds.mirror()
    assert [r.version for r in reports] == [ds.version]
    assert {f.spec_id for f in ds.files} == {0, 1}


def test_enabling_a_mirror_after_a_change_it_cannot_describe_is_refused():
    repo = DatasetRepository(f"memory://mirror-specs-{uuid.uuid4().hex}")
    ds = repo.create("t", DatasetDescriptor(SCHEMA, "identity(n)"))
    ds.alter().partition_by("hash(id, 4)").commit()
    with pytest.raises(InvalidDescriptorError, match="property mirror.delta: the partition strategy changed"):
        repo.update("t", ds.descriptor.replace(properties={"mirror.delta": "true"}))


def test_the_record_key_and_the_format_stay_fixed_and_say_why():
    from cdkds.catalog.errors import IncompatibleDescriptorError
    repo = DatasetRepository(f"memory://fixed-{uuid.uuid4().hex}")
    ds = repo.create("t", DatasetDescriptor(SCHEMA, "identity(n)", record_key="id"))
    with pytest.raises(IncompatibleDescriptorError, match=r"dataset 't': the format cannot change \(parquet -> avro\): "
                                                          r"a dataset's data files are all of its format"):
        repo.update("t", ds.descriptor.replace(format="avro"))
    with pytest.raises(IncompatibleDescriptorError, match=r"the record key cannot change .*: the record index finds each "
                                                          r"key's one live row by the key's hash"):
        repo.update("t", ds.descriptor.replace(record_key="n"))
    ds.alter().partition_by("hash(id, 4)").commit()  # the partitioning may change
    assert repo.load("t").descriptor.record_key == ("id",)
