"""Commands that bring data in and out: create (from an Avro schema or a data file's inferred
schema), import (CSV, JSON lines, Parquet, Avro files in one commit) and export (a scan into
one Parquet, CSV, JSON lines or Avro file). Files are read by :mod:`cdkds.formats.inputs` and
written by :mod:`cdkds.formats.outputs`; :mod:`cdkds.formats.text` has the rules for values in
text and the inference of types."""

from __future__ import annotations

import contextlib
import json
from typing import Any, Callable, Iterator, Mapping, Sequence

import click
import fsspec
import pyarrow as pa
from rich.console import Console
from rich.table import Table

from cdkds.catalog import CdkdsError, Dataset, DatasetDescriptor, DatasetRepository, PartitionStrategy
from cdkds.catalog.descriptor import KNOWN_PROPERTIES
from cdkds.catalog.log import LOG_FOLDER
from cdkds.catalog.repository import split_dataset_url
from cdkds.catalog.read.scan import read_task
from cdkds.cli.app import CliError, cli, common, emit, open_dataset, progress, storage_options, working
from cdkds.cli.inspection import schema_tree
from cdkds.formats.inputs import FORMATS, InputFile, infer_schema, open_input
from cdkds.formats.outputs import EXPORT_FORMATS, OutputFile, output_format

@contextlib.contextmanager
def about(name: str) -> Iterator[None]:
    """Errors as one line naming dataset ``name`` (most catalog errors name it already)."""
    try:
        yield
    except (CdkdsError, OSError) as e:
        text = str(e) if isinstance(e, CdkdsError) else f"{type(e).__name__}: {e}"
        if not text.startswith(f"dataset {name!r}"):
            text = f"dataset {name!r}: {text}"
        raise CliError(text) from e


def descriptor_options(command: Callable) -> Callable:
    """The options that describe a new dataset (create, and import --create)."""
    for option in reversed([
        click.option("--partition-by", metavar="STRATEGY",
                     help="a partition strategy, e.g. \"hash(userId, 16), day(ts)\""),
        click.option("--format", "fmt", type=click.Choice(["parquet", "avro"]),
                     help="the dataset's file format (default parquet)"),
        click.option("--compression", help="snappy (default), zstd, gzip, none for Parquet; snappy, deflate, zstd, "
                                           "null for Avro"),
        click.option("--record-key", metavar="A,B", help="record key fields: a keyed dataset (upserts)"),
        click.option("--ordering-field", metavar="FIELD", help="the field that orders writes of one key"),
        click.option("--property", "properties", multiple=True, metavar="K=V",
                     help=f"a descriptor property (repeatable): {', '.join(KNOWN_PROPERTIES)}"),
    ]):
        command = option(command)
    return command


def _keys(text: str | None) -> tuple[str, ...]:
    return tuple(k.strip() for k in text.split(",") if k.strip()) if text else ()


def _properties(name: str, pairs: Sequence[str]) -> dict[str, str]:
    props = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise click.BadParameter(f"expected k=v, got {pair!r}", param_hint="--property")
        if key not in KNOWN_PROPERTIES:
            raise CliError(f"dataset {name!r}: unknown property {key!r}; the properties are {', '.join(KNOWN_PROPERTIES)}")
        props[key] = value.strip()
    return props


def _descriptor(name: str, schema: Any, partition_by: str | None, fmt: str | None, compression: str | None,
                keys: tuple[str, ...], ordering_field: str | None, props: Mapping[str, str]) -> DatasetDescriptor:
    return DatasetDescriptor(schema, partition_by, fmt or "parquet", compression, keys or None, ordering_field, props)


def _schema_file(name: str, path: str, options: Mapping[str, Any]) -> dict:
    fs, p = fsspec.core.url_to_fs(path, **options)
    try:
        text = fs.cat_file(p).decode("utf-8")
    except FileNotFoundError:
        raise CliError(f"dataset {name!r}: schema file {path} does not exist") from None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CliError(f"dataset {name!r}: schema file {path} is not JSON: {e}") from None


def _inferred(name: str, inputs: Sequence[InputFile], keys: tuple[str, ...]) -> dict:
    """An Avro schema for the files: every inferred field nullable, except the record key's."""
    with working(f"inferring a schema from {len(inputs)} file{'s' if len(inputs) > 1 else ''}"):
        arrow = infer_schema(inputs, required=keys)
    return DatasetDescriptor.from_arrow(arrow, name=name.rsplit("/", 1)[-1]).schema


def _created(ds: Dataset, as_json: bool) -> None:
    d = ds.descriptor
    info = {"dataset": ds.name, "url": ds.url, "revision": ds.version, "format": d.format,
            "compression": d.compression,
            "partition_strategy": d.partition_strategy.to_text() if d.partition_strategy else None,
            "record_key": list(d.record_key) or None, "ordering_field": d.ordering_field,
            "properties": dict(d.properties), "schema": d.schema}

    def render(out: Console) -> None:
        out.print(f"created {ds.name} at {ds.url} (revision {ds.version})")
        table = Table(show_header=False, box=None)
        for key, value in info.items():
            if key not in ("dataset", "url", "revision", "schema"):
                table.add_row(key.replace("_", " "), "-" if value in (None, {}, []) else str(value))
        out.print(table)
        out.print(schema_tree(d.schema))

    emit(as_json, info, render)


@cli.command()
@click.argument("url")
@click.option("--schema", "schema_path", metavar="FILE.avsc", help="an Avro record schema (a local path or a URL)")
@click.option("--like", metavar="FILE", help="infer the schema from a data file (.csv, .jsonl, .parquet, .avro)")
@click.option("--input-format", type=click.Choice(FORMATS), help="the --like file's format, if its name does not tell")
@click.option("--delimiter", default=",", show_default=True, help="the --like CSV file's delimiter")
@descriptor_options
@common
def create(url: str, schema_path: str | None, like: str | None, input_format: str | None, delimiter: str,
           partition_by: str | None, fmt: str | None, compression: str | None, record_key: str | None,
           ordering_field: str | None, properties: Sequence[str], storage: Sequence[str], as_json: bool) -> None:
    """Create a dataset from an Avro schema, or with the schema of a data file.

    A schema inferred from CSV or JSON lines has nullable fields (the record key's are
    required); see the README for the rules.

    \b
    Example:
      cdkds create lake/events --like events.csv \\
            --partition-by "hash(userId, 16), day(ts)" --property checkpoint.interval=20
    """
    if schema_path is not None and like is not None:
        raise click.UsageError("give --schema or --like, not both")
    if schema_path is None and like is None:
        raise click.UsageError("give --schema FILE.avsc or --like DATAFILE")
    parent, name = split_dataset_url(url)
    options = storage_options(storage)
    with about(name):
        keys, props = _keys(record_key), _properties(name, properties)
        if schema_path is not None:
            schema = _schema_file(name, schema_path, options)
        else:
            schema = _inferred(name, [open_input(like, None, input_format, options, delimiter)], keys)
        descriptor = _descriptor(name, schema, partition_by, fmt, compression, keys, ordering_field, props)
        ds = DatasetRepository(parent, options).create(name, descriptor)
    _created(ds, as_json)


@cli.command("import")
@click.argument("url")
@click.argument("files", nargs=-1, required=True)
@click.option("--mode", type=click.Choice(["append", "overwrite", "upsert"]), default="append", show_default=True,
              help="add rows, replace every row, or insert-or-replace by record key (keyed datasets)")
@click.option("--input-format", type=click.Choice(FORMATS), help="the files' format, if their names do not tell")
@click.option("--delimiter", default=",", show_default=True, help="the CSV files' delimiter")
@click.option("--create", "create_missing", is_flag=True,
              help="create the dataset from the files' inferred schema if it does not exist (with the options below)")
@descriptor_options
@common
def import_(url: str, files: Sequence[str], mode: str, input_format: str | None, delimiter: str, create_missing: bool,
            partition_by: str | None, fmt: str | None, compression: str | None, record_key: str | None,
            ordering_field: str | None, properties: Sequence[str], storage: Sequence[str], as_json: bool) -> None:
    """Import CSV, JSON lines, Parquet and Avro files, all in one commit.

    Columns are matched to fields by name. A value that does not fit is an error naming the
    file, line, field and value, and nothing is committed.

    \b
    Example:
      cdkds import lake/events day1.csv day2.jsonl.gz old.parquet --mode append
    """
    described = [o for o, v in (("--partition-by", partition_by), ("--format", fmt), ("--compression", compression),
                                ("--record-key", record_key), ("--ordering-field", ordering_field),
                                ("--property", properties)) if v]
    if described and not create_missing:
        raise click.UsageError(f"{described[0]} describes a new dataset: it needs --create")
    parent, name = split_dataset_url(url)
    options = storage_options(storage)
    repo = DatasetRepository(parent, options)
    with about(name):
        inputs = [open_input(f, None, input_format, options, delimiter) for f in files]
        created = False
        if create_missing and not repo.exists(name):
            keys, props = _keys(record_key), _properties(name, properties)
            schema = _inferred(name, inputs, keys)
            repo.create(name, _descriptor(name, schema, partition_by, fmt, compression, keys, ordering_field, props))
            created = True
        ds = repo.load(name)
        if not created:
            _check_agrees(ds, partition_by, fmt, compression, _keys(record_key), ordering_field,
                          _properties(name, properties))
        try:
            data = _import(ds, inputs, mode)
        except BaseException:
            if created:  # nothing of this command stays
                repo.drop(name)
            raise
    data["created"] = created
    counts = "".join(f", {data[k]:,} {k}" for k in ("inserted", "updated", "unchanged") if k in data)
    where = f"revision {data['revision']}" if data["revision"] is not None else "nothing to commit"
    emit(as_json, data, lambda out: out.print(
        f"imported {data['rows']:,} rows from {len(inputs)} file{'s' if len(inputs) > 1 else ''} into {ds.name} "
        f"({mode}{counts}): {where}"))


def _check_agrees(ds: Dataset, partition_by: str | None, fmt: str | None, compression: str | None,
                  keys: tuple[str, ...], ordering_field: str | None, props: Mapping[str, str]) -> None:
    """``import --create`` into a dataset that exists: what the options describe must be what it is."""
    d = ds.descriptor
    have = d.partition_strategy.to_text() if d.partition_strategy else "unpartitioned"
    checks = [("--partition-by", partition_by and PartitionStrategy.parse(partition_by).to_text(), have),
              ("--format", fmt, d.format), ("--compression", compression, d.compression),
              *((f"--property {k}", v, d.properties.get(k, "unset")) for k, v in props.items()),
              ("--record-key", ",".join(keys) or None, ",".join(d.record_key) or "none"),
              ("--ordering-field", ordering_field, d.ordering_field or "none")]
    for option, given, actual in checks:
        if given is not None and given != actual:
            raise CliError(f"dataset {ds.name!r} exists with {option.removeprefix('--').replace('-', ' ')} {actual}, "
                           f"not {given}")


def _import(ds: Dataset, inputs: Sequence[InputFile], mode: str) -> dict:
    """Read every file into one commit; on any error nothing is committed."""
    d = ds.descriptor
    schema, defaults = d.arrow_schema, dict(d.defaults)
    if mode == "upsert" and not d.record_key:
        raise CliError(f"dataset {ds.name!r} has no record key: --mode upsert needs a keyed dataset "
                       f"(create it with --record-key)")
    for f in inputs:  # every file's columns, before anything is written
        f.check(schema, defaults, d.schema)
    before, rows = ds.version, 0
    with progress() as bar:
        task = bar.add_task(f"importing into {ds.name}", total=sum(f.size for f in inputs) or None, detail="")

        def batches() -> Iterator[tuple[InputFile, pa.RecordBatch]]:
            nonlocal rows
            done = 0
            for f in inputs:
                for batch in f.read(schema, defaults, d.schema):
                    rows += batch.num_rows
                    bar.update(task, completed=done + f.bytes_read, detail=f"{f.name}: {rows:,} rows")
                    yield f, batch
                done += f.size
                bar.update(task, completed=done)

        if mode == "upsert":
            result = ds.upsert(batch for _, batch in batches())  # holds every row in memory (one reconciliation)
            return {"dataset": ds.name, "mode": mode, "files": len(inputs), "rows": rows, "revision": result.revision,
                    "inserted": result.inserted, "updated": result.updated, "unchanged": result.unchanged}
        writer = ds.writer(mode=mode)
        try:
            read: dict[str, int] = {}  # rows of each file written so far
            for f, batch in batches():
                try:
                    writer.write_batch(batch)
                except CdkdsError as e:
                    refused = getattr(e, "refused", None)
                    if refused is not None:  # a value refused at a row of the batch: name its line in the file
                        raise CliError(f"dataset {ds.name!r}: {f.refused(refused, read.get(f.name, 0) + refused.row)}") \
                            from e
                    raise CliError(f"{e} (file {f.name})") from e
                read[f.name] = read.get(f.name, 0) + batch.num_rows
        except BaseException:
            writer.abort()
            raise
        writer.close()
    revision = ds.version if ds.version != before else None
    return {"dataset": ds.name, "mode": mode, "files": len(inputs), "rows": rows, "revision": revision}


@cli.command()
@click.argument("url")
@click.argument("dest")
@click.option("--where", help="a predicate, e.g. \"userId = 1234 and ts >= '2026-03-01'\"")
@click.option("--columns", help="comma-separated columns")
@click.option("--format", "fmt", type=click.Choice(EXPORT_FORMATS), help="default: from DEST's extension")
@click.option("--version", type=click.IntRange(min=0), help="export this revision")
@click.option("--timestamp", help="export the last revision at or before this time (ISO text or epoch ms)")
@click.option("--overwrite", is_flag=True, help="replace DEST if it exists")
@common
def export(url: str, dest: str, where: str | None, columns: str | None, fmt: str | None, version: int | None,
           timestamp: str | None, overwrite: bool, storage: Sequence[str], as_json: bool) -> None:
    """Export the rows of a dataset (pruned by --where) into one file: Parquet, CSV, JSON lines or Avro.

    \b
    Example:
      cdkds export lake/events march.csv --where "ts >= '2026-03-01'" --columns id,ts
    """
    if version is not None and timestamp is not None:
        raise click.UsageError("give --version or --timestamp, not both")
    options = storage_options(storage)
    ds = open_dataset(url, storage, version, int(timestamp) if timestamp and timestamp.isdigit() else timestamp)
    with about(ds.name):
        if columns is not None and not any(c.strip() for c in columns.split(",")):
            raise CliError(f"dataset {ds.name!r}: --columns names no column; give one or more, comma-separated")
        plan = ds.plan(where, columns)
        fmt = output_format(dest, fmt)
        fs, path = fsspec.core.url_to_fs(dest, **options)
        inside = _dataset_folder_above(fs, path)
        if inside is not None:
            raise CliError(f"dataset {ds.name!r}: {dest} is inside the folder of the dataset at {inside}; a file "
                           f"there could break its log or be deleted by vacuum: export elsewhere")
        if not overwrite and fs.exists(path):
            raise CliError(f"dataset {ds.name!r}: {dest} exists; add --overwrite to replace it")
        schema = ds.descriptor.schema
        by_name = {f["name"]: f for f in schema["fields"]}
        avro = {"type": "record", "name": schema["name"], "fields": [by_name[c] for c in plan.columns]}
        output = OutputFile(path, plan.output_schema, fmt, fs=fs, avro_schema=avro, overwrite=True)
        try:
            with progress() as bar:
                task = bar.add_task(f"exporting {ds.name}", total=len(plan.tasks), detail="")
                for t in plan.tasks:
                    for batch in read_task(ds.store, plan.snapshot.descriptor, plan.predicate, plan.columns, t):
                        output.write(batch)
                        bar.update(task, detail=f"{output.rows:,} rows")
                    bar.advance(task)
            size = output.close()
        except BaseException:
            output.abort()
            raise
    data = {"dataset": ds.name, "revision": ds.version, "destination": dest, "format": fmt, "rows": output.rows,
            "bytes": size, "files_read": len(plan.tasks), "total_files": plan.total_files}
    emit(as_json, data, lambda out: out.print(
        f"exported {output.rows:,} rows of {ds.name} (revision {ds.version}; {len(plan.tasks)} of {plan.total_files} "
        f"files read) to {dest}: {size:,} bytes of {fmt}"))


def _dataset_folder_above(fs: Any, path: str) -> str | None:
    """The folder of a dataset (one holding a ``_log/``) that ``path`` lies in, if any."""
    parent = path.rstrip("/")
    while True:
        parent, sep, _ = parent.rpartition("/")
        if not sep or not parent:
            return None
        if fs.exists(f"{parent}/{LOG_FOLDER}"):
            return parent
