"""Nulls inside nested Arrow values, as every Arrow writer accepts them.

Arrow leaves the values under a null record unspecified, but writers (Parquet's among them)
check each child column's own nulls against its declared nullability: a required child of
a null record must hold some value there, though no reader ever sees it (the record's null
hides it). That value is a placeholder: the type's zero, as pyarrow puts under a null
record it builds from Python values. Nulls a null record does not hide are left alone, for
the writer to refuse.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def null_column(t: pa.DataType, rows: int) -> pa.Array:
    """``rows`` nulls of type ``t``, with placeholders under them where ``t`` has required children."""
    if pa.types.is_struct(t):  # pyarrow's converter puts the placeholders in (pa.nulls does not)
        return pa.array([None] * rows, type=t)
    return pa.nulls(rows, t)


def writable_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with a placeholder wherever a required child holds a null a null record hides."""
    if not any(_has_required(f.type) for f in batch.schema):
        return batch
    columns = batch.columns
    fixed = [writable(c) for c in columns]
    if all(a is b for a, b in zip(fixed, columns)):
        return batch
    return pa.RecordBatch.from_arrays(fixed, schema=batch.schema)


def writable(array: pa.Array, hidden: np.ndarray | None = None) -> pa.Array:
    """``array`` with a placeholder wherever a required child holds a null that a null record
    (of ``array`` or, through ``hidden``, above it) hides; the same object when there is none."""
    t = array.type
    if not _has_required(t):
        return array
    own = array.is_null().to_numpy(zero_copy_only=False) if array.null_count else None
    here = own if hidden is None else hidden if own is None else hidden | own
    if pa.types.is_struct(t):
        children = [array.field(i) for i in range(t.num_fields)]
        fixed = [_fill(writable(c, here), f.nullable, here) for c, f in zip(children, t)]
        if all(a is b for a, b in zip(fixed, children)):
            return array
        return pa.StructArray.from_arrays(fixed, fields=list(t), mask=pa.array(own) if own is not None else None)
    offsets = array.offsets
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    values = (array.items if pa.types.is_map(t) else array.values)[start:end]
    lengths = np.diff(offsets.to_numpy(zero_copy_only=False))
    inner = np.repeat(here, lengths) if here is not None else None  # the entries of a hidden list are hidden
    item = t.item_field if pa.types.is_map(t) else t.value_field
    fixed = _fill(writable(values, inner), item.nullable, inner)
    if fixed is values:
        return array
    offsets = pc.subtract(offsets, offsets[0]) if start else offsets
    mask = pa.array(own) if own is not None else None
    if pa.types.is_map(t):
        return pa.MapArray.from_arrays(offsets, array.keys[start:end], fixed, type=t, mask=mask)
    return type(array).from_arrays(offsets, fixed, type=t, mask=mask)


def _fill(array: pa.Array, nullable: bool, hidden: np.ndarray | None) -> pa.Array:
    """``array`` (a required child's, unless ``nullable``) with its hidden nulls replaced."""
    if nullable or hidden is None or not array.null_count:
        return array
    fill = hidden & array.is_null().to_numpy(zero_copy_only=False)
    if not fill.any():
        return array
    return pc.if_else(pa.array(fill), pc.coalesce(array, _placeholder(array.type)), array)


@functools.lru_cache(maxsize=256)
def _placeholder(t: pa.DataType) -> pa.Scalar:
    """The value pyarrow puts in a required child of type ``t`` under a null record."""
    return pa.array([None], pa.struct([pa.field("v", t, False)])).field(0)[0]


@functools.lru_cache(maxsize=256)
def _has_required(t: pa.DataType) -> bool:
    """Whether a nested type holds a required child or item (where a hidden null may sit)."""
    if pa.types.is_struct(t):
        return any(not f.nullable or _has_required(f.type) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return not t.value_field.nullable or _has_required(t.value_type)
    if pa.types.is_map(t):
        return not t.item_field.nullable or _has_required(t.item_type)
    return False
