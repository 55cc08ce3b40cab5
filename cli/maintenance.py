"""Commands that change or tidy a dataset: delete, compact, vacuum, expire-log, checkpoint,
rebuild-index, alter (schema changes) and rebuild (of a lost log)."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import re
import warnings
from typing import Any, Sequence

import click
from rich.console import Console

from cdkds.catalog import CdkdsError, Dataset, DatasetNotFoundError, DatasetRepository
from cdkds.catalog.maintenance.rebuild import IncompleteRebuildWarning
from cdkds.catalog.log.expiry import MINIMUM_LOG_AGE
from cdkds.catalog.maintenance.vacuum import MINIMUM_RETENTION
from cdkds.catalog.read.scan import read_plan
from cdkds.catalog.repository import split_dataset_url
from cdkds.catalog.schema_update import SchemaUpdate
from cdkds.catalog.write.writer import DATA_FOLDER
from cdkds.cli.app import (
    CliError, Duration, Size, cli, committed, common, emit, open_dataset, progress, storage_options, working,
)
from cdkds.cli.inspection import schema_tree


@cli.command()
@click.argument("url")
@click.option("--where", required=True, help="the rows to delete, e.g. \"ts < '2026-01-01'\"")
@common
def delete(url: str, where: str, storage: Sequence[str], as_json: bool) -> None:
    """Delete the rows matching a predicate, in one commit.

    \b
    Example:
      cdkds delete lake/events --where "ts < '2026-01-01'"
    """
    ds = open_dataset(url, storage)
    with working(f"counting the rows of {ds.name} matching {where}"):
        rows, files = matching_rows(ds, where)
    with working(f"deleting from {ds.name}"):
        revision = ds.delete(where)
    if revision is None:
        rows, files = 0, 0
    committed(as_json, ds, revision, f"deleted {_rows(rows)} in {_files(files)}", deleted_rows=rows, files=files)


def matching_rows(ds: Dataset, where: str) -> tuple[int, int]:
    """The live rows of ``ds`` matching ``where`` and the files holding them: what a delete with
    this predicate removes from this revision (a scan of the files it plans to touch, one column)."""
    plan = ds.plan(where, [ds.descriptor.arrow_schema.names[0]])
    rows, files = 0, 0
    for task in plan.tasks:
        with contextlib.closing(read_plan(ds.store, dataclasses.replace(plan, tasks=(task,)))) as scan:
            found = sum(batch.num_rows for batch in scan)
        rows, files = rows + found, files + (found > 0)
    return rows, files


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


@cli.command()
@click.argument("url")
@click.option("--where", help="compact only files that may hold matching rows")
@click.option("--target-file-size", type=Size(), help="bytes per rewritten file (default 128m)")
@common
def compact(url: str, where: str | None, target_file_size: int | None, storage: Sequence[str], as_json: bool) -> None:
    """Merge small files per partition and apply deletes, in one commit.

    \b
    Example:
      cdkds compact lake/events --target-file-size 256m
    """
    ds = open_dataset(url, storage)
    base = ds.snapshot
    options = {} if target_file_size is None else {"target_file_size": target_file_size}
    with working(f"compacting {ds.name}"):
        revision = ds.compact(where=where, **options)
    entry = ds.log.entry(revision, base) if revision is not None else None
    rewritten, written = (entry.removed_files, entry.added_files) if entry is not None else (0, 0)
    rows_read = entry.removed_rows if entry is not None else 0  # None: another writer committed in between
    rows_written = entry.added_rows if entry is not None else 0
    rows = "" if rows_read is None else f" ({_rows(rows_read)} into {rows_written})"
    committed(as_json, ds, revision, f"compacted {_files(rewritten)} into {written}{rows}", files_rewritten=rewritten,
              files_written=written, files_before=len(base.files), files_after=len(ds.snapshot.files), rows_rewritten=rows_read,
              rows_written=rows_written)


def _files(n: int) -> str:
    return f"{n} file" if n == 1 else f"{n} files"


@cli.command()
@click.argument("url")
@click.option("--retention", type=Duration(), default="7d", show_default=True,
              help="keep unreferenced files younger than this")
@click.option("--dry-run/--no-dry-run", default=True, show_default=True, help="only list what would be deleted")
@click.option("--force", is_flag=True, help="allow a retention under an hour (a running writer whose files it deletes fails)")
@common
def vacuum(url: str, retention: dt.timedelta, dry_run: bool, force: bool, storage: Sequence[str],
           as_json: bool) -> None:
    """Files no retained revision references: listed (default) or deleted.

    \b
    Example:
      cdkds vacuum lake/events --retention 7d --no-dry-run
    """
    if retention < MINIMUM_RETENTION and not force:
        raise CliError(f"a retention of {retention} is below the safe minimum of {MINIMUM_RETENTION}: files of "
                       f"writers that have not committed yet could be deleted; add --force if none are running")
    ds = open_dataset(url, storage)
    with working(f"listing the files of {ds.name}"):
        candidates = ds.vacuum(retention, dry_run=True, force=force)
    sizes = {}
    with progress() as bar:
        task = bar.add_task("sizing", total=len(candidates), detail="")
        for key in candidates:
            sizes[key] = ds.store.size(key)
            bar.advance(task)
    kept = candidates.kept
    if not dry_run:
        with working(f"deleting {len(candidates)} files"):
            done = ds.vacuum(retention, dry_run=False, force=force)
        deleted, kept = set(done), done.kept
        sizes = {key: sizes.get(key, 0) for key in deleted}  # a file may have become unreferenced meanwhile
    total = sum(v for v in sizes.values() if v)
    data = {"dataset": ds.name, "dry_run": dry_run, "files": sorted(sizes), "bytes": total, "kept": list(kept)}

    def render(out: Console) -> None:
        for key in sorted(sizes):
            out.print(key)
        for line in kept:
            out.print(line)
        out.print(f"{'would delete' if dry_run else 'deleted'} {len(sizes)} files, {total} bytes")

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
      cdkds expire-log lake/events --older-than 30d
    """
    if older_than < MINIMUM_LOG_AGE and not force:
        raise CliError(f"expiring commits younger than {MINIMUM_LOG_AGE} is below the safe minimum: a writer that "
                       f"read a revision being expired could still commit after it; add --force if none is running")
    ds = open_dataset(url, storage)
    with working(f"expiring the log of {ds.name}"):
        removed = ds.expire_log(older_than, force=force)
    emit(as_json, removed, lambda out: out.print("\n".join([*removed.kept, f"removed {len(removed)} log objects"])))


@cli.command()
@click.argument("url")
@common
def checkpoint(url: str, storage: Sequence[str], as_json: bool) -> None:
    """Write a checkpoint of the latest revision.

    \b
    Example:
      cdkds checkpoint lake/events
    """
    ds = open_dataset(url, storage)
    with working(f"writing a checkpoint of {ds.name}"):
        ds.checkpoint()
    emit(as_json, {"dataset": ds.name, "revision": ds.version},
         lambda out: out.print(f"checkpoint of revision {ds.version} written"))


@cli.command()
@click.argument("url")
@common
def upgrade(url: str, storage: Sequence[str], as_json: bool) -> None:
    """Raise a dataset's log to the newest version (checkpoints in parts); older cdkds
    versions then refuse it.

    \b
    Example:
      cdkds upgrade lake/events
    """
    ds = open_dataset(url, storage)
    before = ds.snapshot.protocol.reader_version
    with working(f"upgrading the log of {ds.name}"):
        revision = ds.upgrade_log()
    after = ds.snapshot.protocol.reader_version
    emit(as_json, {"dataset": ds.name, "revision": revision, "from": before, "to": after},
         lambda out: out.print(f"log of {ds.name} at version {after}" + (
             f" (was {before}), committed as revision {revision}" if after != before else ", as it was")))


@cli.command("rebuild-index")
@click.argument("url")
@common
def rebuild_index(url: str, storage: Sequence[str], as_json: bool) -> None:
    """Rebuild a keyed dataset's record index from its data files, in one commit.

    \b
    Example:
      cdkds rebuild-index lake/users
    """
    ds = open_dataset(url, storage)
    with working(f"rebuilding the record index of {ds.name}"):
        revision = ds.rebuild_index()
    committed(as_json, ds, revision, "rebuilt the record index")


_CHANGES = (
    ("rename", re.compile(r"rename\s+(?P<path>\S+)\s+to\s+(?P<name>\S+)")),
    ("drop", re.compile(r"drop\s+(?P<path>\S+)")),
    ("add", re.compile(r"add\s+(?P<path>\S+)\s+(?P<type>.+?)(?P<nullable_first>\s+nullable)?"
                       r"(?:\s+default\s+(?P<default>.+?))?(?P<nullable>\s+nullable)?")),
    ("widen", re.compile(r"widen\s+(?P<path>\S+)\s+(?:to\s+)?(?P<type>.+)")),
    ("move", re.compile(r"move\s+(?P<path>\S+)\s+(?:(?P<end>first|last)|(?P<side>after|before)\s+(?P<other>\S+))")),
)


def apply_change(update: SchemaUpdate, text: str) -> None:
    """One change in words (``rename a to b``, ``add score double default 0``...) applied to ``update``."""
    for kind, pattern in _CHANGES:
        m = pattern.fullmatch(text.strip())
        if m:
            break
    else:
        raise click.BadParameter(f"{text!r} is not a change; write one of: 'rename PATH to NAME', 'drop PATH', "
                                 f"'add PATH TYPE [default VALUE] [nullable]', 'widen PATH to TYPE', "
                                 f"'move PATH first|last|after OTHER|before OTHER'", param_hint="CHANGES")
    g = m.groupdict()
    if kind == "rename":
        update.rename(g["path"], g["name"])
    elif kind == "drop":
        update.drop(g["path"])
    elif kind == "add":
        extra = {} if g["default"] is None else {"default": _value(g["default"], g["type"])}
        update.add(g["path"], g["type"], nullable=True if g["nullable"] or g["nullable_first"] else None, **extra)
    elif kind == "widen":
        update.widen(g["path"], g["type"])
    elif g["end"]:
        update.move(g["path"], **{g["end"]: True})
    else:
        update.move(g["path"], **{g["side"]: g["other"]})


def _value(text: str, type_name: str) -> Any:
    """A default: for a string field the text (quotes around it removed), else JSON (numbers,
    true/false), or the text itself."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1] if type_name.strip().lower() == "string" or text[0] == "'" else text
    if type_name.strip().lower() == "string":
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


@cli.command()
@click.argument("url")
@click.argument("changes", nargs=-1, required=True)
@click.option("--dry-run", is_flag=True, help="print the new schema without committing it")
@common
def alter(url: str, changes: Sequence[str], dry_run: bool, storage: Sequence[str], as_json: bool) -> None:
    """Change a dataset's schema in one metadata-only commit (no data is rewritten).

    Each change is one argument, applied in order: 'rename PATH to NAME', 'drop PATH',
    'add PATH TYPE [default VALUE] [nullable]', 'widen PATH to TYPE',
    'move PATH first|last|after OTHER|before OTHER'. PATH is dotted for nested fields;
    TYPE is boolean, int, long, float, double, string, bytes, date, timestamp,
    decimal(p,s)... Nothing is committed if any change is refused.

    \b
    Example:
      cdkds alter lake/events "rename ts to event_time" "add score double default 0"
    """
    ds = open_dataset(url, storage)
    update = ds.alter()
    for text in changes:
        apply_change(update, text)
    if dry_run:
        schema = update.preview()
        emit(as_json, schema, lambda out: out.print(schema_tree(schema)))
        return
    committed(as_json, ds, update.commit(), f"altered the schema ({len(changes)} changes)")


@cli.command()
@click.argument("url")
@click.option("--force", is_flag=True, help="rebuild even though the log reads fine")
@common
def rebuild(url: str, force: bool, storage: Sequence[str], as_json: bool) -> None:
    """Rebuild a lost or damaged log from the data files' own metadata.

    The old log is kept aside as _log.broken-<time>/. What the files cannot tell (deletes,
    descriptor changes, deletion vectors, the order of concurrent writers) is listed; run
    rebuild-index afterwards on a keyed dataset. A log that reads fine is left alone unless
    --force is given.

    \b
    Example:
      cdkds rebuild lake/events
    """
    parent, name = split_dataset_url(url)
    repository = DatasetRepository(parent, storage_options(storage))
    if not force:
        try:
            healthy = repository.load(name)
        except CdkdsError as e:
            if isinstance(e, DatasetNotFoundError) and not repository.store.child(name).list(DATA_FOLDER):
                raise
        else:
            raise CliError(f"the log of dataset {name!r} reads fine (revision {healthy.version}); a rebuild would "
                           f"lose what the data files do not record (deletes, descriptor changes, deletion vectors); "
                           f"add --force to rebuild it anyway")
    with working(f"rebuilding the log of {name}"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", IncompleteRebuildWarning)
        ds = repository.rebuild(name)
    reports = [w.message.report for w in caught if isinstance(w.message, IncompleteRebuildWarning)]
    missing = [str(u) for r in reports for u in r.unrecoverable]
    files, rows = len(ds.snapshot.files), ds.snapshot.row_count
    data = {"dataset": name, "revision": ds.version, "files": files, "rows": rows, "complete": not missing,
            "unrecoverable": missing}

    def render(out: Console) -> None:
        out.print(f"rebuilt the log of {name} from {_files(files)} ({_rows(rows)}): revision {ds.version}")
        if missing:
            out.print("not recoverable from the data files:")
            for line in missing:
                out.print(f"- {line}")

    emit(as_json, data, render)
