"""Tags (issue 33 §2): a name for a revision, a commit of its own that raises the log to
protocol 5; expiry and vacuum keep a tagged revision readable and say so; bad names,
existing names, revisions the log does not hold and unknown tags fail naming them, with
nothing committed."""

import datetime as dt
import json

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import (
    CdkdsError, CommitConflictError, InvalidTimeTravelError, RefError, RefExistsError, RefNotFoundError,
    UnsupportedLogVersionError,
)
from cdkds.catalog.log import actions, checkpoint, checkpoint_key, transaction
from cdkds.catalog.log.actions import LAYOUT_PROTOCOL, PARTED_CHECKPOINT_PROTOCOL, SetProtocol, Tag, Untag
from cdkds.catalog.log.commit import Commit
from cdkds.catalog.log.conflicts import BlindAppend, Exclusive, RefChange
from cdkds.catalog.log.listing import EXPIRED_KEY, ExpiryMarker
from cdkds.catalog.log.parts import PARTS_FOLDER

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}


@pytest.fixture
def repo(tmp_path):
    return DatasetRepository(f"file://{tmp_path}/lake")


def make(repo, name="t", interval=4, rows=3):
    ds = repo.create(name, DatasetDescriptor.builder().schema(SCHEMA).property("checkpoint.interval", str(interval))
                     .build())
    return appends(ds, range(rows))


def appends(ds, values):
    for i in values:
        with ds.writer() as w:
            w.write_batch(pa.table({"id": [i]}))
    return ds


def ids(ds):
    return sorted(r["id"] for r in ds.reader())


def soon():
    return dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)


def log_objects(ds):
    return sorted(ds.store.list("_log"))


# ---------------------------------------------------------------- tagging


def test_a_tag_is_a_commit_of_its_own_that_raises_the_log_to_5(repo):
    ds = make(repo)
    assert (ds.snapshot.protocol.reader_version, ds.snapshot.protocol.writer_version) == (4, 4)  # created at 4
    assert ds.tag("q3") == 3
    assert ds.version == 4 and ds.tags() == {"q3": 3}
    assert ds.snapshot.protocol == SetProtocol(LAYOUT_PROTOCOL, LAYOUT_PROTOCOL) == SetProtocol(5, 5)
    raw = json.loads(ds.store.read("_log/00000000000000000004.json"))
    assert raw["operation"] == "tag" and raw["actions"] == [{"protocol": {"reader": 5, "writer": 5}},
                                                            {"tag": {"name": "q3", "revision": 3}}]
    assert ds.store.exists(checkpoint_key(3))  # the tagged revision's state, for after expiry
    assert ds.tag("first", version=1) == 1 and ds.store.exists(checkpoint_key(1))
    raw = json.loads(ds.store.read("_log/00000000000000000005.json"))
    assert raw["actions"] == [{"tag": {"name": "first", "revision": 1}}]  # raised once
    assert ds.untag("first") == 6
    assert [(h.revision, h.operation) for h in ds.history()][-3:] == [(4, "tag"), (5, "tag"), (6, "untag")]
    assert repo.load("t").tags() == {"q3": 3}
    assert repo.load("t", version=5).tags() == {"first": 1, "q3": 3}


def test_an_older_reader_refuses_a_tagged_log(repo, monkeypatch):
    ds = make(repo)
    monkeypatch.setattr(actions, "READER_VERSION", 4)
    repo.load("t")  # untagged: still version 4
    monkeypatch.undo()
    ds.tag("q3")
    monkeypatch.setattr(actions, "READER_VERSION", 4)
    with pytest.raises(UnsupportedLogVersionError, match="needs log reader version 5; this cdkds reads version 4"):
        repo.load("t")


def test_repo_load_reads_a_tag_and_only_one_way_of_time_travel(repo):
    ds = make(repo)
    ds.tag("q3")
    appends(ds, [10, 11])
    tagged = repo.load("t", tag="q3")
    assert tagged.version == 3 and ids(tagged) == [0, 1, 2]
    for other in ({"version": 3}, {"timestamp": dt.datetime.now(dt.timezone.utc)}):
        with pytest.raises(InvalidTimeTravelError, match="dataset 't': give one of a version, a timestamp or a tag"):
            repo.load("t", tag="q3", **other)
    with pytest.raises(RefNotFoundError, match="dataset 't' has no tag 'q4' \\(its tags: 'q3'\\)"):
        repo.load("t", tag="q4")


@pytest.mark.parametrize("name, version, error, message", [
    ("", None, RefError, "'' cannot name a tag"),
    ("-lead", None, RefError, "'-lead' cannot name a tag"),
    ("a/b", None, RefError, "'a/b' cannot name a tag"),
    ("x" * 129, None, RefError, "'x{129}' cannot name a tag"),
    (7, None, RefError, "7 cannot name a tag"),
    ("q3", None, RefExistsError, "tag 'q3' exists already \\(revision 3\\)"),
    ("q4", 99, RefError, "tag 'q4' cannot name revision 99: .*has no revision 99; its latest is 4"),
    ("q4", -1, RefError, "tag 'q4' needs a revision number >= 0, got -1"),
    ("q4", True, RefError, "tag 'q4' needs a revision number >= 0, got True"),
])
def test_bad_tags_fail_naming_them_and_commit_nothing(repo, name, version, error, message):
    ds = make(repo)
    ds.tag("q3")
    before = log_objects(ds)
    with pytest.raises(error, match=f"dataset 't': {message}"):
        ds.tag(name, version=version)
    assert log_objects(ds) == before and ds.version == 4 and repo.load("t").tags() == {"q3": 3}


def test_untagging_an_unknown_tag_fails_naming_it(repo):
    ds = make(repo)
    ds.tag("q3")
    before = log_objects(ds)
    with pytest.raises(RefNotFoundError, match="dataset 't' has no tag 'q4' \\(its tags: 'q3'\\)"):
        ds.untag("q4")
    assert log_objects(ds) == before
    assert issubclass(RefNotFoundError, RefError) and issubclass(RefExistsError, RefError)
    assert issubclass(RefError, CdkdsError)


def test_an_expired_revision_cannot_be_tagged(repo):
    ds = appends(make(repo), range(3, 8))  # checkpoints 4 and 8
    ds.expire_log(soon(), force=True)
    before = log_objects(ds)
    with pytest.raises(RefError, match="dataset 't': tag 'old' cannot name revision 2: .*expired"):
        ds.tag("old", version=2)
    assert log_objects(ds) == before


def test_a_log_below_4_must_be_upgraded_before_tagging(repo, monkeypatch):
    monkeypatch.setattr(transaction, "PARTED_CHECKPOINT_PROTOCOL", 1)  # a dataset created before protocol 4
    ds = make(repo)
    monkeypatch.undo()
    before = log_objects(ds)
    with pytest.raises(RefError, match="dataset 't': tag 'q3' needs log version 5 .* at version 1: run `cdkds upgrade`"):
        ds.tag("q3")
    assert log_objects(ds) == before
    ds.upgrade_log()
    assert ds.snapshot.protocol.reader_version == PARTED_CHECKPOINT_PROTOCOL  # upgrade goes to 4, not 5
    assert ds.tag("q3", version=2) == 2 and ds.snapshot.protocol.reader_version == 5
    assert ids(repo.load("t", tag="q3")) == [0, 1]


# ---------------------------------------------------------------- checkpoints


@pytest.mark.parametrize("parts", [False, True])
def test_checkpoints_keep_the_tags(repo, parts):
    ds = make(repo)
    ds.tag("q3")
    ds.tag("one", version=1)
    ds.untag("q3")
    data = checkpoint.encode(ds.snapshot, [] if parts else None)
    state = checkpoint.decode(data, "here", loader=object() if parts else None)
    assert dict(state.tags) == {"one": 1}
    names = checkpoint.parquet_in_memory(data).read().column("action").to_pylist()
    assert names.count("tag") == 1


def test_a_checkpoint_after_tags_holds_them(repo):
    ds = make(repo, interval=2)  # checkpoint 2
    ds.tag("a", version=1)  # revision 4: a checkpoint
    ds.tag("b")
    assert ds.store.exists(checkpoint_key(4))
    assert dict(ds.log.listing.checkpoint(4).tags) == {"a": 1}
    assert repo.load("t").tags() == {"a": 1, "b": 4}


# ---------------------------------------------------------------- conflicts


def test_two_commits_tagging_one_name_conflict(repo):
    ds, other = make(repo), None
    other = repo.load("t")
    ds.tag("q3")
    before = log_objects(ds)
    with pytest.raises(CommitConflictError, match="conflicts with revision 4 \\('tag'\\).*tagged or untagged 'q3' too"):
        other.tag("q3", version=1)
    assert [k for k in log_objects(ds) if k.endswith(".json")] == [k for k in before if k.endswith(".json")]
    assert other.tag("q4", version=1) == 1  # another name: rebased over it


def test_a_tag_commit_conflicts_with_no_write_and_no_write_with_it(repo):
    ds = make(repo)
    writer, alter = repo.load("t"), repo.load("t")
    ds.tag("q3")
    appends(writer, [5])  # rebased over the tag
    alter.alter().add("z", "string").commit()  # a descriptor change (Exclusive) too
    ds.refresh()
    assert ds.tags() == {"q3": 3} and ids(ds) == [0, 1, 2, 5]
    tagger = repo.load("t")
    appends(ds, [6])
    assert tagger.tag("late") == 6 and ids(repo.load("t", tag="late")) == [0, 1, 2, 5]
    theirs = Commit(9, "u", "p", 1, "tag", {}, (SetProtocol(5, 5), Tag("x", 1)))
    for rule in (BlindAppend(), Exclusive(), RefChange()):
        assert rule.conflict((Tag("y", 2),), theirs, ds.snapshot) is None
        assert "'x'" in rule.conflict((Untag("x"),), theirs, ds.snapshot)


# ---------------------------------------------------------------- expiry and vacuum


def test_expiry_and_vacuum_keep_a_tagged_revision_until_it_is_untagged(repo):
    ds = make(repo)  # revisions 1..3 append 0..2
    ds.tag("q3")
    for i in range(3, 10):  # each removes an early row: revision 3's files become unreferenced
        appends(ds, [i])
        ds.delete(f"id = {i - 3}")
    expected = ids(repo.load("t", version=3))
    removed = ds.expire_log(soon(), force=True)
    assert removed and removed.kept == ("kept checkpoint 3 and the parts it names for tag 'q3'",)
    assert checkpoint_key(3) not in removed and ds.store.exists(checkpoint_key(3))
    assert not any(k.startswith(f"{PARTS_FOLDER}/00000000000000000003-") for k in removed)
    vacuumed = ds.vacuum(dt.timedelta(0), dry_run=False, force=True)
    assert vacuumed.kept == ("kept 3 file(s) live at revision 3 for tag 'q3'",)
    tagged = repo.load("t", tag="q3")
    assert tagged.version == 3 and ids(tagged) == expected == [0, 1, 2]
    assert ds.check().ok
    with pytest.raises(InvalidTimeTravelError, match="revision 4 has been expired"):
        repo.load("t", version=4)  # past the tag's checkpoint: expired, not a hole
    with pytest.raises(InvalidTimeTravelError, match="expired"):
        repo.load("t", timestamp=ds.log.listing.checkpoint(3).timestamp + 1)
    again = ds.expire_log(soon(), force=True)  # nothing new to expire: the tag's checkpoint stays
    assert ds.store.exists(checkpoint_key(3)) and checkpoint_key(3) not in again
    ds.untag("q3")
    removed = ds.expire_log(soon(), force=True)
    assert checkpoint_key(3) in removed and not removed.kept
    assert any(k.startswith(f"{PARTS_FOLDER}/00000000000000000003-") for k in removed)
    vacuumed = ds.vacuum(dt.timedelta(0), dry_run=False, force=True)
    assert {f.path for f in tagged.files} <= set(vacuumed) and not vacuumed.kept
    assert ids(repo.load("t")) == list(range(7, 10))


def test_expiry_writes_a_tagged_revisions_checkpoint_it_lacks(repo):
    ds = make(repo)
    ds.tag("q3")
    ds.store.delete(checkpoint_key(3))  # lost, say; the commits before it are still there
    appends(ds, range(3, 8))
    ds.expire_log(soon(), force=True)
    assert ids(repo.load("t", tag="q3")) == [0, 1, 2]


def test_a_tag_of_revision_0_needs_no_checkpoint(repo):
    ds = make(repo)
    assert ds.tag("birth", version=0) == 0 and not ds.store.exists(checkpoint_key(0))
    appends(ds, range(3, 9))
    ds.expire_log(soon(), force=True)
    assert ds.vacuum(dt.timedelta(0), dry_run=False, force=True) == []
    assert repo.load("t", tag="birth").version == 0


@settings(max_examples=10, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["append", "delete", "tag", "untag", "expire", "vacuum"]),
                          st.integers(0, 5)), min_size=1, max_size=10))
def test_every_tagged_revision_reads_the_same_rows_whatever_expiry_and_vacuum_do(tmp_path_factory, steps):
    repo = DatasetRepository(f"file://{tmp_path_factory.mktemp('lake')}/lake")
    ds = make(repo, interval=3, rows=2)
    seen: dict[str, list[int]] = {}  # tag -> the rows of its revision when it was made
    for n, (op, arg) in enumerate(steps):
        if op == "append":
            appends(ds, [100 + n])
        elif op == "delete":
            ds.delete(f"id = {min(ids(ds), default=-1)}")
        elif op == "tag":
            name = f"t{arg}"
            if name not in ds.tags():
                version = max(0, ds.version - arg)
                if repo.load("t").log.listing.list().expired:
                    version = ds.version
                ds.tag(name, version=version)
                seen[name] = ids(repo.load("t", version=version))
        elif op == "untag" and ds.tags():
            name = sorted(ds.tags())[arg % len(ds.tags())]
            ds.untag(name)
            del seen[name]
        elif op == "expire":
            ds.expire_log(soon(), force=True)
        elif op == "vacuum":
            ds.vacuum(dt.timedelta(0), dry_run=False, force=True)
        for name, rows in seen.items():
            assert ids(repo.load("t", tag=name)) == rows
    assert ds.tags() == {name: ds.tags()[name] for name in seen}


def test_a_tag_that_lost_its_revision_to_a_concurrent_expiry_is_taken_back(repo, monkeypatch):
    from cdkds.catalog.log import tags
    ds = make(repo, interval=3)  # checkpoint 3
    ds.delete("id = 0")
    appends(ds, range(3, 6))  # checkpoint 6 rewrote the part of checkpoint 3 that held id 0's file
    tagger = repo.load("t")  # tags revision 3, read from checkpoint 3's parts
    planned = tags.plan_tag

    def expired_meanwhile(log, base, name, version):  # an expiry that read the tags before ours landed
        plan = planned(log, base, name, version)
        kept = set(checkpoint.part_keys(ds.store.read(checkpoint_key(6)), "checkpoint 6"))
        for key in set(checkpoint.part_keys(ds.store.read(checkpoint_key(3)), "checkpoint 3")) - kept:
            ds.store.delete(key)
        ds.store.delete(checkpoint_key(3))
        for r in range(1, 6):
            ds.store.delete(f"_log/{r:020d}.json")
        ds.store.put(EXPIRED_KEY, ExpiryMarker(6).to_bytes())
        return plan
    monkeypatch.setattr(tags, "plan_tag", expired_meanwhile)
    with pytest.raises(RefError, match="dataset 't': an expiry running meanwhile removed revision 3 before tag 'q3' "
                                       "could keep it; the tag was taken back \\(revision 9\\)"):
        tagger.tag("q3", version=3)
    assert repo.load("t").tags() == {} and [h.operation for h in repo.load("t").history()][-2:] == ["tag", "untag"]


@pytest.mark.parametrize("tagged", [2, 3])  # 2: a new checkpoint and part; 3: a checkpoint the expiry lists to delete
def test_a_tag_that_lands_after_a_concurrent_expiry_read_the_tags_stays_readable(repo, monkeypatch, tagged):
    from cdkds.catalog.log import expiry
    ds = make(repo, interval=3)  # checkpoint 3
    appends(ds, range(3, 7))  # checkpoint 6
    ds.delete("id = 0")
    expected = ids(repo.load("t", version=tagged))
    tagger = repo.load("t")
    pin = expiry.LogExpiry._pin

    def tag_lands_meanwhile(self, pins):  # the expiry has read the tags; the tag commits and checks now
        assert tagger.tag("q", version=tagged) == tagged
        return pin(self, pins)
    monkeypatch.setattr(expiry.LogExpiry, "_pin", tag_lands_meanwhile)
    removed = ds.expire_log(soon(), force=True)
    monkeypatch.undo()
    assert checkpoint_key(tagged) not in removed and removed.kept == (
        f"kept checkpoint {tagged} and the parts it names for tag 'q'",)
    assert repo.load("t").tags() == {"q": tagged}
    assert ids(repo.load("t", tag="q")) == expected
    ds.vacuum(dt.timedelta(0), dry_run=False, force=True)
    assert ids(repo.load("t", tag="q")) == expected


@pytest.mark.parametrize("how", ["tag", "checkpoint"])
def test_a_checkpoint_of_a_tagged_revision_below_the_retained_log_never_becomes_the_hint(repo, how):
    ds = make(repo, interval=3)
    ds.tag("a", version=2)  # checkpoint 2, kept below the retained log
    appends(ds, range(3, 8))
    ds.expire_log(soon(), force=True)
    ds.store.delete("_log/_last_checkpoint")  # missing (a crash after a checkpoint, say): readers list the log
    if how == "tag":
        assert ds.tag("b", version=2) == 2
    else:
        repo.load("t", tag="a").checkpoint()
    assert ds.log.listing.hint() is None
    assert ids(repo.load("t")) == list(range(8))


def test_an_expiry_moves_a_stale_hint_off_a_checkpoint_it_keeps_for_a_tag(repo):
    ds = make(repo, interval=3)
    ds.tag("a", version=2)
    appends(ds, range(3, 8))
    ds.store.put("_log/_last_checkpoint", b'{"revision": 2}')  # stale (two checkpoint writers raced), and harmless
    assert ids(repo.load("t")) == list(range(8))
    ds.expire_log(soon(), force=True)  # keeps checkpoint 2 for the tag, but not the commits after it
    assert ds.log.listing.hint() >= 3
    assert ids(repo.load("t")) == list(range(8))


def test_a_hint_a_tagger_moved_while_an_expiry_ran_is_raised_again(repo, monkeypatch):
    from cdkds.catalog.log import expiry
    ds = make(repo, interval=3)
    appends(ds, range(3, 8))
    tagger = repo.load("t")
    raise_hint, calls = expiry.LogExpiry._hint_at_least, []

    def tagged_meanwhile(self, oldest):  # the tagger read the hint and the marker before ours, and wrote late
        raise_hint(self, oldest)
        if not calls:
            calls.append(tagger.tag("a", version=2))
            ds.store.put("_log/_last_checkpoint", b'{"revision": 2}')
    monkeypatch.setattr(expiry.LogExpiry, "_hint_at_least", tagged_meanwhile)
    ds.expire_log(soon(), force=True)
    monkeypatch.undo()
    assert calls == [2] and ds.log.listing.hint() >= 3
    assert ids(repo.load("t")) == list(range(8)) and ids(repo.load("t", tag="a")) == [0, 1]


def test_readers_go_around_a_stale_hint_naming_a_checkpoint_kept_for_a_tag(repo):
    ds = make(repo, interval=3)
    ds.tag("a", version=2)
    appends(ds, range(3, 8))
    ds.expire_log(soon(), force=True)
    ds.store.put("_log/_last_checkpoint", b'{"revision": 2}')  # stale: readers list the log instead
    assert ids(repo.load("t")) == list(range(8))
    assert repo.load("t", version=ds.version).version == ds.version
    assert ids(repo.load("t", tag="a")) == [0, 1]


def test_an_untagged_revision_below_the_retained_log_is_expired_although_its_checkpoint_is_left(repo):
    ds = make(repo, interval=3)
    ds.tag("a", version=2)
    for i in range(3, 8):
        appends(ds, [i])
        ds.delete(f"id = {i - 3}")
    ds.expire_log(soon(), force=True)  # keeps checkpoint 2 for the tag
    files = {f.path for f in repo.load("t", version=2).files}
    ds.untag("a")
    assert ds.store.exists(checkpoint_key(2))  # until the next expiry; vacuum may collect its files now
    vacuumed = ds.vacuum(dt.timedelta(0), dry_run=False, force=True)
    assert files <= set(vacuumed) and not vacuumed.kept
    with pytest.raises(InvalidTimeTravelError, match="dataset 't': revision 2 has been expired from the log"):
        repo.load("t", version=2)
    before = log_objects(ds)
    with pytest.raises(RefError, match="dataset 't': tag 'a' cannot name revision 2: .*expired"):
        ds.tag("a", version=2)
    assert log_objects(ds) == before and ds.check().ok
