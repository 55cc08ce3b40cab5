"""Keyed datasets for the tests of this package."""

from __future__ import annotations

import datetime as dt

import pytest

from cdkds.catalog import DatasetDescriptor

USERS = {"type": "record", "name": "User", "fields": [
    {"name": "tenant", "type": "string"}, {"name": "userId", "type": "long"},
    {"name": "email", "type": ["null", "string"], "default": None},
    {"name": "score", "type": ["null", "long"], "default": None},
    {"name": "updatedAt", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}

EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def at(seconds: float) -> dt.datetime:
    return EPOCH + dt.timedelta(seconds=seconds)


def user(tenant: str, user_id: int, t: float, email: str | None = None, score: int | None = None) -> dict:
    return {"tenant": tenant, "userId": user_id, "email": email, "score": score, "updatedAt": at(t)}


def users_descriptor(ordering: bool = True, **properties: str) -> DatasetDescriptor:
    return DatasetDescriptor(USERS, record_key=["tenant", "userId"], ordering_field="updatedAt" if ordering else None,
                             partition_strategy="identity(tenant)", properties={"index.buckets": "4", **properties})


@pytest.fixture
def users(repo):
    return repo.create("users", users_descriptor())


def state(ds) -> dict:
    """Key -> (email, score, updatedAt) of every visible row; fails on a repeated key."""
    out = {}
    for r in ds.reader():
        key = (r["tenant"], r["userId"])
        assert key not in out, f"key {key} is visible twice"
        out[key] = (r["email"], r["score"], r["updatedAt"])
    return out
