"""Commands for tags: ``cdkds tag`` names a revision (or ends a tag), ``cdkds tags`` lists them."""

from __future__ import annotations

from typing import Mapping, Sequence

import click
from rich.console import Console

from cdkds.cli.app import cli, committed, common, emit, open_dataset


@cli.command()
@click.argument("url")
@click.argument("name")
@click.option("--version", type=click.IntRange(min=0), help="the revision to tag (default: the latest)")
@click.option("--delete", is_flag=True, help="end the tag instead (its revision may then be expired and vacuumed)")
@common
def tag(url: str, name: str, version: int | None, delete: bool, storage: Sequence[str], as_json: bool) -> None:
    """Name a revision: expire-log and vacuum keep a tagged revision readable (show it
    with `cdkds show URL --tag NAME`, read it with repo.load(name, tag=NAME)).

    \b
    Example:
      cdkds tag lake/events 2026-q3-close
      cdkds tag lake/events 2026-q3-close --delete
    """
    if delete and version is not None:
        raise click.UsageError("give --version or --delete, not both")
    ds = open_dataset(url, storage)
    if delete:
        revision = ds.tags().get(name)
        committed(as_json, ds, ds.untag(name), f"untagged {name!r} (revision {revision})", tag=name, tagged=revision)
    else:
        tagged = ds.tag(name, version)
        committed(as_json, ds, ds.version, f"tagged revision {tagged} {name!r}", tag=name, tagged=tagged)


@cli.command()
@click.argument("url")
@common
def tags(url: str, storage: Sequence[str], as_json: bool) -> None:
    """List a dataset's tags and the revisions they name.

    \b
    Example:
      cdkds tags lake/events
    """
    ds = open_dataset(url, storage)
    list_refs(as_json, ds.name, "tags", ds.tags())


def list_refs(as_json: bool, dataset: str, kind: str, found: Mapping[str, int]) -> None:
    """Print a dataset's refs of one ``kind`` ("tags", "branches"), each with its revision."""
    def render(out: Console) -> None:
        for name, revision in found.items():
            out.print(f"{name}  {revision}")
        if not found:
            out.print(f"{dataset} has no {kind}")

    emit(as_json, {"dataset": dataset, kind: dict(found)}, render)
