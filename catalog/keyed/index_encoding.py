"""How index files store their entries' columns: which are dictionary-encoded (``_file``
always, key strings of few values), which of them a reader reads as codes, and the check
those codes need."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def checked_codes(entries: Any) -> Any:
    """``entries`` (a table or batch) once its dictionaries (``_file``, key strings) are
    checked: page checksums leave out page headers, and a damaged dictionary page header
    decodes indices outside the dictionary, which nothing else checks."""
    for column in entries.columns:
        if pa.types.is_dictionary(column.type):
            for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
                _check_codes(chunk)
    return entries


def _check_codes(codes: pa.DictionaryArray) -> None:
    """The range check of a full validation (3x cheaper: it leaves the values to the page
    checksums, which cover them): every code names a value of the dictionary."""
    if len(codes) == codes.null_count:
        return
    low, high = pc.min_max(codes.indices).values()
    if low.as_py() < 0 or high.as_py() >= len(codes.dictionary):
        raise pa.ArrowInvalid(f"dictionary code {high.as_py() if high.as_py() >= len(codes.dictionary) else low.as_py()} "
                              f"is outside a dictionary of {len(codes.dictionary)} values")
    codes.dictionary.validate(full=True)


SAMPLE_ENTRIES = 2048  # entries looked at: in hash order, so any run of them is like a row group's
FEW = 8  # a row group's dictionary pays when it holds at most one distinct value per this many entries


def dictionary_keys(rows: pa.Table) -> list[str]:
    """The string or binary key columns of ``rows`` (entries, in hash order) with few values:
    at most one distinct value per :data:`FEW` entries in the first :data:`SAMPLE_ENTRIES`.
    They are stored dictionary-encoded, which a lookup reads as codes (2-letter tenant codes:
    10M decode in 34 ms as codes, 147 ms as strings). Parquet's dictionaries are per row
    group and hash order scatters a value's entries, so a run of entries tells, not the
    whole file's count; a column mostly distinct in a run of a tenth of that (ids, UUIDs)
    is told from it."""
    keys = rows.schema.names[1:rows.schema.get_field_index("_file")]
    return [k for k in keys if (pa.types.is_string(rows.schema.field(k).type) or pa.types.is_binary(rows.schema.field(k).type))
            and _few_values(rows.column(k))]


def _few_values(column: pa.ChunkedArray) -> bool:
    glance = column.slice(0, SAMPLE_ENTRIES // 10)
    if 2 * pc.count_distinct(glance).as_py() > len(glance):
        return False
    sample = column.slice(0, SAMPLE_ENTRIES)
    return FEW * pc.count_distinct(sample).as_py() <= len(sample)


def coded_columns(metadata: pq.FileMetaData) -> list[str]:
    """The key columns of an index file stored dictionary-encoded (by :func:`dictionary_keys`):
    read as codes (files written before are read as strings, as decoding them to codes would
    cost more)."""
    if not metadata.num_row_groups:
        return []
    first = metadata.row_group(0)
    return [first.column(i).path_in_schema for i in range(first.num_columns)
            if first.column(i).physical_type == "BYTE_ARRAY" and first.column(i).has_dictionary_page
            and first.column(i).path_in_schema != "_file"]
