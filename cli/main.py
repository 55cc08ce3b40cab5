"""The ``cdkds`` command: look at repositories and datasets from a terminal.

Built on click (commands, options, ``--help``) and rich (tables and trees on a terminal).
Every command takes ``--storage-option k=v`` (fsspec options; S3 credentials also come
from the usual environment) and ``--json`` (machine-readable output). Errors are one line
naming the dataset and what was wrong, with exit code 1 (2 for a bad invocation) and no
traceback unless ``--debug`` is given.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import io
import json
import os
import sys
from typing import Any, Callable, Sequence

import click
import pyarrow as pa
from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from cdkds.catalog import CdkdsError, Dataset, DatasetRepository
from cdkds.catalog.repository import split_dataset_url

SMALL_FILE_BYTES = 16 * 1024 * 1024  # a data file under this size counts as small (compaction would merge it)


class CliError(click.ClickException):
    """One line for the user; exit code 1."""


def _storage_options(pairs: Sequence[str]) -> dict[str, Any]:
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


def open_dataset(url: str, storage: Sequence[str], version: int | None = None, timestamp: str | None = None) -> Dataset:
    parent, name = split_dataset_url(url)
    return DatasetRepository(parent, _storage_options(storage)).load(name, version=version, timestamp=timestamp)


def emit(as_json: bool, data: Any, render: Callable[[Console], None]) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=2, default=_json_default))
    else:
        render(terminal())


def terminal() -> Console:
    """Where tables and trees go: standard output, values printed as they are (no markup)."""
    wide = None if sys.stdout.isatty() else 200  # piped: one row per line rather than 80-column wrapping
    return Console(highlight=False, markup=False, soft_wrap=True, width=wide)


def _json_default(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


# ---------------------------------------------------------------- commands

@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="show the traceback of an error")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Transactional, partitioned datasets on object stores.

    \b
    Example:
      cdkds describe file:///data/lake/events
    """
    ctx.obj = {"debug": debug}


@cli.command("list")
@click.argument("repository")
@common
def list_(repository: str, storage: Sequence[str], as_json: bool) -> None:
    """The datasets of a repository.

    \b
    Example:
      cdkds list file:///data/lake
    """
    names = DatasetRepository(repository, _storage_options(storage)).list()
    emit(as_json, names, lambda out: [out.print(n) for n in names])


@cli.command()
@click.argument("url")
@common
def describe(url: str, storage: Sequence[str], as_json: bool) -> None:
    """A dataset's descriptor, schema, partitioning, revision and files.

    \b
    Example:
      cdkds describe file:///data/lake/events
    """
    ds = open_dataset(url, storage)
    d, s = ds.descriptor, ds.snapshot
    files = list(s.files.values())
    info = {
        "dataset": ds.name, "url": ds.url, "revision": ds.version,
        "committed": dt.datetime.fromtimestamp(s.timestamp / 1000, dt.timezone.utc).isoformat(),
        "format": d.format, "compression": d.compression,
        "partition_strategy": d.partition_strategy.to_text() if d.partition_strategy else None,
        "record_key": list(d.record_key) or None, "ordering_field": d.ordering_field,
        "properties": dict(d.properties),
        "files": len(files), "rows": s.row_count, "bytes": sum(f.size for f in files),
        "small_files": sum(1 for f in files if f.size < SMALL_FILE_BYTES),
        "tombstones": len(s.tombstones),
        "deletion_vectors": sum(len(f.deletes) for f in files),
        "deleted_rows": sum(f.deleted_rows for f in files),
        "schema": d.schema,
    }

    def render(out: Console) -> None:
        table = Table(show_header=False, box=None)
        for key, value in info.items():
            if key != "schema":
                table.add_row(key.replace("_", " "), "-" if value in (None, {}, []) else str(value))
        out.print(table)
        out.print(schema_tree(d.schema))

    emit(as_json, info, render)


def schema_tree(schema: dict) -> Tree:
    """An Avro record schema as a tree of fields and types."""
    tree = Tree(str(schema.get("name", "record")))

    def add(node: Tree, avro: Any, label: str) -> None:
        nullable = isinstance(avro, list) and "null" in avro
        inner = [t for t in avro if t != "null"] if isinstance(avro, list) else [avro]
        t = inner[0] if len(inner) == 1 else inner
        suffix = " (nullable)" if nullable else ""
        if isinstance(t, dict) and t.get("type") == "record":
            branch = node.add(f"{label}: record{suffix}")
            for f in t["fields"]:
                add(branch, f["type"], f["name"])
        elif isinstance(t, dict) and t.get("type") == "array":
            add(node.add(f"{label}: array{suffix}"), t["items"], "element")
        elif isinstance(t, dict) and t.get("type") == "map":
            add(node.add(f"{label}: map{suffix}"), t["values"], "value")
        elif isinstance(t, dict):
            node.add(f"{label}: {t.get('logicalType', t.get('type'))}{suffix}")
        else:
            node.add(f"{label}: {t}{suffix}")

    for f in schema["fields"]:
        add(tree, f["type"], f["name"])
    return tree


@cli.command()
@click.argument("url")
@click.option("--avro", "kind", flag_value="avro", default=True, help="the Avro schema (default)")
@click.option("--arrow", "kind", flag_value="arrow", help="the Arrow schema")
@click.option("--spark", "kind", flag_value="spark", help="Spark's StructType JSON")
@common
def schema(url: str, kind: str, storage: Sequence[str], as_json: bool) -> None:
    """A dataset's schema, as Avro (default), Arrow or Spark sees it.

    \b
    Example:
      cdkds schema file:///data/lake/events --arrow
    """
    d = open_dataset(url, storage).descriptor
    if kind == "arrow":
        text = str(d.arrow_schema)
        emit(as_json, [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in d.arrow_schema],
             lambda out: out.print(text))
        return
    data = d.schema if kind == "avro" else d.spark_schema_json()
    click.echo(json.dumps(data, indent=2))


@cli.command()
@click.argument("url")
@click.option("--limit", type=click.IntRange(min=1), help="only the newest N commits")
@common
def history(url: str, limit: int | None, storage: Sequence[str], as_json: bool) -> None:
    """The commits of a dataset, oldest first.

    \b
    Example:
      cdkds history file:///data/lake/events --limit 10
    """
    entries = open_dataset(url, storage).history()
    if limit is not None:
        entries = entries[-limit:]
    rows = [{"revision": e.revision, "time": e.time.isoformat(), "operation": e.operation,
             "added_files": e.added_files, "removed_files": e.removed_files, "added_rows": e.added_rows,
             "tombstones": e.tombstones} for e in entries]

    def render(out: Console) -> None:
        table = Table("revision", "time", "operation", "+files", "-files", "+rows", "tombstones")
        for r in rows:
            table.add_row(str(r["revision"]), r["time"][:19].replace("T", " "), r["operation"], str(r["added_files"]),
                          str(r["removed_files"]), str(r["added_rows"]), str(r["tombstones"]))
        out.print(table)

    emit(as_json, rows, render)


@cli.command()
@click.argument("url")
@click.option("--where", help="a predicate, e.g. \"userId = 1234 and ts >= '2026-03-01'\"")
@click.option("--columns", help="comma-separated columns")
@click.option("--limit", type=click.IntRange(min=0), default=20, show_default=True, help="rows to show")
@click.option("--version", type=click.IntRange(min=0), help="read this revision")
@click.option("--timestamp", help="read the last revision at or before this time (ISO text or epoch ms)")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@common
def show(url: str, where: str | None, columns: str | None, limit: int, version: int | None, timestamp: str | None,
         fmt: str, storage: Sequence[str], as_json: bool) -> None:
    """Rows of a dataset (pruned by --where), at the latest or an earlier revision.

    \b
    Example:
      cdkds show file:///data/lake/events --where "userId = 1234" --limit 5
    """
    if version is not None and timestamp is not None:
        raise click.UsageError("give --version or --timestamp, not both")
    ds = open_dataset(url, storage, version, int(timestamp) if timestamp and timestamp.isdigit() else timestamp)
    from cdkds.catalog.scan import read_plan

    batches, taken = [], 0
    plan = ds.plan(where, columns)
    with contextlib.closing(read_plan(ds.store, plan)) as scan:
        for batch in scan:
            if taken >= limit:
                break
            batches.append(batch.slice(0, limit - taken))
            taken += batches[-1].num_rows
    table = pa.Table.from_batches(batches, schema=plan.output_schema)
    print_table(table, "json" if as_json else fmt,
                f"{table.num_rows} rows shown (revision {ds.version}; {len(plan.files)} of {plan.total_files} files read)")


# ---------------------------------------------------------------- maintenance

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class Duration(click.ParamType):
    """A duration such as ``7d``, ``12h``, ``90m`` or ``3600s`` (a bare number is seconds)."""

    name = "duration"

    def convert(self, value: Any, param: Any, ctx: Any) -> dt.timedelta:
        if isinstance(value, dt.timedelta):
            return value
        text = str(value).strip().lower()
        unit = text[-1] if text and text[-1] in _UNITS else "s"
        number = text[:-1] if text and text[-1] in _UNITS else text
        try:
            amount = float(number)
        except ValueError:
            self.fail(f"{value!r} is not a duration (e.g. 7d, 12h, 90m, 3600s)", param, ctx)
        if amount < 0:
            self.fail(f"{value!r} is negative", param, ctx)
        return dt.timedelta(seconds=amount * _UNITS[unit])


class Size(click.ParamType):
    """A size in bytes, or with a unit (``128m``, ``1g``)."""

    name = "size"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip().lower().removesuffix("b")
        scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:], 1)
        try:
            size = int(float(text[:-1] if scale > 1 else text) * scale)
        except ValueError:
            self.fail(f"{value!r} is not a size (e.g. 134217728, 128m, 1g)", param, ctx)
        if size < 1:
            self.fail(f"{value!r} is not positive", param, ctx)
        return size


def committed(as_json: bool, dataset: Dataset, revision: int | None, what: str, **extra: Any) -> None:
    """Report a maintenance commit (or that nothing needed committing)."""
    data = {"dataset": dataset.name, "revision": revision, **extra}
    text = f"{what}: revision {revision}" if revision is not None else f"{what}: nothing to do"
    emit(as_json, data, lambda out: out.print(text))


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
    from cdkds.catalog.maintenance.vacuum import MINIMUM_RETENTION

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


@cli.command()
@click.argument("url")
@click.option("--start", "start", type=click.IntRange(min=0), required=True, help="the first revision")
@click.option("--end", "end", type=click.IntRange(min=0), help="the last revision (default: the latest)")
@click.option("--columns", help="comma-separated columns")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@common
def changes(url: str, start: int, end: int | None, columns: str | None, fmt: str, storage: Sequence[str],
            as_json: bool) -> None:
    """The change feed: rows each commit inserted, updated or deleted.

    \b
    Example:
      cdkds changes file:///data/lake/users --start 5 --format json
    """
    ds = open_dataset(url, storage)
    print_table(ds.changes(start, end, columns).read_all(), "json" if as_json else fmt)


def print_table(table: pa.Table, fmt: str, footer: str | None = None) -> None:
    """Rows as a table, JSON or CSV on standard output."""
    rows = table.to_pylist()
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2, default=_json_default))
    elif fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=table.schema.names, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: _json_default(v) if isinstance(v, (dt.datetime, dt.date, bytes)) else v
                          for k, v in r.items()} for r in rows)
        click.echo(buffer.getvalue(), nl=False)
    else:
        out = terminal()
        grid = Table(*table.schema.names)
        for r in rows:
            grid.add_row(*("" if v is None else str(v) for v in r.values()))
        out.print(grid)
        if footer:
            out.print(footer)


# ---------------------------------------------------------------- entry point

def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        cli.main(args=args, prog_name="cdkds", standalone_mode=False)
        return 0
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 1
    except click.ClickException as e:
        if debug:
            raise
        e.show()
        return e.exit_code
    except CdkdsError as e:
        if debug:
            raise
        click.echo(f"error: {e}", err=True)
        return 1
    except (OSError, ValueError) as e:
        if debug:
            raise
        click.echo(f"error: {type(e).__name__}: {e}", err=True)
        return 1


def entry_point() -> None:
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Arrow's thread pools can abort ("terminate called without an active exception") when the
    # interpreter tears down right after a scan; all output is written, so leave without teardown
    os._exit(code)
