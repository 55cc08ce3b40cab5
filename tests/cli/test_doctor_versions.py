"""What ``cdkds doctor`` compares versions with: the requirements cdkds declares, and release
numbers compared as numbers (in this process, no script)."""

from __future__ import annotations

import pytest

from cdkds.cli.doctor import at_least, declared


def test_the_declared_requirements_are_the_minimums_checked():
    python, lowest = declared()
    assert python == "3.11"
    assert {name: lowest[name] for name in ("pyspark", "pyarrow", "fastavro", "fsspec", "s3fs")} == {
        "pyspark": "4.1", "pyarrow": "25", "fastavro": "1.9", "fsspec": "2024.6", "s3fs": "2024.6"}
    assert "backports.zstd" not in lowest and "duckdb" not in lowest  # no minimum; an extra's


@pytest.mark.parametrize("found, needed, ok", [
    ("4.1.0", "4.1", True), ("4.0.1", "4.1", False), ("4.10.0", "4.9", True), ("4.1.0.dev1", "4.1", True),
    ("2026.9.0", "2024.6", True), ("2024.5.0", "2024.6", False), ("3.11.2", "3.11", True), ("3.10.14", "3.11", False),
    ("25", "25", True), ("26.0.1rc1", "25", True)])
def test_versions_compare_by_release_numbers(found, needed, ok):
    assert at_least(found, needed) is ok
