"""``cdkds create``, ``import`` and ``export``: every input format into one commit, overwrite and
upsert, exports checked with pyarrow, a round trip on S3 (moto), and bad invocations giving one
clear line, the right exit code and nothing committed.

Most tests run the command in this process (``run``); the ``slow`` ones spawn the installed
console script (the round trip on S3, progress bars on a terminal)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from tests.cli.running import on_a_terminal, run, run_script
from tests.conftest import new_bucket

UTC = dt.timezone.utc
SCHEMA = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"}, {"name": "userId", "type": "long"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "name", "type": ["null", "string"], "default": None},
    {"name": "score", "type": ["null", "double"], "default": None}]}


def ts(i: int) -> dt.datetime:
    return dt.datetime(2026, 3, 1, tzinfo=UTC) + dt.timedelta(hours=7 * i)


def event(i: int, name: str | None = None) -> dict:
    return {"id": i, "userId": i % 5, "ts": ts(i), "name": name if name is not None else f"n{i}", "score": i / 4}


def inputs(folder: Path) -> dict[str, list[dict]]:
    """The same kind of rows in every format; ids 0-39, 10 per file."""
    folder.mkdir(exist_ok=True)
    files = {}
    part = [event(i) for i in range(0, 10)]
    lines = ["id,userId,ts,name,score"] + [f"{r['id']},{r['userId']},{r['ts'].isoformat()},{r['name']},{r['score']}"
                                           for r in part]
    (folder / "a.csv").write_text("\n".join(lines) + "\n")
    files["a.csv"] = part
    part = [event(i) for i in range(10, 20)]
    (folder / "b.jsonl").write_text("".join(json.dumps({**r, "ts": r["ts"].isoformat()}) + "\n" for r in part))
    files["b.jsonl"] = part
    part = [event(i) for i in range(20, 30)]
    pq.write_table(pa.Table.from_pylist(part, schema=pa.schema([
        ("id", pa.int64()), ("userId", pa.int32()), ("ts", pa.timestamp("us", tz="UTC")), ("name", pa.string()),
        ("score", pa.float64())])), folder / "c.parquet")
    files["c.parquet"] = part
    part = [event(i) for i in range(30, 40)]
    with open(folder / "d.avro", "wb") as f:
        fastavro.writer(f, SCHEMA, part)
    files["d.avro"] = part
    (folder / "schema.avsc").write_text(json.dumps(SCHEMA))
    return files


def ids(rows) -> list[int]:
    return sorted(r["id"] for r in rows)


def test_create_import_export(tmp_path):
    data = inputs(tmp_path / "in")
    root = f"file://{tmp_path}/lake"
    url = f"{root}/sales/events"
    created = json.loads(run("create", url, "--schema", str(tmp_path / "in" / "schema.avsc"), "--partition-by",
                             "hash(userId, 4), day(ts)", "--property", "checkpoint.interval=5", "--json").stdout)
    assert (created["revision"], created["partition_strategy"], created["properties"]) == (
        0, "hash(userId, 4), day(ts)", {"checkpoint.interval": "5"})
    files = [str(tmp_path / "in" / f) for f in data]
    done = run("import", url, *files, "--json")
    assert done.stderr == ""  # no progress bar when standard error is not a terminal
    assert json.loads(done.stdout) | {"created": False} == {"dataset": "events", "mode": "append", "files": 4,
                                                             "rows": 40, "revision": 1, "created": False}
    history = json.loads(run("history", url, "--json").stdout)
    assert [h["operation"] for h in history] == ["create", "append"] and history[1]["added_rows"] == 40  # one commit
    stored = DatasetRepository(root).load("sales/events").to_table().to_pylist()
    assert sorted(stored, key=lambda r: r["id"]) == [r for f in data.values() for r in f]

    text = run("import", url, files[1], "--mode", "overwrite").stdout
    assert "imported 10 rows from 1 file into events (overwrite): revision 2" in text
    assert ids(json.loads(run("show", url, "--limit", "100", "--json").stdout)) == list(range(10, 20))
    run("import", url, *files)

    # exports: one file each, pruned by --where, read back with pyarrow
    out = tmp_path / "out"
    for fmt, name in [("parquet", "e.parquet"), ("csv", "e.csv"), ("jsonl", "e.jsonl")]:
        report = json.loads(run("export", url, str(out / name), "--where", "userId = 1 and id < 30", "--json").stdout)
        assert (report["format"], report["rows"], report["files_read"] < report["total_files"]) == (fmt, 8, True)
        table = {"parquet": pq.read_table, "csv": pacsv.read_csv, "jsonl": pajson.read_json}[fmt](out / name)
        assert sorted(table.column("id").to_pylist()) == [1, 6, 11, 11, 16, 16, 21, 26]
        assert report["bytes"] == (out / name).stat().st_size
    assert json.loads((out / "e.jsonl").read_text().splitlines()[0])["ts"].endswith("Z")
    text = run("export", url, str(out / "cols.csv"), "--columns", "id,name", "--where", "id = 3", "--version", "1").stdout
    assert "exported 1 rows of events (revision 1;" in text
    assert (out / "cols.csv").read_text() == '"id","name"\n3,"n3"\n'

    # --like: a schema from each kind of file; partitioning and properties on top
    for name, fmt in [("a.csv", "csv"), ("b.jsonl", "jsonl"), ("c.parquet", "parquet")]:
        made = json.loads(run("create", f"{root}/like_{fmt}", "--like", str(tmp_path / "in" / name), "--partition-by",
                              "hash(userId, 16), day(ts)", "--property", "index.buckets=8", "--record-key", "id",
                              "--json").stdout)
        fields = {f["name"]: f["type"] for f in made["schema"]["fields"]}
        user = "int" if fmt == "parquet" else "long"
        assert fields["id"] == "long" and fields["userId"] == ["null", user], fields  # the key is required
        assert fields["ts"] == ["null", {"type": "long", "logicalType": "timestamp-micros"}]
        assert made["record_key"] == ["id"] and made["properties"] == {"index.buckets": "8"}
    run("import", f"{root}/like_csv", *files)

    # upsert into a keyed dataset: ids 5-14 change, 40-44 are new
    changed = tmp_path / "in" / "changed.csv"
    changed.write_text("id,userId,ts,name\n" + "".join(f"{i},{i % 5},{ts(i).isoformat()},new{i}\n"
                                                      for i in [*range(5, 15), *range(40, 45)]))
    upserted = json.loads(run("import", f"{root}/like_csv", str(changed), "--mode", "upsert", "--json").stdout)
    assert (upserted["inserted"], upserted["updated"], upserted["rows"], upserted["revision"]) == (5, 10, 15, 2)
    rows = {r["id"]: r for r in json.loads(run("show", f"{root}/like_csv", "--limit", "100", "--json").stdout)}
    assert sorted(rows) == list(range(45)) and rows[7]["name"] == "new7" and rows[7]["score"] is None
    assert rows[20]["name"] == "n20" and rows[42]["name"] == "new42"

    # import --create: the dataset from the files' inferred schema, then the rows, in two commits
    made = json.loads(run("import", f"{root}/fresh", files[0], files[1], "--create", "--partition-by",
                          "hash(userId, 2)", "--json").stdout)
    assert (made["created"], made["rows"], made["revision"]) == (True, 20, 1)
    assert json.loads(run("describe", f"{root}/fresh", "--json").stdout)["partition_strategy"] == "hash(userId, 2)"
    again = json.loads(run("import", f"{root}/fresh", files[0], "--create", "--partition-by", "hash(userId,2)",
                           "--json").stdout)
    assert (again["created"], again["revision"]) == (False, 2)  # it exists as described: an import


@pytest.mark.slow
def test_create_import_export_on_s3(s3_endpoint, tmp_path):
    import s3fs

    bucket = new_bucket(s3_endpoint)
    options = ["--storage-option", f"client_kwargs.endpoint_url={s3_endpoint}"]
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    data = inputs(tmp_path / "in")
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_endpoint}, skip_instance_cache=True)
    fs.put(str(tmp_path / "in" / "b.jsonl"), f"{bucket}/in/b.jsonl")
    url = f"s3://{bucket}/lake/events"
    run_script("create", url, "--like", f"s3://{bucket}/in/b.jsonl", "--partition-by", "hash(userId, 4)", *options,
               env=env)
    done = json.loads(run_script("import", url, str(tmp_path / "in" / "a.csv"), f"s3://{bucket}/in/b.jsonl",
                                 *options, "--json", env=env).stdout)
    assert (done["rows"], done["revision"]) == (20, 1)
    run_script("export", url, f"s3://{bucket}/out/e.parquet", "--where", "userId = 2", *options, env=env)
    table = pq.read_table(f"{bucket}/out/e.parquet", filesystem=fs)
    assert sorted(table.column("id").to_pylist()) == [i for i in range(20) if i % 5 == 2]
    assert len(data) == 4


@pytest.fixture
def lake(tmp_path):
    """A dataset at revision 1 and input files, good and bad."""
    root = f"file://{tmp_path}/lake"
    ds = DatasetRepository(root).create("sales/events", DatasetDescriptor(SCHEMA, "hash(userId, 4)"))
    with ds.writer() as w:
        w.write_batch(pa.Table.from_pylist([event(i) for i in range(10)], schema=ds.descriptor.arrow_schema))
    folder = tmp_path / "in"
    inputs(folder)
    (folder / "good.csv").write_text("id,userId,ts\n100,1,2026-03-01T00:00:00Z\n101,2,2026-03-01T00:00:00Z\n")
    (folder / "bad.csv").write_text("id,userId,ts\n102,1,2026-03-01T00:00:00Z\nabc,2,2026-03-01T00:00:00Z\n")
    (folder / "colour.csv").write_text("id,userId,ts,colour\n103,1,2026-03-01T00:00:00Z,red\n")
    (folder / "noid.csv").write_text("userId,ts\n1,2026-03-01T00:00:00Z\n")
    (folder / "nullkey.csv").write_text("id,userId,ts\n1,1,2026-03-01T00:00:00Z\n,2,2026-03-01T00:00:00Z\n")
    (folder / "exists.csv").write_text("keep me\n")
    return root, folder


@pytest.mark.parametrize("args, code, message", [
    (["create", "{root}/new", "--like", "{in}/good.csv", "--partition-by", "hash(id"], 1,
     "error: dataset 'new': cannot parse partition strategy 'hash(id'"),
    (["create", "{root}/new", "--like", "{in}/good.csv", "--partition-by", "hash(nope, 4)"], 1,
     "error: dataset 'new': partition source 'nope' of hash(nope, 4) is not a field of the schema"),
    (["create", "{root}/new", "--like", "{in}/good.csv", "--property", "colour=blue"], 1,
     "error: dataset 'new': unknown property 'colour'; the properties are checkpoint.interval, checkpoint.partFiles, index.buckets"),
    (["create", "{root}/new", "--like", "{in}/good.csv", "--property", "checkpoint.interval=0"], 1,
     "error: dataset 'new': property checkpoint.interval must be a positive integer, got '0'"),
    (["create", "{root}/new", "--like", "{in}/good.csv", "--property", "novalue"], 2, "expected k=v, got 'novalue'"),
    (["create", "{root}/new", "--like", "{in}/good.csv", "--schema", "{in}/schema.avsc"], 2,
     "give --schema or --like, not both"),
    (["create", "{root}/new"], 2, "give --schema FILE.avsc or --like DATAFILE"),
    (["create", "{root}/new", "--like", "{in}/good.csv", "--record-key", "nope"], 1,
     "error: dataset 'new': no column 'nope' in"),
    (["create", "{root}/new", "--schema", "{in}/nope.avsc"], 1, "error: dataset 'new': schema file"),
    (["create", "{root}/new", "--like", "{in}/good.csv", "--format", "orc"], 2, "Invalid value for '--format'"),
    (["create", "{root}/sales/events", "--like", "{in}/good.csv"], 1, "error: dataset 'events' already exists"),
    (["import", "{url}", "{in}/bad.csv"], 1, "error: dataset 'events': {in}/bad.csv line 3: field 'id': 'abc' is not a long"),
    (["import", "{url}", "{in}/good.csv", "{in}/a.csv", "{in}/bad.csv"], 1, "bad.csv line 3: field 'id': 'abc'"),
    (["import", "{url}", "{in}/colour.csv"], 1, "error: dataset 'events': {in}/colour.csv: unknown column 'colour'"),
    (["import", "{url}", "{in}/good.csv", "{in}/noid.csv"], 1,
     "error: dataset 'events': {in}/noid.csv: no column for the required field 'id'"),
    (["import", "{url}", "{in}/nope.csv"], 1, "error: dataset 'events': {in}/nope.csv: no such file"),
    (["import", "{root}/new", "{in}/good.csv"], 1, "error: dataset 'new' does not exist"),
    (["import", "{url}", "{in}/good.csv", "--mode", "upsert"], 1,
     "error: dataset 'events' has no record key: --mode upsert needs a keyed dataset"),
    (["import", "{url}", "{in}/good.csv", "--mode", "insert"], 2, "Invalid value for '--mode'"),
    (["import", "{url}", "{in}/good.csv", "--partition-by", "hash(id, 2)"], 2, "--partition-by describes a new dataset"),
    (["import", "{root}/new", "{in}/nullkey.csv", "--create", "--record-key", "id"], 1,
     "nullkey.csv line 3: field 'id' is required, but the value is empty"),
    (["import", "{url}"], 2, "Missing argument 'FILES...'"),
    (["import", "{url}", "{in}/good.csv", "--create", "--partition-by", "hash(id, 2)"], 1,
     "error: dataset 'events' exists with partition by hash(userId, 4), not hash(id, 2)"),
    (["export", "{url}", "{in}/exists.csv"], 1, "error: dataset 'events': {in}/exists.csv exists; add --overwrite"),
    (["export", "{url}", "{in}/out.csv", "--where", "id = = 1"], 1, "error: dataset 'events': cannot parse predicate"),
    (["export", "{url}", "{in}/out.csv", "--where", "nope = 1"], 1, "error: dataset 'events': unknown field 'nope'"),
    (["export", "{url}", "{in}/out.txt"], 1, "error: dataset 'events': {in}/out.txt: cannot tell the format"),
    (["export", "{url}", "{in}/out.csv", "--version", "7"], 1, "error: dataset 'events' has no revision 7"),
    (["export", "{url}", "{lake}/sales/events/_log/00000000000000000002.json", "--format", "jsonl"], 1,
     "is inside the folder of the dataset at"),
    (["export", "{url}", "{lake}/sales/events/data/mine.parquet"], 1, "is inside the folder of the dataset at"),
    (["export", "{url}", "{in}/out.csv", "--columns", " , "], 1, "error: dataset 'events': --columns names no column"),
    (["import", "{url}", "{in}/good.csv", "--create", "--property", "colour=blue"], 1, "unknown property 'colour'"),
    (["import", "{url}", "{in}/good.csv", "--create", "--compression", "zstd"], 1,
     "error: dataset 'events' exists with compression snappy, not zstd"),
])
def test_bad_invocations_commit_nothing(lake, args, code, message):
    root, folder = lake
    values = {"root": root, "url": f"{root}/sales/events", "in": str(folder), "lake": root.removeprefix("file://")}
    data = Path(root.removeprefix("file://")) / "sales" / "events" / "data"
    before = sorted(p.name for p in data.rglob("*") if p.is_file())
    done = run(*[a.format(**values) for a in args], code=code)
    assert message.format(**values) in done.stderr and "Traceback" not in done.stderr, done.stderr
    if code == 1:
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    repo = DatasetRepository(root)
    dataset = repo.load("sales/events")
    assert (dataset.version, len(dataset.history())) == (1, 2)  # nothing committed
    assert sorted(p.name for p in data.rglob("*") if p.is_file()) == before  # no file left behind
    assert repo.list() == ["sales/events"]  # no dataset created (or it was dropped again)
    assert not (folder / "out.csv").exists() and (folder / "exists.csv").read_text() == "keep me\n"


def test_debug_shows_the_traceback_of_a_bad_row(lake):
    root, folder = lake
    done = run("--debug", "import", f"{root}/sales/events", str(folder / "bad.csv"), code=1)
    assert "Traceback" in done.stderr and "InputError" in done.stderr


@pytest.mark.slow
def test_progress_shows_on_a_terminal(lake):
    root, folder = lake
    out, shown = on_a_terminal("import", f"{root}/sales/events", str(folder / "a.csv"), str(folder / "b.jsonl"))
    assert b"imported 20 rows from 2 files" in out and b"importing into events" in shown
    out, shown = on_a_terminal("export", f"{root}/sales/events", str(folder / "all.parquet"))
    assert b"exported 30 rows" in out and b"exporting events" in shown


@pytest.mark.parametrize("fmt", ["avro", "csv", "jsonl", "parquet"])
def test_an_export_makes_its_folder_and_infinities_import_back(tmp_path, fmt):  # issue 26.12
    schema = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"},
                                                       {"name": "f", "type": ["null", "float"], "default": None}]}
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("d", DatasetDescriptor(schema))
    rows = [{"id": 1, "f": float("inf")}, {"id": 2, "f": float("-inf")}, {"id": 3, "f": 1.5}, {"id": 4, "f": None}]
    with ds.writer() as w:
        for r in rows:
            w.write(r)
    out = tmp_path / "not" / "yet" / f"out.{fmt}"
    run("export", f"file://{tmp_path}/lake/d", str(out))
    repo.create("e", DatasetDescriptor(schema))
    run("import", f"file://{tmp_path}/lake/e", str(out))
    assert sorted(repo.load("e").reader(), key=lambda r: r["id"]) == rows


def test_partition_value_errors_on_import_name_the_line(tmp_path):  # issue 26.12
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "country", "type": "string"},
        {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None}]}
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    repo.create("d", DatasetDescriptor(schema, "list(country, [['NZ', 'AU']]), day(ts)"))
    (tmp_path / "a.csv").write_text("id,country,ts\n1,NZ,2026-03-01T00:00:00Z\n\n2,FR,2026-03-01T00:00:00Z\n")
    (tmp_path / "b.csv").write_text("id,country,ts\n1,NZ,2026-03-01T00:00:00Z\n2,AU,\n")
    done = run("import", f"file://{tmp_path}/lake/d", str(tmp_path / "a.csv"), code=1)
    assert f"{tmp_path}/a.csv line 4: field 'country': value 'FR' is in none of the partition lists" in done.stderr
    done = run("import", f"file://{tmp_path}/lake/d", str(tmp_path / "b.csv"), code=1)
    assert f"{tmp_path}/b.csv line 3: field 'ts': null is not a partition value" in done.stderr
    assert repo.load("d").version == 0 and not list((tmp_path / "lake" / "d" / "data").rglob("*.parquet"))
