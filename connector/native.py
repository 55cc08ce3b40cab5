"""Native reads: cdkds plans on the driver, Spark's own Parquet source reads.

:func:`load` takes the options of ``spark.read.format("cdkds")`` and gives the same rows and
schema, but each group of files of the native plan (:func:`~cdkds.catalog.read.native.plan_native`)
is one ``spark.read.parquet`` with an explicit schema, so Spark's column pruning, filter
pushdown, row-group skipping and vectorised decoding apply. Per group, the file columns are
turned into the current columns (renames, widenings, added fields, nested records), then the
scan's predicate, the TTL and the tombstones filter rows, and the deletion vectors drop rows
by position (``_metadata.row_index``). Files none of this can express exactly (Avro, types
Spark reads differently, casts that could differ from cdkds's, field names that differ only in
case) are read by the Python source,
restricted to exactly those files at the same revision and plan time, and unioned in.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Sequence
from urllib.parse import unquote, urlsplit

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdkds.catalog.errors import ExpressionError
from cdkds.catalog.expressions import ALWAYS_TRUE, Expression
from cdkds.catalog.keyed.deletion import load_deletes
from cdkds.catalog.read.native import NativeGroup, NativePlan, NativeReader, plan_native
from cdkds.catalog.storage import ObjectStore
from cdkds.connector.expressions import spark_literal, to_spark_column, top_level_column
from cdkds.connector.s3a import NoS3aEquivalent, has_s3a, s3a_options
from cdkds.connector.options import (
    FALLBACK_OPTION, FallbackFiles, Location, location, read_options, reads_change_feed,
)
from cdkds.connector.source import open_dataset, read_schema
from cdkds.formats.projection import (
    AsStored, CastTo, Conversion, FileColumn, FileProjection, ListConversion, MapConversion, MissingField,
    PartitionValue,
    RecordConversion,
)
from cdkds.formats.schema import default_value

log = logging.getLogger("cdkds.connector")

BROADCAST_ROWS = 2_000_000  # deleted positions up to this many are joined by broadcast
_FILE, _ROW = "__cdkds_file", "__cdkds_row"
_GLOB = re.compile(r"[*?\[\]{}\\]")  # Spark reads a path with these as a glob pattern
_PARQUET = {"datetimeRebaseMode": "CORRECTED", "int96RebaseMode": "CORRECTED"}  # dates as pyarrow reads them, whatever
# the session's spark.sql.parquet.*RebaseModeInRead say
_TIME_TRAVEL = {"versionasof", "version", "timestampasof", "timestamp", "tagasof"}


class Refused(Exception):
    """Why Spark's Parquet source cannot read some files exactly as cdkds does."""


def load(spark: SparkSession, url: str, **options: Any) -> DataFrame:
    """The rows of ``spark.read.format("cdkds").options(**options).load(url)``, with its schema,
    planned by cdkds and read by Spark's Parquet source where it reads them exactly; the
    rest (and stores Spark cannot reach) through the ``cdkds`` source."""
    given = {**{k: v if isinstance(v, str) else json.dumps(v) for k, v in options.items()}, "path": url}
    where = location(given)
    if reads_change_feed(given, where.name):
        return _python_source(spark, given)
    read = read_options(given, where.view, where.name)
    why = _why_python_source(spark, where)
    if why is not None:
        log.info("cdkds: dataset %r read by the cdkds source, not Spark's Parquet source: %s", where.name, why)
        return _python_source(spark, given)
    dataset = open_dataset(where, read.version, read.timestamp, read.tag)
    schema = read_schema(dataset, read.columns, {k.lower(): v for k, v in given.items()})
    plan = dataset.plan(read.where, [f.name for f in schema.fields])
    native = plan_native(dataset.store, plan, SPARK)
    parts, refused = _native_parts(spark, dataset.store, native, _store_options(where))
    fallback = [t.file.path for t in native.fallback] + list(refused)
    if fallback:
        only = FallbackFiles(dataset.version, plan.now, frozenset(fallback))
        pinned = {k: v for k, v in given.items() if k.lower() not in _TIME_TRAVEL}
        parts.append(_python_source(spark, {**pinned, "versionAsOf": str(dataset.version),
                                            FALLBACK_OPTION: only.to_option()}))
    _log_split(where.name, dataset.version, native.native_files - len(refused), {**native.reasons, **refused})
    if not parts:
        return spark.createDataFrame([], schema)
    return _with_metadata(functools.reduce(DataFrame.unionByName, parts), schema)


def _python_source(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    return spark.read.format("cdkds").options(**options).load()


def _log_split(dataset: str, version: int, native: int, reasons: Mapping[str, str]) -> None:
    counts = Counter(reasons.values())
    why = "; ".join(f"{n} because {reason}" for reason, n in counts.most_common())
    log.info("cdkds: dataset %r revision %d: %d files read by Spark's Parquet source, %d by the cdkds source%s",
             dataset, version, native, len(reasons), f" ({why})" if why else "")


# ---------------------------------------------------------------- stores

def _why_python_source(spark: SparkSession, where: Location) -> str | None:
    """Why Spark's Parquet source cannot reach the dataset's store, or ``None``."""
    scheme = urlsplit(where.url).scheme or "file"
    if scheme == "file":
        return None
    if scheme not in ("s3", "s3a"):
        return f"Spark's Parquet source cannot read {scheme}:// stores"
    if not has_s3a(spark):
        return "the Spark session has no s3a file system (hadoop-aws)"
    try:
        s3a_options(where.storage_options)
    except NoS3aEquivalent as e:
        return str(e)
    return None


def _store_options(where: Location) -> dict[str, str]:
    return s3a_options(where.storage_options) if urlsplit(where.url).scheme in ("s3", "s3a") else {}


def spark_url(store: ObjectStore, key: str) -> str:
    """The URL Spark's Parquet source reads a data file at (``file://`` or ``s3a://``)."""
    path = store.path(key)
    return f"file://{path}" if urlsplit(store.url).scheme in ("", "file") else f"s3a://{path}"


# ---------------------------------------------------------------- types and conversions

def spark_type(t: pa.DataType) -> T.DataType:
    """The Spark type Spark's Parquet source reads a column pyarrow wrote as ``t`` into,
    giving the values pyarrow reads (Refused if there is none)."""
    simple = {pa.bool_(): T.BooleanType(), pa.int8(): T.ByteType(), pa.int16(): T.ShortType(),
              pa.int32(): T.IntegerType(), pa.int64(): T.LongType(), pa.float32(): T.FloatType(),
              pa.float64(): T.DoubleType(), pa.string(): T.StringType(), pa.large_string(): T.StringType(),
              pa.binary(): T.BinaryType(), pa.large_binary(): T.BinaryType(), pa.date32(): T.DateType()}
    if t in simple:
        return simple[t]
    if pa.types.is_fixed_size_binary(t):
        return T.BinaryType()
    if pa.types.is_timestamp(t) and t.unit in ("ms", "us"):
        return T.TimestampType() if t.tz is not None else T.TimestampNTZType()
    if pa.types.is_decimal128(t):
        return T.DecimalType(t.precision, t.scale)
    if pa.types.is_struct(t):
        return T.StructType([T.StructField(f.name, spark_type(f.type)) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return T.ArrayType(spark_type(t.value_type))
    if pa.types.is_map(t) and pa.types.is_string(t.key_type):
        return T.MapType(T.StringType(), spark_type(t.item_type))
    raise Refused(f"Spark's Parquet source does not read {t} as cdkds does")


_EXACT_CASTS = {  # Spark casts whose values are pyarrow's (safe=True) for every value
    (T.ByteType, T.ShortType), (T.ByteType, T.IntegerType), (T.ByteType, T.LongType), (T.ShortType, T.IntegerType),
    (T.ShortType, T.LongType), (T.IntegerType, T.LongType), (T.IntegerType, T.DoubleType),
    (T.FloatType, T.DoubleType), (T.StringType, T.BinaryType),
}


def _cast(column: Column, source: pa.DataType, target: pa.DataType) -> Column:
    """``column`` (read as ``source``) cast as pyarrow casts it to ``target``."""
    a, b = spark_type(source), spark_type(target)
    if a == b:
        return column
    if (type(a), type(b)) in _EXACT_CASTS or (isinstance(a, T.DecimalType) and isinstance(b, T.DecimalType)
                                              and a.scale == b.scale and a.precision <= b.precision):
        return column.cast(b)
    raise Refused(f"Spark's cast of {source} to {target} may differ from cdkds's")


def _filled(field: dict, target: pa.DataType) -> Column:
    """A field a file lacks: its default, or null, as a literal of the Spark type."""
    return _constant(default_value(field["type"], field.get("default")), target)


def _constant(value: Any, target: pa.DataType) -> Column:
    """``value`` (or null) in every row, as a literal of the Spark type of ``target``."""
    typ = spark_type(target)
    if value is None:
        return F.lit(None).cast(typ)
    try:
        literal = spark_literal(pa.scalar(value, target).as_py(), target)
    except ExpressionError:
        raise Refused(f"a constant of type {target} is read by cdkds") from None
    return _nullable(literal.cast(typ), typ)  # as the field may be


def _converted(column: Column, convert: Conversion, source: pa.DataType) -> Column:
    """A file column read as ``source``, converted as cdkds converts it."""
    if isinstance(convert, AsStored):
        return column
    if isinstance(convert, CastTo):
        return _cast(column, source, convert.target)
    if isinstance(convert, RecordConversion):
        children = []
        for target, (index, child) in zip(convert.target, convert.children):
            value = _filled(child, target.type) if index is None else \
                _converted(column.getField(source.field(index).name), child, source.field(index).type)
            children.append(value.alias(target.name))
        return F.when(column.isNotNull(), F.struct(*children))
    if isinstance(convert, ListConversion):
        return F.transform(column, lambda item: _converted(item, convert.items, source.value_type))
    if isinstance(convert, MapConversion):
        return F.transform_values(column, lambda _, value: _converted(value, convert.values, source.item_type))
    raise Refused(f"conversion {type(convert).__name__} is read by cdkds")


def _conversions(projection: FileProjection) -> str | None:
    """Why Spark cannot read through ``projection``, judged without the file's types (defaults
    and target types); the file's own types are judged per group by :func:`_group_frame`."""
    try:
        for reader, target in zip(projection.readers, projection.schema):
            spark_type(target.type)
            if isinstance(reader, MissingField):
                _filled(reader.field, target.type)
            elif isinstance(reader, PartitionValue):
                _constant(reader.value, target.type)
    except Refused as e:
        return str(e)
    return None


SPARK = NativeReader("Spark's Parquet source", deletion_vectors=True, predicates=True, conversions=_conversions)


# ---------------------------------------------------------------- groups

@dataclass(frozen=True)
class _Layout:
    """A group's file columns as Spark reads them, and the current columns made of them."""

    read_schema: T.StructType
    columns: tuple[Column, ...] | None  # None: the file columns are the plan's, as they are


def _layout(group: NativeGroup) -> _Layout:
    """How Spark reads ``group``'s files into the plan's columns (Refused if not exactly)."""
    projection = group.projection
    layout = group.layout
    read_schema = T.StructType([T.StructField(n, spark_type(layout.field(n).type)) for n in projection.read_columns])
    if projection.is_identity:
        return _Layout(read_schema, None)
    columns = []
    for reader, target in zip(projection.readers, projection.schema):
        if isinstance(reader, FileColumn):
            value = _converted(top_level_column(reader.name), reader.convert, layout.field(reader.name).type)
        elif isinstance(reader, PartitionValue):
            value = _constant(reader.value, target.type)
        else:
            value = _filled(reader.field, target.type)
        columns.append(value.alias(target.name))
    return _Layout(read_schema, tuple(columns))


def _native_parts(spark: SparkSession, store: ObjectStore, plan: NativePlan, store_options: Mapping[str, str]
                  ) -> tuple[list[DataFrame], dict[str, str]]:
    """A DataFrame per group of the plan, and why the files of groups Spark cannot read are left out."""
    parts, refused = [], {}
    for group in plan.groups:
        try:
            parts.append(_group_frame(spark, store, plan, group, store_options))
        except Refused as e:
            refused.update({t.file.path: str(e) for t in group.tasks})
    return parts, refused


def _group_frame(spark: SparkSession, store: ObjectStore, plan: NativePlan, group: NativeGroup,
                 store_options: Mapping[str, str]) -> DataFrame:
    """The plan's output rows of one group's files, read by Spark's Parquet source."""
    if any(_GLOB.search(store.path(t.file.path)) for t in group.tasks):
        raise Refused("a path Spark would read as a glob pattern")
    layout = _layout(group)
    if _names_clash_without_case(group.layout) or \
            len({c.lower() for c in plan.read_columns}) < len(plan.read_columns):
        raise Refused("fields whose names differ only in case (Spark's Parquet source matches them without case)")
    urls = [spark_url(store, t.file.path) for t in group.tasks]
    frame = spark.read.options(**_PARQUET, **store_options).schema(layout.read_schema).parquet(*urls)
    if group.has_deletes:
        frame = _without_deleted(spark, store, group, frame)
    if layout.columns is not None:
        frame = frame.select(*layout.columns)
    arrow = pa.schema([plan.scan.snapshot.descriptor.arrow_schema.field(c) for c in plan.read_columns])
    try:
        rules = _row_rules(plan.scan.predicate, group.visible, group.tombstones, arrow)
    except ExpressionError as e:
        raise Refused(str(e)) from None
    for rule in rules:
        frame = frame.filter(rule)
    if plan.read_columns == plan.scan.columns:
        return frame
    return frame.select(*(top_level_column(c) for c in plan.scan.columns))


def _names_clash_without_case(schema: pa.Schema | pa.StructType) -> bool:
    """Whether two sibling fields, at any depth, have names that differ only in case."""
    fields = list(schema)
    if len({f.name.lower() for f in fields}) < len(fields):
        return True
    return any(_names_clash_without_case(t) for t in map(_record_of, (f.type for f in fields)) if t is not None)


def _record_of(t: pa.DataType) -> pa.StructType | None:
    """The record type ``t`` is or holds (in lists and map values), if any."""
    while pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        t = t.item_type if pa.types.is_map(t) else t.value_type
    return t if pa.types.is_struct(t) else None


def _row_rules(predicate: Expression, visible: Expression, tombstones: Sequence[Expression], arrow: pa.Schema
               ) -> list[Column]:
    """The filters a group's rows pass: the scan's predicate, TTL (true only) and no tombstone true."""
    rules = [to_spark_column(e, arrow) for e in (predicate, visible) if e is not ALWAYS_TRUE]
    return rules + [~F.coalesce(to_spark_column(t, arrow), F.lit(False)) for t in tombstones]


def _without_deleted(spark: SparkSession, store: ObjectStore, group: NativeGroup, frame: DataFrame) -> DataFrame:
    """``frame`` without the rows the group's deletion vectors delete, by file and position."""
    names = _spark_file_names(frame, store, group)
    files, rows = [], []
    for t in group.tasks:
        deleted = load_deletes(store, t.file.deletes)
        if deleted is None:
            continue
        positions = deleted.to_numpy().astype("int64")
        for name in names[t.file.path]:
            files.append(pa.array([name] * len(positions), pa.string()))
            rows.append(pa.array(positions))
    file, row = unused_names(frame.columns, _FILE, _ROW)
    table = pa.table({file: pa.concat_arrays(files), row: pa.concat_arrays(rows)})
    deleted_frame = spark.createDataFrame(table)
    if table.num_rows <= BROADCAST_ROWS:
        deleted_frame = F.broadcast(deleted_frame)
    metadata = frame.metadataColumn("_metadata")  # Spark's, even where a data column is named _metadata
    marked = frame.select("*", metadata.getField("file_path").alias(file), metadata.getField("row_index").alias(row))
    return marked.join(deleted_frame, [file, row], "left_anti").drop(file, row)


def unused_names(columns: Sequence[str], *names: str) -> tuple[str, ...]:
    """``names``, each suffixed until no column has it (Spark compares names without case)."""
    taken = {c.lower() for c in columns}
    out = []
    for name in names:
        while name.lower() in taken:
            name += "_"
        taken.add(name.lower())
        out.append(name)
    return tuple(out)


def _spark_file_names(frame: DataFrame, store: ObjectStore, group: NativeGroup) -> dict[str, list[str]]:
    """Each file's names in ``_metadata.file_path``: the URI Spark lists it under (percent-encoded
    by Hadoop), with and without an empty authority (``file:///x``, ``file:/x``)."""
    listed = {}
    for uri in frame.inputFiles():
        parts = urlsplit(uri)
        listed[unquote(parts.netloc + parts.path)] = uri
    out = {}
    for t in group.tasks:
        if t.file.deletes:
            path = store.path(t.file.path)
            uri = listed.get(path)
            if uri is None:
                raise Refused("Spark lists the file under a name cdkds cannot match to its deletion vectors")
            out[t.file.path] = sorted({uri, re.sub(r"^([a-z0-9]+):///", r"\1:/", uri)})
    return out


# ---------------------------------------------------------------- the schema

def _with_metadata(frame: DataFrame, schema: T.StructType) -> DataFrame:
    """``frame`` with ``schema``'s field metadata. Its columns stay plain columns, so Spark
    still pushes filters on them into the Parquet scan; for the same reason they keep the
    nullability Spark's Parquet source gives (every column may be null), and a required
    field shows as nullable."""
    for f in schema.fields:
        if f.metadata:
            frame = frame.withMetadata(f.name, f.metadata)
    return frame


def _nullable(column: Column, typ: T.DataType) -> Column:
    """``column`` as it is, which Spark takes for one that may be null."""
    return F.nullif(column, F.lit(None).cast(typ))


# ---------------------------------------------------------------- SQL

def register_views(spark: SparkSession, repository_url: str, storage_options: dict | None = None) -> list[str]:
    """A temporary view per dataset of the repository over :func:`load` (``namespace/name``
    becomes ``namespace_name``). Each view is pinned to the revision its dataset had when it
    was made: later commits show after registering again."""
    from cdkds.catalog import DatasetRepository

    repo = DatasetRepository(repository_url, storage_options)
    names = []
    extra = {"storageOptions": storage_options} if storage_options else {}
    for name in repo.list():
        table = name.replace("/", "_")
        load(spark, f"{repo.url.rstrip('/')}/{name}", **extra).createOrReplaceTempView(table)
        names.append(table)
    return names

