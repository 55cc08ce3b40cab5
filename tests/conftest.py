"""Shared fixtures: repositories on every backend the core runs on."""

from __future__ import annotations

import os
import uuid

import pytest
from hypothesis import HealthCheck, settings

from cdkds.catalog import DatasetRepository
from tests.components import absent, missing

settings.register_profile("ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Most tests look at one mechanism (a tombstone, a deletion vector, a file count) that the
# table services would rewrite right after the write; they run without inline services, in
# this process and the processes it starts. tests/catalog/services/ turns them on (the
# `inline_services` fixture), and the examples run with the defaults.
os.environ["CDKDS_INLINE_SERVICES"] = "off"


def pytest_runtest_setup(item):
    """``@pytest.mark.needs("module", ...)``: skip the test when a module is not installed (fail
    it under CDKDS_REQUIRE_COMPONENTS=1, see tests/components.py)."""
    for mark in item.iter_markers("needs"):
        lacking = absent(mark.args)
        if lacking:
            missing(f"{', '.join(lacking)} {'is' if len(lacking) == 1 else 'are'} not installed (pip install '.[test]')")


@pytest.fixture
def inline_services(monkeypatch):
    """Inline table services on, as they are by default."""
    monkeypatch.delenv("CDKDS_INLINE_SERVICES", raising=False)


@pytest.fixture(scope="session")
def s3_endpoint() -> str:
    """A real S3 endpoint on loopback: moto's server in its own process (so it does not
    compete with the tests for the GIL), started once per test session."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
            break
        except OSError:
            if time.time() > deadline or server.poll() is not None:
                server.kill()
                raise RuntimeError("moto's S3 server did not start")
            time.sleep(0.2)
    yield endpoint
    server.terminate()
    server.wait(10)


def s3_options(endpoint: str) -> dict:
    return {"client_kwargs": {"endpoint_url": endpoint}, "use_listings_cache": False, "skip_instance_cache": True}


def new_bucket(endpoint: str) -> str:
    """A fresh bucket (moto's state is process-wide, so every test gets its own)."""
    import boto3

    name = f"lake-{uuid.uuid4().hex[:20]}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=name)
    return name


@pytest.fixture(params=["file", "memory", pytest.param("s3", marks=pytest.mark.slow)])
def backend(request, tmp_path) -> tuple[str, dict]:
    """A fresh repository URL and its storage options on local files, fsspec's memory
    store and S3 (moto on loopback)."""
    if request.param == "file":
        return f"file://{tmp_path}/lake", {}
    if request.param == "memory":
        return f"memory://lake-{uuid.uuid4().hex}", {}
    endpoint = request.getfixturevalue("s3_endpoint")
    return f"s3://{new_bucket(endpoint)}/lake", s3_options(endpoint)


@pytest.fixture
def repo(backend) -> DatasetRepository:
    return DatasetRepository(*backend)


USER_SCHEMA = {"type": "record", "name": "User", "fields": [
    {"name": "userId", "type": "long"}, {"name": "username", "type": "string"}]}

EVENT_SCHEMA = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"},
    {"name": "userId", "type": "long"},
    {"name": "country", "type": ["null", "string"], "default": None},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "amount", "type": ["null", "double"], "default": None},
]}


# ---------------------------------------------------------------- one-column datasets

def one_column_dataset(tmp_path, avro_type, fmt, name="d"):
    """A new file:// dataset whose records have one field ``x`` of ``avro_type``."""
    from cdkds.catalog import DatasetDescriptor

    schema = {"type": "record", "name": "R", "fields": [{"name": "x", "type": avro_type}]}
    return DatasetRepository(f"file://{tmp_path}/lake").create(name, DatasetDescriptor(schema, format=fmt))


def xs(ds, where=None):
    """The ``x`` values a reader with ``where`` returns."""
    return [r["x"] for r in ds.reader(where)]


def write_xs(ds, values):
    """One commit of records ``{"x": v}``."""
    with ds.writer() as w:
        for v in values:
            w.write({"x": v})
