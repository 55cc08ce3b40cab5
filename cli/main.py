"""The ``cdkds`` command: look at repositories and datasets from a terminal.

Built on click (commands, options, ``--help``) and rich (tables and trees on a terminal).
Every command takes ``--storage-option k=v`` (fsspec options; S3 credentials also come
from the usual environment) and ``--json`` (machine-readable output). Errors are one line
naming the dataset and what was wrong, with exit code 1 (2 for a bad invocation) and no
traceback unless ``--debug`` is given.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
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
    batches, taken = [], 0
    plan = ds.plan(where, columns)
    for batch in ds.scan(where, columns):
        if taken >= limit:
            break
        batches.append(batch.slice(0, limit - taken))
        taken += batches[-1].num_rows
    table = pa.Table.from_batches(batches, schema=plan.output_schema)
    rows = table.to_pylist()
    if as_json or fmt == "json":
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
        out.print(f"{len(rows)} rows shown (revision {ds.version}; {len(plan.files)} of {plan.total_files} files read)")


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
    sys.exit(main())
