"""A FileTable pickles as its own rows (a Spark task's files travel so)."""

import pickle

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.log.files import FileTable
from cdkds.formats.statistics import ColumnStatistics

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "p", "type": "string"}]}


def test_a_slice_pickles_as_its_rows_alone():
    descriptor = DatasetDescriptor(SCHEMA, partition_strategy="identity(p)")
    adds = [AddFile(f"data/p_copy=v{i % 3}/f{i}.parquet", {"p_copy": f"v{i % 3}"}, 100 + i, 10,
                    {"id": ColumnStatistics(0, i, i + 9), "p": ColumnStatistics(1, "a", "z")}, 0, revision=i)
            for i in range(5000)]
    table = FileTable.of(adds, descriptor)
    piece = FileTable(table.table.slice(1200, 3), descriptor)
    shipped = pickle.loads(pickle.dumps(piece))
    assert list(shipped.files()) == adds[1200:1203]
    assert shipped.descriptor == descriptor
    assert len(pickle.dumps(piece)) < 10_000 < len(pickle.dumps(table))  # the slice's rows, not the table's buffers
