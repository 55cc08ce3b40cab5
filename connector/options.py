"""The options of ``spark.read/write.format("cdkds")`` and SQL, checked and typed.

Spark hands a data source a case-insensitive dict of strings. This module turns it into
:class:`Location`, :class:`ReadOptions` and :class:`WriteOptions`, with errors that name
the dataset, the option and the value. Kite view URIs (``view:file:/data/users?userId=1234``)
carry a location and constraints in one string.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import parse_qsl, urlsplit

from cdkds.catalog.errors import CdkdsError, ExpressionError
from cdkds.catalog.expressions import ALWAYS_TRUE, Expression, Predicate, all_of, as_expression

DEFAULT_MAX_PARTITION_BYTES = 128 * 1024 * 1024  # spark.sql.files.maxPartitionBytes
DEFAULT_BATCH_ROWS = 65_536
OPTIONS_METADATA_KEY = "cdkds.options"  # survives in the schema of catalog tables, whose options Spark drops


KEYED_OPERATIONS = ("upsert", "insert", "update", "delete")


class InvalidOptionError(CdkdsError, ValueError):
    """A Spark option of the cdkds source with a value it cannot use."""


def _get(options: Mapping[str, str], *names: str) -> str | None:
    lowered = {k.lower(): v for k, v in options.items()}
    for name in names:
        if name.lower() in lowered and lowered[name.lower()] is not None:
            return str(lowered[name.lower()])
    return None


@dataclass(frozen=True)
class Location:
    """Where a dataset is: its URL and the fsspec storage options to open it with."""

    url: str
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    view: Expression = ALWAYS_TRUE  # constraints of a Kite view URI

    @property
    def name(self) -> str:
        return self.url.rstrip("/").rsplit("/", 1)[-1]


def location(options: Mapping[str, str]) -> Location:
    """The dataset location of the ``path`` option (a URL, a local path or a Kite view URI)."""
    path = _get(options, "path")
    if not path:
        raise InvalidOptionError("the cdkds source needs a dataset URL: load(url), save(url) or option('path', url)")
    storage = _get(options, "storageOptions")
    try:
        storage_options = json.loads(storage) if storage else {}
    except json.JSONDecodeError as e:
        raise InvalidOptionError(f"option storageOptions must be a JSON object, got {storage!r}: {e}") from None
    if not isinstance(storage_options, dict):
        raise InvalidOptionError(f"option storageOptions must be a JSON object, got {storage!r}")
    view = ALWAYS_TRUE
    if path.startswith(("view:", "dataset:")):
        path, view = parse_view_uri(path)
    if re.match(r"^file:/[^/]", path):
        path = "file://" + path[len("file:"):]  # Hadoop's file:/x is fsspec's file:///x
    return Location(path, storage_options, view)


_RANGE = re.compile(r"^([\[(])([^,]*),([^,]*)([\])])$")


def parse_view_uri(uri: str) -> tuple[str, Expression]:
    """A Kite view URI's dataset URL and constraints: ``?f=v`` (equal), ``?f=a,b`` (one
    of), ``?f=[a,b)`` (a range; ``[``/``]`` inclusive, ``(``/``)`` exclusive, an empty end
    unbounded); several constraints must all hold."""
    body = uri.split(":", 1)[1]
    base, _, query = body.partition("?")
    if not urlsplit(base).scheme:
        base = "file://" + base if base.startswith("/") else base
    constraints = []
    for name, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        m = _RANGE.match(value)
        if m:
            lower, lo, hi, upper = m.groups()
            if lo:
                constraints.append(Predicate("ge" if lower == "[" else "gt", name, lo))
            if hi:
                constraints.append(Predicate("le" if upper == "]" else "lt", name, hi))
            if not lo and not hi:
                raise InvalidOptionError(f"view URI {uri!r}: range for {name!r} has no bounds")
        elif "," in value:
            constraints.append(Predicate("in", name, values=tuple(value.split(","))))
        elif value == "":
            raise InvalidOptionError(f"view URI {uri!r}: constraint {name!r} has no value")
        else:
            constraints.append(Predicate("eq", name, value))
    return base, all_of(constraints)


def _int(options: Mapping[str, str], name: str, default: int | None, dataset: str, minimum: int = 0) -> int | None:
    text = _get(options, name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise InvalidOptionError(f"dataset {dataset!r}: option {name} must be an integer >= {minimum}, got {text!r}")
    return value


def _bool(options: Mapping[str, str], name: str, dataset: str) -> bool:
    text = _get(options, name)
    if text is None:
        return False
    if text.lower() not in ("true", "false"):
        raise InvalidOptionError(f"dataset {dataset!r}: option {name} must be true or false, got {text!r}")
    return text.lower() == "true"


@dataclass(frozen=True)
class ReadOptions:
    version: int | None
    timestamp: str | None
    where: Expression
    columns: tuple[str, ...] | None
    push_filters: bool
    max_partition_bytes: int
    batch_rows: int


def read_options(options: Mapping[str, str], where_from_view: Expression, dataset: str) -> ReadOptions:
    version = _int(options, "versionAsOf", None, dataset)
    alias = _int(options, "version", None, dataset)
    timestamp = _get(options, "timestampAsOf", "timestamp")
    if alias is not None:
        if version is not None and version != alias:
            raise InvalidOptionError(f"dataset {dataset!r}: versionAsOf={version} and version={alias} disagree")
        version = alias
    if version is not None and timestamp is not None:
        raise InvalidOptionError(f"dataset {dataset!r}: give versionAsOf or timestampAsOf, not both")
    text = _get(options, "where")
    try:
        where = as_expression(text) if text else ALWAYS_TRUE
    except ExpressionError as e:
        raise InvalidOptionError(f"dataset {dataset!r}: option where: {e}") from None
    columns_text = _get(options, "columns")
    columns = tuple(c.strip() for c in columns_text.split(",") if c.strip()) if columns_text else None
    if columns_text is not None and not columns:
        raise InvalidOptionError(f"dataset {dataset!r}: option columns names no column: {columns_text!r}")
    return ReadOptions(
        version, timestamp, all_of([where, where_from_view]), columns, _bool(options, "pushFilters", dataset),
        _int(options, "maxPartitionBytes", DEFAULT_MAX_PARTITION_BYTES, dataset, 1),
        _int(options, "batchRows", DEFAULT_BATCH_ROWS, dataset, 1),
    )


@dataclass(frozen=True)
class WriteOptions:
    partition_by: str | None
    format: str | None
    compression: str | None
    record_key: tuple[str, ...] | None
    ordering_field: str | None
    schema: str | None
    dynamic_partition_overwrite: bool
    target_file_size: int | None
    properties: Mapping[str, str]
    check_null_schema: bool  # refuse nullable columns for required fields up front (else check values)
    operation: str | None = None  # a keyed write: upsert, insert, update or delete
    clustered: bool = False  # each task holds whole index buckets (set by cdkds.connector.upsert)
    job: str | None = None  # the commit's uuid, chosen by the caller (cdkds.connector.upsert)


def write_options(options: Mapping[str, str], dataset: str) -> WriteOptions:
    overwrite = (_get(options, "partitionOverwrite", "partitionOverwriteMode") or "static").lower()
    if overwrite not in ("static", "dynamic"):
        raise InvalidOptionError(f"dataset {dataset!r}: option partitionOverwrite must be static or dynamic, "
                                 f"got {overwrite!r}")
    nulls = (_get(options, "checkNulls") or "schema").lower()
    if nulls not in ("schema", "values"):
        raise InvalidOptionError(f"dataset {dataset!r}: option checkNulls must be schema or values, got {nulls!r}")
    key = _get(options, "recordKey")
    operation = _get(options, "operation")
    if operation is not None:
        operation = operation.strip().lower()
        if operation not in KEYED_OPERATIONS:
            raise InvalidOptionError(f"dataset {dataset!r}: option operation must be one of {list(KEYED_OPERATIONS)}, "
                                     f"got {_get(options, 'operation')!r}")
    job = _get(options, "cdkds.job")
    if job is not None and not re.fullmatch(r"[0-9a-f]{32}", job):
        raise InvalidOptionError(f"dataset {dataset!r}: option cdkds.job must be 32 hex digits, got {job!r}")
    properties = {k[len("property."):]: v for k, v in options.items() if k.lower().startswith("property.")}
    return WriteOptions(
        _get(options, "partitionBy"), _get(options, "format"), _get(options, "compression"),
        tuple(k.strip() for k in key.split(",") if k.strip()) if key else None,
        _get(options, "orderingField"), _get(options, "schema"), overwrite == "dynamic",
        _int(options, "targetFileSize", None, dataset, 1), properties, nulls == "schema",
        operation, _bool(options, "cdkds.clustered", dataset), job,
    )
