"""The columns a read outputs: every entry point that takes columns selects them with
:func:`select_columns` and refuses an unknown one with the same message."""

from __future__ import annotations

import re

import pytest

from cdkds.catalog import DatasetDescriptor, DatasetRepository
from cdkds.catalog.errors import ExpressionError
from cdkds.catalog.read.columns import select_columns
from tests.cli.running import run

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "g", "type": "string"}]}
UNKNOWN = "dataset 'x': unknown column 'nope'; columns are ['id', 'g']"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    repo = DatasetRepository(f"file://{tmp_path_factory.mktemp('columns')}/lake")
    ds = repo.create("x", DatasetDescriptor(SCHEMA, record_key=["id"]))
    ds.upsert([{"id": 1, "g": "a"}])
    return repo.load("x")


def test_selection_keeps_the_order_given_once_each(keyed):
    d = keyed.descriptor
    assert select_columns("x", d, None) == ("id", "g")
    assert select_columns("x", d, ["g", "id", "g"]) == ("g", "id")
    assert select_columns("x", d, " g , id,") == ("g", "id")
    assert keyed.get(1, columns=["g", "g"]) == {"g": "a"}


ENTRY_POINTS = {
    "plan": lambda d: d.plan(columns=["id", "nope"]),
    "scan": lambda d: list(d.scan(columns=["nope"])),
    "to_table": lambda d: d.to_table(columns="id,nope"),
    "reader": lambda d: list(d.reader(columns=["nope"])),
    "to_arrow_dataset": lambda d: d.to_arrow_dataset(columns=["nope"]),
    "changes": lambda d: d.changes(0, columns=["nope"]),
    "get": lambda d: d.get(1, columns=["nope"]),
    "get_many": lambda d: d.get_many([1], columns="nope"),
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_an_unknown_column_is_one_error_at_every_entry_point(keyed, entry):
    with pytest.raises(ExpressionError, match=re.escape(UNKNOWN)):
        ENTRY_POINTS[entry](keyed)


@pytest.mark.parametrize("command", ["show", "export", "changes"])
def test_an_unknown_column_on_the_command_line(keyed, tmp_path, command):
    url = f"{keyed.repository.url}/x"
    args = {"show": ["show", url], "export": ["export", url, str(tmp_path / "o.parquet")],
            "changes": ["changes", url, "--start", "0"]}[command]
    done = run(*args, "--columns", "id,nope", code=1)
    assert f"error: {UNKNOWN}" in done.stderr
