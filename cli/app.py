"""What every ``cdkds`` command shares: the command group, dataset URLs and storage options,
output (tables, JSON, CSV), option types (durations, sizes) and progress bars.

Built on click (commands, options, ``--help``) and rich (tables, trees and progress bars on a
terminal). Every command takes ``--storage-option k=v`` (fsspec options; S3 credentials also
come from the usual environment) and ``--json`` (machine-readable output). Errors are one line
naming the dataset and what was wrong, with exit code 1 (2 for a bad invocation) and no
traceback unless ``--debug`` is given.
"""

from __future__ import annotations

import configparser
import contextlib
import datetime as dt
import importlib.metadata
import json
import math
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import click
import pyarrow as pa
from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                           TimeElapsedColumn)
from rich.table import Table

from cdkds.catalog import Dataset, DatasetRepository
from cdkds.catalog.quantities import parse_duration, parse_size
from cdkds.catalog.repository import split_dataset_url
from cdkds.formats.outputs import csv_text, json_rows, text_cells


class CliError(click.ClickException):
    """One line for the user; exit code 1."""

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def storage_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``k=v`` pairs as fsspec options; a value that is JSON (numbers, booleans, objects) is decoded,
    and ``a.b=v`` nests (``client_kwargs.endpoint_url=http://...``)."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected k=v, got {pair!r}", param_hint="--storage-option")
        try:
            value: Any = json.loads(text)
        except json.JSONDecodeError:
            value = text
        target = options
        *parents, leaf = key.split(".")
        for part in parents:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise click.BadParameter(f"{key!r} nests under a value", param_hint="--storage-option")
        target[leaf] = value
    return options


def common(command: Callable) -> Callable:
    """The options every command takes."""
    command = click.option("--storage-option", "storage", multiple=True, metavar="K=V",
                           help="an fsspec storage option (repeatable), e.g. client_kwargs.endpoint_url=http://...")(command)
    return click.option("--json", "as_json", is_flag=True, help="print JSON for scripts")(command)


def open_repository(url: str, storage: Sequence[str]) -> DatasetRepository:
    """The repository at ``url``; a :class:`CliError` naming it when nothing is there (a typo would
    otherwise look like an empty repository)."""
    repository = DatasetRepository(url, storage_options(storage))
    if not repository.store.exists(""):
        raise CliError(f"repository {repository.url} does not exist")
    if repository.store.fs.isfile(repository.store.root):
        raise CliError(f"repository {repository.url} is a file, not a folder")
    return repository


def open_dataset(url: str, storage: Sequence[str], version: int | None = None, timestamp: str | None = None,
                 tag: str | None = None) -> Dataset:
    parent, name = split_dataset_url(url)
    return DatasetRepository(parent, storage_options(storage)).load(name, version=version, timestamp=timestamp, tag=tag)


def emit(as_json: bool, data: Any, render: Callable[[Console], None]) -> None:
    if as_json:
        click.echo(to_json(data))
    else:
        render(terminal())


def terminal() -> Console:
    """Where tables and trees go: standard output, values printed as they are (no markup)."""
    wide = None if sys.stdout.isatty() else 200  # piped: one row per line rather than 80-column wrapping
    return Console(highlight=False, markup=False, soft_wrap=True, width=wide)


def to_json(data: Any) -> str:
    """Strict JSON (what ``--json`` prints): dates and times as ISO text, bytes as hex, and the
    floats JSON has no number for as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``."""
    return json.dumps(_finite(data), indent=2, default=_json_default, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def installed_version() -> str:
    """The version of the installed cdkds package, or setup.cfg's in a source tree that is not installed."""
    try:
        return importlib.metadata.version("cdkds")
    except importlib.metadata.PackageNotFoundError:
        config = configparser.ConfigParser()
        config.read(Path(__file__).resolve().parent.parent / "setup.cfg")
        return config.get("metadata", "version", fallback="unknown")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=installed_version(), prog_name="cdkds", message="%(prog)s %(version)s")
@click.option("--debug", is_flag=True, help="show the traceback of an error")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Transactional, partitioned datasets on object stores.

    \b
    Example:
      cdkds describe lake/events
    """
    ctx.obj = {"debug": debug}


class Duration(click.ParamType):
    """A duration such as ``7d``, ``12h``, ``90m`` or ``3600s`` (a bare number is seconds)."""

    name = "duration"

    def convert(self, value: Any, param: Any, ctx: Any) -> dt.timedelta:
        if isinstance(value, dt.timedelta):
            return value
        try:
            duration = parse_duration(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)
        if duration < dt.timedelta(0):
            self.fail(f"{value!r} is negative", param, ctx)
        return duration


class Size(click.ParamType):
    """A size in bytes, or with a unit (``128m``, ``1g``)."""

    name = "size"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int):
            return value
        try:
            size = parse_size(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)
        if size < 1:
            self.fail(f"{value!r} is not positive", param, ctx)
        return size


def committed(as_json: bool, dataset: Dataset, revision: int | None, what: str, **extra: Any) -> None:
    """Report a maintenance commit (or that nothing needed committing)."""
    data = {"dataset": dataset.name, "revision": revision, **extra}
    text = f"{what}: revision {revision}" if revision is not None else f"{what}: nothing to do"
    emit(as_json, data, lambda out: out.print(text))


def progress(transient: bool = True) -> Progress:
    """A progress display on standard error; it shows nothing when standard error is not a terminal,
    so piped output and scripts see only the result."""
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[detail]}"), TimeElapsedColumn(),
                    console=Console(stderr=True), transient=transient, disable=not sys.stderr.isatty())


@contextlib.contextmanager
def working(description: str) -> Iterator[None]:
    """A pulsing bar with the time elapsed while one long call runs (off when not on a terminal)."""
    with progress() as bar:
        bar.add_task(description, total=None, detail="")
        yield


def print_table(table: pa.Table, fmt: str, footer: str | None = None) -> None:
    """Rows as a table, JSON or CSV on standard output, each value as export writes it (CSV as
    an exported CSV file, JSON as exported JSON lines, table cells as the CSV's)."""
    if fmt == "json":
        click.echo(to_json(json_rows(table)))
    elif fmt == "csv":
        click.echo(csv_text(table), nl=False)
    else:
        out = terminal()
        grid = Table(*table.schema.names)
        for row in text_cells(table):
            grid.add_row(*("" if v is None else v for v in row))
        out.print(grid)
        if footer:
            out.print(footer)
