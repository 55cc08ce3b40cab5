"""Schema changes as one commit: ``dataset.alter().rename(...).drop(...).add(...).widen(...)
.move(...).commit()``.

Each change applies, in order, to the schema the previous ones left; a field is named by
its dotted path (``address.city``; the fields of a record inside an array or a map are
named through it: ``items.sku``). Nothing is written until :meth:`SchemaUpdate.commit`,
which checks the result as a whole (:meth:`DatasetDescriptor.evolve`) and commits it as
metadata only: files are read by field id, so no data file is rewritten.
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Any

from cdkds.catalog.errors import (
    IncompatibleDescriptorError, InvalidDescriptorError, InvalidPartitionStrategyError, InvalidSchemaError,
    SchemaMismatchError,
)
from cdkds.catalog.partitioning import PartitionStrategy
from cdkds.formats.evolution import can_widen, type_text
from cdkds.formats.records import record_validator
from cdkds.formats.schema import FIELD_ID, AvroType, assign_ids, record_of, unwrap
from cdkds.formats.schema_rules import is_field_name

if TYPE_CHECKING:
    from cdkds.catalog.dataset import Dataset
    from cdkds.catalog.descriptor import DatasetDescriptor

_MISSING = object()
_TYPES: dict[str, AvroType] = {
    "boolean": "boolean", "int": "int", "long": "long", "float": "float", "double": "double",
    "string": "string", "bytes": "bytes", "date": {"type": "int", "logicalType": "date"},
    "timestamp": {"type": "long", "logicalType": "timestamp-micros"},
    "timestamp_ntz": {"type": "long", "logicalType": "local-timestamp-micros"},
    "uuid": {"type": "string", "logicalType": "uuid"},
}
_DEFAULT_KINDS = {"boolean", "int", "long", "float", "double", "string"}


def parse_type(spec: Any, where: str) -> AvroType:
    """An Avro type from a name (``long``, ``decimal(10,2)``, ``timestamp``...) or Avro's JSON."""
    if isinstance(spec, str):
        text = spec.strip().lower()
        if text in _TYPES:
            return _TYPES[text]
        m = re.fullmatch(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)", text)
        if m:
            precision, scale = int(m.group(1)), int(m.group(2))
            if not 0 < precision or scale > precision:
                raise InvalidSchemaError(f"{where}: {spec!r} is not a valid decimal (0 < precision, scale <= precision)")
            return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}
        raise InvalidSchemaError(f"{where}: unknown type {spec!r}; use one of {sorted(_TYPES)}, decimal(p,s) "
                                 f"or an Avro type (a dict)")
    if isinstance(spec, (dict, list)):
        return json.loads(json.dumps(spec))
    raise InvalidSchemaError(f"{where}: a type is a name or an Avro type, got {spec!r:.100}")


class SchemaUpdate:
    """Changes to a dataset's schema, committed together by :meth:`commit`."""

    def __init__(self, dataset: "Dataset"):
        self.dataset = dataset
        self._base = dataset.descriptor
        self._schema = self._base.schema  # with ids: changed in place by each step
        self._changes: list[str] = []
        self._partitioning: PartitionStrategy | None | object = _MISSING
        self._key_ids = {self._base.field_ids[k] for k in self._base.record_key}

    def __repr__(self) -> str:
        return f"SchemaUpdate({self.dataset.name!r}, {self._changes})"

    # ---------------------------------------------------------------- changes

    def rename(self, path: str, new_name: str) -> "SchemaUpdate":
        """Rename a field; ``new_name`` is its new name (or its new dotted path, same parent)."""
        parent, _, field = self._find(path)
        prefix = path.rsplit(".", 1)[0] + "." if "." in path else ""
        name = new_name[len(prefix):] if isinstance(new_name, str) and prefix and new_name.startswith(prefix) else new_name
        if not is_field_name(name):
            raise self._error(f"cannot rename field {path!r} to {new_name!r}: a name is letters, digits and _, "
                              f"not starting with a digit")
        if name != field["name"] and any(f["name"] == name for f in parent["fields"]):
            raise self._error(f"cannot rename field {path!r} to {name!r}: a field {prefix + name!r} already exists")
        field["name"] = name
        self._changes.append(f"rename {path} to {name}")
        return self

    def drop(self, path: str) -> "SchemaUpdate":
        """Drop a field: its values stay in the files written so far, never read again."""
        parent, index, _ = self._find(path)
        if len(parent["fields"]) == 1:
            raise self._error(f"cannot drop field {path!r}: it is the last field of its record")
        del parent["fields"][index]
        self._changes.append(f"drop {path}")
        return self

    def add(self, path: str, type: Any, default: Any = _MISSING, nullable: bool | None = None,
            doc: str | None = None) -> "SchemaUpdate":
        """Add a field at ``path`` (in a record, or a record inside an array or map), last in
        its record. Without a default it is optional (rows written before read null); with
        one, it is required unless ``nullable`` (rows written before read the default)."""
        parent_path, name = self._split(path)
        parent = self._record(parent_path) if parent_path else self._schema
        if not is_field_name(name):
            raise self._error(f"cannot add field {path!r}: a name is letters, digits and _, not starting with a digit")
        if any(f["name"] == name for f in parent["fields"]):
            raise self._error(f"cannot add field {path!r}: it already exists")
        avro = parse_type(type, f"dataset {self.dataset.name!r}: field {path!r}")
        if isinstance(avro, list):
            raise self._error(f"cannot add field {path!r}: give the type without null and say nullable=True")
        field: dict[str, Any] = {"name": name}
        if default is _MISSING or default is None:
            if nullable is False:
                raise self._error(f"cannot add required field {path!r} without a default: rows written before "
                                  f"could not be read")
            field["type"], field["default"] = ["null", avro], None
        else:
            kind = unwrap(avro).kind
            if kind not in _DEFAULT_KINDS:
                raise self._error(f"cannot add field {path!r} ({type_text(avro)}) with a default: defaults are "
                                  f"supported for {sorted(_DEFAULT_KINDS)}; add it without one (optional)")
            try:
                default = record_validator({"type": "record", "name": "R", "fields": [
                    {"name": name, "type": avro}]})({name: default})[name]
            except SchemaMismatchError as e:
                raise self._error(f"cannot add field {path!r} with default {default!r}: {e}") from None
            if isinstance(default, float) and not math.isfinite(default):
                raise self._error(f"cannot add field {path!r} with default {default!r}: a default must be finite")
            field["type"] = [avro, "null"] if nullable else avro
            field["default"] = default
        if doc is not None:
            if not isinstance(doc, str):
                raise self._error(f"cannot add field {path!r}: doc must be text, got {doc!r:.100}")
            field["doc"] = doc
        parent["fields"].append(field)
        self._changes.append(f"add {path} {type_text(field['type'])}")
        return self

    def widen(self, path: str, type: Any) -> "SchemaUpdate":
        """Widen a field's type: int -> long, float -> double, int/long -> double, a decimal's
        precision up at the same scale."""
        _, _, field = self._find(path)
        old = unwrap(field["type"])
        new = parse_type(type, f"dataset {self.dataset.name!r}: field {path!r}")
        if "." not in path and any(f["name"] == path and f.get(FIELD_ID) in self._key_ids for f in self._schema["fields"]):
            raise self._error(f"record key field {path!r} cannot change its type ({type_text(old.avro)} -> "
                              f"{type_text(new)}): rows would move between keys")
        if old.avro == new:
            return self  # already that type
        if not can_widen(old.avro, new):
            raise self._error(f"cannot widen field {path!r} from {type_text(old.avro)} to {type_text(new)}: "
                              f"allowed are int -> long, float -> double, int/long -> double and a decimal's "
                              f"precision up at the same scale")
        field["type"] = ["null", new] if old.nullable else new
        self._changes.append(f"widen {path} to {type_text(new)}")
        return self

    def move(self, path: str, first: bool = False, last: bool = False, after: str | None = None,
             before: str | None = None) -> "SchemaUpdate":
        """Move a field within its record: ``first``, ``last``, ``after=`` or ``before=`` a sibling."""
        if sum([bool(first), bool(last), after is not None, before is not None]) != 1:
            raise self._error(f"move {path!r}: give exactly one of first=True, last=True, after= or before=")
        parent, index, field = self._find(path)
        prefix = path.rsplit(".", 1)[0] + "." if "." in path else ""
        fields = parent["fields"]
        del fields[index]
        if first:
            fields.insert(0, field)
        elif last:
            fields.append(field)
        else:
            other = after if after is not None else before
            name = other[len(prefix):] if prefix and other.startswith(prefix) else other
            at = next((i for i, f in enumerate(fields) if f["name"] == name), None)
            if at is None:
                fields.insert(index, field)
                raise self._error(f"move {path!r}: {other!r} is not another field of the same record")
            fields.insert(at + 1 if after is not None else at, field)
        self._changes.append(f"move {path} " + ("first" if first else "last" if last else
                                                 f"after {after}" if after is not None else f"before {before}"))
        return self

    def partition_by(self, strategy: "PartitionStrategy | str | list | None") -> "SchemaUpdate":
        """New files are written partitioned by ``strategy`` (text, Kite JSON or a
        :class:`PartitionStrategy`; None: unpartitioned), after the schema changes, so it
        names fields by their new names. Files written so far keep their layout (their
        partition spec); compaction and the table services rewrite them into the new one."""
        if self._partitioning is not _MISSING:
            raise self._error("alter() changes the partition strategy once per commit")
        try:
            parsed = strategy if strategy is None or isinstance(strategy, PartitionStrategy) else (
                PartitionStrategy.parse(strategy) if isinstance(strategy, str) else PartitionStrategy.from_json(strategy))
        except InvalidPartitionStrategyError as e:
            raise InvalidPartitionStrategyError(f"dataset {self.dataset.name!r}: {e}") from None
        self._partitioning = parsed
        self._changes.append("partition by " + (parsed.to_text() if parsed is not None else "nothing"))
        return self

    # ---------------------------------------------------------------- commit

    def commit(self) -> int:
        """Check the changes as a whole and commit them; returns the revision. Nothing is
        committed when a check fails."""
        self.dataset.update_descriptor(self._descriptor(), "alter", {"changes": self._changes})
        return self.dataset.version

    def preview(self) -> dict:
        """The schema the changes give, checked as :meth:`commit` checks it, without committing."""
        return self.dataset.snapshot.evolve(self._descriptor(), self.dataset.name).schema

    def _descriptor(self) -> DatasetDescriptor:
        if not self._changes:
            raise self._error("alter() has no changes to commit")
        try:  # added fields get new ids here: matched by name, a field dropped and re-added would be the old one
            descriptor = self._base.with_schema(assign_ids(self._schema))
            current = descriptor.partition_strategy
            if self._partitioning is not _MISSING:  # evolve() makes it a new partition spec
                descriptor = descriptor.replace(partition_strategy=self._partitioning)
        except InvalidPartitionStrategyError as e:
            raise InvalidPartitionStrategyError(f"dataset {self.dataset.name!r}: {e}") from None
        except (InvalidDescriptorError, InvalidSchemaError) as e:
            raise self._error(str(e)) from None
        if self._partitioning is not _MISSING and descriptor.partition_strategy == current:  # it changes nothing
            raise self._error(f"the dataset is partitioned by {current.to_text() if current is not None else 'nothing'} "
                              f"already")
        return descriptor

    # ---------------------------------------------------------------- paths

    def _error(self, message: str) -> IncompatibleDescriptorError:
        return IncompatibleDescriptorError(f"dataset {self.dataset.name!r}: {message}")

    def _find(self, path: str) -> tuple[dict, int, dict]:
        """The record holding field ``path``, its index there and the field."""
        parent_path, name = self._split(path)
        parent = self._record(parent_path) if parent_path else self._schema
        for i, f in enumerate(parent["fields"]):
            if f["name"] == name:
                return parent, i, f
        raise self._error(f"no field {path!r}; {'the record ' + repr(parent_path) if parent_path else 'the schema'} "
                          f"has {[f['name'] for f in parent['fields']]}")

    def _split(self, path: Any) -> tuple[str, str]:
        """A dotted path's parent path and last name."""
        if not isinstance(path, str) or not path or "" in path.split("."):
            raise self._error(f"a field path is names joined by dots, got {path!r:.100}")
        parent_path, _, name = path.rpartition(".")
        return parent_path, name

    def _record(self, path: str) -> dict:
        """The record held by field ``path`` (through arrays and maps)."""
        _, _, field = self._find(path)
        inner = record_of(field["type"])
        if inner is None:
            raise self._error(f"field {path!r} is a {type_text(field['type'])}, not a record (nor an array or map "
                              f"of records)")
        return inner

