"""The change feed (Dataset.changes): each commit's rows, and a feed replayed onto the rows
of the revision before its start reproduces the rows of its end (hypothesis, over random
operation sequences on plain and keyed datasets)."""

from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given, strategies as st

from cdkds.catalog import DatasetDescriptor, DatasetRepository, ExpressionError, InvalidTimeTravelError
from cdkds.catalog.read.changes import DELETE, INSERT, UPDATE_POSTIMAGE, UPDATE_PREIMAGE, plan_changes

PLAIN = {"type": "record", "name": "P", "fields": [
    {"name": "id", "type": "long"}, {"name": "g", "type": "string"},
    {"name": "x", "type": ["null", "long"], "default": None}]}
KEYED = {"type": "record", "name": "K", "fields": [
    {"name": "k", "type": "long"}, {"name": "v", "type": ["null", "string"], "default": None},
    {"name": "o", "type": "long"}]}


def rows(ds, version=None):
    snapshot = ds if version is None else ds.repository.load(ds.name, version=version)
    return snapshot.to_table().to_pylist()


def feed(ds, start, end=None, columns=None):
    return ds.changes(start, end, columns).read_all().to_pylist()


def replay(before: list[dict], changes: list[dict]) -> Counter:
    """Rows after applying change rows (deletes and pre-images leave, inserts and post-images join)."""
    state = Counter(tuple(sorted(r.items())) for r in before)
    for c in changes:
        row = tuple(sorted((k, v) for k, v in c.items() if not k.startswith("_")))
        if c["_change_type"] in (DELETE, UPDATE_PREIMAGE):
            assert state[row] > 0, f"the feed takes away {row}, which is not there"
            state[row] -= 1
        else:
            state[row] += 1
    return +state


def bag(table_rows: list[dict]) -> Counter:
    return Counter(tuple(sorted(r.items())) for r in table_rows)


# ---------------------------------------------------------------- examples

def test_each_kind_of_commit(repo):
    ds = repo.create("t", DatasetDescriptor(PLAIN, "identity(g)"))
    with ds.writer() as w:
        w.write_batch(pa.table({"id": [1, 2, 3], "g": ["a", "b", "a"], "x": [10, 20, 30]}))
    ds.delete("x >= 30")  # a tombstone: the row it hides is deleted
    ds.delete("g = 'b'")  # a whole file removed
    ds.compact()  # nothing
    with ds.writer(mode="overwrite") as w:
        w.write_batch(pa.table({"id": [7], "g": ["c"], "x": [70]}))
    changes = feed(ds, 1)
    by_version = [(c["_commit_version"], c["_change_type"], c["id"]) for c in changes]
    assert sorted(by_version) == [(1, INSERT, 1), (1, INSERT, 2), (1, INSERT, 3), (2, DELETE, 3), (3, DELETE, 2),
                                  (5, DELETE, 1), (5, INSERT, 7)]
    history = {h.revision: h.timestamp for h in ds.history()}
    assert all(c["_commit_timestamp"].timestamp() * 1000 == pytest.approx(history[c["_commit_version"]]) for c in changes)
    assert feed(ds, 4, 4) == []  # the compaction
    assert [c["x"] for c in feed(ds, 5, columns=["x"])] in ([10, 70], [70, 10])
    assert set(feed(ds, 5, columns=["x"])[0]) == {"x", "_change_type", "_commit_version", "_commit_timestamp"}


def test_keyed_updates_are_pre_and_post_images_read_from_deletion_vectors(repo):
    ds = repo.create("k", DatasetDescriptor(KEYED, record_key=["k"], ordering_field="o"))
    ds.upsert([{"k": 1, "v": "a", "o": 1}, {"k": 2, "v": "b", "o": 1}, {"k": 3, "v": "c", "o": 1}])
    ds.upsert([{"k": 1, "v": "A", "o": 2}, {"k": 2, "v": "late", "o": 0}, {"k": 4, "v": "d", "o": 1}])
    ds.update([{"k": 3, "v": "C"}])
    ds.delete_keys([4])
    ds.delete("v = 'A'")
    got = [(c["_commit_version"], c["_change_type"], c["k"], c["v"]) for c in feed(ds, 2)]
    assert sorted(got) == sorted([
        (2, UPDATE_PREIMAGE, 1, "a"), (2, UPDATE_POSTIMAGE, 1, "A"), (2, INSERT, 4, "d"),  # k=2 lost: unchanged
        (3, UPDATE_PREIMAGE, 3, "c"), (3, UPDATE_POSTIMAGE, 3, "C"),
        (4, DELETE, 4, "d"), (5, DELETE, 1, "A")])
    plan = plan_changes(ds.log, 2, 2)
    (commit,) = plan.commits
    assert commit.paired and all(s.positions is not None for s in commit.removed)  # no file read whole


def test_columns_and_schema_changes_use_the_end_schema(repo):
    ds = repo.create("t", DatasetDescriptor(PLAIN))
    with ds.writer() as w:
        w.write({"id": 1, "g": "a", "x": 1})
    ds.alter().rename("x", "y").add("z", "long").commit()
    with ds.writer() as w:
        w.write({"id": 2, "g": "b", "y": 2, "z": 5})
    assert sorted((c["id"], c["y"], c["z"]) for c in feed(ds, 1)) == [(1, 1, None), (2, 2, 5)]
    assert [sorted(c) for c in feed(ds, 1, 1)] == [["_change_type", "_commit_timestamp", "_commit_version", "g", "id", "x"]]


def test_bad_ranges_and_expired_revisions_fail_clearly(repo):
    import datetime as dt

    ds = repo.create("t", DatasetDescriptor(PLAIN, properties={"checkpoint.interval": "2"}))
    for i in range(6):
        with ds.writer() as w:
            w.write({"id": i, "g": "a"})
    for bad, message in [((-1,), "start_version must be a revision"), (("1",), "start_version"),
                         ((True,), "start_version"), ((3, 2), "end_version 2 is before its start_version 3"),
                         ((8,), "no revision 8; its latest is 6"), ((1, 9), "no revision 9")]:
        with pytest.raises(InvalidTimeTravelError, match=message):
            ds.changes(*bad)
    assert feed(ds, 7) == []  # nothing after the latest yet
    with pytest.raises(ExpressionError, match="unknown column 'nope'"):
        ds.changes(1, columns=["nope"])
    ds.expire_log(dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1), force=True)
    for start in (0, 1, 2):  # commit 0 is kept: still the commits after it are gone, not a hole in the log
        with pytest.raises(InvalidTimeTravelError, match="which have been expired from the log; the oldest change "
                                                         "feed starts at revision"):
            ds.changes(start)
    oldest = ds.log.replay.oldest().version
    with ds.writer() as w:
        w.write({"id": 9, "g": "a"})
    assert [c["id"] for c in feed(ds, oldest + 1)] == list(range(oldest, 6)) + [9]


# ---------------------------------------------------------------- against the dataset itself

PLAIN_OPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.lists(st.tuples(st.integers(0, 9), st.sampled_from("ab"),
                                                    st.one_of(st.none(), st.integers(0, 5))), min_size=1, max_size=6)),
    st.tuples(st.just("delete"), st.sampled_from(["id < 3", "g = 'a'", "x = 2", "x is null", "id = 5 or x > 3"])),
    st.tuples(st.just("overwrite"), st.lists(st.tuples(st.integers(0, 9), st.sampled_from("ab"),
                                                       st.integers(0, 5)), max_size=3)),
    st.tuples(st.just("dynamic"), st.lists(st.tuples(st.integers(0, 9), st.just("b"), st.integers(0, 5)),
                                           min_size=1, max_size=3)),
    st.tuples(st.just("compact"), st.none()),
    st.tuples(st.just("rename"), st.none()),
    st.tuples(st.just("add"), st.none()),
), min_size=1, max_size=10)


@given(ops=PLAIN_OPS, start=st.integers(1, 12))
def test_plain_feed_replays_to_every_revision(tmp_path_factory, ops, start):
    repo = DatasetRepository(f"file://{tmp_path_factory.mktemp('cf')}")
    ds = repo.create("t", DatasetDescriptor(PLAIN, "identity(g)"))
    x, alters = "x", []  # alters: (revision, old name, new name) or (revision, None, added name)
    for op, arg in ops:
        before, previous = rows(ds), ds.version
        if op in ("append", "overwrite", "dynamic"):
            mode = {"append": "append", "overwrite": "overwrite", "dynamic": "overwrite_partitions"}[op]
            with ds.writer(mode=mode) as w:
                for i, g, v in arg:
                    w.write({"id": i, "g": g, x: v})
        elif op == "delete":
            ds.delete(arg.replace("x", x))
        elif op == "compact":
            ds.compact()
        elif op == "rename":
            new = f"x{len(alters)}"
            ds.alter().rename(x, new).commit()
            alters.append((ds.version, x, new))
            before = [{(new if k == x else k): v for k, v in r.items()} for r in before]
            x = new
        else:
            new = f"y{len(alters)}"
            ds.alter().add(new, "long").commit()
            alters.append((ds.version, None, new))
            before = [{**r, new: None} for r in before]
        if ds.version > previous:
            assert replay(before, feed(ds, previous + 1)) == bag(rows(ds)), (op, arg)
    assert replay([], feed(ds, 1)) == bag(rows(ds))
    if start <= ds.version:
        old = rows(ds, start - 1)
        for revision, old_name, new_name in alters:
            if revision >= start:
                old = [{(new_name if k == old_name else k): v for k, v in r.items()} if old_name else
                       {**r, new_name: None} for r in old]
        assert replay(old, feed(ds, start)) == bag(rows(ds))


KEYED_OPS = st.lists(st.one_of(
    st.tuples(st.sampled_from(["upsert", "insert"]), st.lists(
        st.fixed_dictionaries({"k": st.integers(0, 6), "v": st.one_of(st.none(), st.sampled_from("abc")),
                               "o": st.integers(0, 3)}), min_size=1, max_size=5)),
    st.tuples(st.just("update"), st.lists(
        st.fixed_dictionaries({"k": st.integers(0, 6), "v": st.sampled_from("xyz")}), min_size=1, max_size=3,
        unique_by=lambda r: r["k"])),
    st.tuples(st.just("delete_keys"), st.lists(st.integers(0, 6), min_size=1, max_size=3, unique=True)),
    st.tuples(st.just("delete"), st.sampled_from(["v = 'a'", "k > 4", "o = 0"])),
    st.tuples(st.just("compact"), st.none()),
    st.tuples(st.just("overwrite"), st.lists(
        st.fixed_dictionaries({"k": st.integers(0, 6), "v": st.just("w"), "o": st.just(5)}), max_size=3,
        unique_by=lambda r: r["k"])),
), min_size=1, max_size=10)


@given(ops=KEYED_OPS, start=st.integers(1, 12))
def test_keyed_feed_replays_to_every_revision(tmp_path_factory, ops, start):
    from cdkds.catalog import KeyExistsError

    repo = DatasetRepository(f"file://{tmp_path_factory.mktemp('ck')}")
    ds = repo.create("k", DatasetDescriptor(KEYED, record_key=["k"], ordering_field="o",
                                            properties={"index.buckets": "2"}))
    for op, arg in ops:
        before, previous = rows(ds), ds.version
        if op == "overwrite":
            with ds.writer(mode="overwrite") as w:
                w.write_batch(pa.Table.from_pylist(arg, schema=ds.descriptor.arrow_schema))
        elif op == "compact":
            ds.compact()
        elif op == "delete":
            ds.delete(arg)
        elif op == "insert":
            try:
                ds.insert(arg)
            except KeyExistsError:
                continue
        else:
            getattr(ds, op)(arg)
        if ds.version > previous:
            changes = feed(ds, previous + 1)
            assert replay(before, changes) == bag(rows(ds)), (op, arg)
            updated = Counter((c["_commit_version"], c["k"]) for c in changes
                              if c["_change_type"] in (UPDATE_PREIMAGE, UPDATE_POSTIMAGE))
            assert all(n == 2 for n in updated.values())  # a pre-image and a post-image per key
    assert replay([], feed(ds, 1)) == bag(rows(ds))
    if start <= ds.version:
        assert replay(rows(ds, start - 1), feed(ds, start)) == bag(rows(ds))


def test_first_revision_since_a_time(repo):
    import datetime as dt

    from cdkds.catalog.read.changes import first_revision_since

    ds = repo.create("t", DatasetDescriptor(PLAIN))
    for i in range(3):
        with ds.writer() as w:
            w.write({"id": i, "g": "a"})
    times = {h.revision: h.timestamp for h in ds.history()}
    assert first_revision_since(ds.log, times[0] - 5000) == 0
    assert first_revision_since(ds.log, times[2]) == 2
    assert first_revision_since(ds.log, times[1] + 1) == 2
    assert first_revision_since(ds.log, dt.datetime.fromtimestamp((times[3] + 1) / 1000, dt.timezone.utc)) == 4
    with pytest.raises(InvalidTimeTravelError, match="cannot read 'soon' as a time"):
        first_revision_since(ds.log, "soon")


def test_a_field_named_like_a_change_column_is_refused_unless_left_out(repo):
    schema = {"type": "record", "name": "C", "fields": [
        {"name": "id", "type": "long"}, {"name": "_Change_Type", "type": ["null", "string"], "default": None}]}
    ds = repo.create("clash", DatasetDescriptor(schema))
    with ds.writer() as w:
        w.write({"id": 1, "_Change_Type": "mine"})
    for columns in (None, ["id", "_Change_Type"]):
        with pytest.raises(ExpressionError, match="dataset 'clash': field '_Change_Type' has the name of a change "
                                                  "feed column .*rename the field"):
            ds.changes(1, columns=columns)
    assert feed(ds, 1, columns=["id"]) == [{"id": 1, "_change_type": "insert", "_commit_version": 1,
                                             "_commit_timestamp": feed(ds, 1, columns=["id"])[0]["_commit_timestamp"]}]
