"""``cdkds convert``: existing data in a folder (a Kite dataset, a Delta table, Hive-style
partitioned Parquet) becomes a cdkds dataset in place (see :mod:`cdkds.catalog.convert`)."""

from __future__ import annotations

import os
from typing import Sequence

import click

from cdkds.catalog import DatasetRepository
from cdkds.catalog.convert.hive import PARTITION_TYPES
from cdkds.cli.app import CliError, cli, common, emit, storage_options, working


def _partition_types(pairs: Sequence[str]) -> dict[str, str]:
    types: dict[str, str] = {}
    for pair in pairs:
        name, sep, kind = pair.partition("=")
        if not sep or not name or kind not in PARTITION_TYPES:
            raise click.BadParameter(f"expected NAME=TYPE with TYPE one of {', '.join(PARTITION_TYPES)}, got {pair!r}",
                                     param_hint="--partition-type")
        types[name] = kind
    return types


def _url(location: str) -> str:
    """A URL, or a local path made absolute (from the working folder)."""
    return location if "://" in location else os.path.abspath(location)


@cli.command()
@click.argument("source")
@click.option("--into", "repository_url", metavar="REPO_URL",
              help="the repository the source folder lies in (default: the source's parent folder)")
@click.option("--name", help="the dataset's name: the source's path from the repository (the default)")
@click.option("--partition-type", "partition_types", multiple=True, metavar="NAME=TYPE",
              help=f"a Hive partition column's type instead of the inferred one (repeatable; "
                   f"{', '.join(PARTITION_TYPES)})")
@common
def convert(source: str, repository_url: str | None, name: str | None, partition_types: Sequence[str],
            storage: Sequence[str], as_json: bool) -> None:
    """Make the data in folder SOURCE a cdkds dataset without copying it: a Kite dataset
    (.metadata/descriptor.properties), a Delta table (_delta_log/, its current version) or
    Hive-style partitioned Parquet (country=NZ/day=2026-01-01/...). Its first commit adopts
    the files where they are; nothing is committed if a file cannot be adopted.

    \b
    Example:
      cdkds convert lake/sales --partition-type day=date
      cdkds convert s3://bucket/lake/events --into s3://bucket/lake
    """
    types = _partition_types(partition_types)
    source = _url(source.rstrip("/"))
    if repository_url is None:
        repository_url = source.rstrip("/").rpartition("/")[0]
        if not repository_url or repository_url.endswith(":/"):
            raise CliError(f"source {source} has no parent folder to be the repository; give --into")
    repository = DatasetRepository(_url(repository_url), storage_options(storage))
    if not repository.store.exists(""):
        raise CliError(f"repository {repository.url} does not exist")
    with working(f"converting {source}"):
        ds = repository.convert(source, name, types)
    first = ds.log.history()[0]
    data = {"dataset": ds.name, "url": ds.url, "kind": first.info.get("converted"), "revision": ds.version,
            "files": len(ds.files), "rows": sum(f.row_count for f in ds.files),
            "deleted_rows": sum(f.deleted_rows for f in ds.files)}
    deleted = f", {data['deleted_rows']:,} of them deleted" if data["deleted_rows"] else ""
    emit(as_json, data, lambda out: out.print(
        f"converted {source} ({data['kind']}) into dataset {ds.name!r}: {data['files']:,} files, "
        f"{data['rows']:,} rows{deleted}: revision {ds.version}"))
