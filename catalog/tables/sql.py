"""Keyed tables over SQL: one SQL table per TableSpecification, with a real primary key and
secondary indexes, filters compiled to parameterised SQL (never formatted values), and the
database's own transactions. SQLite (Python's ``sqlite3``) is the embedded default."""

from __future__ import annotations

import itertools
import json
from abc import ABC, abstractmethod
import sqlite3
import threading
from typing import Any, Iterator, Sequence

from cdkds.catalog.errors import InvalidFieldError, StorageError, TransactionConflictError
from cdkds.catalog.expressions import ALWAYS_TRUE, BoundPredicate, BoundPredicateVisitor, Expression, evaluate, visit
from cdkds.catalog.expressions.tree import balanced
from cdkds.catalog.tables.keys import Range, after_prefix
from cdkds.catalog.tables.spec import TableSpecification
from cdkds.catalog.tables.table import StructuredTable

_SQLITE_TYPES = {"int": "INTEGER", "long": "INTEGER", "float": "REAL", "double": "REAL", "string": "TEXT",
                 "bytes": "BLOB", "boolean": "INTEGER"}
# float columns are double precision too: a value reads back as written, as on the other stores
_POSTGRES_TYPES = {"int": "INTEGER", "long": "BIGINT", "float": "DOUBLE PRECISION", "double": "DOUBLE PRECISION",
                   "string": "TEXT", "bytes": "BYTEA", "boolean": "BOOLEAN"}
_SPECS = "_cdkds_tables"
SQL_DEPTH = 24
"""The deepest filter (``Expression.depth``) compiled to SQL: SQLite's parser holds about 30
nested parentheses; a deeper filter (MAX_DEPTH allows 100) is evaluated on the rows read."""


def quote(name: str) -> str:
    """An identifier (names are checked to be letters, digits and _)."""
    return f'"{name}"'


class _Compiler(BoundPredicateVisitor["tuple[str, list]"]):
    """A bound expression as a SQL condition and its parameters (SQL's three-valued logic is
    the expression tree's: a comparison with null is unknown)."""

    def visit_true(self):
        return "1 = 1", []

    def visit_false(self):
        return "1 = 0", []

    def visit_and(self, terms):
        return balanced(terms, lambda left, right: (f"({left[0]} AND {right[0]})", left[1] + right[1]))

    def visit_or(self, terms):
        return balanced(terms, lambda left, right: (f"({left[0]} OR {right[0]})", left[1] + right[1]))

    def _compare(self, p: BoundPredicate, op: str):
        return f"{quote(p.name)} {op} ?", [p.value]

    def visit_is_null(self, p):
        return f"{quote(p.name)} IS NULL", []

    def visit_not_null(self, p):
        return f"{quote(p.name)} IS NOT NULL", []

    def visit_eq(self, p):
        return self._compare(p, "=")

    def visit_ne(self, p):
        return self._compare(p, "<>")

    def visit_lt(self, p):
        return self._compare(p, "<")

    def visit_le(self, p):
        return self._compare(p, "<=")

    def visit_gt(self, p):
        return self._compare(p, ">")

    def visit_ge(self, p):
        return self._compare(p, ">=")

    def visit_in(self, p):
        if not p.values:
            return "1 = 0", []
        return f"{quote(p.name)} IN ({', '.join('?' * len(p.values))})", list(p.values)

    def visit_not_in(self, p):
        if not p.values:
            return f"{quote(p.name)} IS NOT NULL", []
        return f"{quote(p.name)} NOT IN ({', '.join('?' * len(p.values))})", list(p.values)

    def __init__(self, dialect: str):
        self.dialect = dialect

    def _prefix(self, p: BoundPredicate, op: str):
        if not p.value:  # every value starts with "": nulls stay unknown
            return f"{quote(p.name)} {op} {quote(p.name)}", []
        if self.dialect == "sqlite":
            # SQLite's length() and substr() stop text at a NUL, count characters and return NULL
            # for empty blobs: compare the bytes as a range, [prefix, the first string after it)
            data = p.value.encode("utf-8") if isinstance(p.value, str) else p.value
            column, high = f"CAST({quote(p.name)} AS BLOB)", after_prefix(data)
            inside = f"{column} >= ?" + (f" AND {column} < ?" if high is not None else "")
            params = [data] + ([high] if high is not None else [])
            return (f"({inside})", params) if op == "=" else (f"NOT ({inside})", params)
        # PostgreSQL text holds no NUL and counts characters; bytea counts bytes
        return f"substr({quote(p.name)}, 1, ?) {op} ?", [len(p.value), p.value]

    def visit_starts_with(self, p):
        return self._prefix(p, "=")

    def visit_not_starts_with(self, p):
        return self._prefix(p, "<>")


def compile_filter(expr: Expression, dialect: str = "sqlite") -> tuple[str, list]:
    """A bound expression as ``(SQL condition, parameters)`` for ``dialect`` (sqlite or postgresql)."""
    return visit(expr, _Compiler(dialect))


def range_condition(spec: TableSpecification, range_: Range) -> tuple[str, list]:
    """A key range (leftmost prefixes) as row-value comparisons on the key columns."""
    parts, params = [], []
    for prefix, bound, ops in ((range_.begin, range_.begin_bound, (">=", ">")),
                               (range_.end, range_.end_bound, ("<=", "<"))):
        if not prefix:
            continue
        names = [k for k in spec.primary_key if k in prefix]
        op = ops[0] if bound == Range.INCLUSIVE else ops[1]
        parts.append(f"({', '.join(quote(n) for n in names)}) {op} ({', '.join('?' * len(names))})")
        params.extend(prefix[n] for n in names)
    return (" AND ".join(parts) or "1 = 1"), params


class SqlTable(StructuredTable):
    """A keyed table in a SQL database, inside the connection's current transaction."""

    def __init__(self, spec: TableSpecification, connection: Any, dialect: str = "sqlite"):
        super().__init__(spec)
        self._db = connection
        self._dialect = dialect
        self._columns_sql = ", ".join(quote(f.name) for f in spec.fields)
        self._key_sql = " AND ".join(f"{quote(k)} = ?" for k in spec.primary_key)

    def _row(self, values: Sequence[Any]) -> dict:
        row = dict(zip(self.spec.kinds, values))
        for name, kind in self.spec.kinds.items():
            if kind == "boolean" and row[name] is not None:
                row[name] = bool(row[name])
        return row

    def _get(self, key: dict) -> dict | None:
        found = self._db.execute(f"SELECT {self._columns_sql} FROM {quote(self.spec.name)} WHERE {self._key_sql}",
                                 [key[k] for k in self.spec.primary_key]).fetchone()
        return None if found is None else self._row(found)

    def _scan(self, ranges: Sequence[Range], filter: Expression, limit: int | None, order: str) -> Iterator[dict]:
        if limit == 0 or not ranges:
            return iter(())
        conditions, params = [], []
        for r in ranges:
            sql, values = range_condition(self.spec, r)
            conditions.append(f"({sql})")
            params.extend(values)
        in_sql = filter.depth <= SQL_DEPTH
        where, values = compile_filter(filter if in_sql else ALWAYS_TRUE, self._dialect)
        direction = "ASC" if order == "asc" else "DESC"
        sql = (f"SELECT {self._columns_sql} FROM {quote(self.spec.name)} WHERE ({' OR '.join(conditions)}) AND {where} "
               f"ORDER BY {', '.join(f'{quote(k)} {direction}' for k in self.spec.primary_key)}")
        if limit is not None and in_sql:
            sql += f" LIMIT {int(limit)}"
        rows = (self._row(r) for r in self._db.execute(sql, params + values).fetchall())
        return rows if in_sql else itertools.islice((r for r in rows if evaluate(filter, r) is True), limit)

    def _put(self, row: dict) -> None:
        names = list(self.spec.kinds)
        updates = ", ".join(f"{quote(n)} = excluded.{quote(n)}" for n in names if n not in self.spec.primary_key)
        conflict = f"DO UPDATE SET {updates}" if updates else "DO NOTHING"
        self._db.execute(f"INSERT INTO {quote(self.spec.name)} ({self._columns_sql}) VALUES "
                         f"({', '.join('?' * len(names))}) ON CONFLICT ({', '.join(quote(k) for k in self.spec.primary_key)}) "
                         f"{conflict}", [row[n] for n in names])

    def _remove(self, key: dict) -> None:
        self._db.execute(f"DELETE FROM {quote(self.spec.name)} WHERE {self._key_sql}",
                         [key[k] for k in self.spec.primary_key])


class SqlStore(ABC):
    """The tables of one SQL database: specifications in table ``_cdkds_tables``, one SQL
    table per specification. Subclasses open connections and run transactions."""

    types: dict[str, str] = _SQLITE_TYPES
    dialect = "sqlite"

    @abstractmethod
    def transaction(self, write: bool) -> Any:
        """A context manager: a transaction of the database, committed on a normal exit."""

    def _create_specs(self) -> None:
        with self.transaction(write=True) as db:
            db.execute(f"CREATE TABLE IF NOT EXISTS {_SPECS} (name TEXT PRIMARY KEY, spec TEXT NOT NULL)")

    def table(self, db: Any, name: str) -> SqlTable | None:
        spec = self.specification(db, name)
        return None if spec is None else SqlTable(spec, db, self.dialect)

    def specification(self, db: Any, name: str) -> TableSpecification | None:
        found = db.execute(f"SELECT spec FROM {_SPECS} WHERE name = ?", [name]).fetchone()
        return None if found is None else TableSpecification.from_json(json.loads(found[0]))

    def names(self, db: Any) -> list[str]:
        return [r[0] for r in db.execute(f"SELECT name FROM {_SPECS} ORDER BY name")]

    def create(self, db: Any, spec: TableSpecification) -> None:
        columns = [f"{quote(f.name)} {self.types[f.kind]}{' NOT NULL' if f.name in spec.primary_key else ''}"
                   for f in spec.fields]
        db.execute(f"CREATE TABLE {quote(spec.name)} ({', '.join(columns)}, "
                   f"PRIMARY KEY ({', '.join(quote(k) for k in spec.primary_key)}))")
        for index in spec.indexes:
            self._index(db, spec, index)
        db.execute(f"INSERT INTO {_SPECS} (name, spec) VALUES (?, ?)", [spec.name, json.dumps(spec.to_json())])

    def update(self, db: Any, old: TableSpecification, new: TableSpecification) -> None:
        for f in new.fields:
            if f.name not in old.kinds:
                db.execute(f"ALTER TABLE {quote(new.name)} ADD COLUMN {quote(f.name)} {self.types[f.kind]}")
        for index in new.indexes:
            if index not in old.indexes:
                self._index(db, new, index)
        db.execute(f"UPDATE {_SPECS} SET spec = ? WHERE name = ?", [json.dumps(new.to_json()), new.name])

    def drop(self, db: Any, name: str) -> None:
        db.execute(f"DROP TABLE {quote(name)}")
        db.execute(f"DELETE FROM {_SPECS} WHERE name = ?", [name])

    @staticmethod
    def _index(db: Any, spec: TableSpecification, column: str) -> None:
        db.execute(f"CREATE INDEX {quote(f'{spec.name}#{column}')} ON {quote(spec.name)} ({quote(column)})")


class SqliteStore(SqlStore):
    """The tables of one SQLite database file; each transaction is a connection's
    ``BEGIN IMMEDIATE`` (writers queue on the database lock) or ``BEGIN`` when read-only."""

    def __init__(self, path: str, timeout: float = 30.0):
        self.path = path
        self.timeout = timeout
        self._local = threading.local()
        self._create_specs()

    def connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            try:
                db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=True)
                db.execute("PRAGMA schema_version").fetchone()  # fails here, not later, if it cannot be opened
            except sqlite3.Error as e:
                raise StorageError(f"SQLite database {self.path!r} cannot be opened: {e}") from None
            self._local.db = db
        return db

    def transaction(self, write: bool) -> "_SqliteTransaction":
        return _SqliteTransaction(self.connection(), write)


class PostgresStore(SqlStore):
    """The tables of one PostgreSQL database (through psycopg); each transaction runs at
    ``SERIALIZABLE`` (snapshot isolation with PostgreSQL's checks of what was read, scanned
    ranges included: ``REPEATABLE READ`` would let two transactions that each scan what the
    other writes both commit); a serialization failure or deadlock is a
    :class:`TransactionConflictError`, which the runner retries."""

    types = _POSTGRES_TYPES
    dialect = "postgresql"

    def __init__(self, dsn: str):
        try:
            import psycopg
        except ImportError:
            raise InvalidFieldError(f"table store {dsn!r}: PostgreSQL needs psycopg (pip install 'psycopg[binary]')") from None
        self.dsn = dsn
        self._psycopg = psycopg
        self._local = threading.local()
        try:
            self._create_specs()
        except TransactionConflictError:  # another process created it at the same time
            self._create_specs()

    def connection(self) -> Any:
        db = getattr(self._local, "db", None)
        if db is None or db.closed:
            db = self._psycopg.connect(self.dsn, autocommit=True)
            self._local.db = db
        return db

    def transaction(self, write: bool) -> "_PostgresTransaction":
        return _PostgresTransaction(self.connection(), self._psycopg)


class _PostgresTransaction:
    """``?`` parameters become psycopg's ``%s`` (names are letters, digits and _; values are
    only ever parameters, so neither character appears otherwise)."""

    _CONFLICTS = ("40001", "40P01", "23505")  # serialization failure, deadlock, a concurrent insert of the key

    def __init__(self, db: Any, psycopg: Any):
        self.db, self.psycopg = db, psycopg

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        try:
            return self.db.execute(sql.replace("?", "%s"), list(params))
        except self.psycopg.Error as e:
            if getattr(e, "sqlstate", None) in self._CONFLICTS:
                raise TransactionConflictError(f"PostgreSQL: {e.sqlstate}: {str(e).strip()}") from None
            if isinstance(e, self.psycopg.DataError):  # e.g. a NUL in a string: PostgreSQL text holds none
                raise InvalidFieldError(f"PostgreSQL refused a value: {str(e).strip()}") from None
            raise

    def __enter__(self) -> "_PostgresTransaction":
        self.db.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
        return self

    def __exit__(self, kind, error, tb) -> None:
        if kind is None:
            self.execute("COMMIT")
        else:
            self.db.execute("ROLLBACK")


class _SqliteTransaction:
    def __init__(self, db: Any, write: bool):
        self.db, self.write = db, write

    def __enter__(self) -> Any:
        try:
            self.db.execute("BEGIN IMMEDIATE" if self.write else "BEGIN")
        except sqlite3.OperationalError as e:
            if "locked" in str(e) or "busy" in str(e):
                raise TransactionConflictError(f"SQLite database is locked by another writer: {e}") from None
            raise
        return self.db

    def __exit__(self, kind, error, tb) -> None:
        if kind is None:
            try:
                self.db.execute("COMMIT")
            except sqlite3.OperationalError as e:
                self.db.execute("ROLLBACK")
                raise TransactionConflictError(f"SQLite could not commit: {e}") from None
        else:
            self.db.execute("ROLLBACK")
