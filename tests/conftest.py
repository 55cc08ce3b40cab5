"""Shared fixtures: repositories on every backend the core runs on."""

from __future__ import annotations

import os
import uuid

import pytest
from hypothesis import HealthCheck, settings

from cdkds.catalog import DatasetRepository

settings.register_profile("ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(params=["file", "memory"])
def repo_url(request, tmp_path) -> str:
    """A fresh repository URL on local files and on fsspec's memory store."""
    if request.param == "file":
        return f"file://{tmp_path}/lake"
    return f"memory://lake-{uuid.uuid4().hex}"


@pytest.fixture
def repo(repo_url) -> DatasetRepository:
    return DatasetRepository(repo_url)


USER_SCHEMA = {"type": "record", "name": "User", "fields": [
    {"name": "userId", "type": "long"}, {"name": "username", "type": "string"}]}

EVENT_SCHEMA = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"},
    {"name": "userId", "type": "long"},
    {"name": "country", "type": ["null", "string"], "default": None},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "amount", "type": ["null", "double"], "default": None},
]}
