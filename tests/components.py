"""Tests that need a component a machine may lack — a PostgreSQL server, psycopg, DuckDB,
Polars, a regular (not editable) install of cdkds — skip without it, naming it; with the
environment variable ``CDKDS_REQUIRE_COMPONENTS=1`` they fail instead, so a run that must
test everything (CI sets it in ``.ci/run``) cannot pass green having skipped one.

A test names the modules it needs with ``@pytest.mark.needs("duckdb", ...)`` (checked before
it runs, in tests/conftest.py), or calls :func:`missing` when it finds something absent."""

from __future__ import annotations

import importlib
import importlib.util
import os
from types import ModuleType
from typing import NoReturn

import pytest

REQUIRE = "CDKDS_REQUIRE_COMPONENTS"


def required() -> bool:
    """Whether a missing component fails the test rather than skipping it."""
    return os.environ.get(REQUIRE, "") not in ("", "0")


def missing(what: str) -> NoReturn:
    """Skip the running test because ``what`` is missing — or fail it, under ``CDKDS_REQUIRE_COMPONENTS=1``."""
    if required():
        pytest.fail(f"{what}, and {REQUIRE}=1 requires every component", pytrace=False)
    pytest.skip(what)


def absent(modules: tuple[str, ...]) -> list[str]:
    """The modules of ``modules`` that cannot be imported here."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def imported(name: str) -> ModuleType | None:
    """Module ``name``, or None when it is not installed (its tests are marked ``needs``)."""
    return importlib.import_module(name) if importlib.util.find_spec(name) is not None else None
