"""``cdkds check``: verify a dataset's log, checkpoints and referenced files end to end."""

from __future__ import annotations

from typing import Sequence

import click
from rich.console import Console
from rich.table import Table

from cdkds.catalog import DatasetRepository
from cdkds.catalog.maintenance.check import CheckReport, check_dataset
from cdkds.catalog.repository import split_dataset_url
from cdkds.cli.app import CliError, cli, common, emit, progress, storage_options


class ProblemsFound(CliError):
    """The report went to standard output; one line on standard error, exit code 1."""


@cli.command()
@click.argument("url")
@click.option("--read-data", is_flag=True,
              help="also read every live data file whole and compare its rows and column statistics with the log")
@common
def check(url: str, read_data: bool, storage: Sequence[str], as_json: bool) -> None:
    """Verify a dataset end to end; exit code 1 if anything is wrong.

    Checks that every retained commit is there, parses, matches its checksum and follows
    the one before; that each checkpoint is readable and holds the state the commits
    replay to; that every data, record-index and deletion-vector file a retained revision
    references exists with the recorded size; and that the latest revision's index files
    and deletion vectors read back. Each problem is listed with what it costs. Nothing is
    written. The log records no SHA-256 of data files: --read-data reads them whole.

    \b
    Example:
      cdkds check lake/events --read-data
    """
    parent, name = split_dataset_url(url)
    store = DatasetRepository(parent, storage_options(storage)).store.child(name)
    with progress() as bar:
        task = bar.add_task(f"checking {name}", total=None, detail="")

        def advance(phase: str, done: int, total: int) -> None:
            bar.update(task, description=phase, completed=done, total=total or None)

        report = check_dataset(store, name, read_data=read_data, progress=advance)
    emit(as_json, report.to_json(), lambda out: render(out, report))
    if not report.ok:
        count = len(report.problems)
        raise ProblemsFound(f"check found {count} problem{'s' if count > 1 else ''} in dataset {name}")


def render(out: Console, report: CheckReport) -> None:
    if report.problems:
        grid = Table()
        grid.add_column("kind", no_wrap=True)
        grid.add_column("object", overflow="fold", min_width=min(100, max(len(p.object) for p in report.problems)))
        grid.add_column("problem", overflow="fold")
        grid.add_column("cost", overflow="fold")
        for p in report.problems:
            grid.add_row(p.kind, p.object, p.message, p.cost)
        out.print(grid)
    for note in report.notes:
        out.print(f"note: {note}")
    out.print(summary(report))


def summary(report: CheckReport) -> str:
    """``checked revisions 0 to 12 of events: 12 commits, 2 checkpoints, 340 data files (1.2 GB): 0 problems``."""
    span = ("no revision" if report.latest_revision is None else
            f"revisions {report.first_revision} to {report.latest_revision}")
    parts = [_count(report.commits, "commit"), _count(report.checkpoints, "checkpoint"),
             f"{_count(report.data_files, 'data file')} ({human_bytes(report.data_bytes)})"]
    if report.index_files:
        parts.append(_count(report.index_files, "index file"))
    if report.deletion_vector_files:
        parts.append(_count(report.deletion_vector_files, "deletion-vector file"))
    read = ", contents read" if report.contents_read else ""
    return f"checked {span} of {report.dataset}: {', '.join(parts)}{read}: {_count(len(report.problems), 'problem')}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def human_bytes(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"
