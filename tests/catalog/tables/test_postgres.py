"""The StructuredTable contract on a real PostgreSQL server, started on 127.0.0.1 for the
session when the machine has one (Debian's ``postgresql`` package) and psycopg is installed;
skipped, saying which is missing, otherwise — failed under ``CDKDS_REQUIRE_COMPONENTS=1``
(tests/components.py), as CI runs them."""

import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
import uuid

import pytest

from cdkds.catalog.tables import TableAdmin
from tests.catalog.tables.test_contract import StructuredTableContract
from tests.components import absent, missing

# Debian installs each major version's server under /usr/lib/postgresql/<major>/bin: the newest
BIN = max((os.path.dirname(p) for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")),
          key=lambda d: [int(n) for n in re.findall(r"\d+", d)], default=None)


def _as_server_user(args):
    """initdb and postgres refuse to run as root: run them as the package's postgres user."""
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


@pytest.fixture(scope="session")
def postgres():
    if absent(("psycopg",)):
        missing("psycopg is not installed (pip install '.[test]')")
    if BIN is None:
        missing("no PostgreSQL server on this machine (apt-get install postgresql: Debian's package provides one)")
    folder = tempfile.mkdtemp(prefix="cdkds-pg-")
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = f"{folder}/data"
    subprocess.run(_as_server_user([f"{BIN}/initdb", "-D", data, "-A", "trust", "-U", "cdkds"]), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(_as_server_user([f"{BIN}/pg_ctl", "-D", data, "-w", "-l", f"{data}/log", "-o",
                                    f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off", "start"]),
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield f"postgresql://cdkds@127.0.0.1:{port}"
    finally:
        subprocess.run(_as_server_user([f"{BIN}/pg_ctl", "-D", data, "-m", "immediate", "stop"]),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(folder, ignore_errors=True)


class TestPostgres(StructuredTableContract):
    checks_scanned_ranges = None  # SERIALIZABLE aborts what it cannot prove serial, conservatively
    @pytest.fixture
    def admin_factory(self, postgres):
        import psycopg

        def fresh():
            name = f"db_{uuid.uuid4().hex[:12]}"
            with psycopg.connect(f"{postgres}/postgres", autocommit=True) as db:
                db.execute(f"CREATE DATABASE {name}")
            return TableAdmin.open(f"{postgres}/{name}")
        return fresh

    @pytest.fixture
    def admin(self, admin_factory):
        return admin_factory()
