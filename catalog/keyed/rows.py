"""The rows a keyed operation is given (dicts, Arrow, pandas), checked against the
dataset's schema and made Arrow tables: whole rows for upserts and inserts, partial rows
(with which columns each row sets) for updates (keys, for deletes and lookups, are
:meth:`RecordKey.keys`'s). Errors name the dataset, the field and the value."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import numpy as np
import pyarrow as pa

from cdkds.catalog.errors import InvalidRecordError
from cdkds.catalog.keyed.keys import arrow_table
from cdkds.formats.errors import SchemaMismatchError
from cdkds.formats.conversion import as_nullable, conform_column
from cdkds.formats.records import batch_conformer, field_validator, record_validator

if TYPE_CHECKING:
    from cdkds.catalog.dataset import Dataset


def _tables(rows: Any, dataset: str, what: str) -> Iterable[pa.Table | list]:
    """Arrow tables and lists of dicts from any accepted input."""
    table = arrow_table(rows)
    if table is not None:
        yield table
        return
    if rows is None or isinstance(rows, (str, bytes)) or not isinstance(rows, (Mapping, Iterable)):
        raise InvalidRecordError(f"dataset {dataset!r}: the {what} takes dicts, an Arrow table or batch, or an "
                                 f"iterable of them; got {type(rows).__name__}: {rows!r:.100}")
    if isinstance(rows, Mapping):
        yield [rows]
        return
    records: list = []
    for item in rows:
        table = arrow_table(item)
        if table is not None:
            if records:
                yield records
                records = []
            yield table
        else:
            records.append(item)
    if records:
        yield records


def full_rows(dataset: "Dataset", rows: Any, what: str) -> pa.Table:
    """Whole rows checked against the schema, as one table in the dataset's Arrow schema."""
    descriptor = dataset.descriptor
    schema = descriptor.arrow_schema
    validate = record_validator(descriptor.schema)
    conform = batch_conformer(descriptor.schema)
    parts = []
    try:
        for part in _tables(rows, dataset.name, what):
            if isinstance(part, list):
                checked = []
                for i, record in enumerate(part):
                    try:
                        checked.append(validate(record))
                    except SchemaMismatchError as e:
                        raise SchemaMismatchError(f"{what} row {i}: {e}") from None
                parts.append(pa.Table.from_pylist(checked, schema=schema))
            else:
                parts.extend(pa.Table.from_batches([conform(b)], schema=schema) for b in part.to_batches())
    except InvalidRecordError:
        raise
    except SchemaMismatchError as e:
        raise InvalidRecordError(f"dataset {dataset.name!r}: {e}") from None
    except TypeError as e:
        raise InvalidRecordError(f"dataset {dataset.name!r}: the {what} must be dicts or Arrow tables/batches: {e}") from None
    return pa.concat_tables(parts).combine_chunks() if parts else schema.empty_table()


def partial_rows(dataset: "Dataset", rows: Any) -> tuple[pa.Table, dict[str, np.ndarray]]:
    """The columns an update gives (key fields required), typed, and for each non-key
    column a mask of the rows that give it."""
    descriptor = dataset.descriptor
    schema = descriptor.arrow_schema
    parts, masks = [], defaultdict(list)
    names: dict[str, None] = {}
    for part in _tables(rows, dataset.name, "update"):
        if isinstance(part, list):
            for i, record in enumerate(part):
                if not isinstance(record, Mapping):
                    raise InvalidRecordError(f"dataset {dataset.name!r}: update row {i} must be a dict, got "
                                             f"{type(record).__name__}: {record!r:.100}")
                names.update(dict.fromkeys(record))
            parts.append(part)
        else:
            names.update(dict.fromkeys(part.schema.names))
            parts.append(part)
    unknown = [n for n in names if schema.get_field_index(n) < 0]
    if unknown:
        raise InvalidRecordError(f"dataset {dataset.name!r}: update gives unknown column {unknown[0]!r}; "
                                 f"the schema has {schema.names}")
    columns = [n for n in schema.names if n in names]
    types = {f["name"]: f["type"] for f in descriptor.schema["fields"]}
    given = {n: as_nullable(types[n]) for n in columns}  # a row that does not give a column holds null there
    checks = {n: field_validator(types[n]) for n in columns}
    tables = []
    try:
        for part in parts:
            if isinstance(part, list):
                arrays = []
                for n in columns:
                    values = [checks[n](r[n], n) if n in r else None for r in part]
                    arrays.append(conform_column(pa.array(values, type=schema.field(n).type), given[n], n))
                    masks[n].append(np.array([n in r for r in part], dtype=bool))
                tables.append(pa.table(arrays, names=columns))
            else:
                arrays = []
                for n in columns:
                    if n in part.schema.names:
                        arrays.append(conform_column(part.column(n), types[n], n))
                        masks[n].append(np.ones(part.num_rows, dtype=bool))
                    else:
                        arrays.append(pa.nulls(part.num_rows, schema.field(n).type))
                        masks[n].append(np.zeros(part.num_rows, dtype=bool))
                tables.append(pa.table(arrays, names=columns))
    except SchemaMismatchError as e:
        raise InvalidRecordError(f"dataset {dataset.name!r}: update {e}") from None
    table = pa.concat_tables(tables) if tables else pa.table([pa.array([], schema.field(n).type) for n in columns], names=columns)
    return table.combine_chunks(), {n: np.concatenate(m) for n, m in masks.items()}

