"""Hive-style Parquet folders written as other engines write them (partition columns in the
folder names, usually not in the files), for the conversion and read-path tests."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq


def write_file(folder: Path, partition: dict[str, Any], table: pa.Table, name: str = "part-0.parquet") -> Path:
    """``table`` written as one Parquet file under ``folder/<k=v>/...``."""
    where = folder.joinpath(*(f"{k}={'__HIVE_DEFAULT_PARTITION__' if v is None else v}" for k, v in partition.items()))
    os.makedirs(where, exist_ok=True)
    pq.write_table(table, where / name)
    return where / name


def sales(root: Path) -> Path:
    """``root/sales``: two countries, two days, files without the partition columns, a
    ``_SUCCESS`` marker as Spark leaves it."""
    folder = root / "sales"
    write_file(folder, {"country": "NZ", "day": "2026-01-01"},
               pa.table({"id": [1, 2, 3], "amount": [1.5, 2.5, None], "note": ["a", "b", None]}))
    write_file(folder, {"country": "NZ", "day": "2026-01-02"},
               pa.table({"id": [4], "amount": [4.0], "note": ["d"]}))
    write_file(folder, {"country": "AU", "day": "2026-01-01"},
               pa.table({"id": [5, 6], "amount": [5.0, 6.0], "note": ["e", "f"]}))
    (folder / "_SUCCESS").write_bytes(b"")
    return folder


def hive_rows(folder: Path, schema: pa.Schema | None = None) -> pa.Table:
    """The folder as pyarrow's own Hive-partitioned dataset reads it."""
    partitioning = pads.HivePartitioning.discover(infer_dictionary=False) if schema is None else \
        pads.partitioning(schema, flavor="hive")
    return pads.dataset(str(folder), format="parquet", partitioning=partitioning).to_table()


def bag(table: pa.Table | list[dict]) -> Counter:
    rows = table.to_pylist() if isinstance(table, pa.Table) else table
    return Counter(json.dumps(r, sort_keys=True, default=str) for r in rows)
