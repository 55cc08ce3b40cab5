"""JSON lines files to import: parsed by pyarrow, and by Python's json module where pyarrow fails
or cannot (maps, NaN, empty files), line by line."""

from __future__ import annotations

import io
import json
from typing import Any, Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from cdkds.formats.text import (
    BAD_VALUE, STRING_CANDIDATES, Overflowed, TextKinds, decoded_json, first_bad, is_text, json_array,
)
from cdkds.formats.inputs import base as limits
from cdkds.formats.inputs.base import JSON_CHUNK_LINES, InputError, LinesInput, merge_types, plain

_JSON_GROUPS = {"boolean": "a boolean", "long": "a number", "double": "a number", "string": "a string",
                "nested": "an array or object"}


def _json_kind(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "long" if -(2**63) <= v < 2**63 else "double"
    if isinstance(v, (float, Overflowed)):
        return "double"
    if isinstance(v, str):
        return "string"
    return "nested"


def _json_native(t: pa.DataType) -> pa.DataType | None:
    """The type pyarrow's JSON reader parses a field of type ``t`` as (``None``: it cannot)."""
    if pa.types.is_integer(t):
        return pa.int64()
    if pa.types.is_floating(t):
        return pa.float64()
    if pa.types.is_boolean(t) or is_text(t) or pa.types.is_decimal(t):
        return t
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t) \
            or pa.types.is_large_binary(t):
        return pa.string()  # then converted by the text rules
    if pa.types.is_list(t):
        inner = _json_native(t.value_type)
        return t if inner is not None and inner.equals(t.value_type) else None
    if pa.types.is_struct(t):
        inner = [_json_native(t.field(i).type) for i in range(t.num_fields)]
        if all(x is not None and x.equals(t.field(i).type) for i, x in enumerate(inner)):
            return t
    return None


class JsonLinesInput(LinesInput):
    format = "jsonl"
    null_word = "null or missing"

    def _objects(self, max_rows: int | None = None) -> Iterator[list[tuple[int, dict]]]:
        """Chunks of (line, object), parsed by Python so that every problem has its line."""
        chunk: list[tuple[int, dict]] = []
        seen = 0
        with self._open() as f:
            for line, text in enumerate(io.TextIOWrapper(f, encoding="utf-8"), 1):
                if not text.strip():
                    continue
                try:
                    value = decoded_json(text)
                except json.JSONDecodeError as e:
                    raise InputError(f"{self.name} line {line}: not valid JSON ({e.msg} at column {e.colno})",
                                     self.name, line=line) from None
                if not isinstance(value, dict):
                    raise InputError(f"{self.name} line {line}: not a JSON object", self.name, line=line)
                chunk.append((line, value))
                seen += 1
                if len(chunk) >= JSON_CHUNK_LINES:
                    yield chunk
                    chunk = []
                if max_rows is not None and seen >= max_rows:
                    break
        if chunk:
            yield chunk

    def _line_of(self, index: int) -> int:
        number = -1
        with self._open() as f:
            for line, text in enumerate(io.TextIOWrapper(f, encoding="utf-8"), 1):
                if text.strip():
                    number += 1
                    if number == index:
                        return line
        return -1

    def _fields(self, max_rows: int | None) -> list[pa.Field]:
        kinds: dict[str, dict[str, int]] = {}  # field -> kind -> the first line it was seen on
        texts: dict[str, TextKinds] = {}
        nested: dict[str, pa.DataType] = {}
        for chunk in self._objects(max_rows):
            values: dict[tuple[str, str], list] = {}
            for line, obj in chunk:
                for key, v in obj.items():
                    seen = kinds.setdefault(key, {})
                    if v is None:
                        continue
                    kind = _json_kind(v)
                    if kind not in seen:
                        other = [k for k in seen if _JSON_GROUPS[k] != _JSON_GROUPS[kind]]
                        if other:
                            raise InputError(f"{self.name}: field {key!r} holds {_JSON_GROUPS[other[0]]} (line "
                                             f"{seen[other[0]]}) and {_JSON_GROUPS[kind]} (line {line})", self.name,
                                             field=key)
                        seen[kind] = line
                    if kind in ("string", "nested"):
                        values.setdefault((kind, key), []).append(v)
            for (kind, name), vs in values.items():
                if kind == "string":
                    texts.setdefault(name, TextKinds(STRING_CANDIDATES)).update(pa.array(vs, pa.string()))
                    continue
                try:
                    t = plain(pa.array(vs).type)
                except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
                    raise InputError(f"{self.name}: field {name!r} holds values of different shapes: {e}",
                                     self.name, field=name) from None
                nested[name] = merge_types(name, nested[name], t, self.name) if name in nested else t
        fields = []
        for name, seen in kinds.items():
            if "nested" in seen:
                t = nested[name]
            elif "string" in seen:
                t = texts[name].result()
            else:
                t = next((_JSON_TYPES[k] for k in ("double", "long", "boolean") if k in seen), pa.string())
            fields.append(pa.field(name, t))
        return fields

    def _read(self, schema: pa.Schema, defaults: Mapping[str, Any]) -> Iterator[pa.RecordBatch]:
        natives = [_json_native(f.type) for f in schema]
        if any(t is None for t in natives):
            yield from self._read_python(schema, defaults)
            return
        native = pa.schema([pa.field(f.name, t) for f, t in zip(schema, natives)])
        base = 0
        try:
            with self._open() as f:
                reader = pajson.open_json(f, read_options=pajson.ReadOptions(block_size=limits.BLOCK_BYTES),
                                          parse_options=pajson.ParseOptions(explicit_schema=native,
                                                                            unexpected_field_behavior="error"))
                for batch in reader:
                    if any(_holds_infinity(c) for c in batch.columns):
                        raise pa.ArrowInvalid("a number beyond a double")  # (pyarrow reads no infinity else)
                    columns = {f.name: self._typed(batch.column(f.name), f, base) for f in schema}
                    yield self._conform(columns, batch.num_rows, schema, defaults, base)
                    base += batch.num_rows
        except pa.ArrowInvalid as e:
            # pyarrow's messages do not tell the line, field and value: Python's parser finds them
            # (and reads what pyarrow's parser refuses but Python's takes: an empty file, NaN)
            if base == 0:
                yield from self._read_python(schema, defaults)
                return
            for _ in self._read_python(schema, defaults):
                pass
            raise InputError(f"{self.name}: {str(e).splitlines()[0]}", self.name) from None

    def _read_python(self, schema: pa.Schema, defaults: Mapping[str, Any]) -> Iterator[pa.RecordBatch]:
        names = set(schema.names)
        base = 0
        for chunk in self._objects():
            lines = [line for line, _ in chunk]
            for line, obj in chunk:
                unknown = [k for k in obj if k not in names]
                if unknown:
                    raise InputError(f"{self.name} line {line}: unknown field {unknown[0]!r}; the fields are "
                                     f"{schema.names}", self.name, line=line, field=unknown[0])
            columns = {}
            for f in schema:
                values = [obj.get(f.name) for _, obj in chunk]
                try:
                    columns[f.name] = json_array(values, f.type)
                except BAD_VALUE:
                    i = first_bad(len(values), lambda lo, hi: json_array(values[lo:hi], f.type))
                    raise self._bad_value(i, f.name, values[i], f.type, {"line": lines[i]}) from None
                columns[f.name] = self._checked(columns[f.name], f, base)
                if columns[f.name].null_count and not f.nullable and f.name not in defaults:
                    i = int(pc.index(columns[f.name].is_null(), True).as_py())
                    raise InputError(f"{self.name} line {lines[i]}: field {f.name!r} is required, but the value is "
                                     f"{self.null_word}", self.name, line=lines[i], field=f.name)
            yield self._conform(columns, len(chunk), schema, defaults, base)
            base += len(chunk)


def _holds_infinity(column: pa.Array) -> bool:
    """Whether a column parsed by pyarrow holds an infinity, at any depth."""
    t = column.type
    if pa.types.is_floating(t):
        return bool(pc.any(pc.is_inf(column)).as_py())
    if pa.types.is_list(t):
        return _holds_infinity(column.flatten())
    if pa.types.is_struct(t):
        return any(_holds_infinity(column.field(i)) for i in range(t.num_fields))
    return False


_JSON_TYPES = {"double": pa.float64(), "long": pa.int64(), "boolean": pa.bool_()}
