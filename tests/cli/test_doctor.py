"""``cdkds doctor`` through the installed console script: a machine that has what a first run
needs passes (exit 0); a Spark worker Python without cdkds is caught and PYSPARK_PYTHON named;
a repository that cannot be written, or an S3 bucket that is not there, is a problem (exit 1);
S3 on moto is reachable and writable; ``--json`` is a list of checks. The probe object is
removed, and folders the probe created are removed with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.running import run_script
from tests.conftest import new_bucket

pytestmark = pytest.mark.slow  # the script, and the Java and Python it starts

SPARK_PYTHON_VARIABLES = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
EXPECTED = ["python", "cdkds", "pyspark", "pyarrow", "fastavro", "fsspec", "s3fs", "java", "spark worker python"]


@pytest.fixture
def spark_python_unset(monkeypatch):
    """No PYSPARK_PYTHON or PYSPARK_DRIVER_PYTHON (tests/connector/conftest.py sets one for Spark)."""
    for name in SPARK_PYTHON_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    """A Python without cdkds: a new virtual environment without packages."""
    folder = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    assert subprocess.run([str(python), "-c", "import cdkds"], capture_output=True).returncode != 0
    return python


def checks(done: subprocess.CompletedProcess) -> dict[str, dict]:
    listed = json.loads(done.stdout)
    assert all(set(c) == {"check", "ok", "detail", "fix"} for c in listed), listed
    return {c["check"]: c for c in listed}


def test_a_ready_machine_passes_and_the_probe_leaves_nothing(tmp_path, spark_python_unset):
    lake = tmp_path / "new" / "lake"  # not there yet: the probe creates its folders, then removes them
    env = {"PYSPARK_PYTHON": sys.executable}
    done = run_script("doctor", f"file://{lake}", env=env)
    lines = done.stdout.splitlines()
    assert done.stderr == "" and lines[-1] == f"all {len(EXPECTED) + 2} checks passed"
    assert [line.split(":")[0] for line in lines[:-1]] == [f"ok       {c}" for c in
                                                          [*EXPECTED, "repository reachable", "repository writable"]]
    assert f"PYSPARK_PYTHON={sys.executable}" in done.stdout and "imports cdkds and finds pyspark_cdkds" in done.stdout
    assert not (tmp_path / "new").exists()

    lake.mkdir(parents=True)
    (lake / "keep").write_text("x")
    found = checks(run_script("doctor", f"file://{lake}", "--json", env=env))
    assert list(found) == [*EXPECTED, "repository reachable", "repository writable"]
    assert all(c["ok"] and c["fix"] is None for c in found.values())
    assert "1 entry there" in found["repository reachable"]["detail"]
    assert [p.name for p in lake.iterdir()] == ["keep"]


def test_a_spark_python_without_cdkds_is_named_with_the_fix(bare_python, spark_python_unset, tmp_path):
    done = run_script("doctor", env={"PYSPARK_PYTHON": str(bare_python)}, code=1)
    assert done.stderr == "error: doctor found 1 problem\n"
    problem = next(line for line in done.stdout.splitlines() if line.startswith("problem"))
    assert problem.startswith(f"problem  spark worker python: {bare_python} (PYSPARK_PYTHON={bare_python}) "
                              f"cannot import cdkds (ModuleNotFoundError")
    assert f"export PYSPARK_PYTHON={sys.executable}" in done.stdout

    # unset, Spark starts python3 from the PATH: here the bare one
    assert (bare_python.parent / "python3").exists()
    path = f"{bare_python.parent}{os.pathsep}{os.environ['PATH']}"
    found = checks(run_script("doctor", "--json", env={"PATH": path}, code=1))
    worker = found["spark worker python"]
    assert not worker["ok"] and "python3, Spark's default: PYSPARK_PYTHON not set" in worker["detail"]
    assert "cannot import cdkds" in worker["detail"] and "PYSPARK_PYTHON=" in worker["fix"]
    assert [c for c, v in found.items() if not v["ok"]] == ["spark worker python"]

    # the data-source lookup prefers PYSPARK_DRIVER_PYTHON: checked apart when it names another Python
    found = checks(run_script("doctor", "--json", env={"PYSPARK_PYTHON": sys.executable,
                                                       "PYSPARK_DRIVER_PYTHON": str(bare_python)}, code=1))
    assert found["spark worker python"]["ok"]
    lookup = found["spark data-source lookup python"]
    assert not lookup["ok"] and f"PYSPARK_DRIVER_PYTHON={bare_python}" in lookup["detail"]


def test_a_repository_that_cannot_be_written_and_an_old_java_are_problems(tmp_path, spark_python_unset):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")  # root may write anywhere, but not under a regular file
    java = tmp_path / "jdk8" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text('#!/bin/sh\necho \'openjdk version "1.8.0_292"\' >&2\n')
    java.chmod(0o755)
    done = run_script("doctor", f"file://{blocker}/lake", "--json", code=1,
                      env={"PYSPARK_PYTHON": sys.executable, "JAVA_HOME": str(java.parent.parent)})
    found = checks(done)
    assert done.stderr == "error: doctor found 2 problems\n"
    assert [c for c, v in found.items() if not v["ok"]] == ["java", "repository writable"]
    assert found["java"]["detail"].startswith(f"Java 1.8.0_292 at {java} (JAVA_HOME=")
    assert "Java 17 or later" in found["java"]["fix"]
    writable = found["repository writable"]
    assert "Not a directory" in writable["detail"] and str(blocker) in writable["fix"]
    assert blocker.read_text() == "not a folder"


def test_s3_reachable_and_writable_and_a_missing_bucket(s3_endpoint, spark_python_unset):
    bucket = new_bucket(s3_endpoint)
    options = ["--storage-option", f"client_kwargs.endpoint_url={s3_endpoint}", "--json"]
    env = {"PYSPARK_PYTHON": sys.executable, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1"}
    found = checks(run_script("doctor", f"s3://{bucket}/lake", *options, env=env))
    assert found["repository reachable"]["ok"] and found["repository writable"]["ok"]
    import boto3

    assert boto3.client("s3", endpoint_url=s3_endpoint).list_objects_v2(Bucket=bucket)["KeyCount"] == 0

    found = checks(run_script("doctor", "s3://no-such-bucket-cdkds/lake", *options, env=env, code=1))
    reached = found["repository reachable"]  # not "nothing is there yet": no dataset can be created there
    assert not reached["ok"] and "the bucket no-such-bucket-cdkds does not exist" in reached["detail"]
    assert "create the bucket" in reached["fix"] and "endpoint_url" in reached["fix"]
    assert not found["repository writable"]["ok"] and "not tried" in found["repository writable"]["detail"]
