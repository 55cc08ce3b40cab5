"""StructuredTable: CDAP's keyed table SPI (seed 000), with every check written once.

Backends implement a few primitives (read rows by key, scan key ranges with a bound filter,
write a row, delete a row); the operations of the SPI are built from them here, so their
rules — full keys for reads, writes and deletes, leftmost prefixes for ranges, rows sorted by
primary key, a schema check on every call naming the table, field and value — hold alike.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, Iterable, Iterator, Mapping, Sequence

from cdkds.catalog.errors import ExpressionError, InvalidFieldError, NoSuchFieldError
from cdkds.catalog.expressions import ALWAYS_TRUE, Expression, Predicate, and_, as_expression, bind, field, transform
from cdkds.catalog.tables.keys import INT_RANGES, KeyCodec, Range
from cdkds.catalog.tables.spec import TableSpecification
from cdkds.formats.schema import FieldType



class StructuredTable(ABC):
    """One keyed table inside a transaction."""

    def __init__(self, spec: TableSpecification):
        self.spec = spec
        self.codec = KeyCodec(spec)
        # float columns hold double-precision values on every store: filters compare them so
        self._types = {f.name: FieldType("double" if f.kind == "float" else f.kind, f.name not in spec.primary_key)
                       for f in spec.fields}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.name!r})"

    # ---------------------------------------------------------------- backend primitives

    @abstractmethod
    def _get(self, key: dict) -> dict | None:
        """The stored row of a full, checked key."""

    @abstractmethod
    def _scan(self, ranges: Sequence[Range], filter: Expression, limit: int | None, order: str) -> Iterator[dict]:
        """Rows in any of the (checked) ranges matching the bound filter, by primary key."""

    @abstractmethod
    def _put(self, row: dict) -> None:
        """Write a whole, checked row (every field; None where null)."""

    @abstractmethod
    def _remove(self, key: dict) -> None:
        """Delete the row of a full, checked key (nothing when there is none)."""

    # ---------------------------------------------------------------- writes

    def upsert(self, fields: Mapping[str, Any]) -> None:
        """Write the given columns of the row of the full key in ``fields``; the row's other
        columns keep their values (null for a new row)."""
        row = self._checked(fields, "upsert")
        key = self._key_of(row)
        stored = self._get(key) or {}
        self._put({**self._empty(), **stored, **row})

    def update(self, fields: Mapping[str, Any]) -> None:
        """As :meth:`upsert`, but only when the row exists (no-op otherwise)."""
        row = self._checked(fields, "update")
        stored = self._get(self._key_of(row))
        if stored is not None:
            self._put({**stored, **row})

    def delete(self, key: Mapping[str, Any]) -> None:
        """Delete the row of the full key."""
        self._remove(self._full_key(key, "delete"))

    def delete_all(self, range_: Range) -> None:
        """Delete every row in the range."""
        for row in list(self._scan([self._range(range_)], ALWAYS_TRUE, None, "asc")):
            self._remove(self._key_of(row))

    def update_all(self, range_: Range, fields: Mapping[str, Any]) -> None:
        """Set the given non-key columns on every row in the range."""
        changes = self._checked(fields, "update_all", key=False)
        for row in list(self._scan([self._range(range_)], ALWAYS_TRUE, None, "asc")):
            self._put({**row, **changes})

    def compare_and_swap(self, key: Mapping[str, Any], expected: Mapping[str, Any] | None,
                         new: Mapping[str, Any]) -> bool:
        """Write ``new`` (columns of the row of ``key``) if the row's columns named in
        ``expected`` have those values (``None``: if the row does not exist); whether it wrote."""
        full = self._full_key(key, "compare_and_swap")
        if not isinstance(new, Mapping) or expected is not None and not isinstance(expected, Mapping):
            raise InvalidFieldError(f"table {self.spec.name!r}: compare_and_swap takes dicts of fields (expected may be "
                                    f"None), got expected={expected!r:.100}, new={new!r:.100}")
        changes = self._checked({**new, **full}, "compare_and_swap")
        stored = self._get(full)
        if expected is None:
            if stored is not None:
                return False
        else:
            wanted = self._checked(expected, "compare_and_swap", key=False)
            if stored is None or any(stored.get(k) != v for k, v in wanted.items()):
                return False
        self._put({**self._empty(), **(stored or {}), **changes})
        return True

    def increment(self, key: Mapping[str, Any], column: str, amount: int) -> int:
        """Add ``amount`` to long column ``column`` of the row of ``key`` (a missing row or
        null value counts as 0); returns the new value."""
        full = self._full_key(key, "increment")
        self._field(column)
        if self.spec.kinds[column] != "long" or column in self.spec.primary_key:
            raise InvalidFieldError(f"table {self.spec.name!r}: increment needs a non-key long column, "
                                    f"{column!r} is a {self.spec.kinds[column]}")
        if self._value(column, amount) is None:
            raise InvalidFieldError(f"table {self.spec.name!r}: increment of {column!r} needs an amount, not None")
        stored = self._get(full) or {**self._empty(), **full}
        value = self._value(column, (stored.get(column) or 0) + amount)
        self._put({**stored, column: value})
        return value

    # ---------------------------------------------------------------- reads

    def read(self, key: Mapping[str, Any], columns: Iterable[str] | None = None) -> dict | None:
        """The row of the full key (only ``columns`` if given), or ``None``."""
        names = self._columns(columns)
        row = self._get(self._full_key(key, "read"))
        return None if row is None else {n: row[n] for n in names}

    def multi_read(self, keys: Iterable[Mapping[str, Any]], columns: Iterable[str] | None = None) -> list[dict]:
        """The rows of the keys that exist, sorted by primary key."""
        names = self._columns(columns)
        found = {}
        for key in self._iterable(keys, "multi_read takes an iterable of keys"):
            full = self._full_key(key, "multi_read")
            row = self._get(full)
            if row is not None:
                found[self.codec.encode(full)] = {n: row[n] for n in names}
        return [found[k] for k in sorted(found)]

    def scan(self, range_: Range, limit: int | None = None, filter: Expression | str | None = None,
             columns: Iterable[str] | None = None, order: str = "asc") -> Iterator[dict]:
        """Rows in the range matching the filter, sorted by primary key (``order``: ``asc`` or
        ``desc``), at most ``limit``."""
        return self.multi_scan([range_], limit, filter, columns, order)

    def multi_scan(self, ranges: Iterable[Range], limit: int | None = None, filter: Expression | str | None = None,
                   columns: Iterable[str] | None = None, order: str = "asc") -> Iterator[dict]:
        """Rows in any of the ranges (each row once), as :meth:`scan`."""
        names = self._columns(columns)
        if order not in ("asc", "desc"):
            raise InvalidFieldError(f"table {self.spec.name!r}: order is 'asc' or 'desc', got {order!r:.100}")
        self._limit(limit)
        checked = [self._range(r) for r in self._ranges(ranges)]
        bound = self._filter(filter)
        return ({n: row[n] for n in names} for row in self._scan(checked, bound, limit, order))

    def scan_index(self, column: str, value: Any, limit: int | None = None, filter: Expression | str | None = None,
                   columns: Iterable[str] | None = None) -> Iterator[dict]:
        """Rows whose indexed ``column`` equals ``value``, sorted by primary key."""
        self._field(column)
        if column not in self.spec.indexes:
            raise InvalidFieldError(f"table {self.spec.name!r}: {column!r} is not indexed; indexes are {list(self.spec.indexes)}")
        checked = self._value(column, value)
        if checked is None:
            raise InvalidFieldError(f"table {self.spec.name!r}: an index scan of {column!r} needs a value, not None")
        names = self._columns(columns)
        self._limit(limit)
        bound = self._filter(filter)
        return ({n: row[n] for n in names} for row in self._scan_index(column, checked, bound, limit))

    def _scan_index(self, column: str, value: Any, filter: Expression, limit: int | None) -> Iterator[dict]:
        """Rows whose ``column`` equals the checked ``value`` and match the bound filter, by
        primary key. By default a scan of the table; a backend with its own index entries
        reads those instead."""
        return self._scan([Range.all()], and_(self._filter(field(column) == value), filter), limit, "asc")

    def count(self, ranges: Iterable[Range] | None = None, filter: Expression | str | None = None) -> int:
        """How many rows are in the ranges (default: all) and match the filter."""
        return sum(1 for _ in self.multi_scan(ranges if ranges is not None else [Range.all()], None, filter))

    # ---------------------------------------------------------------- checks

    def _field(self, name: Any) -> str:
        if not isinstance(name, str) or name not in self.spec.kinds:
            raise NoSuchFieldError(f"table {self.spec.name!r} has no field {name!r:.100}; fields are "
                                   f"{list(self.spec.kinds)}")
        return name

    def _value(self, name: str, value: Any) -> Any:
        given = value
        kind, where = self.spec.kinds[name], f"table {self.spec.name!r}: field {name!r}"
        if value is None:
            if name in self.spec.primary_key:
                raise InvalidFieldError(f"{where} is part of the primary key and cannot be null")
            return None
        if kind in INT_RANGES:
            lo, hi = INT_RANGES[kind]
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise InvalidFieldError(f"{where}: value {value!r:.100} ({type(value).__name__}) is not an {kind}")
        elif kind in ("float", "double"):
            try:
                value = None if isinstance(value, bool) or not isinstance(value, (int, float)) else float(value)
            except OverflowError:
                value = None
            if value is None or math.isnan(value):
                raise InvalidFieldError(f"{where}: value {given!r:.100} ({type(given).__name__}) is not "
                                        f"a {kind} (NaN is not stored)")
            value += 0.0  # -0.0 is stored as 0.0, as SQLite does
        elif kind == "string":
            if not isinstance(value, str):
                raise InvalidFieldError(f"{where}: value {value!r:.100} ({type(value).__name__}) is not a string")
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidFieldError(f"{where}: value {value!r:.100} is not valid Unicode (a lone surrogate)") from None
        elif kind == "bytes":
            if not isinstance(value, (bytes, bytearray)):
                raise InvalidFieldError(f"{where}: value {value!r:.100} ({type(value).__name__}) is not bytes")
            value = bytes(value)
        elif not isinstance(value, bool):
            raise InvalidFieldError(f"{where}: value {value!r:.100} ({type(value).__name__}) is not a boolean")
        return value

    def _checked(self, fields: Mapping[str, Any], operation: str, key: bool = True) -> dict:
        if not isinstance(fields, Mapping):
            raise InvalidFieldError(f"table {self.spec.name!r}: {operation} takes a dict of fields, got {fields!r:.100}")
        row = {self._field(n): self._value(n, v) for n, v in fields.items()}
        if key:
            self._key_of(row, operation)
        elif any(n in self.spec.primary_key for n in row):
            raise InvalidFieldError(f"table {self.spec.name!r}: {operation} cannot set key fields "
                                    f"{[n for n in row if n in self.spec.primary_key]}")
        return row

    def _key_of(self, row: Mapping[str, Any], operation: str = "") -> dict:
        missing = [k for k in self.spec.primary_key if k not in row]
        if missing:
            raise InvalidFieldError(f"table {self.spec.name!r}: {operation or 'the row'} needs the full primary key "
                                    f"{list(self.spec.primary_key)}; {missing[0]!r} is missing")
        return {k: row[k] for k in self.spec.primary_key}

    def _full_key(self, key: Mapping[str, Any], operation: str) -> dict:
        if not isinstance(key, Mapping):
            raise InvalidFieldError(f"table {self.spec.name!r}: {operation} takes a key as a dict, got {key!r:.100}")
        self.codec.encode(key)  # checks names, types, nulls and fullness
        return {k: key[k] for k in self.spec.primary_key}

    def _range(self, range_: Range) -> Range:
        if not isinstance(range_, Range):
            raise InvalidFieldError(f"table {self.spec.name!r}: a range is a Range, got {range_!r:.100}")
        self.codec.bounds(range_)  # checks the prefixes
        return range_

    def _limit(self, limit: Any) -> None:
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit < 2**63):
            raise InvalidFieldError(f"table {self.spec.name!r}: limit must be an integer >= 0, got {limit!r:.100}")

    def _columns(self, columns: Iterable[str] | None) -> list[str]:
        if columns is None:
            return list(self.spec.kinds)
        if isinstance(columns, str):
            columns = [columns]
        return [self._field(c) for c in self._iterable(columns, "columns are a list of field names")]

    def _iterable(self, values: Any, what: str) -> Iterable:
        if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__iter__"):
            raise InvalidFieldError(f"table {self.spec.name!r}: {what}, got {values!r:.100}")
        return values

    def _ranges(self, ranges: Any) -> list:
        """Ranges as a list (a single Range is taken as one)."""
        return [ranges] if isinstance(ranges, Range) else list(self._iterable(ranges, "ranges are a list of Range"))

    def _filter(self, filter: Expression | str | None) -> Expression:
        try:
            bound = bind(as_expression(filter), self._types)
        except ExpressionError as e:
            raise InvalidFieldError(f"table {self.spec.name!r}: {e}") from None
        return transform(bound, self._check_literals)

    def _check_literals(self, p: Predicate) -> Predicate:
        """Strings in a filter are valid Unicode, as stored strings are."""
        for value in (*tuple(getattr(p, "values", None) or ()), getattr(p, "value", None)):
            if isinstance(value, str):
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    raise InvalidFieldError(f"table {self.spec.name!r}: the filter on {p.name!r} holds {value!r:.100}, "
                                            f"which is not valid Unicode (a lone surrogate)") from None
        return p

    def _empty(self) -> dict:
        return dict.fromkeys(self.spec.kinds)
