"""Last write wins, deterministically (seed 003, with today's Cassandra/Scylla rule).

With an ordering field, a write replaces what is stored only if its ordering value is
greater; on equal values a delete beats a live row, and between two live rows the greater
row value wins — the rows compared field by field in schema order (nulls first, Arrow's
order of values; nested fields do not take part). So applying the same writes in any
order, split into any batches, converges to one state. Without an ordering field the
later write wins and a key given twice in one write is an error.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.errors import InvalidKeyError
from cdkds.catalog.keyed.keys import RecordKey
from cdkds.catalog.work_columns import BARE, COUNT, INPUT_ROW, PAIR, RANK, SIDE


def _sortable(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_null(t) or pa.types.is_dictionary(t))


def row_order(schema: pa.Schema, names: list[str] | None = None) -> list[str]:
    """The fields that order two rows of equal ordering value (schema order, sortable types)."""
    return [f.name for f in schema if _sortable(f.type) and (names is None or f.name in names)]


def last_per_key(table: pa.Table, key: RecordKey, sort_keys: list[str]) -> np.ndarray:
    """Row numbers of ``table`` holding, for each key, the greatest row by ``sort_keys``
    (ascending, nulls first); ties keep the later row."""
    numbered = table.append_column(INPUT_ROW, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    order = pc.sort_indices(numbered, sort_keys=[(k, "ascending", "at_start") for k in [*key.names, *sort_keys, INPUT_ROW]])
    ranked = numbered.take(order).append_column(RANK, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    best = ranked.group_by(list(key.names), use_threads=False).aggregate([(RANK, "max")])
    chosen = ranked.take(best.column(RANK + "_max"))
    return np.sort(chosen.column(INPUT_ROW).to_numpy(zero_copy_only=False))


def repeated_keys(table: pa.Table, names: list[str]) -> pa.Table:
    """The keys (columns ``names``) that ``table`` holds more than once, each once, with
    how many rows hold it (:data:`COUNT`)."""
    ones = pa.array(np.ones(table.num_rows, dtype=np.int64))
    counts = table.select(names).append_column(COUNT, ones).group_by(names, use_threads=False) \
        .aggregate([(COUNT, "sum")])  # named as no field may be: a key may be called count_all
    repeated = counts.filter(pc.greater(counts.column(COUNT + "_sum"), 1))
    return repeated.rename_columns([*names, COUNT])


def distinct_hashes(hashes: np.ndarray) -> bool:
    """Whether no two key hashes are equal: then no key is given twice (equal keys hash
    equal), and a write needs no reconciling among its own rows."""
    ordered = np.sort(hashes)
    return not bool((ordered[1:] == ordered[:-1]).any())


def reduce_write(table: pa.Table, key: RecordKey, ordering: str | None, what: str,
                 hashes: np.ndarray | None = None) -> np.ndarray:
    """The rows of one write that survive reconciliation among themselves (row numbers);
    without an ordering field a repeated key is :class:`InvalidKeyError` naming it.
    ``hashes``: the rows' key hashes, when known; distinct ones spare the sorting."""
    if hashes is not None and distinct_hashes(hashes):
        return np.arange(table.num_rows)
    if ordering is None:
        repeated = repeated_keys(table, list(key.names))
        if repeated.num_rows:
            rule = ("without an ordering field one write may hold each key once" if key.ordering is None else
                    f"without ordering values ({key.ordering.name!r}) to reconcile them, one {what} may hold each "
                    f"key once")
            raise InvalidKeyError(f"dataset {key.dataset!r}: the {what} gives the key {key.describe(repeated, 0)} "
                                  f"more than once; {rule}")
        return np.arange(table.num_rows)
    sort_keys = [ordering, *[n for n in row_order(table.schema) if n != ordering and n not in key.names]]
    return last_per_key(table, key, sort_keys)


def reduce_delete(table: pa.Table, key: RecordKey) -> tuple[np.ndarray, np.ndarray]:
    """The rows of one delete that stand for its keys (row numbers) — per key the one of
    greatest ordering value, as :func:`reduce_write` — and for each whether the key was
    also given bare (without an ordering value; every key is, without an ordering field):
    a key given several times is one delete."""
    ordering = key.ordering.name if key.ordering is not None else None
    if ordering is None:
        table = table.append_column(BARE, pa.array(np.ones(table.num_rows, dtype=np.int8)))
    else:
        table = table.append_column(BARE, table.column(ordering).is_null().cast(pa.int8()))
    numbered = table.append_column(INPUT_ROW, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    sort_keys = [*key.names, *([ordering] if ordering else []), INPUT_ROW]
    order = pc.sort_indices(numbered, sort_keys=[(k, "ascending", "at_start") for k in sort_keys])
    ranked = numbered.take(order).append_column(RANK, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    best = ranked.group_by(list(key.names), use_threads=False).aggregate([(RANK, "max"), (BARE, "max")])
    chosen = ranked.take(best.column(RANK + "_max")).column(INPUT_ROW).to_numpy(zero_copy_only=False)
    bare = best.column(BARE + "_max").to_numpy(zero_copy_only=False).astype(bool)
    by_row = np.argsort(chosen, kind="stable")
    return chosen[by_row], bare[by_row]


def compare_orders(incoming: pa.Array, stored: pa.Array) -> np.ndarray:
    """Per row: 1 where the incoming ordering value is greater, -1 where smaller, 0 where
    equal, by the order one write's own rows are sorted in (Arrow's, nulls first): null is
    the smallest value, then NaN (equal to NaN), then the numbers (-0.0 equal to 0.0)."""
    incoming_rank, stored_rank = _order_class(incoming), _order_class(stored)
    greater = pc.fill_null(pc.greater(incoming, stored), False).to_numpy(zero_copy_only=False)
    less = pc.fill_null(pc.less(incoming, stored), False).to_numpy(zero_copy_only=False)
    out = np.where(greater, 1, np.where(less, -1, 0))
    return np.where(incoming_rank > stored_rank, 1, np.where(incoming_rank < stored_rank, -1, out))


def _order_class(values: pa.Array) -> np.ndarray:
    """0 for null, 1 for NaN, 2 for every other value: the order comparisons cannot tell."""
    ranks = np.where(values.is_null().to_numpy(zero_copy_only=False), 0, 2)
    if pa.types.is_floating(values.type):
        nan = pc.fill_null(pc.is_nan(values), False).to_numpy(zero_copy_only=False)
        ranks = np.where(nan, 1, ranks)
    return ranks


def greater_rows(incoming: pa.Table, stored: pa.Table) -> np.ndarray:
    """Per pair of rows (same position in both tables): True where the incoming row is
    greater than the stored one by :func:`row_order` (equal rows: False)."""
    names = row_order(incoming.schema, stored.schema.names)
    n = incoming.num_rows
    both = pa.concat_tables([incoming.select(names), stored.select(names).cast(incoming.select(names).schema)])
    both = both.append_column(PAIR, pa.array(np.concatenate([np.arange(n), np.arange(n)]), pa.int64()))
    both = both.append_column(SIDE, pa.array(np.concatenate([np.ones(n), np.zeros(n)]).astype(np.int8)))
    # stored sorts after incoming among equal rows, so an equal row does not replace
    order = pc.sort_indices(both, sort_keys=[(PAIR, "ascending", "at_start"),
                                             *[(c, "ascending", "at_start") for c in names],
                                             (SIDE, "descending", "at_start")])
    sides = both.column(SIDE).take(order).to_numpy(zero_copy_only=False).reshape(n, 2) if n else np.zeros((0, 2))
    return sides[:, 1] == 1
