"""check_dataset / Dataset.check: healthy datasets report nothing; each kind of damage is
reported once, naming its object and what it costs; several at once are all reported; a
check never writes."""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json
import struct

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdkds.catalog import CorruptLogError, CorruptLogWarning, DatasetDescriptor, DatasetNotFoundError
from cdkds.catalog.log import checkpoint
from cdkds.catalog.log.commit import Commit
from cdkds.catalog.log import checkpoint_key, commit_key
from cdkds.catalog.maintenance.check import PROBLEM_KINDS, CheckReport, check_dataset
from tests.catalog.keyed.conftest import user, users_descriptor
from tests.conftest import EVENT_SCHEMA

UTC = dt.timezone.utc


def everything(ds) -> dict[str, bytes]:
    return {key: ds.store.read(key) for key, _ in ds.store.walk_files("")}


def checked(ds, read_data: bool = False, name: str | None = None) -> CheckReport:
    """The check's report, asserting it wrote nothing (every object and byte the same)."""
    before = everything(ds)
    report = check_dataset(ds.store, name or ds.name, read_data=read_data)
    assert everything(ds) == before
    return report


def found(report: CheckReport) -> list[tuple[str, str]]:
    return [(p.kind, p.object) for p in report.problems]


def events(repo, commits: int = 7, name: str = "events", fmt: str = "parquet"):
    """A partitioned dataset with checkpoints at 3 and 6 (interval 3)."""
    ds = repo.create(name, DatasetDescriptor(EVENT_SCHEMA, "identity(country)", format=fmt,
                                             properties={"checkpoint.interval": "3"}))
    for i in range(commits):
        with ds.writer() as w:
            w.write_batch(pa.table({
                "id": [i * 10 + j for j in range(10)], "userId": [j % 3 for j in range(10)],
                "country": ["nz" if j % 2 else "au" for j in range(10)],
                "ts": pa.array([dt.datetime(2026, 1, 1 + i, j, tzinfo=UTC) for j in range(10)], pa.timestamp("us", "UTC")),
                "amount": [None if j == 3 else j * 1.5 for j in range(10)]}))
    return ds


def added_at(ds, revision: int) -> list[str]:
    return sorted(f.path for f in ds.files if f.revision == revision)


# ---------------------------------------------------------------- healthy datasets


def test_a_plain_dataset_with_deletes_and_an_overwrite_is_healthy(repo):
    ds = repo.create("plain", DatasetDescriptor(EVENT_SCHEMA, format="avro"))
    for i in range(3):
        with ds.writer() as w:
            for j in (2 * i, 2 * i + 1):
                w.write({"id": j, "userId": i, "country": None, "ts": dt.datetime(2026, 1, 1, tzinfo=UTC), "amount": 2.5})
    ds.delete("id = 1")  # a tombstone
    first = ds.files
    with ds.writer(mode="overwrite") as w:
        w.write({"id": 9, "userId": 9, "country": "nz", "ts": dt.datetime(2026, 1, 2, tzinfo=UTC)})
    report = checked(ds, read_data=True)
    assert report.ok and report.problems == () and report.notes == ()
    assert (report.first_revision, report.latest_revision, report.checked_revision) == (0, 5, 5)
    assert (report.commits, report.checkpoints, report.data_files, report.contents_read) == (6, 0, 4, True)
    assert report.data_bytes == sum(f.size for f in first + ds.files)  # every retained revision's files
    assert ds.check() == dataclasses.replace(report, contents_read=False)
    json.dumps(report.to_json())  # serialisable as it is


def test_a_partitioned_dataset_compacted_and_altered_is_healthy(repo):
    ds = events(repo)
    ds.delete("country = 'nz' and id > 50")
    ds.compact()
    ds.alter().rename("amount", "price").add("channel", "string", default="web").commit()
    ds.update_descriptor(ds.descriptor)  # a no-op descriptor commit
    with ds.writer() as w:
        w.write({"id": 999, "userId": 1, "country": "nz", "ts": dt.datetime(2026, 2, 1, tzinfo=UTC), "price": 1.0,
                 "channel": "app"})
    report = checked(ds, read_data=True)
    assert report.ok, report.problems
    assert (report.latest_revision, report.checkpoints) == (ds.version, ds.version // 3)
    assert report.data_files > len(ds.files)  # the compacted files too: time travel still reads them


def test_a_delete_spent_by_a_compaction_after_a_checkpoint_of_parts_is_healthy(repo):
    """A replay from a checkpoint's parts keeps a tombstone no live file predates (it cannot
    tell without reading them); it deletes nothing, so it is no difference from the log."""
    ds = repo.create("spent", DatasetDescriptor(EVENT_SCHEMA, "identity(country)",
                                                properties={"checkpoint.interval": "1000"}))
    for ids in ([0, 1], [2, 3]):
        with ds.writer() as w:
            for i in ids:
                w.write({"id": i, "userId": i, "country": "nz", "ts": dt.datetime(2026, 1, 1, tzinfo=UTC)})
    ds.checkpoint()
    ds = ds.refresh()  # its files over the checkpoint's parts
    ds.delete("id = 1")  # a tombstone
    ds.compact()  # rewrites both files: the tombstone is spent
    ds.checkpoint()
    assert sorted(r["id"] for r in ds.reader()) == [0, 2, 3]
    report = checked(ds)
    assert report.ok and report.problems == (), report.problems


def test_a_keyed_dataset_with_deletion_vectors_and_an_index_is_healthy(repo):
    ds = keyed(repo)
    report = checked(ds, read_data=True)
    assert report.ok, report.problems
    assert report.index_files >= 4 and report.deletion_vector_files == 1
    ds.compact()
    ds.checkpoint()
    assert checked(ds, read_data=True).ok


def test_after_log_expiry_and_vacuum_the_log_starts_at_a_checkpoint(repo):
    ds = events(repo)
    ds.compact()
    assert ds.expire_log(dt.timedelta(0), force=True)
    ds.vacuum(dt.timedelta(0), dry_run=False, force=True)
    report = checked(ds, read_data=True)
    assert report.ok, report.problems
    assert (report.first_revision, report.latest_revision, report.commits, report.checkpoints) == (6, 8, 4, 1)


def keyed(repo):
    """A keyed dataset whose first file has a deletion vector large enough for a sidecar."""
    ds = repo.create("users", users_descriptor())
    ds.insert([user("nz", i, 1, f"u{i}") for i in range(3000)])
    ds.delete_keys([("nz", i) for i in range(0, 3000, 2)])
    ds.upsert([user("nz", 1, 5, "newer"), user("au", 1, 5)])
    return ds


# ---------------------------------------------------------------- the log


def test_a_missing_commit_in_the_middle_is_a_hole_up_to_the_next_checkpoint(repo):
    ds = events(repo)
    ds.store.delete(commit_key(4))
    report = checked(ds)
    assert found(report) == [("missing_commit", commit_key(4))]
    assert report.problems[0].cost.startswith("time travel to revisions 4 to 5 fails (revision 6 and later read "
                                              "from checkpoint 6)")
    assert report.checked_revision == 7 and not report.notes  # checkpoint 6 lists what commit 4 added


def test_a_flipped_byte_fails_the_checksum(repo):
    ds = events(repo)
    data = bytearray(ds.store.read(commit_key(5)))
    at = data.index(b'"rows":10') + len(b'"rows":')
    data[at] = ord("9")  # still JSON, now claiming 90 rows
    ds.store.put(commit_key(5), bytes(data))
    report = checked(ds)
    assert found(report) == [("corrupt_commit", commit_key(5))]
    assert "checksum mismatch" in report.problems[0].message
    assert "time travel to revision 5 fails" in report.problems[0].cost and "`history` fails" in report.problems[0].cost


def test_a_truncated_latest_commit_means_the_dataset_cannot_be_opened(repo):
    ds = events(repo)
    ds.store.put(commit_key(7), ds.store.read(commit_key(7))[:50])
    report = checked(ds)
    assert found(report) == [("corrupt_commit", commit_key(7))]
    assert "revision 7, the latest, cannot be read: the dataset cannot be opened" in report.problems[0].cost
    assert report.checked_revision == 6
    assert any("replays only to revision 6" in n for n in report.notes)
    assert any("commit 7 added are unknown" in n for n in report.notes)


def rewrite(ds, revision: int, **changes) -> None:
    """Commit ``revision`` rewritten with ``changes`` and a valid checksum."""
    commit = Commit.from_bytes(ds.store.read(commit_key(revision)), ds.descriptor, "test")
    ds.store.put(commit_key(revision), dataclasses.replace(commit, **changes).to_bytes(ds.descriptor))


def test_a_broken_chain_and_a_timestamp_out_of_order(repo):
    ds = events(repo)
    rewrite(ds, 2, previous="0" * 32)
    earlier = Commit.from_bytes(ds.store.read(commit_key(6)), ds.descriptor, "test").timestamp
    rewrite(ds, 7, timestamp=earlier)
    report = checked(ds)
    assert found(report) == [("broken_chain", commit_key(2)), ("timestamp_order", commit_key(7))]
    assert "time travel to revision 2 fails (revision 3 and later read from checkpoint 3)" in report.problems[0].cost
    assert "time travel by timestamp" in report.problems[1].cost


def test_a_checkpoint_that_differs_from_the_replay(repo):
    ds = events(repo)
    state = ds.log.snapshot(version=6)
    dropped = sorted(state.files)[0]
    wrong = dataclasses.replace(state, files={p: f for p, f in state.files.items() if p != dropped})
    ds.store.put(checkpoint_key(6), checkpoint.encode(wrong))
    report = checked(ds)
    assert found(report) == [("checkpoint_mismatch", checkpoint_key(6))]
    assert f"1 file missing from it ({dropped})" in report.problems[0].message
    assert report.problems[0].cost.startswith("reads of revision 6 to the latest start from this checkpoint")


def test_a_corrupt_checkpoint_costs_speed_only(repo):
    ds = events(repo)
    ds.store.put(checkpoint_key(3), ds.store.read(checkpoint_key(3))[:100])
    report = checked(ds)
    assert found(report) == [("corrupt_checkpoint", checkpoint_key(3))]
    assert report.problems[0].cost.endswith("(slower); nothing lost")


def test_after_expiry_a_damaged_oldest_checkpoint_loses_revisions(repo):
    ds = events(repo, commits=9)  # checkpoints 3, 6, 9
    ds.expire_log(dt.timedelta(0), force=True)  # the log starts at checkpoint 9
    with ds.writer() as w:
        w.write({"id": 1, "userId": 1, "country": "nz", "ts": dt.datetime(2026, 1, 1, tzinfo=UTC)})
    ds.store.put(checkpoint_key(9), ds.store.read(checkpoint_key(9))[:100])
    report = checked(ds)
    assert found(report) == [("corrupt_checkpoint", checkpoint_key(9))]
    assert report.problems[0].cost.startswith("revisions 9 to the latest cannot be read: the commits before them "
                                              "were expired")
    assert report.checked_revision is None and any("were not read" in n for n in report.notes)


def test_a_garbage_hint(repo):
    ds = events(repo)
    ds.store.put("_log/_last_checkpoint", b"{{{")
    assert found(checked(ds)) == [("bad_hint", "_log/_last_checkpoint")]


# ---------------------------------------------------------------- data files


def test_a_deleted_data_file(repo):
    ds = events(repo)
    path = added_at(ds, 2)[0]
    ds.store.delete(path)
    report = checked(ds)
    assert found(report) == [("missing_file", path)]
    assert report.problems[0].cost == ("reads that include this file fail from revision 2 to the latest (7); its 5 "
                                       "rows are lost unless the file is restored")


def test_a_truncated_data_file(repo):
    ds = events(repo)
    path = added_at(ds, 3)[0]
    ds.store.put(path, ds.store.read(path)[:-10])
    report = checked(ds)
    assert found(report) == [("size_mismatch", path)]
    assert "fail or return wrong rows" in report.problems[0].cost


def test_a_file_only_time_travel_reads(repo):
    ds = events(repo)
    path = added_at(ds, 3)[0]
    ds.compact()
    ds.store.delete(path)
    report = checked(ds)
    assert found(report) == [("missing_file", path)]
    assert report.problems[0].cost == ("reads that include this file fail at revisions 3 to 7 only (time travel; the "
                                       "latest does not use it)")


def test_same_size_other_bytes_are_found_only_by_reading_the_data(repo):
    ds = events(repo)
    broken, altered = added_at(ds, 2)[0], added_at(ds, 4)[0]
    data = ds.store.read(broken)
    footer = struct.unpack("<i", data[-8:-4])[0] + 8
    ds.store.put(broken, data[:4] + bytes(len(data) - 4 - footer) + data[-footer:])  # pages zeroed
    ds.store.put(altered, same_size_other_values(ds.store.read(altered)))
    assert checked(ds).ok
    report = checked(ds, read_data=True)
    assert sorted(found(report)) == sorted([("unreadable_file", broken), ("content_mismatch", altered)])
    mismatch = next(p for p in report.problems if p.kind == "content_mismatch")
    assert "column id of the data file holds" in mismatch.message


def same_size_other_values(data: bytes) -> bytes:
    """A valid Parquet file of the same size and schema whose ids are other values."""
    table = pq.read_table(io.BytesIO(data))
    table = table.set_column(0, table.schema.field(0), pa.array([v + 1000 for v in table.column(0).to_pylist()],
                                                                  pa.int64()))
    for pad in range(len(data)):
        sink = io.BytesIO()
        with pq.ParquetWriter(sink, table.schema, store_schema=False) as writer:  # field ids stay in the schema
            writer.write_table(table)
            writer.add_key_value_metadata({"pad": "x" * pad})
        if len(sink.getvalue()) == len(data):
            return sink.getvalue()
    raise AssertionError("no padding gives the same size")


# ---------------------------------------------------------------- keyed datasets


def flip(ds, key: str) -> None:
    data = bytearray(ds.store.read(key))
    data[len(data) // 2] ^= 0xFF
    ds.store.put(key, bytes(data))


@pytest.mark.parametrize("damage, kind", [("delete", "missing_file"), ("flip", "unreadable_deletion_vector")])
def test_a_damaged_deletion_vector_and_a_corrupt_index_file(repo, damage, kind):
    ds = keyed(repo)
    (owner,) = [f for f in ds.files if any(d.path for d in f.deletes)]
    (vector,) = [d.path for d in owner.deletes if d.path]
    ds.store.delete(vector) if damage == "delete" else flip(ds, vector)
    index = sorted(ds.snapshot.index)[0]
    flip(ds, index)
    report = checked(ds)
    costs = {p.object: p.cost for p in report.problems}
    assert sorted(found(report)) == sorted([(kind, vector), ("unreadable_index", index)])
    assert f"every read of {owner.path} fails" in costs[vector]
    assert "`cdkds rebuild-index` rebuilds the index" in costs[index]


# ---------------------------------------------------------------- all at once, and what cannot be opened


def test_several_problems_are_all_reported(repo):
    ds = events(repo)
    deleted = added_at(ds, 1)[0]
    ds.store.delete(deleted)
    ds.store.delete(commit_key(2))
    ds.store.put(commit_key(7), b"{")
    ds.store.put(checkpoint_key(6), b"not parquet")
    report = checked(ds)
    assert found(report) == [("missing_commit", commit_key(2)), ("corrupt_checkpoint", checkpoint_key(6)),
                             ("corrupt_commit", commit_key(7)), ("missing_file", deleted)]
    assert "revisions 7" not in report.problems[0].cost  # checkpoint 3 resumes the replay
    assert report.problems[2].cost.startswith("revision 7, the latest, cannot be read")
    assert all(p.kind in PROBLEM_KINDS for p in report.problems)
    with pytest.raises(CorruptLogError), pytest.warns(CorruptLogWarning):
        repo.load("events")  # what the damage does to readers; the check still reports it all


def test_a_dataset_whose_commit_0_or_whole_log_is_gone(repo):
    ds = events(repo, commits=2)
    ds.store.delete(commit_key(0))
    report = checked(ds)
    assert found(report) == [("missing_commit", commit_key(0))]
    assert report.problems[0].cost.startswith("the dataset does not exist for readers")
    ds.store.delete_tree("_log")
    report = check_dataset(ds.store, "events")
    assert found(report) == [("missing_log", commit_key(0))] and "cdkds rebuild" in report.problems[0].cost
    with pytest.raises(DatasetNotFoundError, match="dataset 'nope' does not exist"):
        check_dataset(repo.store.child("nope"), "nope")


def test_read_data_finds_a_key_live_twice_and_rows_the_index_does_not_point_at(tmp_path):
    from cdkds.catalog import DatasetRepository

    repo = DatasetRepository(f"file://{tmp_path}")
    ds = repo.create("users", users_descriptor(ttl="3650 days"))
    ds.upsert([user("nz", i, 1) for i in range(5)])
    ds.upsert([user("nz", 1, 2, "new")])  # a deletion vector, and the index moves to the new row
    ds.delete_keys([{"tenant": "nz", "userId": 4}])
    assert checked(ds, read_data=True).ok
    with _raw_writer(ds) as w:
        w.write(user("nz", 2, 3))  # a second live row of key nz/2, behind the index's back
    report = checked(repo.load("users"), read_data=True)
    assert [p.kind for p in report.problems] == ["duplicate_key", "index_mismatch"], report.problems
    assert "'userId': 2" in report.problems[0].object and "1 live rows are not where" in report.problems[1].message
    assert check_dataset(ds.store, "users").ok  # without read_data the keys are not read


def _raw_writer(ds):
    """A plain append that writes a data file without touching the index (as a broken writer would)."""
    from cdkds.catalog.write.writer import DatasetWriter
    return DatasetWriter(ds, "append")


def test_a_checkpoint_kept_for_a_tag_just_below_the_retained_log_is_no_hole(repo):
    ds = events(repo, commits=3, name="tagged")  # checkpoint 3
    ds.tag("q", version=2)  # checkpoint 2, kept by expiry; the retained log starts at 3
    ds.expire_log(dt.timedelta(0), force=True)
    assert ds.store.exists(checkpoint_key(2)) and not ds.store.exists(commit_key(2))
    report = checked(ds, read_data=True)
    assert report.ok, report.problems
    assert (report.first_revision, report.latest_revision) == (3, 4)


def test_a_tagged_revision_below_the_retained_log_is_checked_too(repo):
    from cdkds.catalog.log.expiry import files_of
    ds = events(repo, commits=2, name="tagged")
    ds.tag("q")  # checkpoint 2 (the tag's commit is revision 3)
    ds.compact()  # revision 4 removes revision 2's files
    ds.checkpoint()
    ds.expire_log(dt.timedelta(0), force=True)
    ds.vacuum(dt.timedelta(0), dry_run=False, force=True)
    tagged = repo.load("tagged", tag="q").snapshot
    kept = files_of(tagged) - files_of(ds.snapshot)  # revision 2's files, kept for the tag
    report = checked(ds)
    assert report.ok, report.problems
    assert len(kept) == 4 and report.data_files == len(ds.files) + len(kept) and report.checkpoints == 2
    only = sorted(kept)[0]
    data = ds.store.read(only)
    ds.store.delete(only)
    report = checked(ds)
    assert found(report) == [("missing_file", only)]
    assert report.problems[0].cost.startswith("reads that include this file fail at revision 2 only")
    ds.store.put(only, data)
    (part,) = checkpoint.parts_of(tagged)
    ds.store.delete(part.key)
    report = checked(ds)
    assert found(report) == [("corrupt_checkpoint_part", part.key)]
    assert "revision 2, which tag 'q' keeps, cannot be read" in report.problems[0].cost
    ds.store.delete(checkpoint_key(2))
    report = checked(ds)
    assert found(report) == [("corrupt_checkpoint", checkpoint_key(2))]
    assert report.problems[0].message == "checkpoint 2 is missing"


def test_a_checkpoint_whose_tags_differ_from_the_replay(repo):
    from types import MappingProxyType
    ds = events(repo, commits=2, name="tagged")
    ds.tag("q", version=1)  # revision 3: a checkpoint
    state = ds.log.snapshot(version=3)
    ds.store.put(checkpoint_key(3), checkpoint.encode(dataclasses.replace(state, tags=MappingProxyType({}))))
    report = checked(ds)
    assert found(report) == [("checkpoint_mismatch", checkpoint_key(3))]
    assert "1 tag missing from it (q)" in report.problems[0].message
