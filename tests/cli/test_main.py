"""The ``cdkds`` command: each command's output (table and --json) on local files and on S3 (moto
on loopback), and bad invocations giving one clear line and the right exit code.

Most tests run the command in this process (``run``); the ``slow`` ones spawn the installed
console script as a user would (``run_script``, ``on_a_terminal``): exit codes, --help, --debug,
S3 credentials from the environment, progress bars on a terminal."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from tests.cli.running import on_a_terminal, run, run_script
from tests.conftest import new_bucket

SCHEMA = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"}, {"name": "userId", "type": "long"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "tags", "type": ["null", {"type": "array", "items": "string"}], "default": None}]}


def make(repo: DatasetRepository) -> None:
    ds = repo.create("sales/events", DatasetDescriptor(SCHEMA, "hash(userId, 4)"))
    with ds.writer() as w:
        w.write_batch(pa.table({"id": range(100), "userId": [i % 7 for i in range(100)],
                                "ts": pa.array([1_772_323_200_000_000 + i for i in range(100)],
                                               pa.timestamp("us", tz="UTC")),
                                "tags": [["a", "[b]"] if i % 2 else None for i in range(100)]}))
    ds.delete("id < 10")


@pytest.fixture
def lake(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    make(repo)
    return f"file://{tmp_path}/lake", []


def test_every_command_on_local_files(lake):
    root, options = lake
    url = f"{root}/sales/events"
    assert run("list", root, *options).stdout.split() == ["sales/events"]
    assert json.loads(run("list", root, "--json").stdout) == ["sales/events"]
    info = json.loads(run("describe", url, "--json").stdout)
    assert (info["revision"], info["rows"], info["tombstones"], info["partition_strategy"]) == (2, 100, 1, "hash(userId, 4)")
    assert info["files"] == 4 and info["small_files"] == 4 and info["schema"]["name"] == "Event"
    text = run("describe", url).stdout
    assert "hash(userId, 4)" in text and "tags: array (nullable)" in text and "ts: timestamp-micros" in text
    history = json.loads(run("history", url, "--json").stdout)
    assert [h["operation"] for h in history] == ["create", "append", "delete"]
    assert [h["revision"] for h in json.loads(run("history", url, "--limit", "1", "--json").stdout)] == [2]
    assert "delete" in run("history", url).stdout
    rows = json.loads(run("show", url, "--where", "userId = 3", "--limit", "100", "--json").stdout)
    assert sorted(r["id"] for r in rows) == [i for i in range(10, 100) if i % 7 == 3]
    assert rows[0]["ts"].startswith("2026-03-01T00:00:00")
    table = run("show", url, "--where", "userId = 3", "--columns", "id,tags", "--limit", "2").stdout
    assert "2 rows shown (revision 2; 1 of 4 files read)" in table and "[b]" in table  # values are not markup
    csv_text = run("show", url, "--columns", "id", "--limit", "3", "--format", "csv", "--version", "1").stdout
    assert csv_text.splitlines()[0] == '"id"' and len(csv_text.splitlines()) == 4
    assert len(json.loads(run("show", url, "--limit", "200", "--version", "1", "--json").stdout)) == 100
    assert json.loads(run("schema", url).stdout)["name"] == "Event"
    assert "ts: timestamp[us, tz=UTC] not null" in run("schema", url, "--arrow").stdout
    assert json.loads(run("schema", url, "--spark").stdout)["type"] == "struct"


@pytest.mark.slow
def test_every_command_on_s3(s3_endpoint):
    bucket = new_bucket(s3_endpoint)
    root = f"s3://{bucket}/lake"
    make(DatasetRepository(root, {"client_kwargs": {"endpoint_url": s3_endpoint}}))
    options = ["--storage-option", f"client_kwargs.endpoint_url={s3_endpoint}"]
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    assert run_script("list", root, *options, env=env).stdout.split() == ["sales/events"]
    assert json.loads(run_script("describe", f"{root}/sales/events", *options, "--json", env=env).stdout)["rows"] == 100
    assert len(json.loads(run_script("show", f"{root}/sales/events", *options, "--json", "--limit", "5",
                                     env=env).stdout)) == 5


def test_maintenance_commands(lake):
    root, _ = lake
    url = f"{root}/sales/events"
    assert "deleted 13 rows in 1 file: revision 3" in run("delete", url, "--where", "userId = 3").stdout
    done = json.loads(run("compact", url, "--target-file-size", "64m", "--json").stdout)
    assert done["revision"] == 4 and done["files_after"] <= done["files_before"]
    assert json.loads(run("describe", url, "--json").stdout)["tombstones"] == 0
    listed = json.loads(run("vacuum", url, "--retention", "0s", "--force", "--json").stdout)
    assert listed["dry_run"] and listed["files"] == []  # the compacted files are still referenced by history
    assert "checkpoint of revision 4 written" in run("checkpoint", url).stdout
    assert json.loads(run("upgrade", url, "--json").stdout) == {"dataset": "events", "revision": 4, "from": 4, "to": 4}
    removed = json.loads(run("expire-log", url, "--older-than", "0s", "--force", "--json").stdout)
    assert removed  # commits 1-3 and older checkpoints
    doomed = json.loads(run("vacuum", url, "--retention", "0s", "--force", "--json").stdout)["files"]
    assert doomed and all(f.startswith("data/") for f in doomed)
    deleted = json.loads(run("vacuum", url, "--retention", "0s", "--force", "--no-dry-run", "--json").stdout)
    assert deleted["files"] == doomed and not deleted["dry_run"]
    assert len(json.loads(run("show", url, "--limit", "1000", "--json").stdout)) == 90 - 13
    expired = run("changes", url, "--start", "4", code=1).stderr
    assert "expired from the log; the oldest change feed starts at revision 5" in expired
    assert json.loads(run("changes", url, "--start", "5", "--json").stdout) == []


@pytest.mark.parametrize("args, code, message", [
    (["describe", "{root}/sales/nope"], 1, "error: dataset 'nope' does not exist"),
    (["describe", "notaurl"], 1, "error: dataset URL 'notaurl' names no dataset folder"),
    (["show", "{url}", "--where", "nope = 1"], 1, "error: dataset 'events': unknown field 'nope' in predicate"),
    (["show", "{url}", "--where", "id = = 1"], 1, "error: "),
    (["show", "{url}", "--where", "userId = "], 1, "error: dataset 'events': cannot parse predicate 'userId = '"),
    (["delete", "{url}", "--where", "userId = "], 1, "error: dataset 'events': cannot parse predicate 'userId = '"),
    (["compact", "{url}", "--where", "userId = "], 1, "error: dataset 'events': cannot parse predicate 'userId = '"),
    (["export", "{url}", "{root}/../out.csv", "--where", "userId = "], 1,
     "error: dataset 'events': cannot parse predicate 'userId = '"),
    (["list", "{root}/nope"], 1, "/lake/nope does not exist"),
    (["show", "{url}", "--columns", "id,nope"], 1, "error: dataset 'events': unknown column 'nope'"),
    (["show", "{url}", "--version", "9"], 1, "error: dataset 'events' has no revision 9; its latest is 2"),
    (["show", "{url}", "--version", "1", "--timestamp", "2026-01-01"], 2, "give one of --version, --timestamp or --tag"),
    (["show", "{url}", "--version", "1", "--tag", "q3"], 2, "give one of --version, --timestamp or --tag"),
    (["show", "{url}", "--timestamp", "yesterday"], 1, "error: dataset 'events': cannot read 'yesterday' as a time"),
    (["show", "{url}", "--limit", "-1"], 2, "Invalid value for '--limit'"),
    (["show", "{url}", "--format", "xml"], 2, "Invalid value for '--format'"),
    (["history", "{url}", "--limit", "0"], 2, "Invalid value for '--limit'"),
    (["list", "{root}", "--storage-option", "novalue"], 2, "expected k=v, got 'novalue'"),
    (["nosuchcommand"], 2, "No such command 'nosuchcommand'"),
    (["vacuum", "{url}", "--retention", "10m"], 1, "below the safe minimum of 1:00:00"),
    (["vacuum", "{url}", "--retention", "-1d"], 2, "'-1d' is negative"),
    (["vacuum", "{url}", "--retention", "soon"], 2, "'soon' is not a duration"),
    (["compact", "{url}", "--target-file-size", "0"], 2, "'0' is not positive"),
    (["delete", "{url}"], 2, "Missing option '--where'"),
    (["expire-log", "{url}", "--older-than", "10m"], 1, "below the safe minimum: a writer that read a revision being expired could still commit after it; add --force"),
    (["changes", "{url}", "--start", "9"], 1, "error: dataset 'events' has no revision 9"),
    (["alter", "{url}", "frobnicate id"], 2, "'frobnicate id' is not a change; write one of"),
    (["alter", "{url}"], 2, "give a schema change or --partition-by"),
    (["alter", "{url}", "--partition-by", "hash(nope, 8)"], 1,
     "error: dataset 'events': partition source 'nope' of hash(nope, 8) is not a field"),
    (["alter", "{url}", "--partition-by", "hash(userId, 4)"], 1,
     "error: dataset 'events': the dataset is partitioned by hash(userId, 4) already"),
    (["alter", "{url}", "rename id to userId"], 1, "error: dataset 'events': cannot rename field 'id' to 'userId'"),
    (["alter", "{url}", "add id2 long", "drop nope"], 1, "error: dataset 'events': no field 'nope'"),
    (["alter", "{url}", "widen id to int"], 1, "error: dataset 'events': cannot widen field 'id' from long to int"),
    (["alter", "{url}", "add n decimal(4,2) default 1"], 1, "defaults are supported for"),
    (["rebuild", "{url}"], 1, "error: the log of dataset 'events' reads fine (revision 2)"),
    (["upgrade", "{root}/sales/nope"], 1, "error: dataset 'nope' does not exist"),
    (["show", "{url}", "--debug"], 2, "No such option '--debug'"),  # the group's option only before the command
    (["show", "{url}", "--where", "--debug"], 1, "error: dataset 'events': cannot parse predicate '--debug'"),
    pytest.param(["list", "s3://bucket/lake", "--storage-option", "client_kwargs.endpoint_url=http://127.0.0.1:9",
                  "--storage-option", "key=a", "--storage-option", "secret=b"], 1,
                 "the object store cannot be reached (EndpointConnectionError: Could not connect to the endpoint URL",
                 marks=pytest.mark.slow),  # botocore retries the closed port for several seconds
])
def test_bad_invocations_give_one_clear_line(lake, args, code, message):
    root, _ = lake
    args = [a.format(root=root, url=f"{root}/sales/events") for a in args]
    done = run(*args, code=code)
    assert message in done.stderr and "Traceback" not in done.stderr, done.stderr
    if code == 1:
        assert len(done.stderr.strip().splitlines()) == 1
    dataset = DatasetRepository(f"{root}").load("sales/events")
    assert (dataset.version, len(dataset.history())) == (2, 3)  # nothing committed


@pytest.mark.slow
@pytest.mark.parametrize("args, code, message", [
    (["describe", "{root}/sales/nope"], 1, "error: dataset 'nope' does not exist"),
    (["show", "{url}", "--limit", "-1"], 2, "Invalid value for '--limit'"),
])
def test_the_console_script_gives_one_clear_line(lake, args, code, message):
    """Two of the catalogue above through the installed script: a domain error and a bad invocation."""
    root, _ = lake
    done = run_script(*[a.format(root=root, url=f"{root}/sales/events") for a in args], code=code)
    assert message in done.stderr and "Traceback" not in done.stderr and done.stdout == "", done.stderr
    if code == 1:
        assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_debug_shows_the_traceback(lake):
    root, _ = lake
    done = run_script("--debug", "describe", f"{root}/sales/nope", code=1)
    assert "Traceback" in done.stderr and "DatasetNotFoundError" in done.stderr


@pytest.mark.slow
def test_the_console_script_help():
    done = run_script("--help", env={"COLUMNS": "80"})  # a narrower terminal would narrow the help
    assert done.stderr == "" and done.stdout == run("--help").stdout  # the in-process run formats help the same
    assert "Example:" in done.stdout and "Commands:" in done.stdout


def test_help_of_every_command_has_an_example():
    listing = run("--help").stdout
    commands = [line.split()[0] for line in listing.split("Commands:")[1].splitlines() if line.strip()]
    assert {"list", "describe", "show", "alter", "rebuild", "vacuum"} <= set(commands)
    for command in ["", *commands]:
        done = run(*([command] if command else []), "--help")
        assert "Example:" in done.stdout and "cdkds " in done.stdout, command


def test_alter_and_rebuild(lake):
    root, _ = lake
    url = f"{root}/sales/events"
    preview = run("alter", url, "rename ts to event_time", "add score double default 0.5", "move score first",
                  "--dry-run").stdout
    assert "score: double" in preview and "event_time: timestamp-micros" in preview
    assert json.loads(run("describe", url, "--json").stdout)["revision"] == 2  # a dry run commits nothing
    done = json.loads(run("alter", url, "rename ts to event_time", "add score double default 0.5", "move score first",
                          "widen id to double", "add note string nullable default hello world", "--json").stdout)
    assert done["revision"] == 3
    rows = json.loads(run("show", url, "--limit", "1", "--json").stdout)
    assert list(rows[0]) == ["score", "id", "userId", "event_time", "tags", "note"] and rows[0]["score"] == 0.5
    assert rows[0]["note"] == "hello world"
    assert isinstance(rows[0]["id"], float)

    with DatasetRepository(root).load("sales/events").writer() as w:  # after the delete and alter: they show as gaps
        w.write({"score": 1.0, "id": 1000.0, "userId": 1, "event_time": dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc),
                 "note": None})
    lake_dir = Path(url.removeprefix("file://"))
    (lake_dir / "_log" / f"{1:020d}.json").write_text("{damaged")
    assert "is corrupt or truncated" in run("show", url, code=1).stderr
    rebuilt = json.loads(run("rebuild", url, "--json").stdout)
    assert rebuilt["revision"] == 4 and not rebuilt["complete"]  # the delete and alter left no file: reported
    assert (rebuilt["rows"], rebuilt["files"]) == (101, len(DatasetRepository(root).load("sales/events").files))
    assert any("revision(s) [1, 2]" in line for line in rebuilt["unrecoverable"]), rebuilt
    assert len(json.loads(run("show", url, "--limit", "1000", "--json").stdout)) == 101  # the deleted rows are back
    assert [p.name for p in lake_dir.iterdir() if p.name.startswith("_log.broken-")]


def test_alter_partition_by(lake):
    root, _ = lake
    url = f"{root}/sales/events"
    done = json.loads(run("alter", url, "--partition-by", "hash(userId, 8), month(ts)", "--json").stdout)
    assert done["revision"] == 3
    assert "altered the partitioning (none): revision 4" in run("alter", url, "--partition-by", "none").stdout
    described = json.loads(run("describe", url, "--json").stdout)
    assert described["partition_strategy"] is None
    assert [(s["spec_id"], s["strategy"], s["current"]) for s in described["partition_specs"]] == [
        (0, "hash(userId, 4)", False), (1, "hash(userId, 8), month(ts)", False), (2, None, True)]
    assert any("of partition spec 0" in line for line in described["services"])
    assert len(json.loads(run("show", url, "--limit", "1000", "--json").stdout)) == 90  # read across the change
    run("compact", url)
    assert {f.spec_id for f in DatasetRepository(root).load("sales/events").files} == {2}
    assert len(json.loads(run("show", url, "--limit", "1000", "--json").stdout)) == 90


@pytest.mark.slow
def test_progress_shows_on_a_terminal_only(lake):
    root, _ = lake
    url = f"{root}/sales/events"
    piped = run_script("compact", url)
    assert piped.stderr == ""  # not a terminal: no progress, only the result
    out, shown = on_a_terminal("vacuum", url, "--retention", "0s", "--force")
    assert b"would delete" in out
    assert b"listing the files of events" in shown  # a terminal on standard error: the progress bar


def test_json_output_is_strict_json(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}")
    ds = repo.create("floats", DatasetDescriptor({"type": "record", "name": "F", "fields": [
        {"name": "id", "type": "long"}, {"name": "x", "type": ["null", "double"], "default": None}]}))
    with ds.writer() as w:
        for i, x in enumerate([1.5, float("nan"), float("inf"), float("-inf"), None]):
            w.write({"id": i, "x": x})
    for args in (["show", "--json"], ["show", "--format", "json"], ["changes", "--start", "1", "--json"]):
        text = run(args[0], f"file://{tmp_path}/floats", *args[1:]).stdout
        rows = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
        assert sorted(map(str, (r["x"] for r in rows))) == ["-Infinity", "1.5", "Infinity", "NaN", "None"]


@pytest.mark.slow
def test_version_and_a_missing_repository_from_the_console_script(tmp_path):
    from cdkds.cli.app import installed_version
    import importlib.metadata
    assert installed_version() == importlib.metadata.version("cdkds")
    assert run_script("--version").stdout.strip() == f"cdkds {installed_version()}"
    missing = run_script("list", f"file://{tmp_path}/no/such/dir", code=1)
    assert missing.stdout == "" and missing.stderr.strip() == f"error: repository file://{tmp_path}/no/such/dir does not exist"
    (tmp_path / "empty").mkdir()
    assert run_script("list", f"file://{tmp_path}/empty").stdout == ""


def test_values_print_alike_in_table_csv_and_json(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("flags", DatasetDescriptor({"type": "record", "name": "F", "fields": [
        {"name": "id", "type": "long"}, {"name": "ok", "type": ["null", "boolean"], "default": None},
        {"name": "tags", "type": ["null", {"type": "array", "items": "string"}], "default": None}]}))
    with ds.writer() as w:
        w.write_batch(pa.table({"id": [1, 2, 3], "ok": [True, False, None], "tags": [["a"], None, []]}))
    url = f"{tmp_path}/lake/flags"
    assert json.loads(run("show", url, "--json").stdout) == [
        {"id": 1, "ok": True, "tags": ["a"]}, {"id": 2, "ok": False, "tags": None}, {"id": 3, "ok": None, "tags": []}]
    assert run("show", url, "--format", "csv").stdout.splitlines() == ['"id","ok","tags"', '1,true,"[""a""]"',
                                                                        "2,false,", '3,,"[]"']
    table = run("show", url).stdout
    assert "│ true " in table and "│ false " in table and '["a"]' in table and "True" not in table
    exported = tmp_path / "flags.csv"
    run("export", url, str(exported), "--columns", "id,ok")
    assert exported.read_text().splitlines()[1:] == ["1,true", "2,false", "3,"]


def test_history_shows_the_rows_each_commit_added_and_removed(tmp_path):
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("t", DatasetDescriptor({"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "p", "type": "long"}]}, "identity(p)"))
    with ds.writer() as w:
        w.write_batch(pa.table({"id": range(10), "p": [i % 2 for i in range(10)]}))
    ds.delete("p = 0")  # a whole file: 5 rows
    ds.delete("id = 1")  # a tombstone: not counted
    with ds.writer(mode="overwrite") as w:
        w.write_batch(pa.table({"id": [20], "p": [1]}))
    url = f"file://{tmp_path}/lake/t"
    history = json.loads(run("history", url, "--json").stdout)
    assert [(h["added_rows"], h["removed_rows"], h["tombstones"]) for h in history] == [
        (0, 0, 0), (10, 0, 0), (0, 5, 0), (0, 0, 1), (1, 5, 0)]
    assert [e.removed_rows for e in repo.load("t").history()] == [0, 0, 5, 0, 5]
    assert "-rows" in run("history", url).stdout
    ds.checkpoint()
    with ds.writer() as w:
        w.write_batch(pa.table({"id": [21], "p": [1]}))
    run("expire-log", url, "--older-than", "0s", "--force")
    ds.compact()
    history = json.loads(run("history", url, "--json").stdout)
    # commits 1-3 expired: 5 and 6 counted from checkpoint 4, 4 itself not
    assert [(h["revision"], h["removed_rows"]) for h in history] == [(0, 0), (4, None), (5, 0), (6, 2)]
    assert history[-1]["operation"] == "compact"


def test_every_type_prints_as_export_writes_it(tmp_path):
    """One rendering: show's CSV is export's CSV, its table the same cells, its --json export's
    JSON lines (NaN and infinities as strings, --json being strict JSON)."""
    import decimal
    import math
    nullable = lambda t: ["null", t]  # noqa: E731
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("types", DatasetDescriptor({"type": "record", "name": "T", "fields": [
        {"name": n, "type": nullable(t), "default": None} for n, t in [
            ("b", "boolean"), ("ts", {"type": "long", "logicalType": "timestamp-micros"}),
            ("lts", {"type": "long", "logicalType": "local-timestamp-millis"}),
            ("d", {"type": "int", "logicalType": "date"}), ("t", {"type": "int", "logicalType": "time-millis"}),
            ("dec", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}),
            ("f", "double"), ("by", "bytes"), ("m", {"type": "map", "values": "long"}),
            ("nested", {"type": "array", "items": {"type": "long", "logicalType": "timestamp-micros"}}),
            ("s", "string")]]}))
    utc = dt.datetime(2026, 3, 1, 10, 0, 0, 123456, tzinfo=dt.timezone.utc)
    with ds.writer() as w:
        w.write({"b": False, "ts": utc, "lts": dt.datetime(2026, 3, 1, 10, 0, 0, 5000), "d": dt.date(2026, 3, 1),
                 "t": dt.time(10, 1, 2, 3000), "dec": decimal.Decimal("1.50"), "f": float("nan"), "by": b"\x00ab",
                 "m": {"a": 1}, "nested": [utc], "s": "x,y"})
        w.write({"b": True, "f": 100.0, "s": ""})
        w.write({"f": float("-inf")})
    url = f"{tmp_path}/lake/types"
    run("export", url, str(tmp_path / "out.csv"))
    run("export", url, str(tmp_path / "out.jsonl"))
    shown = run("show", url, "--format", "csv").stdout
    assert shown == (tmp_path / "out.csv").read_text()
    assert "2026-03-01T10:00:00.123456Z" in shown and "AGFi" in shown and '{""a"": 1}' in shown
    exported = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    strict = [{k: ("NaN" if math.isnan(v) else "-Infinity") if isinstance(v, float) and not math.isfinite(v) else v
               for k, v in row.items()} for row in exported]
    assert json.loads(run("show", url, "--json").stdout) == strict
    table = run("show", url).stdout
    for text in ["2026-03-01T10:00:00.123456Z", "2026-03-01T10:00:00.005", "10:01:02.003", "1.50", "nan", "-inf",
                 "AGFi", '{"a": 1}', '["2026-03-01T10:00:00.123456Z"]', "│ false ", "│ 100 "]:
        assert text in table, text
    assert '"NaN"' not in table and "True" not in table


def test_a_repository_path_that_is_a_file_is_an_error_naming_it(tmp_path):
    (tmp_path / "events.csv").write_text("id\n1\n")  # a file given where a repository was meant
    done = run("list", str(tmp_path / "events.csv"), code=1)
    assert done.stderr.strip() == f"error: repository {tmp_path}/events.csv is a file, not a folder"


def test_help_examples_use_a_relative_folder():
    """A newcomer copies --help's examples: no /data, which only root can create (as in the guide)."""
    from cdkds.cli.app import cli
    for name in [None, *cli.commands]:
        text = run(*([name] if name else []), "--help").stdout
        assert "/data/" not in text, name
