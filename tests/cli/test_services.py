"""``cdkds maintain`` (one pass, or ``--watch`` until interrupted), and the services as
``describe`` and ``history`` show them (issue 29 section 1)."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from tests.cli.running import CDKDS, run, run_script

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "p", "type": "long"}]}
SMALL = {"services.small.files": "3", "services.file.size": "1m"}  # 3 files of a partition are enough


def fragmented(tmp_path, writes: int = 4, **properties: str):
    """A dataset of ``writes`` one-file appends into one partition (small files to bin-pack)."""
    repo = DatasetRepository(f"file://{tmp_path}/lake")
    ds = repo.create("t", DatasetDescriptor(SCHEMA, "identity(p)", properties={**SMALL, **properties}))
    for i in range(writes):
        with ds.writer() as w:
            w.write_batch(pa.table({"id": [2 * i, 2 * i + 1], "p": [0, 0]}))
    return repo, f"file://{tmp_path}/lake/t"


def rows(repo: DatasetRepository, version: int | None = None) -> list[int]:
    return sorted(r["id"] for r in repo.load("t", version=version).reader())


def test_maintain_runs_one_pass_as_its_own_commit(tmp_path):
    repo, url = fragmented(tmp_path)
    out = run("maintain", url).stdout
    assert out.startswith("rewrote 4 file(s)") and "into 1 " in out and "at revision 5" in out, out
    entry = repo.load("t").history()[-1]
    assert (entry.revision, entry.operation, entry.removed_files, entry.added_files) == (5, "compact", 4, 1)
    assert entry.info["service"] == "maintain" and entry.info["reasons"] == ["small"]
    assert rows(repo) == rows(repo, 4) == list(range(8))
    again = json.loads(run("maintain", url, "--json").stdout)  # nothing left to do: nothing committed
    assert (again["revision"], again["revisions"], again["summary"].split(" (")[0]) == (5, [], "nothing to do")
    assert repo.load("t").version == 5


def test_maintain_says_the_rows_it_rewrote(tmp_path):
    repo, url = fragmented(tmp_path)
    repo.load("t").delete("id < 3")  # drops the file of 0 and 1; a tombstone hides 2
    out = run("maintain", url).stdout
    assert "rewrote 3 file(s)" in out and "(6 rows into 5)" in out, out  # counted as the history counts them
    entry = repo.load("t").history()[-1]
    assert (entry.removed_rows, entry.added_rows) == (6, 5)
    done = json.loads(run("maintain", url, "--json").stdout)  # nothing left: nothing rewritten
    assert (done["rows_rewritten"], done["rows_written"]) == (0, 0)


def test_maintain_keeps_within_its_budget(tmp_path):
    repo, url = fragmented(tmp_path)
    size = sum(f.size for f in repo.load("t").snapshot.files.values())
    done = json.loads(run("maintain", url, "--budget", str(size - 1), "--json").stdout)
    assert done["revisions"] == [] and repo.load("t").version == 4  # the one group does not fit
    done = json.loads(run("maintain", url, "--budget", str(size), "--json").stdout)
    assert (done["revisions"], done["rewritten_files"], done["bytes_read"]) == ([5], 4, size)


def test_maintain_says_what_it_left_for_a_later_pass(tmp_path):
    repo, url = fragmented(tmp_path)
    size = sum(f.size for f in repo.load("t").snapshot.files.values())
    done = json.loads(run("maintain", url, "--budget", str(size - 1), "--json").stdout)
    assert done["left"] == [f"4 file(s) in 1 group(s), {size:,} bytes"], done
    assert "left for later: 4 file(s)" in done["summary"]


@pytest.mark.parametrize("args, code, message", [
    (["maintain", "{root}/nope"], 1, "error: dataset 'nope' does not exist"),
    (["maintain", "{root}"], 1, "error: dataset 'lake' does not exist"),
    (["maintain", "{url}", "--budget", "lots"], 2, "Invalid value for '--budget': 'lots' is not a size"),
    (["maintain", "{url}", "--budget", "0"], 2, "'0' is not positive"),
    (["maintain", "{url}", "--interval", "5s"], 2, "--interval is for --watch"),
    (["maintain", "{url}", "--watch", "--interval", "0s"], 2, "is not a positive time"),
    (["maintain", "{url}", "--watch", "--interval", "soon"], 2, "'soon' is not a duration"),
    (["maintain", "{url}", "--storage-option", "novalue"], 2, "expected k=v, got 'novalue'"),
    (["maintain", "{url}", "--bugdet", "1m"], 2, "No such option '--bugdet'. Did you mean '--budget'?"),
])
def test_maintain_refuses_bad_input_in_one_line_committing_nothing(tmp_path, args, code, message):
    repo, url = fragmented(tmp_path)
    done = run(*[a.format(root=f"file://{tmp_path}/lake", url=url) for a in args], code=code)
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stdout == "" and repo.load("t").version == 4


@pytest.mark.slow
def test_the_console_script_refuses_a_path_that_is_not_a_dataset(tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("not a dataset")
    for args, code in ((["maintain", f"file://{tmp_path}/plain"], 1),
                       (["maintain", f"file://{tmp_path}/plain", "--watch", "--interval", "never"], 2)):
        done = run_script(*args, code=code)
        assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert done.stdout == "" and "Traceback" not in done.stderr
    assert sorted(p.name for p in (tmp_path / "plain").iterdir()) == ["notes.txt"]


@pytest.mark.slow
@pytest.mark.parametrize("stop, as_json", [(signal.SIGINT, False), (signal.SIGTERM, True)])
def test_maintain_watch_runs_passes_until_interrupted(tmp_path, stop, as_json):
    repo, url = fragmented(tmp_path)
    watcher = subprocess.Popen([CDKDS, "maintain", url, "--watch", "--interval", "0.2s", *(["--json"] * as_json)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = watcher.stdout.readline()
        if as_json:  # a JSON object a line
            first = json.loads(first)
            assert (first["revisions"], first["rewritten_files"]) == ([5], 4), first
        else:
            assert "rewrote 4 file(s)" in first, first
        ds = repo.load("t")
        for i in range(3):  # more small files: a later pass packs them with the one it wrote
            with ds.writer() as w:
                w.write_batch(pa.table({"id": [100 + i], "p": [0]}))
        deadline = time.time() + 60
        while len(repo.load("t").history()) < 10 and time.time() < deadline:
            time.sleep(0.1)
        watcher.send_signal(stop)
        out, err = watcher.communicate(timeout=60)
    finally:
        if watcher.poll() is None:
            watcher.kill()
    assert watcher.returncode == 0 and err == "", err
    lines = out.strip().splitlines()
    if as_json:
        assert json.loads(lines[-1])["stopped"] and json.loads(lines[-1])["revision"] == 9, out
        assert all(isinstance(json.loads(line), dict) for line in lines)
    else:
        assert lines[-1].startswith("stopped after ") and "t is at revision 9" in lines[-1], out
    history = repo.load("t").history()
    assert [e.info.get("service") for e in history if e.operation == "compact"] == ["maintain", "maintain"]
    assert rows(repo) == [*range(8), 100, 101, 102]


def test_describe_says_what_the_services_would_do_next_and_why(tmp_path):
    repo, url = fragmented(tmp_path)
    info = json.loads(run("describe", url, "--json").stdout)
    assert info["services"] == repo.load("t").services_plan().describe()
    assert "4 small files in partition p_copy=0 (at least 3): bin-pack them" in info["services"]
    assert info["small_files"] == 4
    text = run("describe", url).stdout
    assert "services:\n  inline services: on" in text and "  4 small files in partition p_copy=0" in text, text
    run("maintain", url)
    after = json.loads(run("describe", url, "--json").stdout)["services"]
    assert after[-1] == "nothing to do" and not any("small files" in line for line in after)


def test_history_shows_service_commits_as_such(tmp_path, inline_services):
    repo, url = fragmented(tmp_path, writes=3)  # the third write's inline pass bin-packs the partition
    ds = repo.load("t")
    ds.delete("id = 0")  # a tombstone: its inline pass rewrites the file without the row
    with ds.writer() as w:
        w.write_batch(pa.table({"id": [6], "p": [0]}))
    run("compact", url)  # a compaction a user asked for is not a service's
    history = json.loads(run("history", url, "--json").stdout)
    assert [(h["operation"], h["service"]) for h in history] == [
        ("create", None), ("append", None), ("append", None), ("append", None), ("compact", "inline"),
        ("delete", None), ("compact", "inline"), ("append", None), ("compact", None)]
    assert history[6]["info"]["reasons"] == ["tombstones"]
    inline = history[4]
    assert inline["info"]["reasons"] == ["small"] and (inline["removed_files"], inline["added_files"]) == (3, 1)
    assert inline["bytes_read"] == inline["info"]["bytes_read"] > 0 and inline["bytes_written"] > 0
    table = run("history", url).stdout
    line = next(l for l in table.splitlines() if "service" in l)
    assert "compact (service: inline, small files)" in line
    assert f"{inline['bytes_read']:,} -> {inline['bytes_written']:,}" in line, table
    assert "compact (service: inline, tombstones)" in table
    assert rows(repo) == list(range(1, 7))


def test_a_watch_interrupted_after_a_pass_committed_reports_the_revision_it_made(tmp_path, monkeypatch, capsys):
    """The interrupt may come between a pass's commit and its line: the last line still names
    the dataset's latest revision (the pass is not counted)."""
    from cdkds.catalog.dataset import Dataset
    from cdkds.cli.services import _watch
    repo, _ = fragmented(tmp_path)
    maintain = Dataset.maintain

    def interrupted(self, budget=None):
        maintain(repo.load("t"), budget)  # another handle commits the pass; this one stays where it was
        raise KeyboardInterrupt

    monkeypatch.setattr(Dataset, "maintain", interrupted)
    ds = repo.load("t")
    _watch(ds, None, 0.01, as_json=False)
    assert capsys.readouterr().out.strip() == f"stopped after 0 passes; t is at revision {ds.version}" and ds.version == 5
