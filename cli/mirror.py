"""Mirrors from the command line: ``cdkds mirror`` writes or brings up to date the Delta Lake
and Iceberg metadata over a dataset's files (see :mod:`cdkds.catalog.mirror`)."""

from __future__ import annotations

from typing import Sequence

import click

from cdkds.cli.app import cli, common, emit, open_dataset, working


@cli.command()
@click.argument("url")
@click.option("--delta", is_flag=True, help="the Delta Lake mirror (_delta_log/ in the dataset's folder)")
@click.option("--iceberg", is_flag=True, help="the Iceberg mirror (metadata/ in the dataset's folder)")
@common
def mirror(url: str, delta: bool, iceberg: bool, storage: Sequence[str], as_json: bool) -> None:
    """Write the Delta Lake or Iceberg metadata of a dataset, or bring it up to the latest
    revision: one mirror version per revision, over the same data files. Without --delta or
    --iceberg, the mirrors the dataset's properties (mirror.delta, mirror.iceberg) enable.

    \b
    Example:
      cdkds mirror lake/events --delta --iceberg
    """
    ds = open_dataset(url, storage)
    names = tuple(n for n, on in (("delta", delta), ("iceberg", iceberg)) if on)
    if not names and not ds.descriptor.mirrors:
        raise click.UsageError(f"dataset {ds.name!r} enables no mirror (properties mirror.delta, mirror.iceberg): "
                               f"name one with --delta or --iceberg")
    with working(f"mirroring {ds.name}"):
        reports = ds.mirror(*names)
    data = {"dataset": ds.name, "revision": ds.version,
            "mirrors": [{"name": r.name, "version": r.version, "written": r.written, "seconds": round(r.seconds, 3)}
                        for r in reports]}
    emit(as_json, data, lambda out: [out.print(f"{ds.name}: {r.summary()}") for r in reports])
