"""File pruning over the columns of a :class:`~cdkds.catalog.log.files.FileTable`: one
boolean per file, equal to :class:`~cdkds.catalog.expressions.pruning.FileFilter`'s answer
for that file's :class:`AddFile`, without making the AddFiles.

The partition part evaluates the filter's projection (``inclusive`` or ``strict``) on the
``partition`` columns with :func:`~cdkds.catalog.expressions.arrow.to_arrow` (the meaning
of :func:`~cdkds.catalog.expressions.rows.evaluate`; unknown counts as not true). The
statistics part states the rules of :mod:`~cdkds.catalog.expressions.metrics` once more,
over the ``stats.<field id>`` and ``rows`` columns, as Arrow compute. Where Arrow cannot
give Python's answer — a literal that is not a value of the column's type (the per-file
comparison would raise ``TypeError`` or compare otherwise), a NaN among the literals,
bounds with a minimum but no maximum — the per-file rule itself decides, called on the
rows concerned only (the property test in tests/catalog/expressions/test_columnar.py holds
the two equal).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc

from cdkds.catalog.expressions import metrics
from cdkds.catalog.expressions.arrow import to_arrow
from cdkds.catalog.expressions.pruning import SPEC_NAME, FileFilter
from cdkds.catalog.expressions.rows import evaluate
from cdkds.catalog.expressions.tree import (
    ALWAYS_FALSE, ALWAYS_TRUE, SET_OPS, UNARY_OPS, BoundPredicate, Expression, Predicate,
)
from cdkds.catalog.expressions.visitors import BoundPredicateVisitor, transform, visit
from cdkds.formats.statistics import ColumnStatistics

if TYPE_CHECKING:
    from cdkds.catalog.log.files import FileTable

Mask = Union[bool, pa.Array, pa.ChunkedArray]
"""A boolean per file (no nulls), or one boolean for every file."""

_LONG_IN = 16  # 'in' lists longer than this are matched against bounds by binary search


def may_match_mask(file_filter: FileFilter, files: "FileTable") -> pa.BooleanArray:
    """For each row of ``files``: ``file_filter.may_match`` of its file (False only when no
    row of the file can match)."""
    n = len(files)
    partition = _partition_mask(file_filter.inclusive, files) if n else False
    if partition is False:
        return _array(False, n)
    return _array(_and([partition, _metrics_mask(file_filter.predicate, files, _MayMatch)]), n)


def must_match_mask(file_filter: FileFilter, files: "FileTable") -> pa.BooleanArray:
    """For each row of ``files``: ``file_filter.must_match`` of its file (True only when
    every row of the file matches)."""
    n = len(files)
    if file_filter.predicate is ALWAYS_TRUE or n == 0:
        return _array(True, n)
    strict = _partition_mask(file_filter.strict, files)
    if strict is True:
        return _array(True, n)
    return _array(_or([strict, _metrics_mask(file_filter.predicate, files, _MustMatch)]), n)


# ---------------------------------------------------------------- masks

def _array(mask: Mask, n: int) -> pa.BooleanArray:
    if isinstance(mask, bool):
        return _filled(mask, n)
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.combine_chunks() if mask.num_chunks else pa.array([], pa.bool_())
    return mask


def _filled(value: bool, n: int) -> pa.BooleanArray:
    return pa.array(np.full(n, value, dtype=bool))


def _and(terms: Sequence[Mask]) -> Mask:
    if any(t is False for t in terms):
        return False
    arrays = [t for t in terms if t is not True]
    if not arrays:
        return True
    out = arrays[0]
    for a in arrays[1:]:
        out = pc.and_(out, a)
    return out


def _or(terms: Sequence[Mask]) -> Mask:
    if any(t is True for t in terms):
        return True
    arrays = [t for t in terms if t is not False]
    if not arrays:
        return False
    out = arrays[0]
    for a in arrays[1:]:
        out = pc.or_(out, a)
    return out


class _PerRow(Exception):
    """Arrow cannot give the per-file rule's answer: let the rule decide, row by row."""


def _scalar(value: Any, type_: pa.DataType) -> pa.Scalar:
    """``value`` as a scalar of ``type_`` that compares as Python compares ``value`` with
    the column's values; :class:`_PerRow` when there is none (another type, a value the
    type cannot hold exactly, NaN)."""
    if isinstance(value, float) and math.isnan(value):
        raise _PerRow  # Python's 'in' finds a NaN by identity
    try:
        scalar = pa.scalar(value, type=type_)
        back = scalar.as_py()
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        raise _PerRow from None
    if type(back) is not type(value) and not _same_kind(back, value) or back != value:
        raise _PerRow
    return scalar


def _same_kind(back: Any, value: Any) -> bool:
    """Whether Python compares ``value`` with the column's values as Arrow does."""
    numbers = (int, float)
    if isinstance(back, numbers) and isinstance(value, numbers):
        return not isinstance(value, bool) and not isinstance(back, bool)
    return isinstance(back, type(value)) or isinstance(value, type(back))


def _value_type(type_: pa.DataType) -> pa.DataType:
    """The type of the values of a column of ``type_`` (a dictionary's value type)."""
    return type_.value_type if pa.types.is_dictionary(type_) else type_


def _comparable(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """The column in a type Arrow compares (dictionaries decoded)."""
    value_type = _value_type(column.type)
    return column if value_type == column.type else column.cast(value_type)


# ---------------------------------------------------------------- partitions

def _partition_mask(expr: Expression, files: "FileTable") -> Mask:
    """Where ``evaluate(expr, partition) is True`` (the partition holding the file's spec id
    as :data:`SPEC_NAME` when the table has a ``spec`` column)."""
    if expr is ALWAYS_TRUE or expr is ALWAYS_FALSE:
        return expr is ALWAYS_TRUE
    table = files.table
    names = table.schema.names
    stored = list(table.schema.field("partition").type) if "partition" in names else []
    columns = {f.name: pc.field("partition", f.name) if f.type == _value_type(f.type)
               else pc.field("partition", f.name).cast(_value_type(f.type)) for f in stored}
    fields = [f.with_type(_value_type(f.type)) for f in stored]
    if "spec" in names:
        columns[SPEC_NAME] = pc.field("spec")
        fields.append(pa.field(SPEC_NAME, pa.int64()))
    if not columns:  # every file's partition is {}
        return evaluate(expr, {}) is True
    schema = pa.schema(fields)
    try:
        bound = transform(expr, lambda p: _bound_on_partition(p, schema))
    except _PerRow:
        values = table.column("partition").to_pylist() if stored else [{}] * table.num_rows
        if "spec" in names:
            values = [{**(v or {}), SPEC_NAME: spec} for v, spec in zip(values, table.column("spec").to_pylist())]
        return pa.array([evaluate(expr, v or {}) is True for v in values], pa.bool_())
    arrow = pc.coalesce(to_arrow(bound, schema, columns), pc.scalar(False))
    plan = acero.Declaration.from_sequence([
        acero.Declaration("table_source", acero.TableSourceNodeOptions(
            table.select([n for n in ("partition", "spec") if n in names]))),
        acero.Declaration("project", acero.ProjectNodeOptions([arrow], ["mask"])),
    ])
    return plan.to_table(use_threads=False).column("mask")


def _bound_on_partition(p: Predicate, schema: pa.Schema) -> Expression:
    """A projected predicate on partition values as one :func:`to_arrow` translates."""
    if p.name not in schema.names:
        raise _PerRow
    type_ = schema.field(p.name).type
    if p.op in SET_OPS:
        for v in p.values:
            _scalar(v, type_)
    elif p.op in ("starts_with", "not_starts_with"):
        prefix_types = {str: pa.types.is_string, bytes: pa.types.is_binary}
        if type(p.value) not in prefix_types or not prefix_types[type(p.value)](type_):
            raise _PerRow
    elif p.op not in UNARY_OPS:
        _scalar(p.value, type_)
    return BoundPredicate(p.op, p.name, p.value, p.values)


# ---------------------------------------------------------------- statistics

class _Stats:
    """One field's statistics columns (over every file)."""

    def __init__(self, column: pa.ChunkedArray, rows: pa.ChunkedArray):
        self.column = column
        self.rows = rows
        self.nulls = pc.struct_field(column, ["nulls"])
        self.has = pc.and_(column.is_valid(), self.nulls.is_valid())

    def bound(self, which: str) -> pa.ChunkedArray:
        if self.column.type.get_field_index(which) < 0:
            raise _PerRow  # a nested field: no bounds kept
        return _comparable(pc.struct_field(self.column, [which]))

    @property
    def lo(self) -> pa.ChunkedArray:
        return self.bound("min")

    @property
    def hi(self) -> pa.ChunkedArray:
        return self.bound("max")


Test = Callable[[pa.ChunkedArray, pa.ChunkedArray], pa.ChunkedArray]


class _Metrics(BoundPredicateVisitor[Mask]):
    """The rules of :mod:`.metrics` over columns; each operator's method gives an array
    that is null where the rule must be asked row by row (``visit_predicate`` does)."""

    undecided: bool
    per_file: Callable[[Expression, int, Mapping[str, ColumnStatistics]], bool]

    def __init__(self, files: "FileTable"):
        self.files = files
        self.rows = files.table.column("rows")
        self.stats_column = files.table.column("stats")
        self.s: _Stats | None = None

    def visit_true(self) -> Mask:
        return True

    def visit_false(self) -> Mask:
        return False

    def visit_and(self, terms: Sequence[Mask]) -> Mask:
        return _and(terms)

    def visit_or(self, terms: Sequence[Mask]) -> Mask:
        return _or(terms)

    def visit_predicate(self, p: BoundPredicate) -> Mask:  # type: ignore[override]
        field_id = self.files.descriptor.field_ids.get(p.name)
        key = str(field_id)
        if field_id is None or self.stats_column.type.get_field_index(key) < 0:
            return self.undecided  # no file has statistics for the field
        self.s = _Stats(pc.struct_field(self.stats_column, [key]), self.rows)
        try:
            raw = super().visit_predicate(p)
        except _PerRow:
            return self._per_row(p, None)
        out = pc.if_else(self.s.has, raw, self.undecided)
        return self._per_row(p, out) if out.null_count else out

    def _per_row(self, p: BoundPredicate, out: pa.ChunkedArray | None) -> Mask:
        """``out`` with its nulls (every row when ``out`` is None) decided by the per-file rule."""
        n = len(self.files)
        if out is None:
            result = np.zeros(n, dtype=bool)
            where = np.arange(n)
        else:
            combined = _array(out, n)
            result = pc.fill_null(combined, False).to_numpy(zero_copy_only=False)
            where = np.flatnonzero(combined.is_null().to_numpy(zero_copy_only=False))
        indices = pa.array(where, pa.int64())
        stats = self.s.column.take(indices).to_pylist()
        rows = self.rows.take(indices).to_pylist()
        for i, s, r in zip(where, stats, rows):
            statistics = {} if s is None else {p.name: ColumnStatistics(s["nulls"], s.get("min"), s.get("max"))}
            result[i] = self.per_file(p, r, statistics)
        return pa.array(result)

    # building blocks

    def _literal(self, value: Any, column: pa.ChunkedArray) -> pa.Scalar:
        return _scalar(value, column.type)

    def _members(self, p: BoundPredicate, column: pa.ChunkedArray) -> pa.Array:
        """The literals of an ``in`` list as a value set that finds what ``==`` finds."""
        scalars = [self._literal(v, column) for v in p.values]
        members = pa.array([s.as_py() for s in scalars], type=column.type)
        if pa.types.is_floating(column.type) and pc.any(pc.equal(members, 0.0)).as_py():
            members = pa.concat_arrays([members, pa.array([0.0, -0.0], column.type)])  # set lookup tells zeros apart
        return members

    def _any_between(self, p: BoundPredicate, lo: pa.ChunkedArray, hi: pa.ChunkedArray) -> pa.ChunkedArray:
        """``any(lo <= v <= hi for v in p.values)`` (null where Python could raise)."""
        scalars = [self._literal(v, lo) for v in p.values]
        if len(scalars) > _LONG_IN:
            searched = _searched_between(scalars, lo, hi)
            if searched is not None:
                return searched
        if not scalars:
            return _filled(False, len(lo))  # any() of nothing
        return _or_kleene([pc.and_kleene(pc.less_equal(lo, s), pc.less_equal(s, hi)) for s in scalars])

    def _prefix(self, p: BoundPredicate, column: pa.ChunkedArray) -> tuple[pa.ChunkedArray, pa.Scalar]:
        """The column as variable-size text or bytes, with the prefix as a scalar of it."""
        if pa.types.is_fixed_size_binary(column.type):
            column = column.cast(pa.binary())
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            if not isinstance(p.value, str):
                raise _PerRow
        elif pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            if not isinstance(p.value, bytes):
                raise _PerRow
        else:
            raise _PerRow
        return column, pa.scalar(p.value, column.type)

    def _both_start(self, p: BoundPredicate, lo: pa.ChunkedArray, hi: pa.ChunkedArray) -> pa.ChunkedArray:
        """``lo.startswith(prefix) and hi.startswith(prefix)``."""
        lo, hi = self._prefix(p, lo)[0], self._prefix(p, hi)[0]
        return pc.and_kleene(pc.starts_with(lo, pattern=p.value), pc.starts_with(hi, pattern=p.value))

    def _head(self, p: BoundPredicate, column: pa.ChunkedArray) -> tuple[pa.ChunkedArray, pa.Scalar]:
        """``column[:len(prefix)]`` and the prefix (``lo[:n]`` of the per-file rule)."""
        column, prefix = self._prefix(p, column)
        n = len(p.value)
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            return pc.utf8_slice_codeunits(column, 0, n), prefix
        return pc.binary_slice(column, 0, n), prefix


def _or_kleene(arrays: Sequence[pa.ChunkedArray]) -> pa.ChunkedArray:
    out = arrays[0]
    for a in arrays[1:]:
        out = pc.or_kleene(out, a)
    return out


def _and_kleene(arrays: Sequence[pa.ChunkedArray]) -> pa.ChunkedArray:
    out = arrays[0]
    for a in arrays[1:]:
        out = pc.and_kleene(out, a)
    return out


def _searched_between(scalars: Sequence[pa.Scalar], lo: pa.ChunkedArray, hi: pa.ChunkedArray
                      ) -> pa.ChunkedArray | None:
    """``any(lo <= v <= hi)`` over a long list by binary search of the sorted literals, for
    numeric and temporal columns (``None`` for others): the smallest literal at or above
    ``lo`` is at most ``hi``. Null where ``lo`` or ``hi`` is."""
    t = lo.type
    if pa.types.is_integer(t) or pa.types.is_temporal(t):
        as_number = pa.int64()
    elif pa.types.is_floating(t):
        as_number = pa.float64()
    else:
        return None

    def numbers(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
        if t in (pa.date32(), pa.time32("s"), pa.time32("ms")):
            column = column.cast(pa.int32())  # no direct cast to int64
        return pc.fill_null(column.cast(as_number), 0).to_numpy(zero_copy_only=False)

    literals = np.sort(numbers(pa.array([s.as_py() for s in scalars], type=t)))
    low, high = numbers(lo), numbers(hi)
    at = np.searchsorted(literals, low, side="left")  # NaN sorts last: no literal is at or above it
    found = at < len(literals)
    candidate = literals[np.minimum(at, len(literals) - 1)]
    result = found & (candidate <= high)
    unknown = pc.or_(lo.is_null(), hi.is_null()).to_numpy()
    return pa.chunked_array([pa.array(result, mask=unknown)])


class _MayMatch(_Metrics):
    undecided = True
    per_file = staticmethod(metrics.may_match)

    def _compare(self, test: Test) -> pa.ChunkedArray:
        s = self.s
        lo, hi = s.lo, s.hi
        all_null = pc.greater_equal(s.nulls, s.rows)  # comparisons are unknown on nulls
        return pc.if_else(all_null, False, pc.if_else(lo.is_valid(), test(lo, hi), True))

    def visit_is_null(self, p: BoundPredicate) -> Mask:
        return pc.greater(self.s.nulls, 0)

    def visit_not_null(self, p: BoundPredicate) -> Mask:
        return pc.less(self.s.nulls, self.s.rows)

    def visit_eq(self, p: BoundPredicate) -> Mask:
        def test(lo, hi):
            v = self._literal(p.value, lo)
            return pc.and_kleene(pc.less_equal(lo, v), pc.less_equal(v, hi))
        return self._compare(test)

    def visit_ne(self, p: BoundPredicate) -> Mask:
        def test(lo, hi):
            v = self._literal(p.value, lo)
            return pc.invert(pc.and_kleene(pc.equal(lo, hi), pc.equal(hi, v)))
        return self._compare(test)

    def visit_lt(self, p: BoundPredicate) -> Mask:
        return self._compare(lambda lo, hi: pc.less(lo, self._literal(p.value, lo)))

    def visit_le(self, p: BoundPredicate) -> Mask:
        return self._compare(lambda lo, hi: pc.less_equal(lo, self._literal(p.value, lo)))

    def visit_gt(self, p: BoundPredicate) -> Mask:
        return self._compare(lambda lo, hi: pc.greater(hi, self._literal(p.value, hi)))

    def visit_ge(self, p: BoundPredicate) -> Mask:
        return self._compare(lambda lo, hi: pc.greater_equal(hi, self._literal(p.value, hi)))

    def visit_in(self, p: BoundPredicate) -> Mask:
        return self._compare(lambda lo, hi: self._any_between(p, lo, hi))

    def visit_not_in(self, p: BoundPredicate) -> Mask:
        def test(lo, hi):
            found = pc.is_in(lo, value_set=self._members(p, lo))
            return pc.invert(pc.and_kleene(pc.equal(lo, hi), found))
        return self._compare(test)

    def visit_starts_with(self, p: BoundPredicate) -> Mask:
        def test(lo, hi):
            lo_head, v = self._head(p, lo)
            hi_head, _ = self._head(p, hi)
            return pc.and_kleene(pc.less_equal(lo_head, v), pc.less_equal(v, hi_head))
        return self._compare(test)

    def visit_not_starts_with(self, p: BoundPredicate) -> Mask:
        def test(lo, hi):
            return pc.invert(self._both_start(p, lo, hi))
        return self._compare(test)


class _MustMatch(_Metrics):
    undecided = False
    per_file = staticmethod(metrics.must_match)

    def _compare(self, test: Test) -> pa.ChunkedArray:
        s = self.s
        lo, hi = s.lo, s.hi
        some_null = pc.or_(pc.not_equal(s.nulls, 0), lo.is_null())  # a null row satisfies no comparison
        return pc.if_else(some_null, False, test(lo, hi))

    def visit_is_null(self, p: BoundPredicate) -> Mask:
        return pc.equal(self.s.nulls, self.s.rows)

    def visit_not_null(self, p: BoundPredicate) -> Mask:
        return pc.equal(self.s.nulls, 0)

    def visit_eq(self, p: BoundPredicate) -> Mask:
        def test(lo, hi):
            return pc.and_kleene(pc.equal(lo, hi), pc.equal(hi, self._literal(p.value, hi)))
        return self._compare(test)

    def visit_ne(self, p: BoundPredicate) -> Mask:
        def test(lo, hi):
            v = self._literal(p.value, lo)
            return pc.or_kleene(pc.less(v, lo), pc.greater(v, hi))
        return self._compare(test)

    def visit_lt(self, p: BoundPredicate) -> Mask:
        return self._compare(lambda lo, hi: pc.less(hi, self._literal(p.value, hi)))

    def visit_le(self, p: BoundPredicate) -> Mask:
        return self._compare(lambda lo, hi: pc.less_equal(hi, self._literal(p.value, hi)))

    def visit_gt(self, p: BoundPredicate) -> Mask:
        return self._compare(lambda lo, hi: pc.greater(lo, self._literal(p.value, lo)))

    def visit_ge(self, p: BoundPredicate) -> Mask:
        return self._compare(lambda lo, hi: pc.greater_equal(lo, self._literal(p.value, lo)))

    def visit_in(self, p: BoundPredicate) -> Mask:
        def test(lo, hi):
            return pc.and_kleene(pc.equal(lo, hi), pc.is_in(lo, value_set=self._members(p, lo)))
        return self._compare(test)

    def visit_not_in(self, p: BoundPredicate) -> Mask:
        def test(lo, hi):
            scalars = [self._literal(v, lo) for v in p.values]
            if not scalars:
                return _filled(True, len(lo))  # all() of nothing
            if len(scalars) > _LONG_IN and not pa.types.is_floating(lo.type):  # no NaN bounds: an order
                searched = _searched_between(scalars, lo, hi)
                if searched is not None:
                    return pc.invert(searched)
            return _and_kleene([pc.or_kleene(pc.less(v, lo), pc.greater(v, hi)) for v in scalars])
        return self._compare(test)

    def visit_starts_with(self, p: BoundPredicate) -> Mask:
        def test(lo, hi):
            return self._both_start(p, lo, hi)
        return self._compare(test)

    def visit_not_starts_with(self, p: BoundPredicate) -> Mask:
        def test(lo, hi):
            lo_head, v = self._head(p, lo)
            hi_head, _ = self._head(p, hi)
            return pc.invert(pc.and_kleene(pc.less_equal(lo_head, v), pc.less_equal(v, hi_head)))
        return self._compare(test)


def _metrics_mask(expr: Expression, files: "FileTable", evaluator: type[_Metrics]) -> Mask:
    return visit(expr, evaluator(files))
