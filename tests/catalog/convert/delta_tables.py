"""Delta tables made with deltalake (delta-rs), and deletion vectors added to them as Delta's
PROTOCOL.md writes them (delta-rs deletes by rewriting files, never with vectors)."""

from __future__ import annotations

import json
import struct
import time
import uuid
import zlib
from pathlib import Path

import pyarrow as pa
from pyroaring import BitMap

Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85(data: bytes) -> str:
    data += b"\0" * (-len(data) % 4)
    out = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i:i + 4], "big")
        out.append("".join(Z85[value // 85 ** k % 85] for k in range(4, -1, -1)))
    return "".join(out)


def bitmap_array(positions: list[int]) -> bytes:
    """Delta's portable RoaringBitmapArray of ``positions``."""
    by_high: dict[int, list[int]] = {}
    for p in positions:
        by_high.setdefault(p >> 32, []).append(p & 0xFFFFFFFF)
    out = struct.pack("<IQ", 1681511377, len(by_high))
    for high in sorted(by_high):
        out += struct.pack("<I", high) + BitMap(by_high[high]).serialize()
    return out


def delete_rows(table: Path, path: str, positions: list[int], inline: bool, prefix: str = "") -> None:
    """A commit giving live file ``path`` of the Delta table a deletion vector of ``positions``
    (inline in the log, or in a ``deletion_vector_<uuid>.bin`` file under ``prefix``)."""
    log = table / "_delta_log"
    version = max(int(p.name.split(".")[0]) for p in log.glob("*.json"))
    add = None
    for v in range(version + 1):
        for line in (log / f"{v:020d}.json").read_text().splitlines():
            action = json.loads(line)
            if "add" in action and action["add"]["path"] == path:
                add = action["add"]
    data = bitmap_array(positions)
    if inline:
        vector = {"storageType": "i", "pathOrInlineDv": z85(data), "sizeInBytes": len(data),
                  "cardinality": len(positions)}
    else:
        key = uuid.uuid4()
        folder = table / prefix if prefix else table
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"deletion_vector_{key}.bin").write_bytes(
            b"\x01" + struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data)))
        vector = {"storageType": "u", "pathOrInlineDv": prefix + z85(key.bytes), "offset": 1,
                  "sizeInBytes": len(data), "cardinality": len(positions)}
    now = int(time.time() * 1000)
    removed = {"path": path, "deletionTimestamp": now, "dataChange": True, "extendedFileMetadata": True,
               "partitionValues": add["partitionValues"], "size": add["size"],
               **({"deletionVector": add["deletionVector"]} if add.get("deletionVector") else {})}
    added = {**add, "deletionVector": vector, "modificationTime": now}
    (log / f"{version + 1:020d}.json").write_text("\n".join(json.dumps(a) for a in (
        {"commitInfo": {"timestamp": now, "operation": "DELETE"}}, {"remove": removed}, {"add": added})) + "\n")


def delta_rows(url: str) -> pa.Table:
    """The table's rows as delta-rs's query engine reads them (deletion vectors and column
    mapping applied; ``to_pyarrow_table`` of deltalake 1.6 reads column-mapped files as nulls)."""
    from deltalake import DeltaTable, QueryBuilder

    return pa.table(QueryBuilder().register("t", DeltaTable(url)).execute("select * from t").read_all())
