"""``cdkds convert``: a Hive-style folder becomes a dataset in place; bad input is one line
naming the file, exit code 1 (2 for a bad option), nothing committed."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from cdkds.catalog import DatasetRepository
from tests.catalog.convert.folders import sales, write_file
from tests.cli.running import run, run_script


def test_convert_a_folder_with_the_console_script(tmp_path):
    sales(tmp_path / "lake")
    done = run_script("convert", str(tmp_path / "lake" / "sales"), "--partition-type", "day=string")
    assert done.stdout.strip().endswith("(hive) into dataset 'sales': 3 files, 6 rows: revision 0")
    ds = DatasetRepository(f"file://{tmp_path}/lake").load("sales")
    assert ds.descriptor.fields["day"].kind == "string"
    assert not ds.check(read_data=True).problems
    assert json.loads(run("check", ds.url, "--read-data", "--json").stdout)["problems"] == []


def test_json_into_a_repository_and_a_name(tmp_path):
    sales(tmp_path / "lake" / "ns")
    done = json.loads(run("convert", f"file://{tmp_path}/lake/ns/sales", "--into", f"file://{tmp_path}/lake",
                          "--name", "ns/sales", "--json").stdout)
    assert (done["dataset"], done["kind"], done["files"], done["rows"], done["revision"]) == \
        ("ns/sales", "hive", 3, 6, 0)


@pytest.mark.parametrize("args, message", [
    (["--partition-type", "day"], "expected NAME=TYPE"),
    (["--partition-type", "day=datetime"], "expected NAME=TYPE with TYPE one of int, long"),
])
def test_a_bad_partition_type_is_a_usage_error(tmp_path, args, message):
    sales(tmp_path)
    done = run("convert", str(tmp_path / "sales"), *args, code=2)
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "sales" / "_log").exists()


def test_errors_are_one_line_naming_the_file(tmp_path):
    folder = sales(tmp_path)
    write_file(folder, {"country": "FR", "day": "2026-01-01"}, pa.table({"id": ["x"], "amount": [1.0], "note": ["n"]}))
    done = run_script("convert", str(folder), code=1)
    assert done.stderr.startswith("error: the schemas of the data files disagree: ")
    assert "country=FR/day=2026-01-01/part-0.parquet has field 'id'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (folder / "_log").exists()
    os.makedirs(tmp_path / "empty")
    assert "holds no data file" in run("convert", str(tmp_path / "empty"), code=1).stderr
    other = tmp_path / "other"
    os.makedirs(other)
    assert "lies outside repository" in run("convert", str(folder), "--into", str(other), code=1).stderr
