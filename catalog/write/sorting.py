"""The order of rows within each data file a dataset writes (property ``sort.by``).

Rows are sorted within a file, not across files: ascending by the first field, then by
the next; nulls last (a float's NaN sorts after every number and before null); strings
and enums by their UTF-8 bytes, binary values by their bytes. Sorted files make the
per-row-group statistics of Parquet files narrow, so a scan skips the row groups that
cannot match.

- ``sort.by`` unset: a keyed dataset sorts by its record key, any other not at all;
- ``sort.by = a, b``: top-level fields of primitive, orderable types;
- ``sort.by = none``: no sorting (turns the keyed default off).

A writer's ``sort_by`` option (Python ``dataset.writer(sort_by=...)``, Spark ``sortBy``)
overrides the property for one write, in the same form (a list or comma text; ``none``
or an empty list: unsorted).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.errors import CdkdsError, InvalidDescriptorError
from cdkds.formats.schema import FieldType

PROPERTY = "sort.by"
NONE = "none"
ORDERABLE_KINDS = frozenset({
    "boolean", "int", "long", "float", "double", "bytes", "string", "enum", "uuid", "fixed", "decimal", "date",
    "time-millis", "time-micros", "timestamp-millis", "timestamp-micros", "local-timestamp-millis",
    "local-timestamp-micros",
})


def sort_columns(value: Any, fields: Mapping[str, FieldType], what: str,
                 error: type[CdkdsError] = InvalidDescriptorError) -> tuple[str, ...]:
    """The fields named by a ``sort.by`` value (comma text or a list of names; ``none`` or an
    empty list: no sorting); ``error`` naming ``what`` and the value when a name is not a
    top-level field of an orderable type, repeats, or the text names nothing."""
    if isinstance(value, str):
        if value.strip().lower() == NONE:
            return ()
        names = [n.strip() for n in value.split(",")]
        if not any(names):
            raise error(f"{what} = {value!r} names no field; give field names such as 'a, b', or 'none' to write "
                        f"files unsorted")
        if not all(names):
            raise error(f"{what} = {value!r} has an empty field name; give field names separated by commas")
    elif isinstance(value, Sequence) and all(isinstance(n, str) for n in value):
        names = [n.strip() for n in value]
        if not all(names):
            raise error(f"{what} = {list(value)!r} has an empty field name")
    else:
        raise error(f"{what} must be field names (a list, or text such as 'a, b'), got {value!r:.100}")
    seen: set[str] = set()
    for name in names:
        if name not in fields:
            raise error(f"{what} = {_text(value)!r}: field {name!r} is not in the schema {list(fields)}")
        kind = fields[name].kind
        if kind not in ORDERABLE_KINDS:
            raise error(f"{what} = {_text(value)!r}: field {name!r} is a {kind}, which has no order to sort by "
                        f"(sort by top-level fields of primitive types)")
        if name in seen:
            raise error(f"{what} = {_text(value)!r} names field {name!r} twice")
        seen.add(name)
    return tuple(names)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ", ".join(value)


def descriptor_sort(properties: Mapping[str, str], fields: Mapping[str, FieldType],
                    record_key: Sequence[str]) -> tuple[str, ...]:
    """The fields a dataset's files are sorted by: property ``sort.by``, else its record key."""
    value = properties.get(PROPERTY)
    if value is None:
        return tuple(record_key)
    return sort_columns(value, fields, f"property {PROPERTY}")


def write_sort(dataset: str, descriptor: Any, option: Any, name: str = "sort_by",
               error: type[CdkdsError] = CdkdsError) -> tuple[str, ...]:
    """The fields one write sorts its files by: option ``name`` when given (not ``None``),
    else the descriptor's; ``error`` naming the dataset, option and value."""
    if option is None:
        return descriptor.sort_by
    return sort_columns(option, descriptor.fields, f"dataset {dataset!r}: option {name}", error)


def sort_order(table: pa.Table | pa.RecordBatch, columns: Sequence[str]) -> np.ndarray:
    """The row order that sorts ``table`` by ``columns`` (ascending, nulls last; stable).
    A column of one value (a partition's, in its files) orders nothing and is left out: a
    sort comparing it first compares a string per comparison for nothing."""
    keys = [(c, "ascending") for c in columns if _varies(table.column(c))]
    if not keys:
        return np.arange(table.num_rows, dtype=np.int64)
    return pc.sort_indices(table, sort_keys=keys).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _varies(column: pa.Array | pa.ChunkedArray) -> bool:
    """False when every value of ``column`` is the same (or null, all of them); True when
    they may differ (floats may hold NaN, which min and max leave out)."""
    kind = column.type
    if column.null_count == len(column):
        return False
    if column.null_count or not (pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)
                                 or pa.types.is_temporal(kind) or pa.types.is_boolean(kind)):
        return True
    bounds = pc.min_max(column)
    return bounds["min"] != bounds["max"]
