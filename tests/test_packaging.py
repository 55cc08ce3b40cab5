"""Every package of the source tree is in setup.cfg's list, so an installed cdkds (not only an
editable one) has all of it."""

from __future__ import annotations

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_installed():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    listed = {line.strip() for line in config["options"]["packages"].splitlines() if line.strip()}
    found = {"cdkds." + ".".join(init.parent.relative_to(ROOT).parts)
             for top in ("catalog", "cli", "connector", "formats") for init in (ROOT / top).rglob("__init__.py")}
    assert found - listed == set()
