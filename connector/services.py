"""The table services as a Spark job, for datasets too large for one process to rewrite:
:func:`maintain` plans a pass on the driver, rewrites each planned group of files (a
partition's files to rid of deleted rows or to bin-pack) in a Spark task, and commits all of
it once on the driver (see :mod:`cdkds.catalog.services`).

Tasks write data files only (:func:`cdkds.catalog.maintenance.rewrite.write_files`); on a
keyed dataset each returns the moved rows' key columns with where they went, and the driver
writes their index entries in the commit (:func:`~cdkds.catalog.maintenance.rewrite.commit_rewrite`).
A job that fails, or a commit that loses to a concurrent one, commits nothing; files its
tasks wrote are deleted, or (a task or the driver killed) left for ``vacuum``.
"""

from __future__ import annotations

import json
import pickle
import uuid
from typing import TYPE_CHECKING, Any

from cdkds.connector.options import InvalidOptionError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdkds.catalog import Dataset
    from cdkds.catalog.maintenance.rewrite import WrittenFiles
    from cdkds.catalog.maintenance.rewrite import Rewritten
    from cdkds.catalog.services.planner import RewriteGroup, ServicePlan
    from cdkds.catalog.services.runner import ServiceReport
    from cdkds.connector.options import Location

SERVICE = "spark"  # the commit info's "service" of this job's commits


def maintain(spark: "SparkSession", url: str, budget: int | str | None = None, **options: Any) -> "ServiceReport":
    """One pass of the table services over the dataset at ``url``, its rewrites run in Spark
    tasks and committed once on the driver as a ``compact`` commit (info ``service``:
    ``spark``); index deltas merged in the same commit; then the log expired and files
    vacuumed where the dataset's ``services.*.retention`` properties ask for it. ``budget``:
    input bytes to rewrite at most (a number, or text such as ``10g``; ``None``: all the work
    there is). ``options``: ``storageOptions`` (a dict, or its JSON). A concurrent commit that
    deleted rows of a file being rewritten makes the pass give that work up (``gave_up``; a
    later pass tries again), never the other commit."""
    from cdkds.catalog.log.commit import clock
    from cdkds.catalog.maintenance.rewrite import commit_rewrite
    from cdkds.catalog.services.runner import maintain as one_pass
    from cdkds.connector.source import open_dataset

    where = _location(url, options)
    limit = _budget(budget, where.name)

    def in_tasks(dataset: "Dataset", plan: "ServicePlan", info: dict) -> "Rewritten":
        now = clock()
        transaction = uuid.uuid4().hex
        written = rewrite_in_tasks(spark, where, dataset, plan.groups, transaction, now, plan.settings.file_size)
        return commit_rewrite(dataset, plan.files, written, transaction, now, {**info, "engine.spark": True},
                              [m.bucket for m in plan.buckets])

    return one_pass(open_dataset(where), limit, SERVICE, in_tasks)


def rewrite_in_tasks(spark: "SparkSession", where: "Location", dataset: "Dataset", groups: "tuple[RewriteGroup, ...]",
                     transaction: str, now_ms: int, target_file_size: int) -> "list[WrittenFiles]":
    """The files of each group rewritten by a Spark task of its own, for commit ``transaction``
    (nothing committed), in the order of ``groups``."""
    import pyarrow as pa

    from cdkds.catalog.read.scan import file_task

    if not groups:
        return []
    snapshot = dataset.snapshot
    work = [[file_task(snapshot, f, now_ms) for f in g.files] for g in groups]
    descriptor, descriptor_version, base = snapshot.descriptor, snapshot.descriptor_version, snapshot.version
    url, storage, name = where.url, dict(where.storage_options), dataset.name

    def rewrite_groups(batches):
        from cdkds.catalog.maintenance.rewrite import write_files
        from cdkds.catalog.storage import ObjectStore

        store = ObjectStore.open(url, storage)
        for batch in batches:
            for group in batch.column(0).to_pylist():
                written = write_files(store, name, descriptor, descriptor_version, base, work[group], transaction,
                                      target_file_size)
                yield pa.RecordBatch.from_pydict({"group": [group], "written": [pickle.dumps(written)]})

    rows = spark.range(0, len(work), 1, len(work)).mapInArrow(rewrite_groups, "group long, written binary").collect()
    return [pickle.loads(r["written"]) for r in sorted(rows, key=lambda r: r["group"])]


def _location(url: str, options: dict[str, Any]) -> "Location":
    from cdkds.connector.options import location

    name = url.rstrip("/").rsplit("/", 1)[-1]
    unknown = [k for k in options if k.lower() != "storageoptions"]
    if unknown:
        raise InvalidOptionError(f"dataset {name!r}: maintain takes the option storageOptions only, got {unknown[0]!r}")
    given = {k: v if isinstance(v, str) else json.dumps(v) for k, v in options.items()}
    return location({**given, "path": url})


def _budget(budget: int | str | None, dataset: str) -> int | None:
    from cdkds.catalog.quantities import parse_size

    if budget is None:
        return None
    if isinstance(budget, str):
        try:
            return parse_size(budget)
        except ValueError:
            pass
    elif isinstance(budget, int) and not isinstance(budget, bool) and budget >= 0:
        return budget
    raise InvalidOptionError(f"dataset {dataset!r}: the services' budget must be a number of bytes or a size such as "
                             f"10g, got {budget!r}")
