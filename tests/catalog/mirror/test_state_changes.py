"""``Changes.of`` (from a commit's actions) finds what ``Changes.between`` (comparing every
live file) finds, over random histories: the same added and removed files, and every file
whose deleted rows really changed."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings, strategies as st

from cdkds.catalog.mirror.state import Changes, deleted_positions
from tests.datasets import FOCUSES, build

FOCUS_NAMES = ("everything", "tombstones", "deletion vectors", "schema changes")


@settings(max_examples=12)
@given(data=st.data())
def test_changes_of_a_commit_are_the_changes_between_its_snapshots(tmp_path_factory, data):
    focus = dataclasses.replace(FOCUSES[data.draw(st.sampled_from(FOCUS_NAMES))], ttls=("none",))
    built = build(data, f"file://{tmp_path_factory.mktemp('lake')}", max_operations=6, focus=focus)
    ds = built.dataset
    before = ds.log.replay.first()
    for commit, after in ds.log.replay.walk(before):
        of, between = Changes.of(before, after, commit), Changes.between(before, after)
        assert [f.path for f in of.added] == sorted(f.path for f in between.added)
        assert [f.path for f in of.removed] == sorted(f.path for f in between.removed)
        assert of.metadata == between.metadata
        found = {f.path for f in of.redeleted}
        assert found <= {f.path for f in between.redeleted}
        for f in between.redeleted:  # the others look different to the statistics only
            if f.path not in found:
                assert np.array_equal(deleted_positions(ds.store, before, before.files[f.path]),
                                      deleted_positions(ds.store, after, f)), (commit.operation, f.path)
        before = after
