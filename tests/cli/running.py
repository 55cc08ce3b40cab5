"""Running the ``cdkds`` command in the CLI tests, two ways.

``run`` calls the command's entry point (``cdkds.cli.main.main``) in this process, with standard
input, output and error and the environment swapped for the call (click's ``CliRunner.isolation``):
the same code, output and exit codes as the console script, without a Python start-up and the
imports (about 1.5 s) per call. Standard output and error are not terminals, as when piped.

``run_script`` and ``on_a_terminal`` spawn the installed console script, for the few tests that
check the script itself: its exit codes and one-line errors, ``--help``, a traceback under
``--debug``, progress bars on a terminal, S3 credentials from the environment.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import traceback
from pathlib import Path

import click.formatting
from click.testing import CliRunner

from cdkds.cli.main import main

CDKDS = str(Path(sys.executable).with_name("cdkds"))


def run(*args: str, code: int = 0, env: dict | None = None) -> subprocess.CompletedProcess:
    """``cdkds ARGS`` in this process; its exit code must be ``code``."""
    with CliRunner().isolation(env=env) as (out, err, _):
        # help as the piped script formats it: click takes the terminal's width (80 when there is
        # none) up to 80, less 2; the isolation sets 80 (and puts the old value back on leaving)
        click.formatting.FORCED_WIDTH = 78
        try:
            returncode = main(list(args))
        except SystemExit as e:  # as the interpreter would end
            returncode = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        except Exception:  # noqa: BLE001 - uncaught (--debug re-raises): the interpreter prints it, exit 1
            traceback.print_exc()
            returncode = 1
        sys.stdout.flush()
        sys.stderr.flush()
        stdout, stderr = out.getvalue().decode(), err.getvalue().decode(errors="replace")
    done = subprocess.CompletedProcess(["cdkds", *args], returncode, stdout, stderr)
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
    return done


def run_script(*args: str, code: int = 0, env: dict | None = None) -> subprocess.CompletedProcess:
    """The installed console script ``cdkds ARGS`` in a subprocess; its exit code must be ``code``."""
    done = subprocess.run([CDKDS, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
    return done


def on_a_terminal(*args: str) -> tuple[bytes, bytes]:
    """Run the script with a terminal (a pty) as standard error: its standard output and what the
    terminal showed."""
    master, slave = pty.openpty()
    try:
        done = subprocess.run([CDKDS, *args], stdout=subprocess.PIPE, stderr=slave, timeout=120)
    finally:
        os.close(slave)
    shown = b""
    while select.select([master], [], [], 1)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    assert done.returncode == 0, shown
    return done.stdout, shown
