"""Overwrite, partition overwrite, delete, compaction, and how they race other commits."""

import datetime as dt
import json
import time
import uuid

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from cdkds.catalog import DatasetDescriptor
from cdkds.catalog.errors import CommitConflictError, CdkdsError
from cdkds.catalog.log.commit import commit_key

SCHEMA = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "g", "type": "string"},
    {"name": "v", "type": ["null", "long"], "default": None}]}


def rows(ids, g=None):
    return pa.table({"id": list(ids), "g": [g or "abc"[i % 3] for i in ids], "v": [i if i % 4 else None for i in ids]})


def write(ds, table, mode="append", **options):
    with ds.writer(mode=mode, **options) as w:
        w.write_batch(table)
    return ds.version


def ids(ds, where=None):
    return sorted(r["id"] for r in ds.reader(where))


@pytest.fixture
def ds(repo):
    return repo.create("t", DatasetDescriptor(SCHEMA, "identity(g)"))


def test_overwrite_replaces_everything_in_one_commit(repo, ds):
    write(ds, rows(range(30)))
    version = write(ds, rows(range(100, 103)), mode="overwrite")
    assert ids(ds) == [100, 101, 102]
    history = ds.history()[-1]
    assert history.operation == "overwrite" and history.removed_files == 3 and history.added_files == 3
    assert ids(repo.load("t", version=version - 1)) == list(range(30))  # never an empty revision between


def test_overwrite_with_no_rows_empties_the_dataset(ds):
    write(ds, rows(range(5)))
    with ds.writer(mode="overwrite"):
        pass
    assert ids(ds) == [] and ds.history()[-1].operation == "overwrite"


def test_partition_overwrite_replaces_only_partitions_written(ds):
    write(ds, rows(range(30)))
    write(ds, rows([100, 101], g="a"), mode="overwrite_partitions")
    assert ids(ds) == [i for i in range(30) if "abc"[i % 3] != "a"] + [100, 101]


def test_delete_removes_whole_files_and_tombstones_the_rest(repo, ds):
    write(ds, rows(range(30)))
    before = ds.version
    ds.delete("g = 'a'")  # whole partition: strict projection
    assert ds.history()[-1].removed_files == 1 and ds.history()[-1].tombstones == 0
    ds.delete("id < 5")  # part of two files: one tombstone
    assert ds.history()[-1].removed_files == 0 and ds.history()[-1].tombstones == 1
    expected = [i for i in range(30) if "abc"[i % 3] != "a" and i >= 5]
    assert ids(ds) == expected and ids(repo.load("t")) == expected
    assert ids(repo.load("t", version=before)) == list(range(30))
    write(ds, rows([1, 2]))  # new rows are not hit by an older tombstone
    assert ids(ds) == sorted(expected + [1, 2])
    assert ds.delete("id > 1000") is None and ds.delete("g = 'zzz'") is None


def test_delete_follows_sql_nulls(ds):
    write(ds, rows(range(12)))
    ds.delete("v != 1")  # rows with a null v are not deleted
    assert ids(ds) == [0, 1, 4, 8]
    ds.delete("v is null")
    assert ids(ds) == [1]


def test_delete_where_everything_removes_all_files(ds):
    write(ds, rows(range(10)))
    ds.delete("id >= 0")
    assert ids(ds) == [] and ds.snapshot.tombstones == () and ds.files == []


@pytest.mark.parametrize("where", [None, "", "   "])
def test_delete_without_a_predicate_is_refused_not_a_delete_of_everything(ds, where):
    write(ds, rows(range(4)))
    with pytest.raises(CdkdsError, match=f"dataset 't': delete needs a predicate, got {where!r}"):
        ds.delete(where)
    assert ids(ds) == [0, 1, 2, 3] and ds.version == 1


@pytest.mark.parametrize("size", [0, -1, "big", 1.5, True])
def test_compaction_checks_its_target_file_size(ds, size):
    write(ds, rows(range(4)))
    write(ds, rows(range(4, 8)))
    with pytest.raises(CdkdsError, match=f"dataset 't': target_file_size must be a positive number of bytes, "
                                         f"got {size!r}"):
        ds.compact(size)
    assert ds.version == 2 and len(ds.files) == 6


def test_compaction_merges_small_files_and_materialises_tombstones(repo, ds):
    for k in range(4):
        write(ds, rows(range(k * 10, k * 10 + 10)))
    ds.delete("id in (0, 11, 22, 33)")
    assert len(ds.files) == 12 and len(ds.snapshot.tombstones) == 1
    before = ids(ds)
    version = ds.compact()
    assert ids(ds) == before and len(ds.files) == 3
    assert ds.snapshot.tombstones == ()  # no file predates it any more
    assert ds.history()[-1].operation == "compact" and ds.compact() is None
    assert ids(repo.load("t", version=version - 1)) == before


def test_appends_rebase_over_compaction_and_compaction_over_appends(repo, ds):
    for k in range(3):
        write(ds, rows(range(k * 10, k * 10 + 10)))
    stale = repo.load("t")
    write(ds, rows(range(50, 55)))
    stale.compact()  # planned before the append: still commits
    assert ids(repo.load("t")) == list(range(30)) + list(range(50, 55))


def test_compaction_conflicts_with_a_concurrent_delete_of_its_rows(repo, ds):
    for k in range(3):
        write(ds, rows(range(k * 10, k * 10 + 10)))
    stale = repo.load("t")
    ds.delete("id = 4")
    with pytest.raises(CommitConflictError, match="its delete .* may match .* which this commit rewrites"):
        stale.compact()
    assert 4 not in ids(repo.load("t")) and repo.load("t").history()[-1].operation == "delete"


def test_overwrite_conflicts_with_a_concurrent_append(repo, ds):
    write(ds, rows(range(10)))
    stale = repo.load("t")
    write(ds, rows([77]))
    with pytest.raises(CommitConflictError, match="it added .* where this commit overwrites or deletes"):
        write(stale, rows([1]), mode="overwrite")
    assert ids(repo.load("t")) == list(range(10)) + [77]


def test_delete_conflicts_only_with_appends_it_could_have_deleted(repo, ds):
    write(ds, rows(range(10)))
    stale = repo.load("t")
    write(ds, rows([30], g="c"))
    stale.delete("g = 'a'")  # the append went to another partition: no conflict
    stale = repo.load("t")
    write(ds.refresh(), rows([40], g="b"))
    with pytest.raises(CommitConflictError, match="it added"):
        stale.delete("g = 'b'")


def test_partition_overwrite_conflicts_with_appends_to_its_partitions(repo, ds):
    write(ds, rows(range(10)))
    stale = repo.load("t")
    write(ds, rows([31], g="b"))
    write(stale, rows([100], g="a"), mode="overwrite_partitions")  # partition a: no conflict
    stale = repo.load("t")
    write(ds.refresh(), rows([32], g="b"))
    with pytest.raises(CommitConflictError, match="to a partition this commit replaces"):
        write(stale, rows([101], g="b"), mode="overwrite_partitions")


def test_a_compaction_that_lost_to_another_is_planned_again(repo, ds):
    for k in range(3):
        write(ds, rows(range(k * 10, k * 10 + 10)))
    a, b = repo.load("t"), repo.load("t")
    revision = a.compact()
    assert b.compact() is None  # planned again on a's commit: nothing left to do
    assert b.version == revision and ids(repo.load("t")) == list(range(30))


def test_bad_operation_arguments(ds):
    with pytest.raises(CdkdsError, match="unknown write mode 'upsert'"):
        ds.writer(mode="upsert")
    with pytest.raises(CdkdsError, match="below the safe minimum"):
        ds.vacuum(retention=dt.timedelta(minutes=5))
    with pytest.raises(CdkdsError, match="must be a datetime.timedelta"):
        ds.vacuum(retention=7)


def test_compaction_of_fully_deleted_files_removes_them_and_spends_the_tombstone(repo, ds):
    write(ds, rows(range(0, 3), g="a"))
    write(ds, rows(range(3, 6), g="a"))
    ds.delete("id in (0, 1, 2, 3, 4, 5)")  # every row of both files; statistics cannot prove it
    write(ds, rows(range(6, 9), g="b"))  # newer than the tombstone
    assert len(ds.snapshot.tombstones) == 1 and len(ds.files) == 3
    before = ds.version
    version = ds.compact()
    assert version == before + 1 and ds.history()[-1].operation == "compact"
    assert ids(ds) == [6, 7, 8] and [f.partition for f in ds.files] == [{"g_copy": "b"}]
    assert ds.snapshot.tombstones == ()  # no file predates it any more
    assert ids(repo.load("t")) == [6, 7, 8] and repo.load("t").compact() is None


def test_a_removing_compaction_conflicts_with_a_concurrent_delete_of_its_files(repo, ds):
    write(ds, rows(range(0, 3), g="a"))
    write(ds, rows(range(3, 6), g="b"))
    ds.delete("id in (0, 1, 2)")
    stale = repo.load("t")
    ds.delete("g = 'a'")  # removes the whole file the stale compaction would remove
    with pytest.raises(CommitConflictError):
        stale.compact()
    assert ids(repo.load("t")) == [3, 4, 5]


# ---------------------------------------------------------------- rebuilding a lost log

def rebuild(repo, name="t"):
    """Rebuild after losing the log; the rebuilt dataset and the report it warned with."""
    import warnings

    from cdkds.catalog.maintenance import IncompleteRebuildWarning

    repo.load(name).store.delete_tree("_log")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rebuilt = repo.rebuild(name)
    reports = [w.message.report for w in caught if issubclass(w.category, IncompleteRebuildWarning)]
    return rebuilt, (reports[0] if reports else None)


def all_rows(ds):
    return sorted((r["id"], r["g"], r["v"]) for r in ds.reader())


def write_flushes(ds, chunks, mode):
    """One writer committing ``chunks`` in as many flushes (flush() ..., then close())."""
    with ds.writer(mode=mode) as w:
        for chunk in chunks[:-1]:
            w.write_batch(chunk)
            w.flush()
        w.write_batch(chunks[-1])


_ids = st.lists(st.sampled_from("abc"), min_size=1, max_size=4)
_operation = st.one_of(
    st.tuples(st.just("append"), st.lists(_ids, min_size=1, max_size=1)),
    st.tuples(st.sampled_from(["overwrite", "overwrite_partitions"]), st.lists(_ids, min_size=1, max_size=3)),
    st.tuples(st.just("compact"), st.just([])),
)


@settings(max_examples=max(10, settings.default.max_examples // 4))
@given(st.lists(_operation, min_size=1, max_size=7).filter(lambda h: any(op != "compact" for op, _ in h)))
def test_rebuild_restores_histories_of_multi_flush_writes_and_compactions(history):
    from cdkds.catalog import DatasetRepository

    repo = DatasetRepository(f"memory://rebuild-{uuid.uuid4().hex}")
    ds = repo.create("t", DatasetDescriptor(SCHEMA, "identity(g)"))
    counter = iter(range(10**6))
    for operation, flushes in history:
        if operation == "compact":
            ds.compact()
            continue
        chunks = [pa.table({"id": [next(counter) for _ in gs], "g": gs, "v": [1] * len(gs)}) for gs in flushes]
        write_flushes(ds, chunks, operation)
    expected, operations = all_rows(ds), [h.operation for h in ds.history()]
    rebuilt, report = rebuild(repo)
    assert report is None, str(report)
    assert all_rows(rebuilt) == expected
    assert [h.operation for h in rebuilt.history()] == operations


def test_rebuild_of_a_two_flush_overwrite_keeps_both_flushes(repo, ds):
    write(ds, rows(range(0, 6)))
    write_flushes(ds, [rows(range(10, 13)), rows(range(20, 23))], "overwrite")
    write_flushes(ds, [rows([30], g="a"), rows([31], g="a"), rows([32], g="b")], "overwrite_partitions")
    expected = all_rows(ds)
    rebuilt, report = rebuild(repo)
    assert report is None and all_rows(rebuilt) == expected
    assert ids(rebuilt) == [11, 20, 30, 31, 32]


def test_rebuild_reports_commits_that_left_no_file(repo, ds):
    write(ds, rows(range(0, 3)))
    ds.delete("id = 1")  # a tombstone: no file
    write(ds, rows(range(3, 6)))
    rebuilt, report = rebuild(repo)
    assert ids(rebuilt) == [0, 1, 2, 3, 4, 5]  # the delete is lost, and said to be
    [lost] = report.unrecoverable
    assert lost.reason == "commits without files" and "at least 1 commits" in lost.detail
    assert "revision(s) [1]" in lost.detail and "dataset 't'" in str(report)
    assert [h.operation for h in rebuilt.history()] == ["create", "append", "unrecovered", "append"]


def test_rebuild_keeps_each_files_partition_spec(repo, ds):
    """Files written before and after partition changes are rebuilt with their specs (the
    descriptor each file records knows them), under log protocol 5."""
    write(ds, rows(range(0, 6)))
    ds.alter().partition_by("range(g, ['b', 'z']) as g_copy").commit()  # g_copy names another function
    write(ds, rows(range(6, 12)))
    ds.alter().partition_by("identity(v)").commit()
    write(ds, rows(range(12, 18)))
    specs = {f.path: f.spec_id for f in ds.files}
    rebuilt, _ = rebuild(repo)
    assert {f.path: f.spec_id for f in rebuilt.files} == specs and set(specs.values()) == {0, 1, 2}
    assert rebuilt.snapshot.protocol.reader_version == 5
    assert ids(rebuilt) == list(range(18))
    for where in ("g = 'a'", "id = 7", "v = 13", "v is null"):
        assert ids(rebuilt, where) == ids(ds, where), where
    assert rebuilt.check(read_data=True).ok


def test_a_rebuild_whose_first_file_came_after_a_partition_change_raises_the_protocol_with_it(repo, ds):
    """The rebuilt log starts as any dataset is created (a descriptor's past specs are not
    a new dataset's: spec 0 without them, protocol 4, one protocol action); the first commit
    with files brings their descriptor, its specs and protocol 5 together."""
    ds.alter().partition_by("identity(v)").commit()
    write(ds, rows(range(0, 6)))
    rebuilt, _ = rebuild(repo)
    first = repo.load("t", version=0)
    assert not first.descriptor.has_past_specs and first.snapshot.protocol.reader_version == 4
    for revision in range(rebuilt.version + 1):
        actions = json.loads(rebuilt.store.read(commit_key(revision)))["actions"]
        assert sum("protocol" in a for a in actions) <= 1, revision
    with_files = repo.load("t", version=next(h.revision for h in rebuilt.history() if h.operation == "append"))
    assert with_files.descriptor.has_past_specs and with_files.snapshot.protocol.reader_version == 5
    assert {f.spec_id for f in rebuilt.files} == {1} and ids(rebuilt, "v = 3") == [3]


def test_a_second_rebuild_orders_writes_after_the_first_one(repo, ds):
    """Revisions keep their numbers across a rebuild, so files written after it (planned
    on the rebuilt log) sort after the older files of a later rebuild."""
    write(ds, rows(range(0, 3)))
    for k in range(3):
        ds.delete(f"id = {k}")  # commits that leave no file
    write(ds, rows(range(3, 6)), mode="overwrite")
    rebuilt, _ = rebuild(repo)
    write(rebuilt, rows([7]))
    expected = ids(rebuilt)
    again, _ = rebuild(repo)
    assert ids(again) == expected == [3, 4, 5, 7]


def test_rebuild_reports_the_order_of_concurrent_writes(repo, ds):
    write(ds, rows(range(0, 3)))
    stale = repo.load("t")
    write(ds, rows(range(3, 6)))
    with pytest.raises(CommitConflictError):
        write(stale, rows([9]), mode="overwrite")
    stale = repo.load("t", version=ds.version)
    write(ds, rows([7]))
    write(stale, rows([8]), mode="overwrite_partitions")  # rebases over the append
    rebuilt, report = rebuild(repo)
    [concurrent] = [u for u in report.unrecoverable if u.reason == "order of concurrent transactions"]
    assert len(concurrent.transactions) == 2 and "overwrite_partitions" in concurrent.detail


def test_rebuild_leaves_out_a_compaction_that_never_committed(repo, ds, monkeypatch):
    from cdkds.catalog.maintenance import rewrite as rewriting

    for k in range(3):
        write(ds, rows(range(k * 3, k * 3 + 3), g="a"))
    stale = repo.load("t")
    write(ds, rows([100], g="a"), mode="overwrite")
    time.sleep(1.1)  # rebuild orders by file time: S3 keeps whole seconds, and a tie would put the compaction first
    monkeypatch.setattr(rewriting, "delete_files", lambda store, keys: None)  # it crashes before cleaning up
    with pytest.raises(CommitConflictError):
        stale.compact()
    monkeypatch.undo()
    rebuilt, report = rebuild(repo)
    assert ids(rebuilt) == [100]
    assert "compaction not committed there" in {u.reason for u in report.unrecoverable}


def test_rebuild_reports_an_overwrite_whose_first_flush_left_no_file(repo, ds):
    write(ds, rows(range(0, 3)))
    with ds.writer(mode="overwrite") as w:
        w.flush()  # empties the dataset
        w.write_batch(rows([7]))
    rebuilt, report = rebuild(repo)
    assert ids(rebuilt) == [7]
    assert "overwrite without its first flush" in {u.reason for u in report.unrecoverable}


def test_rebuild_reads_files_written_before_writer_ids(repo, ds, monkeypatch):
    from cdkds.catalog.write import writer

    real = writer.PartitionedWriter.__init__

    def unrecorded(self, *args, **kwargs):
        real(self, *args, **kwargs)
        del self._metadata["cdkds.writer"], self._metadata["cdkds.flush"]

    monkeypatch.setattr(writer.PartitionedWriter, "__init__", unrecorded)
    write(ds, rows(range(0, 3)))
    write_flushes(ds, [rows([10]), rows([20])], "overwrite")
    monkeypatch.undo()
    rebuilt, report = rebuild(repo)
    assert ids(rebuilt) == [20]  # each transaction taken whole: the first flush is replaced, and that is said
    [old] = report.unrecoverable
    assert old.reason == "written without writer ids" and len(old.transactions) == 2


def test_a_compacted_file_names_only_the_replaced_files_of_its_partition_and_rebuild_takes_their_union(repo, ds):
    import json

    from cdkds.formats.files import file_format

    for k in range(2):
        write(ds, rows(range(k * 6, k * 6 + 6)))  # partitions a, b, c: two files each
    replaced = {f.path for f in ds.files}
    ds.compact()
    for f in ds.files:
        named = json.loads(file_format("parquet").metadata(ds.store.fs, ds.store.path(f.path))["cdkds.replaces"])
        assert len(named) == 2 and {p.rsplit("/", 1)[0] for p in named} == {f.path.rsplit("/", 1)[0]}
    rebuilt, _ = rebuild(repo)
    assert ids(rebuilt) == list(range(12)) and not replaced & {f.path for f in rebuilt.files}
