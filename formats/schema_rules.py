"""The rules a dataset schema obeys beyond Avro's grammar: every one of them is a schema some
file of ours could not hold, or a value a writer would refuse later.

:func:`check_schema` applies them all, once, to a whole record schema, and raises
:class:`InvalidSchemaError` naming the first field at fault by its path (``address.city``;
``tags[]`` is an array's items, ``attrs{}`` a map's values):

- names are letters, digits and ``_``, not starting with a digit (Avro's rule: Parquet,
  Spark and the text form of predicates all read them), namespaces such names joined by
  ``.``; a record's field names are unique;
- every type is written out where it is used: a named type referred to by name (a
  recursive record, or a record used twice) has no Arrow form;
- a field holds something: no ``null`` type but in ``["null", T]``, no record without fields;
- logical types sit on their Avro type (``date`` on an int, ``uuid`` on a string...); a
  decimal has 1 to 76 digits, a scale from 0 to its precision, and fits its fixed size;
  an enum has unique symbols; a fixed has a size of 1 byte or more;
- a default is a value of the field's type (within an int's range, an enum's symbols, a
  day for a time...), in Avro's JSON form.
"""

from __future__ import annotations

import decimal
import math
import re
from typing import Any

from cdkds.formats import domains
from cdkds.formats.errors import InvalidSchemaError
from cdkds.formats.schema import INT_RANGES, PRIMITIVES, AvroType, type_kind, unwrap

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_DECIMAL_PRECISION = 76  # Arrow's decimal256
MAX_FIXED_SIZE = 2**31 - 1  # Arrow's fixed_size_binary takes an int32 width

_LOGICAL_BASES = {  # logical type -> the Avro types it may annotate (as cdkds reads and writes them)
    "date": {"int"}, "time-millis": {"int"}, "time-micros": {"long"}, "timestamp-millis": {"long"},
    "timestamp-micros": {"long"}, "local-timestamp-millis": {"long"}, "local-timestamp-micros": {"long"},
    "decimal": {"bytes", "fixed"}, "uuid": {"string"},
}
_INT_BASED = {"int": "int", "long": "long", "date": "int", "time-millis": "int", "time-micros": "long",
              "timestamp-millis": "long", "timestamp-micros": "long", "local-timestamp-millis": "long",
              "local-timestamp-micros": "long"}


def check_schema(schema: dict) -> None:
    """Raise :class:`InvalidSchemaError` naming the field unless the record schema obeys
    every rule of this module. Parts malformed by Avro's own grammar are left to Avro's
    parser to report."""
    _Checker().record(schema, "", "")


def is_field_name(name: Any) -> bool:
    """Whether ``name`` may name a field."""
    return isinstance(name, str) and NAME.fullmatch(name) is not None


def _error(path: str, message: str) -> InvalidSchemaError:
    return InvalidSchemaError(f"field {path!r}: {message}" if path else message)


class _Checker:
    """One walk over a schema, knowing the named types defined so far."""

    def __init__(self) -> None:
        self.named: set[str] = set()

    def define(self, avro: dict, path: str, namespace: str) -> str:
        """Check a named type's name and record it; its namespace for what it holds."""
        name, what = avro.get("name"), avro["type"]
        if not isinstance(name, str) or not all(NAME.fullmatch(part) for part in name.split(".")):
            raise _error(path, f"{what} name {name!r} is not a name (letters, digits and _, not starting with a digit)")
        given = avro.get("namespace")
        if given not in (None, "") and (not isinstance(given, str) or
                                        not all(NAME.fullmatch(part) for part in given.split("."))):
            raise _error(path, f"{what} namespace {given!r} is not a name or names joined by '.' (letters, digits "
                               f"and _, not starting with a digit)")
        space = avro.get("namespace", namespace) if "." not in name else name.rsplit(".", 1)[0]
        full = name if "." in name or not space else f"{space}.{name}"
        if full in self.named:
            raise _error(path, f"{what} name {name!r} is already the name of another type; give each type its own")
        self.named.add(full)
        return space if isinstance(space, str) else ""

    def record(self, record: dict, path: str, namespace: str) -> None:
        namespace = self.define(record, path, namespace)
        fields = record.get("fields")
        if not isinstance(fields, list):
            return
        if not fields:
            raise _error(path, f"record {record.get('name')!r} has no fields; a record needs one or more")
        seen = set()
        for f in fields:
            if not isinstance(f, dict) or "type" not in f:
                continue
            name = f.get("name")
            here = f"{path}.{name}" if path else str(name)
            if not is_field_name(name):
                raise InvalidSchemaError(f"field {here!r}: not a field name (letters, digits and _, not starting "
                                         f"with a digit)")
            if name in seen:
                raise _error(here, "the record has two fields of this name")
            seen.add(name)
            self.type(f["type"], here, namespace)
            if "default" in f:
                _check_default(f["type"], f["default"], here)

    def type(self, avro: AvroType, path: str, namespace: str) -> None:
        if isinstance(avro, list):
            if _optional(avro):
                self.type(unwrap(avro).avro, path, namespace)
            return  # other unions: see formats.schema's rule on unions
        if isinstance(avro, str):
            if avro == "null":
                raise _error(path, "a null type holds nothing; write [\"null\", T] for an optional T")
            if avro not in PRIMITIVES and (avro in self.named or f"{namespace}.{avro}" in self.named):
                raise _error(path, f"refers to type {avro!r} by name (a recursive or repeated named type); write "
                                   f"every type out where it is used, under a name of its own")
            return  # an unknown name: Avro's parser reports it
        if not isinstance(avro, dict):
            return
        t = avro.get("type")
        if isinstance(t, (list, dict)):
            self.type(t, path, namespace)
            return
        if t == "record":
            self.record(avro, path, namespace)
        elif t == "array":
            self.type(avro.get("items"), f"{path}[]", namespace)
        elif t == "map":
            self.type(avro.get("values"), f"{path}{{}}", namespace)
        elif t == "enum":
            self.define(avro, path, namespace)
            _check_enum(avro, path)
        elif t == "fixed":
            self.define(avro, path, namespace)
            size = avro.get("size")
            if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_FIXED_SIZE:
                raise _error(path, f"a fixed needs a size of 1 to {MAX_FIXED_SIZE} bytes, got {size!r}")
        elif t == "null":
            raise _error(path, "a null type holds nothing; write [\"null\", T] for an optional T")
        _check_logical(avro, t, path)


def _check_enum(avro: dict, path: str) -> None:
    symbols = avro.get("symbols")
    if not isinstance(symbols, list) or not symbols:
        raise _error(path, f"enum {avro.get('name')!r} has no symbols; an enum needs one or more")
    for s in symbols:
        if not isinstance(s, str) or not NAME.fullmatch(s):
            raise _error(path, f"enum symbol {s!r} is not a name (letters, digits and _, not starting with a digit)")
    if len(set(symbols)) != len(symbols):
        raise _error(path, f"enum {avro.get('name')!r} repeats a symbol: {symbols}")
    if "default" in avro and avro["default"] not in symbols:
        raise _error(path, f"enum default {avro['default']!r} is not one of its symbols {symbols}")


def _check_logical(avro: dict, base: Any, path: str) -> None:
    logical = avro.get("logicalType")
    if logical not in _LOGICAL_BASES:
        return  # Avro: an unknown logical type is its base type
    if base not in _LOGICAL_BASES[logical]:
        raise _error(path, f"logical type {logical} is on {base}; it belongs on "
                           f"{' or '.join(sorted(_LOGICAL_BASES[logical]))}")
    if logical == "decimal":
        precision, scale = avro.get("precision"), avro.get("scale", 0)
        if isinstance(precision, bool) or not isinstance(precision, int) or \
                not 1 <= precision <= MAX_DECIMAL_PRECISION:
            raise _error(path, f"a decimal's precision is 1 to {MAX_DECIMAL_PRECISION} digits, got {precision!r}")
        if isinstance(scale, bool) or not isinstance(scale, int) or not 0 <= scale <= precision:
            raise _error(path, f"a decimal's scale is 0 to its precision ({precision}), got {scale!r}")
        if base == "fixed":
            most = math.floor(math.log10(2 ** (8 * avro["size"] - 1) - 1))
            if precision > most:
                raise _error(path, f"a fixed of {avro['size']} bytes holds decimals of at most {most} digits, "
                                   f"not {precision}")


# ---------------------------------------------------------------- defaults

def _optional(avro: list) -> bool:
    return len(avro) == 2 and avro.count("null") == 1


def _check_default(avro: AvroType, value: Any, path: str) -> None:
    if isinstance(avro, list) and not _optional(avro):
        return
    ft = unwrap(avro)
    if value is None:
        if not ft.nullable:
            raise _error(path, "the default is null but the field is required")
        return
    problem = _default_problem(ft.avro, value)
    if problem:
        raise _error(path, f"default {value!r:.100} is not a value of the field's type: {problem}")


def _default_problem(avro: AvroType, value: Any) -> str:  # noqa: C901 - one branch per kind
    """Why ``value`` (Avro's JSON form) is not a value of the (non-union) type, or ''."""
    kind = type_kind(avro)
    if kind == "boolean":
        return "" if isinstance(value, bool) else "expected true or false"
    if kind in _INT_BASED:
        if isinstance(value, bool) or not isinstance(value, int):
            return "expected an integer"
        lo, hi = (0, domains.ticks_per_day(domains.TIME_UNITS[kind]) - 1) if kind in domains.TIME_UNITS \
            else INT_RANGES[_INT_BASED[kind]]
        return "" if lo <= value <= hi else f"outside {lo}..{hi}"
    if kind in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return "expected a finite number"
        return "beyond a float's range" if domains.beyond_range(value, kind) else ""
    if kind in ("string", "uuid", "enum", "bytes", "fixed"):
        if not isinstance(value, str):
            return "expected text"
        if kind == "uuid":
            try:
                domains.canonical_uuid(value)
            except ValueError:
                return "not a UUID"
        if kind == "enum" and value not in avro["symbols"]:
            return f"not one of the symbols {avro['symbols']}"
        if kind in ("bytes", "fixed") and any(ord(c) > 255 for c in value):
            return "bytes are text of code points 0-255 in Avro's JSON form"
        if kind == "fixed" and len(value) != avro["size"]:
            return f"expected {avro['size']} bytes"
        return ""
    if kind == "decimal":
        if isinstance(value, bool) or not isinstance(value, int):
            return "a decimal default is an integer"
        fitted = domains.fitted_decimal(decimal.Decimal(value), avro["precision"], avro.get("scale", 0))
        return "" if fitted is not None else "too many digits"
    if kind == "array":
        if not isinstance(value, list):
            return "expected a list"
        return next((p for p in (_item_problem(avro["items"], v) for v in value) if p), "")
    if kind == "map":
        if not isinstance(value, dict):
            return "expected an object"
        return next((p for p in (_item_problem(avro["values"], v) for v in value.values()) if p), "")
    if kind == "record":
        record = avro if avro.get("type") == "record" else avro["type"]
        if not isinstance(value, dict):
            return "expected an object"
        names = {f["name"] for f in record["fields"]}
        unknown = [k for k in value if k not in names]
        if unknown:
            return f"the record has no field {unknown[0]!r}"
        for f in record["fields"]:
            if f["name"] not in value and "default" not in f:
                return f"field {f['name']!r} is missing"
            problem = _item_problem(f["type"], value.get(f["name"], f.get("default")))
            if problem:
                return f"field {f['name']!r}: {problem}"
        return ""
    return ""


def _item_problem(avro: AvroType, value: Any) -> str:
    if isinstance(avro, list) and not _optional(avro):
        return ""
    ft = unwrap(avro)
    if value is None:
        return "" if ft.nullable else "null in a required place"
    return _default_problem(ft.avro, value)
