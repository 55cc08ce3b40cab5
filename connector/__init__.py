"""cdkds.connector: the Spark adapter on PySpark's Python Data Source API.

``spark.read.format("cdkds")`` finds :class:`CdkdsDataSource` by itself through the
``pyspark_cdkds`` module; :func:`register` registers it explicitly and can make every
dataset of a repository queryable in SQL by name; :func:`upsert` writes keyed rows and
:func:`maintain` runs the table services as a Spark job.
"""

from __future__ import annotations

import os
import sys

from cdkds.connector.keyed import upsert
from cdkds.connector.services import maintain
from cdkds.connector.source import CdkdsDataSource

# Spark starts PYSPARK_PYTHON, else `python3` from the PATH, for its workers and to look up Python
# data sources (pyspark_* modules) — read when the session starts. A script run as
# `.venv/bin/python script.py` without activating the venv would have Spark start another Python,
# without cdkds: reads fail with DATA_SOURCE_NOT_FOUND ... cdkds.DefaultSource, and tasks cannot
# unpickle the source. A script that imports cdkds.connector before starting Spark gets this Python
# instead — only when PYSPARK_PYTHON is unset: a cluster whose executors run another Python sets it
# (or spark.pyspark.python), and that choice stands.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

__all__ = ["CdkdsDataSource", "load", "maintain", "register", "upsert"]


def load(spark, url: str, **options):
    """The rows of ``spark.read.format("cdkds").options(**options).load(url)``, planned by cdkds
    and read by Spark's own Parquet source where it can (see :mod:`cdkds.connector.native`)."""
    from cdkds.connector.native import load as native_load

    return native_load(spark, url, **options)


def register(spark, repository_url: str | None = None, database: str | None = None,
             storage_options: dict | None = None, native: bool = False) -> list[str]:
    """Register the ``cdkds`` source with ``spark``; with a repository URL, also make each
    of its datasets queryable by name: as temporary views, or as tables of ``database``
    (``namespace/name`` becomes ``namespace_name``). Returns the names registered.

    Catalog tables keep no storage options (see :func:`cdkds.connector.source.carried_options`),
    so ``storage_options`` are refused with ``database``.

    With ``native``, the views read through :func:`load` (Spark's own Parquet source) and each is
    pinned to the revision its dataset had at registration: commits made later do not show in it
    until ``register`` is called again. Native views are temporary views (no ``database``)."""
    import json

    from cdkds.catalog import DatasetRepository

    spark.dataSource.register(_with_parallelism(spark))
    if repository_url is None:
        return []
    if native:
        from cdkds.connector.native import register_views
        from cdkds.connector.options import InvalidOptionError

        if database is not None:
            raise InvalidOptionError(f"repository {repository_url}: native=True makes temporary views, each pinned "
                                     f"to its dataset's revision; give no database")
        return register_views(spark, repository_url, storage_options)
    if database is not None and storage_options:
        from cdkds.connector.options import InvalidOptionError

        raise InvalidOptionError(
            f"repository {repository_url}: catalog tables (database={database!r}) cannot keep storage options without "
            f"showing them in their schema; configure the storage for fsspec instead (environment or fsspec config "
            f"files, see the README), or register temporary views (database=None)")
    repo = DatasetRepository(repository_url, storage_options)
    extra = f", storageOptions '{_quote(json.dumps(storage_options))}'" if storage_options else ""
    names = []
    if database is not None:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS `{database}`")
    for name in repo.list():
        table = name.replace("/", "_")
        url = f"{repo.url.rstrip('/')}/{name}"
        if database is None:
            spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW `{table}` USING cdkds OPTIONS (path '{_quote(url)}'{extra})")
            names.append(table)
        else:
            spark.sql(f"CREATE TABLE IF NOT EXISTS `{database}`.`{table}` USING cdkds "
                      f"OPTIONS (path '{_quote(url)}'{extra})")
            names.append(f"{database}.{table}")
    return names


def _with_parallelism(spark) -> type[CdkdsDataSource]:
    """The source, carrying the session's default parallelism for sizing input splits (its
    planner cannot ask the session; the class, made here, travels to it by value)."""
    try:
        parallelism = int(spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: the planner's cores decide
        return CdkdsDataSource
    return type("CdkdsDataSource", (CdkdsDataSource,), {"default_parallelism": parallelism, "__module__": __name__})


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
