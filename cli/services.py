"""The table services from the command line: ``cdkds maintain`` runs a pass of them over a
dataset, once or every interval until interrupted (see :mod:`cdkds.catalog.services`)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import signal
import time
from typing import Any, Sequence

import click

from cdkds.catalog import CdkdsError, Dataset
from cdkds.catalog.services.runner import ServiceReport
from cdkds.cli.app import Duration, Size, cli, common, emit, open_dataset, to_json, working


@cli.command()
@click.argument("url")
@click.option("--budget", type=Size(), help="bytes of files one pass may rewrite (default: all the work there is)")
@click.option("--watch", is_flag=True, help="run a pass every --interval until interrupted (Ctrl-C or SIGTERM)")
@click.option("--interval", type=Duration(), help="the time between passes with --watch (default 30s)")
@common
def maintain(url: str, budget: int | None, watch: bool, interval: dt.timedelta | None, storage: Sequence[str],
             as_json: bool) -> None:
    """Run the table services: rewrite files with many deleted rows, bin-pack small files,
    merge record-index deltas, and expire the log and vacuum where the dataset's properties
    ask for it. Each rewrite is its own 'compact' commit.

    \b
    Example:
      cdkds maintain lake/events --budget 1g
      cdkds maintain lake/events --watch --interval 5m
    """
    if interval is not None and not watch:
        raise click.UsageError("--interval is for --watch")
    if interval is not None and interval <= dt.timedelta(0):
        raise click.BadParameter(f"{interval} is not a positive time", param_hint="--interval")
    ds = open_dataset(url, storage)
    if not watch:
        with working(f"maintaining {ds.name}"):
            report = ds.maintain(budget)
        data = _data(ds, report)
        emit(as_json, data, lambda out: out.print(_with_rows(report.summary(), data)))
        return
    _watch(ds, budget, (interval or dt.timedelta(seconds=30)).total_seconds(), as_json)


def _watch(ds: Dataset, budget: int | None, seconds: float, as_json: bool) -> None:
    """A pass every ``seconds`` until interrupted, a line each (JSON lines with ``--json``); a
    pass that fails says so on standard error and the next one tries again."""
    passes = 0
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        while True:
            try:
                report = ds.maintain(budget)
            except (CdkdsError, OSError) as e:
                click.echo(f"error: {e}", err=True)
            else:
                passes += 1
                if as_json:
                    click.echo(json.dumps(json.loads(to_json(_data(ds, report)))))
                else:
                    click.echo(f"{_now()} {_with_rows(report.summary(), _data(ds, report))}")
            time.sleep(seconds)
    except KeyboardInterrupt:
        # a pass interrupted after its commit landed is not counted, but its revision is the dataset's
        try:
            revision = ds.refresh().version
        except (CdkdsError, OSError):
            revision = ds.version
        text = f"stopped after {passes} pass{'es' if passes != 1 else ''}; {ds.name} is at revision {revision}"
        click.echo(json.dumps({"dataset": ds.name, "stopped": True, "passes": passes, "revision": revision})
                   if as_json else text)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _data(ds: Dataset, report: ServiceReport) -> dict:
    read, written = _rows_rewritten(ds, report)
    return {"dataset": ds.name, "revision": ds.version, **dataclasses.asdict(report), "rows_rewritten": read,
            "rows_written": written, "summary": report.summary()}


def _rows_rewritten(ds: Dataset, report: ServiceReport) -> tuple[int | None, int | None]:
    """The rows the pass's commits removed and wrote, as ``history`` counts them (live rows of the
    files rewritten); ``None`` when a commit is no longer in the log."""
    read = written = 0
    for revision in report.revisions:
        entry = ds.log.entry(revision, ds.log.snapshot(version=revision - 1))
        if entry is None or entry.removed_rows is None:
            return None, None
        read, written = read + entry.removed_rows, written + entry.added_rows
    return read, written


def _with_rows(summary: str, data: dict) -> str:
    """The pass's summary with the rows it rewrote after its files ("... at revision 6 (6 rows into 5) (0.03 s)")."""
    if not data["revisions"] or data["rows_rewritten"] is None:
        return summary
    done, _, seconds = summary.rpartition(" (")
    return f"{done} ({data['rows_rewritten']:,} rows into {data['rows_written']:,}) ({seconds}"
