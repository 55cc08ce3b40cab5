"""The ``cdkds`` command line: the entry point and exit codes (commands live in their modules)."""

from __future__ import annotations

import sys
from typing import Sequence

import click

from cdkds.catalog import CdkdsError
from cdkds.cli import branches, check, conversion, doctor, inspection, loading, maintenance, mirror, services, tags
from cdkds.cli.app import CliError, cli

# importing a module adds its commands to the group
COMMANDS = (branches, check, conversion, doctor, inspection, loading, maintenance, mirror, services, tags)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = next((i for i, a in enumerate(args) if not a.startswith("-")), len(args))
    debug = "--debug" in args[:command]  # the group's option, before the command (a value may be "--debug")
    try:
        cli.main(args=args, prog_name="cdkds", standalone_mode=False)
        return 0
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 1
    except click.ClickException as e:  # a bad invocation (never a traceback), or an error of ours
        if debug and isinstance(e, CliError):
            raise
        if isinstance(e, click.UsageError):  # one line, as every error: what was wrong and where help is
            command = e.ctx.command_path if e.ctx is not None else "cdkds"
            click.echo(f"error: {e.format_message()} (see '{command} --help')", err=True)
        else:
            e.show()
        return e.exit_code
    except CdkdsError as e:
        if debug:
            raise
        click.echo(f"error: {e}", err=True)
        return 1
    except Exception as e:  # noqa: BLE001 - the store's own errors (fsspec, botocore...) as one line
        if debug:
            raise
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        click.echo(f"error: {type(e).__name__}: {text}", err=True)
        return 1


def entry_point() -> None:
    """The console script: exits with :func:`main`'s code, through the interpreter's normal teardown."""
    sys.exit(main())
