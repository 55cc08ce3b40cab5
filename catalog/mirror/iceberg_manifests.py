"""Iceberg's files below the table metadata (format version 2), written with fastavro and
pyarrow: manifests (the data or delete files of a snapshot, with their partition values and
column statistics), manifest lists (a snapshot's manifests) and positional delete files.

The Avro schemas carry the field ids Iceberg reads these files by, and every file is
byte-for-byte determined by what it describes (fixed sync markers), so two processes that
mirror the same revision write the same objects.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from typing import Any, Iterable

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ADDED, EXISTING, DELETED = 1, 0, 2  # manifest entry status
DATA, POSITION_DELETES = 0, 1  # content of a data file entry and of a manifest
FILE_PATH_ID, POS_ID = 2147483546, 2147483545  # the reserved ids of a positional delete file's columns


def _map(name: str, key_id: int, value_id: int, value: Any) -> dict:
    """Iceberg's Avro form of a map with int keys: an array of key/value records."""
    return {"type": "array", "logicalType": "map", "items": {
        "type": "record", "name": name, "fields": [
            {"name": "key", "type": "int", "field-id": key_id},
            {"name": "value", "type": value, "field-id": value_id}]}}


def _optional(name: str, avro: Any, field_id: int) -> dict:
    return {"name": name, "type": ["null", avro], "default": None, "field-id": field_id}


def entry_schema(partition: dict) -> dict:
    """The Avro schema of a v2 manifest's entries, ``partition`` the partition struct's record."""
    data_file = {"type": "record", "name": "r2", "fields": [
        {"name": "content", "type": "int", "field-id": 134},
        {"name": "file_path", "type": "string", "field-id": 100},
        {"name": "file_format", "type": "string", "field-id": 101},
        {"name": "partition", "type": partition, "field-id": 102},
        {"name": "record_count", "type": "long", "field-id": 103},
        {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
        _optional("column_sizes", _map("k117_v118", 117, 118, "long"), 108),
        _optional("value_counts", _map("k119_v120", 119, 120, "long"), 109),
        _optional("null_value_counts", _map("k121_v122", 121, 122, "long"), 110),
        _optional("nan_value_counts", _map("k138_v139", 138, 139, "long"), 137),
        _optional("lower_bounds", _map("k126_v127", 126, 127, "bytes"), 125),
        _optional("upper_bounds", _map("k129_v130", 129, 130, "bytes"), 128),
        _optional("key_metadata", "bytes", 131),
        _optional("split_offsets", {"type": "array", "items": "long", "element-id": 133}, 132),
        _optional("equality_ids", {"type": "array", "items": "int", "element-id": 136}, 135),
        _optional("sort_order_id", "int", 140),
    ]}
    return {"type": "record", "name": "manifest_entry", "fields": [
        {"name": "status", "type": "int", "field-id": 0},
        _optional("snapshot_id", "long", 1),
        _optional("sequence_number", "long", 3),
        _optional("file_sequence_number", "long", 4),
        {"name": "data_file", "type": data_file, "field-id": 2},
    ]}


MANIFEST_FILE_SCHEMA = {"type": "record", "name": "manifest_file", "fields": [
    {"name": "manifest_path", "type": "string", "field-id": 500},
    {"name": "manifest_length", "type": "long", "field-id": 501},
    {"name": "partition_spec_id", "type": "int", "field-id": 502},
    {"name": "content", "type": "int", "field-id": 517},
    {"name": "sequence_number", "type": "long", "field-id": 515},
    {"name": "min_sequence_number", "type": "long", "field-id": 516},
    {"name": "added_snapshot_id", "type": "long", "field-id": 503},
    {"name": "added_files_count", "type": "int", "field-id": 504},
    {"name": "existing_files_count", "type": "int", "field-id": 505},
    {"name": "deleted_files_count", "type": "int", "field-id": 506},
    {"name": "added_rows_count", "type": "long", "field-id": 512},
    {"name": "existing_rows_count", "type": "long", "field-id": 513},
    {"name": "deleted_rows_count", "type": "long", "field-id": 514},
    _optional("partitions", {"type": "array", "element-id": 508, "items": {
        "type": "record", "name": "r508", "fields": [
            {"name": "contains_null", "type": "boolean", "field-id": 509},
            _optional("contains_nan", "boolean", 518),
            _optional("lower_bound", "bytes", 510),
            _optional("upper_bound", "bytes", 511)]}}, 507),
    _optional("key_metadata", "bytes", 519),
]}


def _sync_marker(seed: str) -> bytes:
    return hashlib.sha256(seed.encode()).digest()[:16]


def _avro(schema: dict, records: Iterable[dict], metadata: dict[str, str], seed: str) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), records, codec="null", metadata=metadata,
                    sync_marker=_sync_marker(seed))
    return out.getvalue()


@dataclass(frozen=True)
class Manifest:
    """One manifest as a manifest list describes it (its Avro record, field by field)."""

    record: dict

    @property
    def path(self) -> str:
        return self.record["manifest_path"]

    @property
    def content(self) -> int:
        return self.record["content"]


def manifest_bytes(entries: list[dict], partition: dict, content: int, metadata: dict[str, str],
                   seed: str) -> bytes:
    """A manifest file holding ``entries`` (manifest-entry records)."""
    header = {**metadata, "format-version": "2", "content": "deletes" if content == POSITION_DELETES else "data"}
    return _avro(entry_schema(partition), entries, header, seed)


def read_entries(data: bytes) -> list[dict]:
    """A manifest's entries, as written."""
    return list(fastavro.reader(io.BytesIO(data)))


def manifest_record(path: str, length: int, content: int, sequence_number: int, snapshot_id: int,
                    entries: list[dict], summaries: list[dict] | None) -> Manifest:
    """The manifest list's record of a manifest holding ``entries``."""
    def count(status: int) -> int:
        return sum(1 for e in entries if e["status"] == status)

    def rows(status: int) -> int:
        return sum(e["data_file"]["record_count"] for e in entries if e["status"] == status)

    live = [e["sequence_number"] for e in entries if e["status"] != DELETED]
    return Manifest({
        "manifest_path": path, "manifest_length": length, "partition_spec_id": 0, "content": content,
        "sequence_number": sequence_number, "min_sequence_number": min(live, default=sequence_number),
        "added_snapshot_id": snapshot_id, "added_files_count": count(ADDED), "existing_files_count": count(EXISTING),
        "deleted_files_count": count(DELETED), "added_rows_count": rows(ADDED),
        "existing_rows_count": rows(EXISTING), "deleted_rows_count": rows(DELETED),
        "partitions": summaries, "key_metadata": None,
    })


def manifest_list_bytes(manifests: list[Manifest], snapshot_id: int, parent_id: int | None,
                        sequence_number: int) -> bytes:
    metadata = {"snapshot-id": str(snapshot_id), "parent-snapshot-id": str(parent_id) if parent_id else "null",
                "sequence-number": str(sequence_number), "format-version": "2"}
    return _avro(MANIFEST_FILE_SCHEMA, [m.record for m in manifests], metadata, f"list-{snapshot_id}")


def read_manifest_list(data: bytes) -> list[Manifest]:
    return [Manifest(r) for r in fastavro.reader(io.BytesIO(data))]


def entry(status: int, snapshot_id: int, sequence_number: int, content: int, path: str, file_format: str,
          partition: dict, record_count: int, size: int, *, value_counts: dict[int, int] | None = None,
          null_counts: dict[int, int] | None = None, lower: dict[int, bytes] | None = None,
          upper: dict[int, bytes] | None = None) -> dict:
    """A manifest entry (a data or positional delete file); sequence numbers are written out,
    not inherited, so the entry means the same in every manifest that carries it."""
    def pairs(values: dict | None) -> list[dict] | None:
        return None if values is None else [{"key": k, "value": v} for k, v in sorted(values.items())]

    return {"status": status, "snapshot_id": snapshot_id, "sequence_number": sequence_number,
            "file_sequence_number": sequence_number, "data_file": {
                "content": content, "file_path": path, "file_format": file_format, "partition": partition,
                "record_count": record_count, "file_size_in_bytes": size, "column_sizes": None,
                "value_counts": pairs(value_counts), "null_value_counts": pairs(null_counts),
                "nan_value_counts": None, "lower_bounds": pairs(lower), "upper_bounds": pairs(upper),
                "key_metadata": None, "split_offsets": None, "equality_ids": None, "sort_order_id": None}}


def entry_bound(e: dict, which: str, field_id: int) -> bytes | None:
    for pair in e["data_file"][which] or ():
        if pair["key"] == field_id:
            return pair["value"]
    return None


# ---------------------------------------------------------------- positional deletes

POSITION_DELETE_SCHEMA = pa.schema([
    pa.field("file_path", pa.string(), nullable=False, metadata={b"PARQUET:field_id": str(FILE_PATH_ID).encode()}),
    pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(POS_ID).encode()}),
])


def position_delete_bytes(data_file: str, positions: np.ndarray) -> bytes:
    """A positional delete file (Parquet, one row group) deleting ``positions`` (sorted) of
    ``data_file`` (its absolute location, as the manifests name it)."""
    table = pa.table([pa.array([data_file] * len(positions), pa.string()), pa.array(positions, pa.int64())],
                     schema=POSITION_DELETE_SCHEMA)
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=max(1, len(positions)), compression="zstd",
                   store_schema=False)
    return out.getvalue()
