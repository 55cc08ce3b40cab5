"""``cdkds doctor``: what a first run needs, checked one by one, each problem with what to do.

Checks the Python version and the versions of the packages cdkds runs on (against what cdkds
declares it needs), Java for Spark, the Python Spark will start for its workers and for
finding the ``cdkds`` data source (in a subprocess: can it import cdkds and find
``pyspark_cdkds``?), and, for a repository URL, that the store answers and that an object can
be created, read back and removed under it. Nothing here imports pyspark or touches a dataset.
"""

from __future__ import annotations

import configparser
import contextlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import click
from fsspec.implementations.local import LocalFileSystem
from rich.console import Console

from cdkds.catalog.storage import ObjectStore
from cdkds.cli.app import CliError, cli, common, emit, installed_version, storage_options

PACKAGES = ("pyspark", "pyarrow", "fastavro", "fsspec", "s3fs")
JAVA_MINIMUM = 17  # Spark 4 runs on Java 17 or 21
INSTALL = "pip install 'cdkds' into the Python you run (or, from a clone, pip install .)"

# What PySpark starts when PYSPARK_PYTHON is unset (pyspark/core/context.py); the JVM looks for
# Python data sources (pyspark_* modules) with PYSPARK_DRIVER_PYTHON, else PYSPARK_PYTHON, else
# the same default (Spark's PythonUtils.defaultPythonExec).
SPARK_DEFAULT_PYTHON = "python3"

# Run in the Python Spark will start: what cdkds needs from it, as JSON on one line.
PROBE = """
import importlib.util, json, sys
found = {"executable": sys.executable, "version": list(sys.version_info[:2]), "cdkds": None}
try:
    import cdkds.catalog
except Exception as e:
    found["cdkds"] = f"{type(e).__name__}: {e}"
found["pyspark_cdkds"] = importlib.util.find_spec("pyspark_cdkds") is not None
print(json.dumps(found))
"""


@dataclass(frozen=True)
class Check:
    """One check: what was looked at, whether it passed, what was found, and what to do if not."""

    check: str
    ok: bool
    detail: str
    fix: str | None = None


class ProblemsFound(CliError):
    """The checks went to standard output; one line on standard error, exit code 1."""


@cli.command()
@click.argument("url", required=False)
@common
def doctor(url: str | None, storage: Sequence[str], as_json: bool) -> None:
    """Check what a first run needs; exit code 1 if anything is missing.

    Checks Python and the packages cdkds runs on, Java for Spark, and whether
    the Python Spark starts for its workers (PYSPARK_PYTHON, else python3) can
    import cdkds. With a repository URL, also checks that the store answers
    with the storage options given and that an object can be written there
    (a probe object, removed again; no dataset is touched).

    \b
    Example:
      cdkds doctor file:///tmp/lake
      cdkds doctor s3://bucket/lake --storage-option client_kwargs.endpoint_url=http://127.0.0.1:9000
    """
    checks = [python_check(), *package_checks(), java_check(), *spark_python_checks()]
    if url is not None:
        checks += repository_checks(url, storage_options(storage))
    emit(as_json, [asdict(c) for c in checks], lambda out: render(out, checks))
    problems = sum(not c.ok for c in checks)
    if problems:
        raise ProblemsFound(f"doctor found {problems} problem{'s' if problems > 1 else ''}")


def render(out: Console, checks: list[Check]) -> None:
    for c in checks:
        out.print(f"{'ok' if c.ok else 'problem':8} {c.check}: {c.detail}")
        if not c.ok and c.fix:
            out.print(f"{'':8} fix: {c.fix}")
    if all(c.ok for c in checks):
        out.print(f"all {len(checks)} checks passed")


# ---------------------------------------------------------------- Python and packages

def python_check() -> Check:
    found = ".".join(map(str, sys.version_info[:3]))
    needed = declared()[0]
    ok = at_least(found, needed)
    return Check("python", ok, f"Python {found} at {sys.executable} (cdkds needs >={needed})",
                 None if ok else f"install Python {needed} or later and cdkds into it")


def package_checks() -> list[Check]:
    needs = declared()[1]
    checks = [Check("cdkds", True, f"cdkds {installed_version()} at {Path(__file__).resolve().parent.parent}")]
    for name in PACKAGES:
        needed = needs.get(name)
        wanted = f"{name}>={needed}" if needed else name
        try:
            found = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            checks.append(Check(name, False, f"{name} is not installed in {sys.executable}", f"pip install '{wanted}'"))
            continue
        ok = needed is None or at_least(found, needed)
        checks.append(Check(name, ok, f"{name} {found}" + (f" (cdkds needs >={needed})" if needed else ""),
                            None if ok else f"pip install --upgrade '{wanted}'"))
    return checks


def declared() -> tuple[str, dict[str, str]]:
    """The Python version cdkds declares it needs, and the lowest version of each dependency it
    names as ``name>=X``: from the installed package's metadata, else a source tree's setup.cfg."""
    try:
        python = importlib.metadata.metadata("cdkds")["Requires-Python"] or ""
        requirements = [r for r in importlib.metadata.requires("cdkds") or [] if "extra ==" not in r]
    except importlib.metadata.PackageNotFoundError:
        config = configparser.ConfigParser(inline_comment_prefixes=("#",))
        config.read(Path(__file__).resolve().parent.parent / "setup.cfg")
        python = config.get("options", "python_requires", fallback="")
        requirements = [line.strip() for line in config.get("options", "install_requires", fallback="").splitlines()
                        if line.strip() and not line.strip().startswith("#")]
    lowest = {}
    for requirement in requirements:
        match = re.match(r"\s*([A-Za-z0-9_.\-]+)(?:\[[^]]*\])?\s*([^;]*)", requirement)
        minimum = re.search(r">=\s*([0-9][^,\s]*)", match.group(2)) if match else None
        if minimum:
            lowest[match.group(1).lower()] = minimum.group(1)
    needed = re.search(r">=\s*([0-9][^,\s]*)", python)
    return (needed.group(1) if needed else "3.11"), lowest


def at_least(found: str, needed: str) -> bool:
    """Whether version ``found`` is ``needed`` or later (release numbers compared; ``4.1.0.dev1`` is 4.1.0)."""
    def release(version: str) -> list[int]:
        numbers = [int(n) for n in re.findall(r"\d+", re.match(r"[\d.]*", version).group(0))]
        return numbers + [0] * (4 - len(numbers))
    return release(found) >= release(needed)


# ---------------------------------------------------------------- Java

def java_check() -> Check:
    """Java as Spark's launcher finds it: ``$JAVA_HOME/bin/java``, else ``java`` on the PATH."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    how = f"JAVA_HOME={home}" if home else "java on the PATH"
    fix = (f"install Java {JAVA_MINIMUM} or later (Debian: apt-get install openjdk-{JAVA_MINIMUM}-jre-headless) "
           f"and put its java on the PATH or set JAVA_HOME to it")
    if not java or not os.access(java, os.X_OK):
        where = f"JAVA_HOME={home} has no bin/java" if home else "no java on the PATH and JAVA_HOME is not set"
        return Check("java", False, f"Spark needs Java: {where}", fix)
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Check("java", False, f"{java} ({how}) did not run: {e}", fix)
    version = re.search(r'version "([^"]+)"', done.stderr + done.stdout)
    if version is None:
        return Check("java", False, f"{java} ({how}) printed no version: {(done.stderr or done.stdout).strip()[:200]}",
                     fix)
    text = version.group(1)
    numbers = re.findall(r"\d+", text)
    major = int(numbers[1] if numbers[0] == "1" and len(numbers) > 1 else numbers[0])  # 1.8.0_292 is Java 8
    ok = major >= JAVA_MINIMUM
    return Check("java", ok, f"Java {text} at {java} ({how}; Spark needs {JAVA_MINIMUM} or later)",
                 None if ok else fix)


# ---------------------------------------------------------------- the Python Spark starts

def spark_python_checks() -> list[Check]:
    """The Python Spark starts for its workers and the one it looks for data sources with (one
    check when they are the same program)."""
    worker, worker_how = _configured("PYSPARK_PYTHON")
    lookup, lookup_how = _configured("PYSPARK_DRIVER_PYTHON", "PYSPARK_PYTHON")
    checks = [spark_python("spark worker python", worker, worker_how)]
    if (shutil.which(lookup) or lookup) != (shutil.which(worker) or worker):
        checks.append(spark_python("spark data-source lookup python", lookup, lookup_how))
    return checks


def _configured(*variables: str) -> tuple[str, str]:
    """The program the first set variable names, or Spark's default; and how it was chosen."""
    for name in variables:
        value = os.environ.get(name)
        if value:
            return value, f"{name}={value}"
    return SPARK_DEFAULT_PYTHON, f"{SPARK_DEFAULT_PYTHON}, Spark's default: {' and '.join(variables)} not set"


def spark_python(check: str, program: str, how: str) -> Check:
    """Whether ``program`` (a Python Spark starts) imports cdkds and finds ``pyspark_cdkds``."""
    fix = (f"activate the virtual environment cdkds is installed in before starting Spark, or "
           f"export PYSPARK_PYTHON={sys.executable} (a script that imports cdkds.connector before starting "
           f"Spark does that itself when PYSPARK_PYTHON is unset; on a cluster, install cdkds into the "
           f"executors' Python)")
    executable = shutil.which(program)
    if executable is None:
        return Check(check, False, f"{program} ({how}) is not a program on this machine", fix)
    try:
        # this environment and folder, as Spark's local workers get them (PYTHONPATH too: Spark adds its own to it)
        done = subprocess.run([executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return Check(check, False, f"{executable} ({how}) did not run as Python", fix)
    problems = []
    if found["cdkds"] is not None:
        problems.append(f"cannot import cdkds ({found['cdkds']})")
    elif not found["pyspark_cdkds"]:
        problems.append("has no module pyspark_cdkds, so spark.read.format(\"cdkds\") fails with "
                        "DATA_SOURCE_NOT_FOUND")
    if tuple(found["version"]) != sys.version_info[:2]:
        problems.append(f"is Python {'.'.join(map(str, found['version']))} but this Python is "
                        f"{'.'.join(map(str, sys.version_info[:2]))} (PySpark needs the same on the driver and workers)")
    name = f"{found['executable']} ({how})"
    if problems:
        return Check(check, False, f"{name} {' and '.join(problems)}", fix)
    return Check(check, True, f"{name} imports cdkds and finds pyspark_cdkds")


# ---------------------------------------------------------------- the repository

def repository_checks(url: str, options: dict) -> list[Check]:
    """Whether the store under ``url`` answers, and whether an object can be created (as a
    commit is: only if absent), read back and removed there."""
    access = ("check the URL, the endpoint (--storage-option client_kwargs.endpoint_url=...) and the "
              "credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or --storage-option key=... "
              "secret=...)")
    try:
        store = ObjectStore.open(url, options)
        exists = store.exists("")
        entries = len(store.list("")) if exists else 0
        bucket = None if exists else _missing_bucket(store)
    except Exception as e:  # noqa: BLE001 - whatever the store raised is the finding
        return [Check("repository reachable", False, f"{url}: {_one_line(e)}", access),
                Check("repository writable", False, f"{url}: not tried (the store did not answer)", access)]
    if bucket is not None:  # a folder is made by the first write; a bucket is not
        fix = f"create the bucket, or {access[0].lower()}{access[1:]}"
        return [Check("repository reachable", False, f"{url}: the bucket {bucket} does not exist", fix),
                Check("repository writable", False, f"{url}: not tried (no bucket)", fix)]
    reached = Check("repository reachable", True,
                    f"{store.url} answers: {entries} entr{'y' if entries == 1 else 'ies'} there" if exists else
                    f"{store.url} answers; nothing is there yet (the first dataset created there creates it)")
    return [reached, probe_writing(store, access)]


BUCKET_PROTOCOLS = {"s3", "s3a", "gs", "gcs", "abfs", "az"}


def _missing_bucket(store: ObjectStore) -> str | None:
    """The bucket a repository URL names, when the store has buckets and that one is not there."""
    protocols = store.fs.protocol if isinstance(store.fs.protocol, (tuple, list)) else (store.fs.protocol,)
    if not BUCKET_PROTOCOLS.intersection(protocols):
        return None
    bucket = store.root.strip("/").split("/")[0]
    return None if store.fs.exists(bucket) else bucket


def probe_writing(store: ObjectStore, fix: str) -> Check:
    key = f".cdkds-doctor-probe-{uuid.uuid4().hex}"
    new_folders = _missing_local_folders(store)
    data = b"written by cdkds doctor; safe to delete\n"
    try:
        try:
            store.put_if_absent(key, data)
            same = store.read(key) == data
        except Exception:
            with contextlib.suppress(Exception):  # a failed call may still have stored it (a lost reply)
                store.delete(key)
            raise
        store.delete(key)
        if not same:
            return Check("repository writable", False, f"{store.display(key)} read back other bytes", fix)
    except Exception as e:  # noqa: BLE001 - whatever the store raised is the finding
        local = isinstance(store.fs, LocalFileSystem)
        return Check("repository writable", False, f"{store.url}: {_one_line(e)}",
                     f"choose a folder this user can write, or give it write access to {store.root}" if local else
                     f"use credentials allowed to write and delete objects there; {fix}")
    finally:
        for folder in new_folders:  # leave the disk as it was
            try:
                store.fs.rmdir(folder)
            except OSError:
                pass
    return Check("repository writable", True, f"created, read back and removed {store.display(key)}")


def _missing_local_folders(store: ObjectStore) -> list[str]:
    """The folders writing under a local repository would create, deepest first."""
    if not isinstance(store.fs, LocalFileSystem):
        return []
    missing, folder = [], store.root
    while not os.path.lexists(folder) and folder != os.path.dirname(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    return missing


def _one_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")
