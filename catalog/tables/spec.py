"""Table specifications: a keyed table's fields, composite primary key and indexes (seed 000,
"Create"). Immutable values with a JSON form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from cdkds.catalog.errors import InvalidFieldError
from cdkds.formats.schema_rules import is_field_name

KINDS = ("int", "long", "float", "double", "string", "bytes", "boolean")
KEY_KINDS = ("int", "long", "string")
RESERVED_PREFIXES = ("_cdkds", "sqlite_", "pg_")


@dataclass(frozen=True)
class FieldSpec:
    """A column: its name and kind (one of :data:`KINDS`)."""

    name: str
    kind: str

    def __post_init__(self) -> None:
        if not is_field_name(self.name):
            raise InvalidFieldError(f"a field name is letters, digits and _, not starting with a digit; got {self.name!r:.100}")
        if self.kind not in KINDS:
            raise InvalidFieldError(f"field {self.name!r}: kind must be one of {list(KINDS)}, got {self.kind!r:.100}")


class Fields:
    """``Fields.int("k1")``, ``Fields.string("k2")``... as in CDAP."""

    @staticmethod
    def int(name: str) -> FieldSpec:
        return FieldSpec(name, "int")

    @staticmethod
    def long(name: str) -> FieldSpec:
        return FieldSpec(name, "long")

    @staticmethod
    def float(name: str) -> FieldSpec:
        return FieldSpec(name, "float")

    @staticmethod
    def double(name: str) -> FieldSpec:
        return FieldSpec(name, "double")

    @staticmethod
    def string(name: str) -> FieldSpec:
        return FieldSpec(name, "string")

    @staticmethod
    def bytes(name: str) -> FieldSpec:
        return FieldSpec(name, "bytes")

    @staticmethod
    def boolean(name: str) -> FieldSpec:
        return FieldSpec(name, "boolean")


@dataclass(frozen=True)
class TableSpecification:
    """A table: its name, fields in order, primary key (field names, in key order) and
    single-column indexes on non-key fields. Key fields are never null; others may be."""

    name: str
    fields: tuple[FieldSpec, ...]
    primary_key: tuple[str, ...]
    indexes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not is_field_name(self.name):
            raise InvalidFieldError(f"a table name is letters, digits and _, not starting with a digit; got {self.name!r:.100}")
        where = f"table {self.name!r}"
        if self.name.lower().startswith(RESERVED_PREFIXES):
            raise InvalidFieldError(f"{where}: names starting with {' or '.join(RESERVED_PREFIXES)} are reserved "
                                    f"(any case) by the stores")
        for attr, item, what in (("fields", FieldSpec, "Fields.<kind>(name) values"), ("primary_key", str, "field names"),
                                 ("indexes", str, "field names")):
            given = getattr(self, attr)
            given = None if isinstance(given, (str, bytes)) or not hasattr(given, "__iter__") else tuple(given)
            if given is None or not all(isinstance(x, item) for x in given):
                raise InvalidFieldError(f"{where}: {attr} must be a sequence of {what}, got {getattr(self, attr)!r:.100}")
            object.__setattr__(self, attr, given)
        if not self.fields:
            raise InvalidFieldError(f"{where} needs at least one field")
        names = [f.name for f in self.fields]
        lowered = [n.lower() for n in names]
        repeated = sorted({n for n in names if lowered.count(n.lower()) > 1})
        if repeated:
            raise InvalidFieldError(f"{where}: field {repeated[0]!r} is declared twice (names are compared ignoring "
                                    f"case, as SQL does)")
        kinds = self.kinds
        if not self.primary_key:
            raise InvalidFieldError(f"{where} needs a primary key")
        for key in self.primary_key:
            if key not in kinds:
                raise InvalidFieldError(f"{where}: primary key field {key!r} is not a field; fields are {names}")
            if kinds[key] not in KEY_KINDS:
                raise InvalidFieldError(f"{where}: primary key field {key!r} is a {kinds[key]}; keys are int, long or string")
        if len(set(self.primary_key)) != len(self.primary_key):
            raise InvalidFieldError(f"{where}: the primary key repeats a field: {list(self.primary_key)}")
        for index in self.indexes:
            if index not in kinds:
                raise InvalidFieldError(f"{where}: index field {index!r} is not a field; fields are {names}")
            if index in self.primary_key:
                raise InvalidFieldError(f"{where}: index field {index!r} is part of the primary key, which is indexed already")
        if len(set(self.indexes)) != len(self.indexes):
            raise InvalidFieldError(f"{where}: an index is declared twice: {list(self.indexes)}")

    @property
    def kinds(self) -> dict[str, str]:
        """Field name -> kind, in order."""
        return {f.name: f.kind for f in self.fields}

    @property
    def key_kinds(self) -> tuple[str, ...]:
        return tuple(self.kinds[k] for k in self.primary_key)

    @staticmethod
    def builder(name: str) -> "TableSpecificationBuilder":
        return TableSpecificationBuilder(name)

    def to_json(self) -> dict:
        return {"name": self.name, "fields": [{"name": f.name, "type": f.kind} for f in self.fields],
                "primaryKey": list(self.primary_key), "indexes": list(self.indexes)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TableSpecification":
        try:
            return cls(data["name"], tuple(FieldSpec(f["name"], f["type"]) for f in data["fields"]),
                       tuple(data["primaryKey"]), tuple(data.get("indexes", ())))
        except (KeyError, TypeError) as e:
            raise InvalidFieldError(f"not a table specification ({type(e).__name__}: {e}): {str(data)[:200]}") from None


class TableSpecificationBuilder:
    """``TableSpecification.builder("t").fields(...).primary_key(...).indexes(...).build()``."""

    def __init__(self, name: str):
        self._name = name
        self._fields: list[FieldSpec] = []
        self._key: tuple[str, ...] = ()
        self._indexes: tuple[str, ...] = ()

    def fields(self, *fields: FieldSpec | Iterable[FieldSpec]) -> "TableSpecificationBuilder":
        for f in fields:
            items = [f] if isinstance(f, FieldSpec) else list(f)
            for item in items:
                if not isinstance(item, FieldSpec):
                    raise InvalidFieldError(f"table {self._name!r}: fields are made by Fields.<kind>(name), got {item!r:.100}")
                self._fields.append(item)
        return self

    def primary_key(self, *names: str) -> "TableSpecificationBuilder":
        self._key = names
        return self

    def indexes(self, *names: str) -> "TableSpecificationBuilder":
        self._indexes = names
        return self

    def build(self) -> TableSpecification:
        return TableSpecification(self._name, tuple(self._fields), self._key, self._indexes)
