"""A test that needs a missing component skips, naming it — and fails under
``CDKDS_REQUIRE_COMPONENTS=1``, as CI runs the suite (tests/components.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

NEEDS = '''
import pytest
from tests.components import missing

@pytest.mark.needs("no_such_module_cdkds")
def test_marked():
    pass

def test_calls_missing():
    missing("no PostgreSQL server on this machine")
'''


@pytest.mark.slow
@pytest.mark.parametrize("require, outcome, code", [("", "2 skipped", 0), ("0", "2 skipped", 0),
                                                   ("1", "1 failed, 1 error", 1)])  # a fixture's failure is an error
def test_missing_components_skip_or_fail(tmp_path, require, outcome, code):
    (tmp_path / "test_needs.py").write_text(NEEDS)
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_runtest_setup  # noqa: F401\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rsf", "-q",
                           "-c", str(ROOT / "setup.cfg"), f"--rootdir={tmp_path}", str(tmp_path / "test_needs.py")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
                               "CDKDS_REQUIRE_COMPONENTS": require})
    assert outcome in done.stdout and done.returncode == code, done.stdout + done.stderr
    assert "no_such_module_cdkds is not installed" in done.stdout
    assert "no PostgreSQL server on this machine" in done.stdout
