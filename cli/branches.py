"""Commands for branches: ``cdkds branch`` starts, publishes or drops one, ``cdkds branches`` lists them."""

from __future__ import annotations

from typing import Sequence

import click

from cdkds.cli.app import cli, committed, common, open_dataset
from cdkds.cli.tags import list_refs


@cli.command()
@click.argument("url")
@click.argument("name")
@click.option("--publish", is_flag=True, help="publish the branch onto main in one commit (which ends it)")
@click.option("--drop", is_flag=True, help="end the branch without publishing it")
@common
def branch(url: str, name: str, publish: bool, drop: bool, storage: Sequence[str], as_json: bool) -> None:
    """Start a branch at the latest revision (readers of main do not see its commits; write
    to it with repo.load(name, branch=NAME) or Spark's option branch), or publish or drop one.

    \b
    Example:
      cdkds branch lake/events audit
      cdkds branch lake/events audit --publish
    """
    if publish and drop:
        raise click.UsageError("give --publish or --drop, not both")
    ds = open_dataset(url, storage)
    if publish:
        committed(as_json, ds, ds.publish(name), f"published branch {name!r}", branch=name)
    elif drop:
        committed(as_json, ds, ds.drop_branch(name), f"dropped branch {name!r}", branch=name)
    else:
        ds.branch(name)
        committed(as_json, ds, ds.version, f"started branch {name!r}", branch=name)


@cli.command()
@click.argument("url")
@common
def branches(url: str, storage: Sequence[str], as_json: bool) -> None:
    """List a dataset's live branches and the revisions they start from.

    \b
    Example:
      cdkds branches lake/events
    """
    ds = open_dataset(url, storage)
    list_refs(as_json, ds.name, "branches", {name: ref.base for name, ref in ds.branches().items()})
