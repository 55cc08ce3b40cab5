"""Commands that look at repositories and datasets: list, describe, schema, history, show, changes."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from typing import Any, Sequence

import click
import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.log.commit import HistoryEntry
from cdkds.catalog.log.files import FileTable
from cdkds.catalog.read.scan import read_plan
from cdkds.catalog.mirror.runner import present_mirrors
from cdkds.catalog.services.planner import SMALL_FILE_FRACTION
from cdkds.cli.app import cli, common, emit, open_dataset, open_repository, print_table, to_json


@cli.command("list")
@click.argument("repository")
@common
def list_(repository: str, storage: Sequence[str], as_json: bool) -> None:
    """The datasets of a repository.

    \b
    Example:
      cdkds list lake
    """
    names = open_repository(repository, storage).list()
    emit(as_json, names, lambda out: [out.print(n) for n in names])


@cli.command()
@click.argument("url")
@common
def describe(url: str, storage: Sequence[str], as_json: bool) -> None:
    """A dataset's descriptor, schema, partitioning, revision and files, the revision its
    Delta Lake and Iceberg mirrors describe, and what the table services would do next and why.

    \b
    Example:
      cdkds describe lake/events
    """
    ds = open_dataset(url, storage)
    d, s = ds.descriptor, ds.snapshot
    small = d.services.file_size * SMALL_FILE_FRACTION  # small as the services count it
    live = s.files.table()
    files = files_summary(live, small)
    info = {
        "dataset": ds.name, "url": ds.url, "revision": ds.version,
        "committed": dt.datetime.fromtimestamp(s.timestamp / 1000, dt.timezone.utc).isoformat(),
        "format": d.format, "compression": d.compression,
        "partition_strategy": d.partition_strategy.to_text() if d.partition_strategy else None,
        "partition_specs": partition_specs(d, live),
        "record_key": list(d.record_key) or None, "ordering_field": d.ordering_field,
        "properties": dict(d.properties),
        **{k: files[k] for k in ("files", "rows", "bytes", "small_files")},
        "tombstones": len(s.tombstones),
        **{k: files[k] for k in ("deletion_vectors", "deleted_rows")},
        "schema": d.schema,
        "services": ds.services_plan().describe(),
        "mirrors": {m.name: m.version() for m in present_mirrors(ds.store, ds.name)},
    }

    def render(out: Console) -> None:
        table = Table(show_header=False, box=None)
        for key, value in info.items():
            if key == "partition_specs":
                value = "; ".join(f"spec {p['spec_id']}: {p['strategy'] or 'unpartitioned'}"
                                  f"{' (current)' if p['current'] else ''}, {p['files']} files" for p in value)
            if key not in ("schema", "services"):
                table.add_row(key.replace("_", " "), "-" if value in (None, {}, []) else str(value))
        out.print(table)
        out.print(schema_tree(d.schema))
        out.print("services:")
        for line in info["services"]:
            out.print(f"  {line}")

    emit(as_json, info, render)


def partition_specs(descriptor: DatasetDescriptor, files: FileTable) -> list[dict[str, Any]]:
    """Each partition spec of the dataset, by id: its strategy's text, how many of the live
    ``files`` it has and whether new files are written with it."""
    if "spec" in files.table.schema.names:
        counts = files.table.column("spec").value_counts().to_pylist()
        by_spec = {c["values"]: c["counts"] for c in counts}
    else:  # never changed: every file is of the current spec
        by_spec = {descriptor.partition_spec_id: len(files)}
    return [{"spec_id": i, "strategy": s.to_text() if s is not None else None, "files": by_spec.get(i, 0),
             "current": i == descriptor.partition_spec_id} for i, s in sorted(descriptor.partition_specs.items())]


def files_summary(files: FileTable, small: float) -> dict[str, int]:
    """What ``describe`` says of the live files, from their columns: how many, their rows
    (less deleted ones) and bytes, how many are smaller than ``small`` bytes, their deletion
    vectors and the rows those delete."""
    if not len(files):
        return {"files": 0, "rows": 0, "bytes": 0, "small_files": 0, "deletion_vectors": 0, "deleted_rows": 0}
    table = files.table
    sizes = table.column("size")
    vectors = pc.drop_null(table.column("deletes")).to_pylist()  # JSON arrays, of the files that have vectors
    return {"files": len(files), "rows": files.live_rows, "bytes": pc.sum(sizes).as_py(),
            "small_files": pc.sum(pc.less(sizes, small).cast(pa.int64())).as_py(),
            "deletion_vectors": sum(len(json.loads(v)) for v in vectors),
            "deleted_rows": pc.sum(table.column("deleted_rows")).as_py()}


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
      cdkds schema lake/events --arrow
    """
    d = open_dataset(url, storage).descriptor
    if kind == "arrow":
        text = str(d.arrow_schema)
        emit(as_json, [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in d.arrow_schema],
             lambda out: out.print(text))
        return
    data = d.schema if kind == "avro" else d.spark_schema_json()
    click.echo(to_json(data))


@cli.command()
@click.argument("url")
@click.option("--limit", type=click.IntRange(min=1), help="only the newest N commits")
@common
def history(url: str, limit: int | None, storage: Sequence[str], as_json: bool) -> None:
    """The commits of a dataset, oldest first, with the files and rows each added and removed
    (-rows: of removed files and deletion vectors; rows a tombstone hides are not counted).

    \b
    Example:
      cdkds history lake/events --limit 10
    """
    entries = open_dataset(url, storage).history()
    if limit is not None:
        entries = entries[-limit:]
    rows = [{"revision": e.revision, "time": e.time.isoformat(), "operation": e.operation,
             "service": e.info.get("service"), "added_files": e.added_files, "removed_files": e.removed_files,
             "added_rows": e.added_rows, "removed_rows": e.removed_rows, "tombstones": e.tombstones,
             "bytes_read": e.info.get("bytes_read"), "bytes_written": e.info.get("bytes_written"),
             "info": dict(e.info)} for e in entries]

    def render(out: Console) -> None:
        table = Table("revision", "time", "operation", "+files", "-files", "+rows", "-rows", "tombstones",
                      "bytes rewritten")
        for e, r in zip(entries, rows):
            table.add_row(str(r["revision"]), r["time"][:19].replace("T", " "), operation(e), str(r["added_files"]),
                          str(r["removed_files"]), str(r["added_rows"]),
                          "?" if r["removed_rows"] is None else str(r["removed_rows"]), str(r["tombstones"]),
                          rewritten_bytes(e))
        out.print(table)

    emit(as_json, rows, render)


def operation(entry: HistoryEntry) -> str:
    """A commit's operation as the history prints it: a table service's commit says so, with
    what made it (``compact (service: inline, small files)``)."""
    service = entry.info.get("service")
    if service is None:
        return entry.operation
    reasons = [REASONS.get(r, str(r)) for r in entry.info.get("reasons", ())]
    return f"{entry.operation} (service: {', '.join([str(service), *reasons])})"


REASONS = {"small": "small files", "deleted": "deleted rows", "tombstones": "tombstones", "index": "index deltas"}


def rewritten_bytes(entry: HistoryEntry) -> str:
    """The bytes a rewrite (compaction or a service) read and wrote, from its commit's info."""
    read, written = entry.info.get("bytes_read"), entry.info.get("bytes_written")
    return "" if read is None or written is None else f"{read:,} -> {written:,}"


@cli.command()
@click.argument("url")
@click.option("--where", help="a predicate, e.g. \"userId = 1234 and ts >= '2026-03-01'\"")
@click.option("--columns", help="comma-separated columns")
@click.option("--limit", type=click.IntRange(min=0), default=20, show_default=True, help="rows to show")
@click.option("--version", type=click.IntRange(min=0), help="read this revision")
@click.option("--timestamp", help="read the last revision at or before this time (ISO text or epoch ms)")
@click.option("--tag", help="read the revision this tag names")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@common
def show(url: str, where: str | None, columns: str | None, limit: int, version: int | None, timestamp: str | None,
         tag: str | None, fmt: str, storage: Sequence[str], as_json: bool) -> None:
    """Rows of a dataset (pruned by --where), at the latest or an earlier revision.

    \b
    Example:
      cdkds show lake/events --where "userId = 1234" --limit 5
    """
    if sum(x is not None for x in (version, timestamp, tag)) > 1:
        raise click.UsageError("give one of --version, --timestamp or --tag")
    ds = open_dataset(url, storage, version, int(timestamp) if timestamp and timestamp.isdigit() else timestamp, tag)
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
                f"{table.num_rows} rows shown (revision {ds.version}; {len(plan.tasks)} of {plan.total_files} files read)")


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
      cdkds changes lake/users --start 5 --format json
    """
    ds = open_dataset(url, storage)
    print_table(ds.changes(start, end, columns).read_all(), "json" if as_json else fmt)
