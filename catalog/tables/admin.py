"""TableAdmin and TransactionRunner: creating keyed tables and running functions over them
in transactions (seed 000, "Admin operations" and "Transactions")."""

from __future__ import annotations

import random
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar
from urllib.parse import urlparse

import fsspec

from cdkds.catalog.errors import InvalidFieldError, InvalidNameError, NestedTransactionError, TableExistsError, \
    TableNotFoundError, \
    TransactionConflictError
from cdkds.catalog.tables.spec import TableSpecification
from cdkds.catalog.tables.objectstore import ObjectTableStore
from cdkds.catalog.tables.sql import PostgresStore, SqliteStore, SqlStore
from cdkds.catalog.tables.table import StructuredTable

T = TypeVar("T")
_ACTIVE = threading.local()  # ids of the stores this thread is in a transaction on
ATTEMPTS = 20  # CDAP's runner: 20 attempts, 100 ms apart
BACKOFF = 0.1


class TableAdmin:
    """The keyed tables of one store: ``TableAdmin.open(url)`` with ``sqlite:///path.db``,
    ``postgresql://user@host:port/db`` or an object-store root (``file://``, ``memory://``,
    ``s3://``...)."""

    def __init__(self, store: "SqlStore | ObjectTableStore", url: str):
        self.store = store
        self.url = url

    def __repr__(self) -> str:
        return f"TableAdmin({self.url!r})"

    @classmethod
    def open(cls, url: str, storage_options: dict | None = None) -> "TableAdmin":
        """The tables at ``url``: a SQLite database file, or the root of a tables dataset on
        an object store (created on first use); ``storage_options`` go to fsspec."""
        if not isinstance(url, str) or not url.strip():
            raise InvalidNameError(f"a table store URL is a non-empty string, got {url!r:.100}")
        scheme = urlparse(url).scheme
        if scheme == "sqlite":
            path = url[len("sqlite://"):]
            if not path or path == "/" or storage_options:
                raise InvalidNameError(f"a SQLite URL names a file, sqlite:///path/to.db, and takes no storage "
                                       f"options; got {url!r}")
            return cls(SqliteStore(path), url)
        if scheme in ("postgresql", "postgres"):
            if storage_options:
                raise InvalidNameError(f"a PostgreSQL URL takes no storage options; got {storage_options!r:.100}")
            return cls(PostgresStore(url), url)
        if scheme and scheme not in fsspec.available_protocols():
            raise InvalidNameError(f"table store {url!r}: {scheme!r} is neither sqlite nor an object store fsspec "
                                   f"knows (file, memory, s3...)")
        return cls(ObjectTableStore(url, storage_options), url)

    def create(self, spec: TableSpecification) -> None:
        """Create table ``spec.name``; :class:`TableExistsError` if it exists."""
        self._check(spec)

        def create(db: Any) -> None:
            if self.store.specification(db, spec.name) is not None:
                raise TableExistsError(f"table {spec.name!r} already exists in {self.url}")
            self._create(db, spec)
        self._write(create)

    def _create(self, db: Any, spec: TableSpecification) -> None:
        clash = [n for n in self.store.names(db) if n.lower() == spec.name.lower()]
        if clash:  # SQL folds the case of names: a portable store of tables does too
            raise TableExistsError(f"table {spec.name!r}: table names ignore case, and table {clash[0]!r} exists "
                                   f"in {self.url}")
        self.store.create(db, spec)

    def create_or_update(self, spec: TableSpecification) -> None:
        """Create the table, or add the non-key columns and indexes ``spec`` has and it lacks
        (a new index is built over the existing rows)."""
        self._check(spec)
        self._write(lambda db: self._create_or_update(db, spec))

    def _create_or_update(self, db: Any, spec: TableSpecification) -> None:
        old = self.store.specification(db, spec.name)
        if old is None:
            self._create(db, spec)
            return
        changed = [f.name for f in old.fields if spec.kinds.get(f.name) != f.kind]
        if spec.primary_key != old.primary_key or changed:
            raise InvalidFieldError(
                f"table {spec.name!r}: an update may only add non-key columns and indexes; it changes "
                f"{'the primary key' if spec.primary_key != old.primary_key else f'field {changed[0]!r}'}")
        dropped = [i for i in old.indexes if i not in spec.indexes]
        if dropped:
            raise InvalidFieldError(f"table {spec.name!r}: an update cannot drop index {dropped[0]!r}")
        self.store.update(db, old, spec)

    @contextmanager
    def _transaction(self, write: bool) -> Iterator[Any]:
        """The store's transaction; refused inside another on the same store and thread."""
        active = _ACTIVE.__dict__.setdefault("stores", set())
        if id(self.store) in active:
            raise NestedTransactionError(f"{self.url}: a transaction is already running in this thread; use its "
                                         f"ctx instead of starting another (an admin call included)")
        active.add(id(self.store))
        try:
            with self.store.transaction(write) as db:
                yield db
        finally:
            active.discard(id(self.store))

    def exists(self, name: str) -> bool:
        self._name(name)
        with self._transaction(write=False) as db:
            return self.store.specification(db, name) is not None

    def get_specification(self, name: str) -> TableSpecification:
        self._name(name)
        with self._transaction(write=False) as db:
            spec = self.store.specification(db, name)
        if spec is None:
            raise TableNotFoundError(f"table {name!r} does not exist in {self.url}")
        return spec

    def drop(self, name: str) -> bool:
        """Drop the table and its rows; False if it did not exist."""
        self._name(name)
        def drop(db: Any) -> bool:
            if self.store.specification(db, name) is None:
                return False
            self.store.drop(db, name)
            return True
        return self._write(drop)

    def _write(self, fn: Callable[[Any], T]) -> T:
        """``fn(db)`` in a write transaction, retried as the runner retries a conflict (a
        concurrent change of the same table): the retry then sees what the other did."""
        return TransactionRunner(self).run(lambda ctx: fn(ctx._db))

    def list(self) -> list[str]:
        with self._transaction(write=False) as db:
            return self.store.names(db)

    def _name(self, name: Any) -> None:
        if not isinstance(name, str):
            raise InvalidFieldError(f"{self.url}: a table name is a string, got {name!r:.100}")

    @staticmethod
    def _check(spec: Any) -> None:
        if not isinstance(spec, TableSpecification):
            raise InvalidFieldError(f"a table is created from a TableSpecification, got {spec!r:.100}")


class TableContext:
    """What a transaction's function sees: ``ctx.table(name)``."""

    def __init__(self, admin: TableAdmin, db: Any):
        self._admin, self._db = admin, db
        self._tables: dict[str, StructuredTable] = {}

    def table(self, name: str) -> StructuredTable:
        self._admin._name(name)
        if name not in self._tables:
            table = self._admin.store.table(self._db, name)
            if table is None:
                raise TableNotFoundError(f"table {name!r} does not exist in {self._admin.url}")
            self._tables[name] = table
        return self._tables[name]


class TransactionRunner:
    """Runs a function over the tables of an admin in one transaction: every change commits
    at once or none does; a conflict with concurrent transactions retries the function."""

    def __init__(self, admin: TableAdmin, attempts: int = ATTEMPTS, backoff: float = BACKOFF):
        if not isinstance(admin, TableAdmin):
            raise InvalidFieldError(f"a TransactionRunner runs over a TableAdmin, got {admin!r:.100}")
        self.admin, self.attempts, self.backoff = admin, attempts, backoff

    def run(self, fn: Callable[[TableContext], T]) -> T:
        """``fn(ctx)``'s result, its changes committed; an exception in ``fn`` commits nothing."""
        if not callable(fn):
            raise InvalidFieldError(f"{self.admin.url}: run takes a function of the transaction's ctx, got {fn!r:.100}")
        last: Exception | None = None
        for attempt in range(self.attempts):
            try:
                with self.admin._transaction(write=True) as db:
                    return fn(TableContext(self.admin, db))
            except TransactionConflictError as e:
                last = e
                time.sleep(random.uniform(0.5, 1.0) * self.backoff)
        raise TransactionConflictError(f"{self.admin.url}: the transaction lost to concurrent ones "
                                       f"{self.attempts} times ({last})")
