"""Options and view URIs: the connector's logic that needs no Spark session."""

import pytest

from cdkds.catalog.expressions import ALWAYS_TRUE
from cdkds.connector.options import InvalidOptionError, location, parse_view_uri, read_options, write_options


def test_min_partitions_option():
    assert read_options({}, ALWAYS_TRUE, "d").min_partitions is None
    assert read_options({"minPartitions": "8"}, ALWAYS_TRUE, "d").min_partitions == 8
    for bad in ("0", "-2", "two", "1.5"):
        with pytest.raises(InvalidOptionError, match=f"dataset 'd': option minPartitions must be an integer >= 1, "
                                                     f"got '{bad}'"):
            read_options({"minPartitions": bad}, ALWAYS_TRUE, "d")


def test_parse_view_uri():
    base, expr = parse_view_uri("view:file:/data/users?userId=1234&ts=[2026-01-01,2026-02-01)&c=NZ,AU")
    assert base == "file:/data/users"
    assert str(expr) == "(userId = '1234' and ts >= '2026-01-01' and ts < '2026-02-01' and c in ('NZ', 'AU'))"
    with pytest.raises(InvalidOptionError, match="range for 'x' has no bounds"):
        parse_view_uri("view:file:/d/u?x=[,]")
    with pytest.raises(InvalidOptionError, match="constraint 'x' has no value"):
        parse_view_uri("view:file:/d/u?x=")


def test_spark_negations_of_any_depth_push_down():
    from pyspark.sql import datasource as ds

    from cdkds.catalog.expressions import Not, field
    from cdkds.connector.source import spark_filter_to_expression

    f = ds.EqualTo(("x",), 1)
    for depth in range(1, 1001):
        f = ds.Not(f)
        if depth in (1, 2, 999, 1000):
            expected = Not(field("x") == 1) if depth % 2 else field("x") == 1
            assert spark_filter_to_expression(f) == expected
    assert spark_filter_to_expression(ds.Not(ds.Not(ds.EqualNullSafe(("x",), 1)))) is None


def test_location_and_storage_options():
    where = location({"path": "file:/data/lake/users", "storageOptions": '{"anon": true}'})
    assert where.url == "file:///data/lake/users" and where.storage_options == {"anon": True} and where.name == "users"
    assert location({"PATH": "s3://b/lake/t"}).url == "s3://b/lake/t"
    assert location({"path": "file:///x/t", "branch": "audit"}).branch == "audit"
    assert location({"path": "file:///x/t", "branch": "main"}).branch is None  # main itself


@pytest.mark.parametrize("options, message", [
    ({}, "needs a dataset URL"),
    ({"path": "file:///x/t", "storageOptions": "{bad"}, "storageOptions must be a JSON object"),
    ({"path": "file:///x/t", "storageOptions": "[1]"}, "storageOptions must be a JSON object"),
])
def test_bad_locations(options, message):
    with pytest.raises(InvalidOptionError, match=message):
        location(options)


@pytest.mark.parametrize("options, message", [
    ({"versionAsOf": "x"}, "dataset 't': option versionAsOf must be an integer >= 0, got 'x'"),
    ({"versionAsOf": "-1"}, "option versionAsOf must be an integer >= 0"),
    ({"versionAsOf": "1", "timestampAsOf": "2026-01-01"}, "not both"),
    ({"versionAsOf": "1", "version": "2"}, "disagree"),
    ({"versionAsOf": "1", "tagAsOf": "q3"}, "dataset 't': give tagAsOf, versionAsOf or timestampAsOf, not several"),
    ({"timestampAsOf": "2026-01-01", "tagAsOf": "q3"}, "give tagAsOf, versionAsOf or timestampAsOf, not several"),
    ({"where": "id = = 1"}, "option where: cannot parse predicate"),
    ({"columns": " , "}, "option columns names no column"),
    ({"pushFilters": "yes"}, "option pushFilters must be true or false"),
    ({"maxPartitionBytes": "0"}, "option maxPartitionBytes must be an integer >= 1"),
    ({"batchRows": "many"}, "option batchRows must be an integer"),
])
def test_bad_read_options(options, message):
    with pytest.raises(InvalidOptionError, match=message):
        read_options(options, ALWAYS_TRUE, "t")


def test_read_options():
    read = read_options({"version": "3", "where": "id > 1", "columns": "a, b", "pushFilters": "TRUE"}, ALWAYS_TRUE, "t")
    assert (read.version, read.columns, read.push_filters, str(read.where)) == (3, ("a", "b"), True, "id > 1")


@pytest.mark.parametrize("options, message", [
    ({"partitionOverwrite": "sometimes"}, "option partitionOverwrite must be static or dynamic"),
    ({"targetFileSize": "0"}, "option targetFileSize must be an integer >= 1"),
])
def test_bad_write_options(options, message):
    with pytest.raises(InvalidOptionError, match=message):
        write_options(options, "t")


def test_write_options():
    write = write_options({"partitionBy": "hash(id, 4)", "recordKey": "a, b", "partitionOverwrite": "DYNAMIC",
                           "property.checkpoint.interval": "5"}, "t")
    assert write.record_key == ("a", "b") and write.dynamic_partition_overwrite
    assert write.properties == {"checkpoint.interval": "5"}


def test_register_carries_the_sessions_parallelism_to_the_planner():
    from types import SimpleNamespace

    from pyspark import cloudpickle

    from cdkds.connector import CdkdsDataSource, _with_parallelism

    source = _with_parallelism(SimpleNamespace(sparkContext=SimpleNamespace(defaultParallelism=7)))
    assert issubclass(source, CdkdsDataSource) and source.name() == "cdkds" and source.default_parallelism == 7
    shipped = cloudpickle.loads(cloudpickle.dumps(source))  # Spark pickles the class to its planner process
    assert shipped.default_parallelism == 7

    class Connect:  # Spark Connect sessions have no SparkContext
        @property
        def sparkContext(self):  # noqa: N802
            raise RuntimeError("[JVM_ATTRIBUTE_NOT_SUPPORTED]")

    assert _with_parallelism(Connect()) is CdkdsDataSource and CdkdsDataSource.default_parallelism is None


@pytest.mark.parametrize("entry", ["batch", "change feed", "stream"])
def test_an_unknown_column_is_the_same_error_for_every_spark_read(tmp_path, entry):
    """The batch source, the change feed and a stream select columns as a plain-Python scan
    does (``select_columns``), with its message (no session needed)."""
    import re

    from pyspark.sql.types import LongType, StructField, StructType

    from cdkds.catalog import DatasetDescriptor, DatasetRepository
    from cdkds.connector.source import CdkdsDataSource
    from cdkds.connector.streaming import plan_stream_read
    from tests.catalog.read.test_columns import SCHEMA, UNKNOWN

    repo = DatasetRepository(f"file://{tmp_path}/lake")
    repo.create("x", DatasetDescriptor(SCHEMA)).writer().close()
    url = f"{repo.url}/x"
    with pytest.raises(InvalidOptionError, match=re.escape(UNKNOWN)):
        if entry == "batch":
            CdkdsDataSource({"path": url, "columns": "id,nope"}).schema()
        elif entry == "change feed":
            CdkdsDataSource({"path": url, "readChangeFeed": "true", "startingVersion": "0", "columns": "nope"}).schema()
        else:  # a stream's columns are its schema's (Spark's, or one given to readStream)
            schema = StructType([StructField("id", LongType()), StructField("nope", LongType())])
            plan_stream_read({"path": url}, schema).feed


@pytest.mark.parametrize("options, message", [
    ({"partitonBy": "identity(c)"}, "unknown option 'partitonBy' \\(did you mean partitionBy\\?"),
    ({"verisonAsOf": "1"}, "unknown option 'verisonAsOf' \\(did you mean versionAsOf\\?"),
    ({"property.no.such": "1"}, "unknown option 'property.no.such' \\(the descriptor properties are checkpoint"),
    ({"property.index.bucket": "4"}, "unknown option .property.index.bucket. \\(did you mean property.index.buckets\\?"),
    ({"zzz": "1"}, "unknown option 'zzz' \\(the options are listed"),
])
def test_unknown_options_are_refused_naming_the_nearest_known_one(options, message):
    with pytest.raises(InvalidOptionError, match=f"dataset 't': {message}"):
        location({"path": "file:///x/t", **options})


def test_a_create_table_is_checked_on_its_options_not_spark_s_keys_or_tblproperties():
    table = {"path": "file:/x/t", "location": "file:/x/t", "provider": "cdkds", "owner": "me", "tp": "1",
             "option.where": "id > 1", "where": "id > 1"}
    assert location(table).url == "file:///x/t"
    with pytest.raises(InvalidOptionError, match="unknown option 'colums' \\(did you mean columns\\?"):
        location({**table, "option.colums": "a", "colums": "a"})
    assert location({"path": "file:///x/t", "PushFilters": "true", "property.ttl": "1d", "storageoptions": "{}"})


def test_write_options_that_contradict_the_dataset_are_refused(tmp_path):
    from pyspark.sql.types import LongType, StructField, StructType

    from cdkds.catalog import DatasetDescriptor, DatasetRepository
    from cdkds.connector.writer import plan_write

    repo = DatasetRepository(f"file://{tmp_path}/lake")
    repo.create("t", DatasetDescriptor({"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]},
                                       properties={"checkpoint.interval": "5"}))
    url, schema = f"{repo.url}/t", StructType([StructField("id", LongType(), False)])
    for options, message in [({"compression": "zstd"}, "compression='zstd' but the dataset's is 'snappy'"),
                             ({"property.checkpoint.interval": "7"}, "property.checkpoint.interval='7' but the dataset "
                                                                     "has '5'"),
                             ({"property.ttl": "1d"}, "property.ttl='1d' but the dataset has no such property")]:
        with pytest.raises(InvalidOptionError, match=f"dataset 't' exists with other settings: {message}"):
            plan_write({"path": url, **options}, schema, False)
    assert plan_write({"path": url, "compression": "snappy", "property.checkpoint.interval": "5"}, schema, False)
    assert repo.load("t").version == 0


def test_a_write_through_a_view_is_refused():
    """A view URI's constraints, or a view's where or time travel option (Spark hands a
    temporary view's OPTIONS to its writes), show part of the dataset: no write through them."""
    from cdkds.connector.options import write_location

    assert write_location({"path": "file:/d/u", "columns": "a"}).name == "u"
    for options, what in [({"path": "view:file:/d/u?x=1"}, "the URI's constraints"),
                          ({"path": "file:/d/u", "WHERE": "x > 1"}, "option WHERE"),
                          ({"path": "file:/d/u", "versionAsOf": "1"}, "option versionAsOf"),
                          ({"path": "file:/d/u", "timestamp": "2026-01-01"}, "option timestamp"),
                          ({"path": "file:/d/u", "tagAsOf": "q3"}, "option tagAsOf")]:
        with pytest.raises(InvalidOptionError, match=f"dataset 'u': cannot write through a view, which shows only "
                                                     f"part of the dataset \\({what}\\); write to file:///d/u"):
            write_location(options)


def test_a_tag_is_for_batch_reads():
    from cdkds.connector.options import change_feed_options, stream_read_options

    with pytest.raises(InvalidOptionError, match="dataset 't': option tagAsOf is for batch reads"):
        stream_read_options({"tagAsOf": "q3"}, ALWAYS_TRUE, "t")
    with pytest.raises(InvalidOptionError, match="dataset 't': option tagAsOf cannot be combined with readChangeFeed"):
        change_feed_options({"tagAsOf": "q3", "startingVersion": "1"}, "t", False)
