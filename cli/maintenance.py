"""Commands that change or tidy a dataset: delete, compact, vacuum, expire-log, checkpoint, rebuild-index."""

from __future__ import annotations

import datetime as dt
from typing import Sequence

import click
from rich.console import Console

from cdkds.catalog.maintenance.vacuum import MINIMUM_RETENTION
from cdkds.cli.app import CliError, Duration, Size, cli, committed, common, emit, open_dataset


@cli.command()
@click.argument("url")
@click.option("--where", required=True, help="the rows to delete, e.g. \"ts < '2026-01-01'\"")
@common
def delete(url: str, where: str, storage: Sequence[str], as_json: bool) -> None:
    """Delete the rows matching a predicate, in one commit.

    \b
    Example:
      cdkds delete file:///data/lake/events --where "ts < '2026-01-01'"
    """
    ds = open_dataset(url, storage)
    committed(as_json, ds, ds.delete(where), f"deleted rows matching {where}")


@cli.command()
@click.argument("url")
@click.option("--where", help="compact only files that may hold matching rows")
@click.option("--target-file-size", type=Size(), help="bytes per rewritten file (default 128m)")
@common
def compact(url: str, where: str | None, target_file_size: int | None, storage: Sequence[str], as_json: bool) -> None:
    """Merge small files per partition and apply deletes, in one commit.

    \b
    Example:
      cdkds compact file:///data/lake/events --target-file-size 256m
    """
    ds = open_dataset(url, storage)
    before = len(ds.files)
    options = {} if target_file_size is None else {"target_file_size": target_file_size}
    revision = ds.compact(where=where, **options)
    committed(as_json, ds, revision, f"compacted {before} files into {len(ds.files)}", files_before=before,
              files_after=len(ds.files))


@cli.command()
@click.argument("url")
@click.option("--retention", type=Duration(), default="7d", show_default=True,
              help="keep unreferenced files younger than this")
@click.option("--dry-run/--no-dry-run", default=True, show_default=True, help="only list what would be deleted")
@click.option("--force", is_flag=True, help="allow a retention under an hour (no writer may be running)")
@common
def vacuum(url: str, retention: dt.timedelta, dry_run: bool, force: bool, storage: Sequence[str],
           as_json: bool) -> None:
    """Files no retained revision references: listed (default) or deleted.

    \b
    Example:
      cdkds vacuum file:///data/lake/events --retention 7d --no-dry-run
    """
    if retention < MINIMUM_RETENTION and not force:
        raise CliError(f"a retention of {retention} is below the safe minimum of {MINIMUM_RETENTION}: files of "
                       f"writers that have not committed yet could be deleted; add --force if none are running")
    ds = open_dataset(url, storage)
    sizes = {}
    if dry_run:
        for key in ds.vacuum(retention, dry_run=True, force=force):
            sizes[key] = ds.store.fs.size(ds.store.path(key))
    else:
        sizes = {key: None for key in ds.vacuum(retention, dry_run=False, force=force)}
    total = sum(v for v in sizes.values() if v)
    data = {"dataset": ds.name, "dry_run": dry_run, "files": sorted(sizes), "bytes": total if dry_run else None}

    def render(out: Console) -> None:
        for key in sorted(sizes):
            out.print(key)
        verb = "would delete" if dry_run else "deleted"
        out.print(f"{verb} {len(sizes)} files" + (f", {total} bytes" if dry_run else ""))

    emit(as_json, data, render)


@cli.command("expire-log")
@click.argument("url")
@click.option("--older-than", type=Duration(), required=True, help="expire commits older than this, e.g. 30d")
@click.option("--force", is_flag=True, help="allow a cut-off under an hour ago (no writer may be running)")
@common
def expire_log(url: str, older_than: dt.timedelta, force: bool, storage: Sequence[str], as_json: bool) -> None:
    """Remove old commits and checkpoints from the start of the log.

    \b
    Example:
      cdkds expire-log file:///data/lake/events --older-than 30d
    """
    removed = open_dataset(url, storage).expire_log(older_than, force=force)
    emit(as_json, removed, lambda out: out.print(f"removed {len(removed)} log objects"))


@cli.command()
@click.argument("url")
@common
def checkpoint(url: str, storage: Sequence[str], as_json: bool) -> None:
    """Write a checkpoint of the latest revision.

    \b
    Example:
      cdkds checkpoint file:///data/lake/events
    """
    ds = open_dataset(url, storage)
    ds.checkpoint()
    emit(as_json, {"dataset": ds.name, "revision": ds.version},
         lambda out: out.print(f"checkpoint of revision {ds.version} written"))


@cli.command("rebuild-index")
@click.argument("url")
@common
def rebuild_index(url: str, storage: Sequence[str], as_json: bool) -> None:
    """Rebuild a keyed dataset's record index from its data files, in one commit.

    \b
    Example:
      cdkds rebuild-index file:///data/lake/users
    """
    ds = open_dataset(url, storage)
    committed(as_json, ds, ds.rebuild_index(), "rebuilt the record index")
