"""Every example of the README and of docs/guide/ runs as written.

Each page's ```python blocks run in order as one program (one namespace) in an empty
temporary folder, as a reader copying them one after the other into one script would run
them; a ```bash block made only of plain `cdkds` commands runs where it stands (a block
with `[options]`, pipes or continuations is a synopsis and is not run). A block fenced
```python skip (real S3 credentials, a cluster) is not run. Every line of a run block (its top
level) must run: an `except` whose error never came would print nothing and prove nothing.
Pages whose examples use Spark are slow and share the connector tests' local[2] session: an
example's `SparkSession.builder.getOrCreate()` returns it.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.connector.conftest import spark  # noqa: F401  (the one shared session; sets PYSPARK_PYTHON)

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<code>.*?)^```[ \t]*$", re.M | re.S)


@dataclass(frozen=True)
class Example:
    """One fenced block of a page: its language, whether it is skipped, where it starts."""

    page: Path
    line: int
    language: str
    skip: bool
    code: str

    def compiled(self):
        """The block compiled so that a traceback names the page and its line."""
        return compile("\n" * self.line + self.code, str(self.page), "exec")

    def run(self, namespace: dict) -> None:
        """Runs the block in ``namespace``; every line of it must run (an ``except`` whose error
        never came, a branch never taken would show nothing and prove nothing)."""
        code, ran, page = self.compiled(), set(), str(self.page)

        def trace(frame, event, arg):
            if frame.f_code.co_filename != page:
                return None
            if event == "line":
                ran.add(frame.f_lineno)
            return trace

        previous = sys.gettrace()
        sys.settrace(trace)
        try:
            exec(code, namespace)
        finally:
            sys.settrace(previous)
        # the block's own lines: a function it defines may run in another thread (Spark's foreachBatch)
        lines = {line for _, _, line in code.co_lines() if line is not None and line > self.line}
        missed = sorted(lines - ran)
        assert not missed, f"{self.page.name}: lines {missed} of the example did not run"


def examples(page: Path) -> list[Example]:
    """The fenced blocks of a page, in order."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        words = match["info"].split()
        line = text.count("\n", 0, match.start("code"))
        found.append(Example(page, line, words[0] if words else "", "skip" in words[1:], match["code"]))
    return found


def python_examples(page: Path) -> list[Example]:
    return [e for e in examples(page) if e.language == "python"]


def uses_spark(page: Path) -> bool:
    """Whether a run block of the page starts or uses a Spark session."""
    return any(re.search(r"\bpyspark\b|\bspark\.", e.code) for e in python_examples(page) if not e.skip)


def cdkds_commands(example: Example) -> list[list[str]]:
    """The command lines of a bash block made only of plain `cdkds` commands (no options in
    brackets, pipes or continuations: those are synopses); none for any other block."""
    lines = [line for line in example.code.splitlines() if line.strip()]
    if example.language != "bash" or example.skip or not lines:
        return []
    if not all(line.startswith("cdkds ") and not re.search(r"[\[\]|]|\\$|<\w+>", line) for line in lines):
        return []
    return [shlex.split(line, comments=True) for line in lines]


def run_command(example: Example, command: list[str]) -> None:
    """Runs one `cdkds` command of a page with the command the package installs."""
    cdkds = Path(sys.executable).with_name("cdkds")
    done = subprocess.run([str(cdkds), *command[1:]], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{example.page.name}:{example.line}: {' '.join(command)} -> {done.stderr}"


def run_page(page: Path, block_by_block: bool = False) -> dict:
    """Runs a page's python blocks (skip blocks left out) as one program, and its blocks of
    plain `cdkds` commands where they stand; returns the program's namespace. Block by block,
    each python block runs as a program of its own (in the same folder, after the others): a
    reader can copy any one of them."""
    namespace: dict = {"__name__": "__main__"}
    for example in examples(page):
        if example.language == "python" and not example.skip:
            if block_by_block:
                namespace = {"__name__": "__main__"}
            example.run(namespace)
        for command in cdkds_commands(example):
            run_command(example, command)
    return namespace


def page_param(page: Path):
    marks = [pytest.mark.slow] if uses_spark(page) else []
    return pytest.param(page, marks=marks, id=str(page.relative_to(ROOT)))


RUNNABLE = [page for page in PAGES if any(not e.skip for e in python_examples(page))
            or any(cdkds_commands(e) for e in examples(page))]


@pytest.mark.parametrize("page", [page_param(p) for p in RUNNABLE])
def test_page_examples_run(page: Path, tmp_path, monkeypatch, request):
    if uses_spark(page):
        request.getfixturevalue("spark")
    monkeypatch.delenv("CDKDS_INLINE_SERVICES", raising=False)  # examples run with the defaults
    monkeypatch.chdir(tmp_path)
    run_page(page, block_by_block=page == ROOT / "README.md")  # the README's tour: each part on its own


def test_every_topic_has_a_page_with_examples_that_run():
    for topic in ["datasets-and-partitioning", "writing-and-transactions", "time-travel-and-history",
                  "keyed-datasets", "schema-changes", "spark", "streaming-and-change-feed", "keyed-tables",
                  "command-line", "maintenance", "object-stores", "troubleshooting"]:
        assert ROOT / "docs" / "guide" / f"{topic}.md" in RUNNABLE, topic
    assert ROOT / "README.md" in RUNNABLE


def test_readme_stays_one_introduction_and_the_index_lists_every_page():
    """Features add guide pages, not README length."""
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250
    index = (ROOT / "docs" / "guide" / "README.md").read_text(encoding="utf-8")
    for page in PAGES:
        if page.parent.name == "guide" and page.name != "README.md":
            assert f"]({page.name})" in index, f"docs/guide/README.md does not list {page.name}"


def test_examples_use_no_absolute_data_folder():
    """A reader cannot create /data without root: examples use relative or temporary paths."""
    for page in PAGES:
        for example in examples(page):
            assert "/data/" not in example.code, f"{page.name}:{example.line} uses /data/"


def test_skip_blocks_stay_few():
    skipped = [e for page in PAGES for e in python_examples(page) if e.skip]
    assert len(skipped) <= 6, [f"{e.page.name}:{e.line}" for e in skipped]


def anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of a page's headings."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", text, re.M)}


def test_links_between_pages_lead_somewhere():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", FENCE.sub("", page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.exists(), f"{page.name} links to {target}"
            if anchor and linked.suffix == ".md":
                assert anchor in anchors(linked), f"{page.name} links to {target}: no such heading"


def test_a_broken_example_fails_its_page(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```python\nx = 1\n```\n\n```python skip\nraise SystemExit\n```\n\n"
                    "```python\nassert x == 2, 'broken'\n```\n")
    with pytest.raises(AssertionError, match="broken") as failure:
        run_page(page)
    assert failure.traceback[-1].lineno + 1 == 12  # the page's own line


def test_an_example_whose_lines_do_not_all_run_fails_its_page(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\ntry:\n    x = 1\nexcept ValueError as error:\n    print(error)   # never raised\n```\n")
    with pytest.raises(AssertionError, match=r"page.md: lines \[4, 5\] of the example did not run"):
        run_page(page)


def test_block_by_block_each_block_defines_what_it_uses(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nx = 1\n```\n```python\ny = x + 1\n```\n")
    assert run_page(page)["y"] == 2
    with pytest.raises(NameError, match="'x'"):
        run_page(page, block_by_block=True)


def test_a_failing_command_fails_its_page(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("```bash\ncdkds list no/such/lake   # a missing repository\n```\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AssertionError, match="page.md:1: cdkds list no/such/lake -> .*does not exist"):
        run_page(page)


def test_synopses_are_not_run(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```bash\ncdkds show URL [--limit N]\ncdkds list lake\n```\n")
    assert cdkds_commands(examples(page)[0]) == []


def test_blocks_of_a_page_share_one_namespace_and_skip_blocks_do_not_run(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nx = 1\n```\n```python skip\nx = 5\n```\n```bash\nx=9\n```\n```python\ny = x + 1\n```\n")
    assert run_page(page)["y"] == 2
