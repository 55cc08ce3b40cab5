"""Placeholder until the column-wise evaluator lands (per row, through FileFilter)."""
import pyarrow as pa


def may_match_mask(file_filter, files):
    return pa.array([file_filter.may_match(f) for f in files.files()], pa.bool_())


def must_match_mask(file_filter, files):
    return pa.array([file_filter.must_match(f) for f in files.files()], pa.bool_())
