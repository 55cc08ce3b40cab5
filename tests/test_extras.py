"""The optional extras of setup.cfg: ``cdkds[duckdb]``, ``cdkds[polars]`` and ``cdkds[postgres]``
each install what their feature needs, ``cdkds[all]`` is every feature extra together, and
``cdkds[test]`` (what the README's test command installs) holds all of them, so no test skips
for want of a package."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

SETUP_CFG = Path(__file__).resolve().parent.parent / "setup.cfg"
FEATURES = ("postgres", "duckdb", "polars")


def extras() -> dict[str, set[str]]:
    """Each extra's requirements, as written (comments and blank lines dropped)."""
    config = configparser.ConfigParser(inline_comment_prefixes=("#",))
    config.read(SETUP_CFG)
    return {name: {line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")}
            for name, text in config["options.extras_require"].items()}


def project(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()


def test_every_feature_has_its_extra_and_all_and_test_hold_them():
    found = extras()
    assert {project(r) for r in found["duckdb"]} == {"duckdb"}
    assert {project(r) for r in found["polars"]} == {"polars"}
    assert {project(r) for r in found["postgres"]} == {"psycopg"}
    features = set().union(*(found[name] for name in FEATURES))
    assert found["all"] == features
    assert features <= found["test"]
    assert {"pytest", "hypothesis", "moto"} <= {project(r) for r in found["test"]}
    assert {"bench", "test"} <= set(found)  # the older extras stay
