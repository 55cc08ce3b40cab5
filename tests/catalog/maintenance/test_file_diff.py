"""differing_files finds, column-wise, the differences the per-file comparison finds."""

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.keyed.deletion import DeletionVectorRef
from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.log.files import FileTable
from cdkds.catalog.maintenance.file_diff import differing_files
from cdkds.formats.statistics import ColumnStatistics

SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "p", "type": "string"}, {"name": "v", "type": ["null", "double"]}]}
DESCRIPTOR = DatasetDescriptor(SCHEMA, partition_strategy="identity(p)")

CHANGES = {
    "none": lambda f: f,
    "size": lambda f: dataclasses.replace(f, size=f.size + 1),
    "rows": lambda f: dataclasses.replace(f, row_count=f.row_count + 1),
    "no timestamp": lambda f: dataclasses.replace(f, timestamp=0),  # an old checkpoint: not a difference
    "timestamp": lambda f: dataclasses.replace(f, timestamp=f.timestamp + 1),
    "revision": lambda f: dataclasses.replace(f, revision=f.revision + 1),
    "partition": lambda f: dataclasses.replace(f, partition={"p_copy": "other"}),
    "no statistics": lambda f: dataclasses.replace(f, statistics={}),
    "bound": lambda f: dataclasses.replace(f, statistics={**f.statistics, "id": ColumnStatistics(0, -1, 9)}),
    "nan": lambda f: dataclasses.replace(f, statistics={**f.statistics, "v": ColumnStatistics(0, float("nan"), 1.0)}),
    "vector": lambda f: dataclasses.replace(f, deletes=(DeletionVectorRef(1, inline=b"x"),)),
}


def _file(i: int) -> AddFile:
    return AddFile(f"data/p_copy=v{i % 2}/f{i}.parquet", {"p_copy": f"v{i % 2}"}, 100 + i, 10,
                   {"id": ColumnStatistics(0, i, i + 9), "v": ColumnStatistics(i % 3, 0.5, 2.5)}, 0, revision=i,
                   timestamp=1000 + i)


def _same(a: AddFile, b: AddFile) -> bool:  # the check's rule
    if not a.timestamp:
        b = dataclasses.replace(b, timestamp=0)
    return a == b or (a.revision == b.revision and a.to_json(DESCRIPTOR) == b.to_json(DESCRIPTOR))


@given(st.lists(st.tuples(st.sampled_from(sorted(CHANGES)), st.sampled_from(["both", "stored", "replayed"])),
                max_size=12))
def test_property_column_wise_differences_are_the_per_file_ones(files):
    stored, replayed = {}, {}
    for i, (change, where) in enumerate(files):
        f = _file(i)
        if where != "replayed":
            stored[f.path] = CHANGES[change](f)
        if where != "stored":
            replayed[f.path] = f
    expected = (sorted(stored.keys() - replayed.keys()), sorted(replayed.keys() - stored.keys()),
                sorted(k for k in stored.keys() & replayed.keys() if not _same(stored[k], replayed[k])))
    assert differing_files(FileTable.of(stored.values(), DESCRIPTOR), FileTable.of(replayed.values(), DESCRIPTOR),
                           _same) == expected
