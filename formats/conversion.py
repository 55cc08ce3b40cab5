"""The one checked conversion of a column into a field's type: every value that enters a
dataset — records (once buffered into a batch), Arrow batches, imported files, keyed
operations' rows — reaches its data file through :func:`conform_column`, so each rule below
is written here once:

- a column is cast to the field's Arrow type only when no value changes (Arrow's safe
  cast, plus: a finite number that would overflow a ``float`` to infinity is refused);
- records (structs) are matched by field name: a field the schema lacks is refused, as is
  a name given twice; a missing field takes its default, else it is refused;
- arrays and maps are converted value by value (nested to any depth); a map key may
  appear once per map;
- a null in a required field — at any depth — is refused;
- enum values must be symbols; UUIDs are stored in canonical text (lower case, hyphenated);
- ``*-millis`` fields take whole milliseconds (a finer value is refused, never truncated);
- times lie within a day (``00:00`` to ``23:59:59.999999``);
- dates and timestamps lie in the years 1 to 9999 — what Python's ``datetime`` holds, so
  that every stored value reads back through ``reader()``, statistics, partition values
  and predicates (Arrow and Parquet could hold more; they are refused here instead).

A refused value is a :class:`RefusedValue` naming the field path (``r.items[2].sku``), the
value and the row of the column it was found in.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdkds.formats import domains
from cdkds.formats.domains import FIRST_DAY, LAST_DAY, MILLIS_KINDS
from cdkds.formats.errors import SchemaMismatchError
from cdkds.formats.schema import AvroType, TIMESTAMP_KINDS, arrow_type, default_value, type_kind, unwrap

_INFINITY = r"^\s*[+-]?inf(inity)?\s*$"  # text that means an infinity (other text that overflows to one is refused)


class RefusedValue(SchemaMismatchError):
    """A value that cannot be stored in its field: ``path`` (dotted, with list indices and
    map keys), ``value``, ``reason`` and ``row``, the index in the column converted (``None``
    for a value checked on its own)."""

    def __init__(self, path: str, row: int | None, value: Any, reason: str):
        self.path, self.row, self.value, self.reason = path, row, value, reason
        super().__init__(self.describe(None if row is None else f"row {row}"))

    def describe(self, where: str | None = None) -> str:
        """The message, with ``where`` (a row, a file's line) named if given."""
        shown = self.value
        if isinstance(shown, str) and len(shown) > 100:
            shown = shown[:97] + "..."
        value = "null" if self.value is None else f"value {shown!r}"
        return f"field {self.path!r}{f' ({where})' if where else ''}: {value} {self.reason}"

    def at(self, path: str, row: int) -> "RefusedValue":
        """The same refusal, found at ``row`` of an enclosing column, under ``path``."""
        return RefusedValue(path, row, self.value, self.reason)


class FloatOverflow(pa.ArrowInvalid):
    """A finite number a cast would make infinite: beyond the range of the float type."""


class InexactFloat(pa.ArrowInvalid):
    """An integer a cast to a float type would change (its nearest float is another number)."""


def safe_cast(array: pa.Array, t: pa.DataType) -> pa.Array:
    """``array`` as type ``t`` without losing a value: Arrow's safe cast, and ``pa.ArrowInvalid``
    for a finite number that would overflow a float to infinity (Arrow's safe cast lets it);
    an integer becomes a float when that float is the same number (Arrow's safe cast refuses
    every integer beyond 2**24 for a float, 2**53 for a double, even one it holds exactly)."""
    whole_to_float = pa.types.is_integer(array.type) and pa.types.is_floating(t)
    cast = array.cast(t, safe=not whole_to_float)  # (checked below, as write() checks a value)
    if _may_lose(array.type, t):
        _check_round_trip(array, cast)
    if pa.types.is_floating(t) and not array.type.equals(t) and cast.null_count < len(cast):
        overflow = pc.is_inf(cast)
        if pa.types.is_floating(array.type):
            overflow = pc.and_(overflow, pc.invert(pc.is_inf(array)))
        elif pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            overflow = pc.and_(overflow, pc.invert(pc.match_substring_regex(array, _INFINITY, ignore_case=True)))
        first = pc.index(overflow, True).as_py()
        if first >= 0:
            raise FloatOverflow(f"value {array[first].as_py()!r} is beyond the range of a {t}")
        if pa.types.is_integer(array.type):
            _check_whole_numbers_kept(array, cast)
    return cast


def _may_lose(source: pa.DataType, t: pa.DataType) -> bool:
    """Whether Arrow's safe cast from ``source`` to ``t`` may change a value without an error:
    a timestamp to a date or time (it drops the rest), a number to a boolean (2 becomes true),
    a float to a decimal (it rounds to the scale) and a decimal to a float (it rounds digits)."""
    if pa.types.is_timestamp(source):
        return pa.types.is_date(t) or pa.types.is_time(t)
    if pa.types.is_boolean(t):
        return pa.types.is_integer(source) or pa.types.is_floating(source) or pa.types.is_decimal(source)
    return pa.types.is_floating(source) and pa.types.is_decimal(t) or \
        pa.types.is_decimal(source) and pa.types.is_floating(t)


def _check_round_trip(array: pa.Array, cast: pa.Array) -> None:
    """``pa.ArrowInvalid`` if a value of ``cast`` does not cast back to the one it came from
    (``pa.ArrowNotImplementedError`` where there is no way back: a time is not a timestamp)."""
    back = cast.cast(array.type, safe=False)
    first = pc.index(pc.fill_null(pc.not_equal(back, array), False), True).as_py()
    if first >= 0:
        raise pa.ArrowInvalid(f"value {array[first].as_py()!r} would become {cast[first].as_py()!r}")


def _check_whole_numbers_kept(array: pa.Array, cast: pa.Array) -> None:
    """``pa.ArrowInvalid`` if an integer cast to a float lost digits (Arrow's safe cast lets
    2**53 + 1 become 2**53)."""
    exact = 2 ** (53 if pa.types.is_float64(cast.type) else 24)
    big = pc.greater_equal(pc.abs(array.cast(pa.float64(), safe=False)), float(exact))  # (2**53 + 1 reads 2**53)
    if pc.any(big).as_py():
        for i, (v, f) in enumerate(zip(array.to_pylist(), cast.to_pylist())):
            if v is not None and f is not None and int(f) != v:
                raise InexactFloat(f"integer {v} has no exact {cast.type} form (it would become {f!r})")


def first_bad(n: int, convert: Callable[[int, int], Any], errors: tuple = (pa.ArrowInvalid,)) -> int:
    """The index of the first of ``n`` values whose conversion fails, given that converting them
    all fails and that ``convert(start, stop)`` converts that slice value by value (a bisection:
    a few conversions of shrinking slices, however long the batch)."""
    lo, hi = 0, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            convert(lo, mid)
        except errors:
            hi = mid
        else:
            lo = mid
    return lo


def shown(array: pa.Array, i: int) -> Any:
    """Value ``i`` of ``array`` as Python shows it, or, beyond what Python holds (a date past
    9999), as text naming its stored number."""
    try:
        return array[i].as_py()
    except (OverflowError, ValueError):
        t = array.type
        raw = array.cast(pa.int64() if pa.types.is_time64(t) or pa.types.is_timestamp(t) else pa.int32())[i].as_py()
        unit = "days" if pa.types.is_date(t) else getattr(t, "unit", "")
        return f"{raw} {unit} since the epoch" if not pa.types.is_time(t) else f"{raw} {unit} since midnight"


def as_nullable(avro: AvroType) -> AvroType:
    """The field type ``avro`` with nulls allowed (where nulls are checked otherwise: a required
    field's default fills them on import; an update's rows leave out columns)."""
    return avro if unwrap(avro).nullable else ["null", avro]


def conform_column(column: pa.Array | pa.ChunkedArray, avro: AvroType, path: str) -> pa.Array:
    """``column`` in the Arrow type of the Avro field type ``avro``, every value checked by the
    rules of the module docstring; :class:`RefusedValue` for a value that breaks one,
    :class:`SchemaMismatchError` for a column whose type cannot become the field's."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    ft = unwrap(avro)
    column = _plain(column)
    target = arrow_type(ft.avro, path)
    if pa.types.is_null(column.type):
        column = pa.nulls(len(column), target)
    kind = type_kind(ft.avro)
    if kind == "record":
        out = _record(column, ft.avro, target, path)
    elif kind == "array":
        out = _array(column, ft.avro, target, path)
    elif kind == "map":
        out = _map(column, ft.avro, target, path)
    else:
        out = _leaf(column, ft.avro, kind, target, path)
    if not ft.nullable and out.null_count:
        raise RefusedValue(path, pc.index(out.is_null(), True).as_py(), None, "in a required field")
    return out


def _plain(column: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(column.type):
        return column.dictionary_decode()
    if pa.types.is_list_view(column.type) or pa.types.is_large_list_view(column.type):
        return _from_view(column)
    if pa.types.is_large_list(column.type) or pa.types.is_fixed_size_list(column.type):
        return column.cast(pa.list_(column.type.value_field))
    return column


def _from_view(column: pa.Array) -> pa.Array:
    """A list view as a list (Arrow's cast between them makes an invalid array: values lost)."""
    sizes = column.sizes.to_numpy(zero_copy_only=False).astype(np.int64)
    if column.null_count:
        sizes[~column.is_valid().to_numpy(zero_copy_only=False)] = 0
    offsets = pa.array(np.concatenate(([0], np.cumsum(sizes))), pa.int32())
    mask = column.is_null() if column.null_count else None
    return pa.ListArray.from_arrays(offsets, column.flatten(), type=pa.list_(column.type.value_field), mask=mask)


def _mismatch(column: pa.Array, path: str, kind: str, target: pa.DataType, detail: str = "") -> SchemaMismatchError:
    return SchemaMismatchError(f"column {path!r} of type {column.type} cannot be written as {kind} ({target})"
                               f"{': ' + detail if detail else ''}")


# ---------------------------------------------------------------- nested

def _valid_rows(column: pa.Array) -> np.ndarray | None:
    """The positions of the non-null values, ``None`` when all are."""
    if not column.null_count:
        return None
    return np.flatnonzero(column.is_valid().to_numpy(zero_copy_only=False))


def _scatter(values: pa.Array, valid: np.ndarray | None, n: int, target: pa.DataType) -> pa.Array:
    """``values`` (one per valid row) back at their rows, the other rows null — over a
    placeholder Arrow fills with zeros, as a required child under a null parent must be."""
    if valid is None:
        return values
    placeholder = pa.array([None], target)
    index = np.full(n, len(values), dtype=np.int64)
    index[valid] = np.arange(len(values))
    return pa.concat_arrays([values, placeholder]).take(pa.array(index))


def _record(column: pa.Array, avro: dict, target: pa.DataType, path: str) -> pa.Array:
    if not pa.types.is_struct(column.type):
        raise _mismatch(column, path, "record", target)
    valid = _valid_rows(column)
    present = column if valid is None else column.filter(column.is_valid())
    row = (lambda i: int(i)) if valid is None else (lambda i: int(valid[i]))  # noqa: E731
    names = [column.type.field(i).name for i in range(column.type.num_fields)]
    known = {f["name"]: f for f in avro["fields"]}
    for i, name in enumerate(names):
        if name in names[:i]:
            raise SchemaMismatchError(f"field {path!r}: a record holds two fields named {name!r}")
        if name not in known:
            child = present.field(i)
            if not len(child):  # no record to point at: the column's type is at fault
                raise SchemaMismatchError(f"field {path + '.' + name!r} is in no field of the schema (the record "
                                          f"has {list(known)})")
            first = max(pc.index(child.is_valid(), True).as_py(), 0)
            raise RefusedValue(f"{path}.{name}", row(first), child[first].as_py(),
                               f"is in no field of the schema (the record has {list(known)})")
    children = []
    for f in avro["fields"]:
        child_path = f"{path}.{f['name']}"
        if f["name"] in names:
            child = present.field(names.index(f["name"]))
            try:
                children.append(conform_column(child, f["type"], child_path))
            except RefusedValue as e:
                raise e.at(e.path, row(e.row)) from None
        elif "default" in f:
            default = default_value(f["type"], f["default"])
            children.append(pa.array([default] * len(present), arrow_type(unwrap(f["type"]).avro, child_path)))
        else:
            raise SchemaMismatchError(f"field {child_path!r} is required and missing from the column (it has no "
                                      f"default)")
    values = pa.StructArray.from_arrays(children, fields=list(target))
    return _scatter(values, valid, len(column), target)


def _entries(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """For a list or map column: the offsets of its entries once compacted (null values hold
    none), and the positions of those entries in its (unsliced) child arrays."""
    offsets = column.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    lengths = np.diff(offsets)
    if column.null_count:
        lengths[~column.is_valid().to_numpy(zero_copy_only=False)] = 0
    compact = np.concatenate(([0], np.cumsum(lengths)))
    if offsets[-1] - offsets[0] == compact[-1]:  # no entries under null values: one slice of the child
        return compact, np.arange(offsets[0], offsets[-1], dtype=np.int64)
    positions = np.arange(compact[-1], dtype=np.int64) + np.repeat(offsets[:-1] - compact[:-1], lengths)
    return compact, positions


def _entry_row(offsets: np.ndarray, entry: int) -> int:
    """The row of the compacted entry ``entry``."""
    return int(np.searchsorted(offsets, entry, side="right") - 1)


def _children(child: pa.Array, positions: np.ndarray) -> pa.Array:
    """The entries at ``positions`` of a child array (a slice when they are contiguous)."""
    if len(positions) == 0:
        return child.slice(0, 0)
    if positions[-1] - positions[0] + 1 == len(positions):
        return child.slice(int(positions[0]), len(positions))
    return child.take(pa.array(positions))


def _array(column: pa.Array, avro: dict, target: pa.DataType, path: str) -> pa.Array:
    if not pa.types.is_list(column.type):
        raise _mismatch(column, path, "array", target)
    offsets, positions = _entries(column)
    try:
        items = conform_column(_children(column.values, positions), avro["items"], f"{path}[]")
    except RefusedValue as e:
        row = _entry_row(offsets, e.row)
        raise e.at(e.path.replace(f"{path}[]", f"{path}[{e.row - offsets[row]}]", 1), row) from None
    mask = column.is_null() if column.null_count else None
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), items, type=target, mask=mask)


def _map(column: pa.Array, avro: dict, target: pa.DataType, path: str) -> pa.Array:
    if pa.types.is_list(column.type) and pa.types.is_struct(column.type.value_type) \
            and [f.name for f in column.type.value_type] == ["key", "value"]:
        entries = column.values
        keys, items = entries.field(0), entries.field(1)
    elif pa.types.is_map(column.type):
        entries, keys, items = None, column.keys, column.items
    else:
        raise _mismatch(column, path, "map", target)
    offsets, positions = _entries(column)
    if entries is not None and entries.null_count:  # (its key and value read as '' and zero)
        null = np.flatnonzero(entries.is_null().to_numpy(zero_copy_only=False)[positions])
        if len(null):
            raise RefusedValue(path, _entry_row(offsets, int(null[0])), None, "as a map entry (an entry is a key and "
                                                                                "its value)")
    try:
        keys = conform_column(_children(keys, positions), "string", f"{path} key")
        items = conform_column(_children(items, positions), avro["values"], f"{path}[]")
    except RefusedValue as e:
        row = _entry_row(offsets, e.row)
        key = keys[e.row].as_py() if pa.types.is_string(keys.type) and e.path != f"{path} key" else None
        at = e.path.replace(f"{path}[]", f"{path}[{key!r}]", 1) if key is not None else e.path
        raise e.at(at, row) from None
    lengths = np.diff(offsets)
    if len(keys) and lengths.max() > 1:  # a key given twice in one map: (row, key) pairs repeat
        rows = np.repeat(np.arange(len(column)), lengths)
        codes = keys.dictionary_encode().indices.to_numpy(zero_copy_only=False).astype(np.int64)
        pairs = rows * (int(codes.max()) + 1) + codes
        unique, first = np.unique(pairs, return_index=True)
        if len(unique) < len(pairs):
            seen = np.zeros(len(pairs), dtype=bool)
            seen[first] = True
            twice = int(np.flatnonzero(~seen)[0])
            raise RefusedValue(path, int(rows[twice]), keys[twice].as_py(), "is a key given twice in one map")
    mask = column.is_null() if column.null_count else None
    out = pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), keys, items, mask=mask)
    return out if out.type.equals(target) else out.view(target)


# ---------------------------------------------------------------- leaves

def _leaf(column: pa.Array, avro: AvroType, kind: str, target: pa.DataType, path: str) -> pa.Array:
    if pa.types.is_nested(column.type):
        raise _mismatch(column, path, kind, target)
    if not column.type.equals(target):
        column = _cast(column, kind, target, path)
    if kind == "enum":
        symbols = avro["symbols"]
        bad = pc.and_(column.is_valid(), pc.invert(pc.is_in(column, pa.array(symbols))))
        _refuse_first(column, pc.index(bad, True).as_py(), path,
                      f"is not one of the enum symbols {sorted(symbols)}")
    elif kind == "uuid":
        if pc.all(pc.match_substring_regex(column, domains.CANONICAL_UUID)).as_py() is False:
            column = pa.array([None if v is None else _canonical_uuid(v, path, i)
                               for i, v in enumerate(column.to_pylist())], column.type)
    elif kind in ("time-millis", "time-micros"):
        ticks = column.cast(pa.int32() if pa.types.is_time32(target) else pa.int64())
        first = _first_outside(ticks, 0, domains.ticks_per_day(target.unit) - 1)
        if first >= 0:  # (Python would show it wrapped into the day)
            raise RefusedValue(path, first, f"{ticks[first].as_py()} {target.unit} since midnight",
                               domains.NOT_A_TIME_OF_DAY)
    elif kind == "date":
        _refuse_first(column, _first_outside(column.cast(pa.int32()), FIRST_DAY, LAST_DAY), path, domains.NOT_A_DATE)
    elif kind in TIMESTAMP_KINDS:
        first = _first_outside(column.cast(pa.int64()), *domains.timestamp_range(target.unit))
        _refuse_first(column, first, path, domains.NOT_A_TIMESTAMP)
    return column


def _first_outside(ticks: pa.Array, lo: int, hi: int) -> int:
    """The index of the first value outside ``lo..hi``, -1 if none (one pass when all lie within)."""
    least, most = pc.min_max(ticks).values()
    if least.as_py() is None or lo <= least.as_py() and most.as_py() <= hi:
        return -1
    return pc.index(pc.or_(pc.less(ticks, lo), pc.greater(ticks, hi)), True).as_py()


def _refuse_first(column: pa.Array, first: int, path: str, reason: str) -> None:
    if first >= 0:
        raise RefusedValue(path, first, shown(column, first), reason)


def _canonical_uuid(value: Any, path: str, row: int) -> str:
    try:
        return domains.canonical_uuid(value)
    except ValueError:
        raise RefusedValue(path, row, value, domains.NOT_A_UUID) from None


def _cast(column: pa.Array, kind: str, target: pa.DataType, path: str) -> pa.Array:
    if pa.types.is_boolean(column.type) and (pa.types.is_integer(target) or pa.types.is_floating(target)
                                             or pa.types.is_decimal(target)):  # (as write() and keys refuse True)
        raise _mismatch(column, path, kind, target, "a boolean is not a number")
    if kind in MILLIS_KINDS and (pa.types.is_timestamp(column.type) or pa.types.is_time(column.type)):
        try:
            whole = column.cast(target, safe=False)
            lost = pc.index(pc.not_equal(whole.cast(column.type), column), True).as_py()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # (safe_cast says why)
            lost = -1
        if lost >= 0:
            raise RefusedValue(path, lost, shown(column, lost), domains.sub_millisecond(kind))
    try:
        return safe_cast(column, target)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise _mismatch(column, path, kind, target, str(e)) from None
    except pa.ArrowInvalid as e:
        if not len(column):
            raise _mismatch(column, path, kind, target, str(e)) from None
        i = first_bad(len(column), lambda lo, hi: safe_cast(column.slice(lo, hi - lo), target))
        try:
            safe_cast(column.slice(i, 1), target)
        except FloatOverflow:
            raise RefusedValue(path, i, shown(column, i), domains.out_of_range(kind)) from None
        except InexactFloat:
            raise RefusedValue(path, i, shown(column, i), domains.inexact(kind)) from None
        except pa.ArrowInvalid as one:
            if kind == "decimal" and (pa.types.is_decimal(column.type) or pa.types.is_integer(column.type)):
                raise RefusedValue(path, i, shown(column, i), domains.misfit_decimal(target.precision, target.scale)) \
                    from None
            raise RefusedValue(path, i, shown(column, i), f"is not a {_kind_name(kind, target)} "
                                                          f"({str(one).splitlines()[0]})") from None
        raise _mismatch(column, path, kind, target, str(e)) from None


def _kind_name(kind: str, target: pa.DataType) -> str:
    if kind == "decimal":
        return f"decimal({target.precision},{target.scale})"
    if kind == "fixed":
        return f"fixed({target.byte_width})"
    return kind


__all__ = ["FIRST_DAY", "FloatOverflow", "InexactFloat", "LAST_DAY", "MILLIS_KINDS",
           "RefusedValue", "as_nullable", "conform_column", "first_bad", "safe_cast", "shown"]
