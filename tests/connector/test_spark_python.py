"""A script run with a virtual environment's Python, not activated and without PYSPARK_PYTHON,
finds the cdkds source once it imports cdkds.connector before starting Spark: the import makes
this Python the one Spark starts (otherwise `python3` from the PATH, here a Python without cdkds,
and the read fails with DATA_SOURCE_NOT_FOUND). A set PYSPARK_PYTHON is left as it is."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from tests.conftest import USER_SCHEMA

pytestmark = pytest.mark.slow  # a Spark session in a new process

JOB = textwrap.dedent("""
    import os, sys
    import cdkds.connector  # before the session: nothing registered, no PYSPARK_PYTHON given
    from pyspark.sql import SparkSession
    print("PYSPARK_PYTHON", os.environ.get("PYSPARK_PYTHON"), flush=True)
    if sys.argv[2] == "read":
        spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                 .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                 .getOrCreate())
        print("ROWS", spark.read.format("cdkds").load(sys.argv[1]).count(), flush=True)
        spark.stop()
""")


def _environment(path_first: str, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    return {**env, "PATH": f"{path_first}{os.pathsep}{env['PATH']}", "SPARK_LOCAL_IP": "127.0.0.1", **extra}


def test_importing_the_connector_gives_spark_this_python(tmp_path):
    bare = tmp_path / "bare"  # what `python3` on the PATH is: a Python without cdkds
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    ds = DatasetRepository(f"file://{tmp_path}/lake").create("users", DatasetDescriptor(USER_SCHEMA))
    with ds.writer() as w:
        for i in range(5):
            w.write({"userId": i, "username": f"u{i}"})
    script = tmp_path / "job.py"
    script.write_text(JOB)

    done = subprocess.run([sys.executable, str(script), ds.url, "read"], capture_output=True, text=True,
                          timeout=400, cwd=tmp_path, env=_environment(str(bare / "bin")))
    assert done.returncode == 0, [line for line in done.stderr.splitlines() if "Exception" in line][:3]
    assert f"PYSPARK_PYTHON {sys.executable}\nROWS 5\n" in done.stdout

    chosen = str(bare / "bin" / "python")  # a PYSPARK_PYTHON the user set stands
    done = subprocess.run([sys.executable, str(script), ds.url, "no"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=_environment(str(bare / "bin"), PYSPARK_PYTHON=chosen))
    assert done.returncode == 0 and done.stdout == f"PYSPARK_PYTHON {chosen}\n", done.stderr[-4000:]
