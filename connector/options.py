"""The options of ``spark.read/write.format("cdkds")`` and SQL, checked and typed.

Spark hands a data source a case-insensitive dict of strings. This module turns it into
:class:`Location`, :class:`ReadOptions`, :class:`StreamReadOptions` and :class:`WriteOptions`,
with errors that name the dataset, the option and the value. Kite view URIs (``view:file:/data/users?userId=1234``)
carry a location and constraints in one string.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence
from urllib.parse import parse_qsl, urlsplit

from cdkds.catalog.quantities import parse_size
from cdkds.catalog.errors import CdkdsError, ExpressionError, InvalidTimeTravelError
from cdkds.catalog.expressions import ALWAYS_TRUE, Expression, Predicate, all_of, as_expression
from cdkds.catalog.log.branches import MAIN
from cdkds.catalog.log.commit import millis
from cdkds.catalog.read.columns import select_columns
from cdkds.formats.files import DEFAULT_BATCH_ROWS

if TYPE_CHECKING:
    from cdkds.catalog.descriptor import DatasetDescriptor

DEFAULT_MAX_PARTITION_BYTES = 128 * 1024 * 1024  # spark.sql.files.maxPartitionBytes
DEFAULT_MAX_FILES_PER_TRIGGER = 1000  # Delta's default
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


# Every option the source reads, by use (Spark hands a source every option it was given; a
# misspelled one would otherwise be ignored without a word).
KNOWN_OPTIONS = {
    "location": ("path", "storageOptions", "branch"),
    "read": ("where", "columns", "versionAsOf", "version", "timestampAsOf", "timestamp", "tagAsOf", "pushFilters",
             "maxPartitionBytes", "batchRows", "minPartitions"),
    "stream read": ("startingVersion", "startingTimestamp", "maxFilesPerTrigger", "maxBytesPerTrigger",
                    "skipChangeCommits"),
    "change feed": ("readChangeFeed", "endingVersion", "endingTimestamp"),
    "write": ("partitionBy", "format", "compression", "recordKey", "orderingField", "schema", "partitionOverwrite",
              "partitionOverwriteMode", "targetFileSize", "checkNulls", "operation", "sortBy", "txnAppId",
              "txnVersion", "cdkds.clustered", "cdkds.job"),
    "Spark": ("checkpointLocation", "queryName"),  # a streaming query's options reach its sink too
    "native read": ("cdkds.nativeFallback",),  # set by cdkds.connector.load for the files it leaves to the source
}
PROPERTY_PREFIX = "property."


def check_known_options(options: Mapping[str, str], dataset: str) -> None:
    """Refuse an option the source does not know, naming the nearest known one (a
    ``property.`` option must name a descriptor property the library reads)."""
    import difflib

    from cdkds.catalog.descriptor import KNOWN_PROPERTIES

    given = list(options)
    if any(k.lower() == "provider" for k in given):
        # a CREATE TABLE: Spark adds provider, location, owner... and the TBLPROPERTIES, and
        # repeats each key of its OPTIONS as option.<key>: those (and path) are ours
        given = [k[len("option."):] for k in given if k.lower().startswith("option.")]
    known = {name.lower(): name for names in KNOWN_OPTIONS.values() for name in names}
    for key in given:
        lowered = key.lower()
        if lowered.startswith(PROPERTY_PREFIX):
            prop = key[len(PROPERTY_PREFIX):]
            if prop not in KNOWN_PROPERTIES:
                near = difflib.get_close_matches(prop, KNOWN_PROPERTIES, 1)
                hint = f"did you mean {PROPERTY_PREFIX}{near[0]}? " if near else ""
                raise InvalidOptionError(f"dataset {dataset!r}: unknown option {key!r} ({hint}the descriptor "
                                         f"properties are {', '.join(KNOWN_PROPERTIES)})")
            continue
        if lowered in known:
            continue
        near = difflib.get_close_matches(lowered, list(known), 1, 0.6)
        hint = f"did you mean {known[near[0]]}? " if near else ""
        raise InvalidOptionError(f"dataset {dataset!r}: unknown option {key!r} ({hint}the options are listed in the "
                                 f"README, Spark)")


@dataclass(frozen=True)
class Location:
    """Where a dataset is: its URL and the fsspec storage options to open it with."""

    url: str
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    view: Expression = ALWAYS_TRUE  # constraints of a Kite view URI
    branch: str | None = None  # the branch read and written (option branch); None: main

    @property
    def name(self) -> str:
        return self.url.rstrip("/").rsplit("/", 1)[-1]


def location(options: Mapping[str, str]) -> Location:
    """The dataset location of the ``path`` option (a URL, a local path or a Kite view URI)."""
    path = _get(options, "path")
    if not path:
        raise InvalidOptionError("the cdkds source needs a dataset URL: load(url), save(url) or option('path', url)")
    check_known_options(options, path.rstrip("/").rsplit("/", 1)[-1])
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
    branch = _get(options, "branch")
    return Location(path, storage_options, view, None if branch == MAIN else branch)


NO_WRITE_TARGET = (
    "Spark does not tell the cdkds source which dataset this write goes to: a write into a catalog table "
    "(INSERT INTO/OVERWRITE, insertInto, saveAsTable of an existing table, CREATE TABLE ... AS SELECT, writeTo) "
    "and save() without a path pass a Python source no options, only the rows, whose column metadata names the "
    "dataset they were read from, and cdkds never writes there. Name the dataset in the write: "
    "df.write.format('cdkds').mode('append').save(url), INSERT INTO t WITH ('path' = url) SELECT ..., "
    "df.writeTo(t).option('path', url).append(), or INSERT INTO a temporary view made with "
    "CREATE TEMPORARY VIEW v USING cdkds OPTIONS (path url) (cdkds.connector.register(spark, repository_url) "
    "makes one per dataset)")


# Read options by which a view shows part of its dataset (some rows, an older revision).
VIEW_OPTIONS = ("where", "versionAsOf", "version", "timestampAsOf", "timestamp", "tagAsOf")


def write_location(options: Mapping[str, str]) -> Location:
    """Where a write goes: the write's own ``path`` option, never a path carried in the
    rows' schema (that names the dataset the rows were read from). A write through a view
    (a view URI's constraints, or a temporary view's ``where`` or time travel option,
    which Spark hands to its writes) is refused: its overwrite would replace rows the view
    does not show, and its rows would land in a revision it does not show."""
    if not _get(options, "path"):
        raise InvalidOptionError(NO_WRITE_TARGET)
    where = location(options)
    shown = [k for k in options if k.lower() in {o.lower() for o in VIEW_OPTIONS}]
    if where.view is not ALWAYS_TRUE or shown:
        what = f"option {shown[0]}" if shown else "the URI's constraints"
        raise InvalidOptionError(f"dataset {where.name!r}: cannot write through a view, which shows only part of "
                                 f"the dataset ({what}); write to {where.url}")
    return where


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
    tag: str | None  # tagAsOf: the revision a tag names
    where: Expression
    columns: tuple[str, ...] | None
    push_filters: bool
    max_partition_bytes: int
    batch_rows: int
    min_partitions: int | None  # the parallelism splits are sized for (default: Spark's, or the cores)


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
    tag = _get(options, "tagAsOf")
    if tag is not None and (version is not None or timestamp is not None):
        raise InvalidOptionError(f"dataset {dataset!r}: give tagAsOf, versionAsOf or timestampAsOf, not several")
    return ReadOptions(
        version, timestamp, tag, all_of([_where(options, dataset), where_from_view]), columns_option(options, dataset),
        _bool(options, "pushFilters", dataset),
        _int(options, "maxPartitionBytes", DEFAULT_MAX_PARTITION_BYTES, dataset, 1),
        _int(options, "batchRows", DEFAULT_BATCH_ROWS, dataset, 1),
        _int(options, "minPartitions", None, dataset, 1),
    )


@dataclass(frozen=True)
class FallbackFiles:
    """The files of a native read (:func:`cdkds.connector.load`) that the source reads: the
    revision and the moment (ms, for TTL) the read was planned at, and the files' paths."""

    version: int
    now: int
    paths: frozenset[str]

    def to_option(self) -> str:
        return json.dumps({"version": self.version, "now": self.now, "paths": sorted(self.paths)})


FALLBACK_OPTION = "cdkds.nativeFallback"


def fallback_files(options: Mapping[str, str], dataset: str) -> FallbackFiles | None:
    """The files option ``cdkds.nativeFallback`` restricts a read to, if given."""
    text = _get(options, FALLBACK_OPTION)
    if text is None:
        return None
    try:
        data = json.loads(text)
        return FallbackFiles(int(data["version"]), int(data["now"]), frozenset(map(str, data["paths"])))
    except (ValueError, KeyError, TypeError):
        raise InvalidOptionError(f"dataset {dataset!r}: option {FALLBACK_OPTION} is set by cdkds.connector.load; "
                                 f"got {text[:200]!r}") from None


def _where(options: Mapping[str, str], dataset: str) -> Expression:
    text = _get(options, "where")
    try:
        return as_expression(text) if text else ALWAYS_TRUE
    except ExpressionError as e:
        raise InvalidOptionError(f"dataset {dataset!r}: option where: {e}") from None


def columns_option(options: Mapping[str, str], dataset: str) -> tuple[str, ...] | None:
    """The columns option: the columns a read outputs (``None``: all)."""
    text = _get(options, "columns")
    columns = tuple(c.strip() for c in text.split(",") if c.strip()) if text else None
    if text is not None and not columns:
        raise InvalidOptionError(f"dataset {dataset!r}: option columns names no column: {text!r}")
    return columns


def output_columns(dataset: str, descriptor: "DatasetDescriptor", columns: Sequence[str] | None,
                   select: Callable[..., tuple[str, ...]] = select_columns) -> tuple[str, ...]:
    """The columns a Spark read (batch, change feed or stream) outputs: ``select``
    (:func:`select_columns`, or the change feed's), its error an :class:`InvalidOptionError`
    with the same message."""
    try:
        return select(dataset, descriptor, columns)
    except ExpressionError as e:
        raise InvalidOptionError(str(e)) from None


@dataclass(frozen=True)
class StreamStart:
    """Where a new streaming query starts (a restarted one resumes from its checkpoint):
    ``snapshot`` — the whole latest snapshot, then every later commit; ``latest`` — only
    commits after the latest; ``version`` — commits from revision ``value`` on; ``timestamp``
    — commits from the first one at or after ``value`` (ms since the epoch) on."""

    kind: str
    value: int | None = None


@dataclass(frozen=True)
class StreamReadOptions:
    """The options of ``spark.readStream.format("cdkds")``. ``max_files`` and ``max_bytes``
    bound a micro-batch (``None``: no bound); a batch always takes at least one file."""

    start: StreamStart
    max_files: int | None
    max_bytes: int | None
    skip_change_commits: bool
    where: Expression
    columns: tuple[str, ...] | None
    max_partition_bytes: int
    batch_rows: int


_TIME_TRAVEL = ("versionAsOf", "version", "timestampAsOf", "timestamp", "tagAsOf")


def stream_read_options(options: Mapping[str, str], where_from_view: Expression, dataset: str) -> StreamReadOptions:
    given = [name for name in _TIME_TRAVEL if _get(options, name) is not None]
    if given:
        raise InvalidOptionError(f"dataset {dataset!r}: option {given[0]} is for batch reads; a stream starts with "
                                 f"option startingVersion or startingTimestamp")
    version, timestamp = _get(options, "startingVersion"), _get(options, "startingTimestamp")
    if version is not None and timestamp is not None:
        raise InvalidOptionError(f"dataset {dataset!r}: give option startingVersion or startingTimestamp, not both "
                                 f"(got startingVersion={version!r} and startingTimestamp={timestamp!r})")
    if version is not None:
        start = _starting_version(version, dataset)
    elif timestamp is not None:
        start = StreamStart("timestamp", _starting_timestamp(timestamp, dataset))
    else:
        start = StreamStart("snapshot")
    max_bytes = _bytes(options, "maxBytesPerTrigger", dataset)
    max_files = _int(options, "maxFilesPerTrigger", None, dataset, 1)
    if max_files is None and max_bytes is None:
        max_files = DEFAULT_MAX_FILES_PER_TRIGGER  # as Delta: the default applies only without a byte limit
    return StreamReadOptions(
        start, max_files, max_bytes, _bool(options, "skipChangeCommits", dataset),
        all_of([_where(options, dataset), where_from_view]), columns_option(options, dataset),
        _int(options, "maxPartitionBytes", DEFAULT_MAX_PARTITION_BYTES, dataset, 1),
        _int(options, "batchRows", DEFAULT_BATCH_ROWS, dataset, 1),
    )


def _starting_version(text: str, dataset: str) -> StreamStart:
    if text.strip().lower() == "latest":
        return StreamStart("latest")
    try:
        value = int(text.strip())
    except ValueError:
        value = -1
    if value < 0:
        raise InvalidOptionError(f"dataset {dataset!r}: option startingVersion must be 'latest' or a revision "
                                 f"(an integer >= 0), got {text!r}")
    return StreamStart("version", value)


def _starting_timestamp(text: str, dataset: str, name: str = "startingTimestamp") -> int:
    stripped = text.strip()
    try:
        return int(stripped) if re.fullmatch(r"-?\d+", stripped) else millis(stripped)
    except InvalidTimeTravelError:
        raise InvalidOptionError(f"dataset {dataset!r}: option {name} must be a time (ISO 8601 text such "
                                 f"as 2026-03-01T10:00:00Z, or milliseconds since the epoch), got {text!r}") from None


@dataclass(frozen=True)
class ChangeFeedOptions:
    """The options of a change feed read (``readChangeFeed``): where it starts (a
    :class:`StreamStart` of kind ``version``, ``timestamp`` or, for a stream, ``latest``),
    where a batch read ends (a revision or a time in ms; ``None``: the latest), the
    columns, and the files a stream's micro-batch may read."""

    start: StreamStart
    end_version: int | None
    end_timestamp: int | None
    columns: tuple[str, ...] | None
    max_files: int
    max_partition_bytes: int


def reads_change_feed(options: Mapping[str, str], dataset: str) -> bool:
    return _bool(options, "readChangeFeed", dataset)


def change_feed_end(options: Mapping[str, str], dataset: str) -> tuple[int | None, int | None]:
    """Where a batch change feed ends: options endingVersion or endingTimestamp (ms)."""
    end_version = _int(options, "endingVersion", None, dataset)
    end_text = _get(options, "endingTimestamp")
    end_timestamp = None if end_text is None else _starting_timestamp(end_text, dataset, "endingTimestamp")
    if end_version is not None and end_timestamp is not None:
        raise InvalidOptionError(f"dataset {dataset!r}: give option endingVersion or endingTimestamp, not both")
    return end_version, end_timestamp


def change_feed_options(options: Mapping[str, str], dataset: str, streaming: bool) -> ChangeFeedOptions:
    """The change feed options, checked: a start (a revision, a time, or for a stream
    ``latest``), no time travel or ``where``, and an end only for batch reads."""
    for name in (*_TIME_TRAVEL, "where", "pushFilters", "skipChangeCommits"):
        if _get(options, name) is not None:
            raise InvalidOptionError(f"dataset {dataset!r}: option {name} cannot be combined with readChangeFeed "
                                     f"(the feed's range is startingVersion/startingTimestamp to "
                                     f"endingVersion/endingTimestamp; filter the change rows in Spark)")
    version, timestamp = _get(options, "startingVersion"), _get(options, "startingTimestamp")
    if (version is None) == (timestamp is None):
        raise InvalidOptionError(f"dataset {dataset!r}: readChangeFeed needs option startingVersion or "
                                 f"startingTimestamp" + (", not both" if version is not None else ""))
    start = _starting_version(version, dataset) if version is not None else \
        StreamStart("timestamp", _starting_timestamp(timestamp, dataset))
    if start.kind == "latest" and not streaming:
        raise InvalidOptionError(f"dataset {dataset!r}: option startingVersion=latest is for streams; a batch "
                                 f"change feed starts at a revision (an integer >= 0)")
    end_version, end_timestamp = change_feed_end(options, dataset)
    if streaming and (end_version is not None or end_timestamp is not None):
        raise InvalidOptionError(f"dataset {dataset!r}: a streaming change feed has no end; endingVersion and "
                                 f"endingTimestamp are for batch reads")
    return ChangeFeedOptions(start, end_version, end_timestamp, columns_option(options, dataset),
                             _int(options, "maxFilesPerTrigger", DEFAULT_MAX_FILES_PER_TRIGGER, dataset, 1),
                             _int(options, "maxPartitionBytes", DEFAULT_MAX_PARTITION_BYTES, dataset, 1))


def _bytes(options: Mapping[str, str], name: str, dataset: str) -> int | None:
    """A positive size: a number of bytes, or with a unit as Spark writes them (``512k``, ``10m``, ``1g``)."""
    text = _get(options, name)
    if text is None:
        return None
    try:
        size = parse_size(text)
    except ValueError:
        size = 0
    if size < 1:
        raise InvalidOptionError(f"dataset {dataset!r}: option {name} must be a positive number of bytes (such as "
                                 f"1048576, 512k, 10m or 1g), got {text!r}")
    return size


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
    txn_app_id: str | None = None  # exactly once: the application whose batch txn_version this write is
    txn_version: int | None = None
    sort_by: str | None = None  # fields each data file is sorted by, for this write (cdkds.catalog.write.sorting)


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
    txn_app_id, txn_version = _get(options, "txnAppId"), _int(options, "txnVersion", None, dataset, 0)
    if (txn_app_id is None) != (txn_version is None):
        given, missing = ("txnAppId", "txnVersion") if txn_version is None else ("txnVersion", "txnAppId")
        raise InvalidOptionError(f"dataset {dataset!r}: option {given} needs option {missing} too (an exactly-once "
                                 f"write names its application and its batch)")
    if txn_app_id is not None and not txn_app_id.strip():
        raise InvalidOptionError(f"dataset {dataset!r}: option txnAppId must name the application, got {txn_app_id!r}")
    return WriteOptions(
        _get(options, "partitionBy"), _get(options, "format"), _get(options, "compression"),
        tuple(k.strip() for k in key.split(",") if k.strip()) if key else None,
        _get(options, "orderingField"), _get(options, "schema"), overwrite == "dynamic",
        _int(options, "targetFileSize", None, dataset, 1), properties, nulls == "schema",
        operation, _bool(options, "cdkds.clustered", dataset), job, txn_app_id, txn_version,
        _get(options, "sortBy"),  # checked against the dataset's schema by the driver's plan
    )
