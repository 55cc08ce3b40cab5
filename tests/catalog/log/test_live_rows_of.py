"""LiveFiles.live_rows_of: the live rows of some files, looked up in the columns of the parts."""

from types import SimpleNamespace

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.keyed.deletion import DeletionVectorRef
from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.log.files import FileTable
from cdkds.catalog.log.live import LiveFiles

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}


class Loader:
    def __init__(self, tables):
        self.tables = tables
        self.loaded = []

    def load(self, part, descriptor):
        self.loaded.append(part.key)
        return self.tables[part.key]


def test_live_rows_of_files_in_parts_and_added_since():
    descriptor = DatasetDescriptor(SCHEMA)
    adds = [AddFile(f"data/f{i}.parquet", {}, 100, 10 + i, revision=1,
                    deletes=(DeletionVectorRef(2, path=f"_deletes/{i}.roaring", size=9),) if i == 3 else ())
            for i in range(6)]
    parts = [SimpleNamespace(key=k, files=3, rows=0, partition={}, statistics={}) for k in ("a", "b")]
    loader = Loader({"a": FileTable.of(adds[:3], descriptor), "b": FileTable.of(adds[3:], descriptor)})
    files = LiveFiles.over(parts, loader, descriptor).apply(
        [AddFile("data/new.parquet", {}, 50, 7, revision=2)], ["data/f1.parquet"],
        [("data/f4.parquet", DeletionVectorRef(3, inline=b"x")), ("data/new.parquet", DeletionVectorRef(1, inline=b"y"))])
    asked = ["data/f0.parquet", "data/f1.parquet", "data/f3.parquet", "data/f4.parquet", "data/new.parquet",
             "data/never.parquet"]
    assert files.live_rows_of(asked) == {"data/f0.parquet": 10, "data/f3.parquet": 11, "data/f4.parquet": 11,
                                         "data/new.parquet": 6}
    assert files.live_rows_of(asked) == {p: f.live_rows for p, f in files.items() if p in asked}  # the mapping agrees
    assert LiveFiles.of(adds, descriptor).live_rows_of(["data/f3.parquet", "data/x"]) == {"data/f3.parquet": 11}


def test_with_deletion_vectors_reads_the_parts_deletes_column():
    descriptor = DatasetDescriptor(SCHEMA)
    vector = DeletionVectorRef(2, inline=b"v")
    adds = [AddFile(f"data/f{i}.parquet", {}, 100, 10, revision=1, deletes=(vector,) if i % 2 else ()) for i in range(6)]
    parts = [SimpleNamespace(key=k, files=3, rows=0, partition={}, statistics={}) for k in ("a", "b")]
    loader = Loader({"a": FileTable.of(adds[:3], descriptor), "b": FileTable.of(adds[3:], descriptor)})
    files = LiveFiles.over(parts, loader, descriptor).apply(
        [AddFile("data/new.parquet", {}, 50, 7, revision=2, deletes=(vector,))], ["data/f1.parquet"],
        [("data/f2.parquet", DeletionVectorRef(3, inline=b"x"))])
    found = files.with_deletion_vectors()
    assert sorted(f.path for f in found) == ["data/f2.parquet", "data/f3.parquet", "data/f5.parquet", "data/new.parquet"]
    assert sorted(found, key=lambda f: f.path) == sorted((f for f in files.values() if f.deletes), key=lambda f: f.path)
