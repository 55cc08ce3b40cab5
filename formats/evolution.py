"""Schema evolution by field id: which changes old files can be read under, and how a new
schema's fields are matched to the current one's.

Fields are the same field when they have the same id, whatever their names. A schema may
replace another when every file written with the old one can be read with the new one
(:func:`read_problems`):

- a field the new schema adds (at any depth) is optional or has a default;
- a field both have keeps its type, or widens it (:data:`PROMOTIONS`; decimals may gain
  precision at the same scale); a record, array or map type changes only inside, by
  these same rules;
- a required field may become optional, never the reverse;
- names, order and dropped fields are free (files are read by id).
"""

from __future__ import annotations

import json

from cdkds.formats.schema import (
    FIELD_ID, FORMER_NAMES, LAST_FIELD_ID, NAME_MAPPING, AvroType, last_field_id, record_of, type_kind, unwrap,
    walk_fields,
)

PROMOTIONS = {  # kind -> the kinds its values may be read as (besides itself)
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


def can_widen(old: AvroType, new: AvroType) -> bool:
    """Whether values of (non-union) type ``old`` may be read as ``new``: a promotion, or
    a decimal with more precision at the same scale."""
    a, b = type_kind(old), type_kind(new)
    if a == "decimal" and b == "decimal":
        return old.get("scale", 0) == new.get("scale", 0) and old["precision"] <= new["precision"]
    return b in PROMOTIONS.get(a, set())


def type_text(avro: AvroType) -> str:
    """A field type as people write it: ``long``, ``decimal(10,2)``, ``record``, ``array<int>``."""
    ft = unwrap(avro)
    kind = ft.kind
    inner = ft.avro
    if kind == "decimal":
        text = f"decimal({inner['precision']},{inner.get('scale', 0)})"
    elif kind == "array":
        text = f"array<{type_text(inner['items'])}>"
    elif kind == "map":
        text = f"map<{type_text(inner['values'])}>"
    else:
        text = kind
    return f"optional {text}" if ft.nullable else text


# ---------------------------------------------------------------- compatibility

def read_problems(old: dict, new: dict) -> list[str]:
    """Why files written with schema ``old`` cannot be read with ``new`` (empty when they
    can); both carry ids."""
    problems: list[str] = []
    _record_problems(old, new, "", problems)
    return problems


def _record_problems(old: dict, new: dict, prefix: str, problems: list[str]) -> None:
    before = {f[FIELD_ID]: f for f in old["fields"]}
    for f in new["fields"]:
        path = f"{prefix}{f['name']}"
        if f[FIELD_ID] not in before:
            if not unwrap(f["type"]).nullable and "default" not in f:
                problems.append(f"new field {path!r} ({type_text(f['type'])}) is required and has no default, "
                                f"so existing rows cannot be read")
            continue
        _type_problems(before[f[FIELD_ID]]["type"], f["type"], path, problems)


def _type_problems(old: AvroType, new: AvroType, path: str, problems: list[str]) -> None:
    a, b = unwrap(old), unwrap(new)
    if a.nullable and not b.nullable:
        problems.append(f"field {path!r} cannot become required ({type_text(old)} -> {type_text(new)}): "
                        f"existing rows may hold nulls")
    ka, kb = a.kind, b.kind
    if ka == kb == "record":
        _record_problems(a.avro, b.avro, f"{path}.", problems)
    elif ka == kb == "array":
        _type_problems(a.avro["items"], b.avro["items"], f"{path}[]", problems)
    elif ka == kb == "map":
        _type_problems(a.avro["values"], b.avro["values"], f"{path}{{}}", problems)
    elif ka == kb and ka not in ("decimal", "enum", "fixed"):
        return
    elif ka == kb and a.avro == b.avro:
        return
    elif not can_widen(a.avro, b.avro):
        problems.append(f"field {path!r} cannot change from {type_text(old)} to {type_text(new)}: "
                        f"existing values cannot be read as {type_text(new)} (only widening: int -> long, "
                        f"float -> double, int/long -> double, decimal precision up at the same scale)")


# ---------------------------------------------------------------- matching ids

def align_ids(current: dict, new: dict) -> dict:
    """``new`` with the ids of ``current``'s fields, at every depth: a field of ``new`` that
    carries an id is the field of ``current`` with that id (a new field if there is none);
    one without is the field of ``current`` of the same name, if no other field claimed it
    by id. Fields not matched get ids above every id ``current`` ever gave; a matched field
    whose name changed records its former names; the name mapping carries over."""
    out = json.loads(json.dumps(new))
    last = last_field_id(current)

    def fresh() -> int:
        nonlocal last
        last += 1
        return last

    def align(old: dict | None, record: dict) -> None:
        before_ids = {f[FIELD_ID]: f for f in old["fields"]} if old is not None else {}
        before_names = {f["name"]: f for f in old["fields"]} if old is not None else {}
        claimed = {f[FIELD_ID] for f in record["fields"] if f.get(FIELD_ID) in before_ids}
        matched = []
        for f in record["fields"]:
            if FIELD_ID in f:
                match = before_ids.get(f[FIELD_ID])
            else:
                match = before_names.get(f["name"])
                match = match if match is not None and match[FIELD_ID] not in claimed else None
            matched.append(match)
            f[FIELD_ID] = match[FIELD_ID] if match is not None else -1
        for f, match in zip(record["fields"], matched):
            if f[FIELD_ID] == -1:
                f[FIELD_ID] = fresh()
            f.pop(FORMER_NAMES, None)
            if match is not None:
                former = [n for n in [*match.get(FORMER_NAMES, []), match["name"]] if n != f["name"]]
                if former:
                    f[FORMER_NAMES] = list(dict.fromkeys(former))
            inner = record_of(f["type"])
            if inner is not None:
                align(record_of(match["type"]) if match is not None else None, inner)

    align(current, out)
    out[LAST_FIELD_ID] = last
    if NAME_MAPPING in current:
        out[NAME_MAPPING] = current[NAME_MAPPING]
    else:
        out.pop(NAME_MAPPING, None)
    return out


def misread_by_name(old: dict, new: dict) -> bool:
    """Whether a reader that matches file columns by name would misread files written with
    ``old`` under ``new``: some field (at any depth) was renamed or dropped."""
    paths = {f[FIELD_ID]: path for path, f in walk_fields(new) if FIELD_ID in f}
    return any(paths.get(f[FIELD_ID]) != path for path, f in walk_fields(old))


def top_level_renames(old: dict, new: dict) -> dict[str, str]:
    """Old name -> new name of the top-level fields both schemas have (by id)."""
    names = {f[FIELD_ID]: f["name"] for f in new["fields"] if FIELD_ID in f}
    return {f["name"]: names[f[FIELD_ID]] for f in old["fields"] if f.get(FIELD_ID) in names}
