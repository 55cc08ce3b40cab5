"""Names of the columns cdkds puts beside a dataset's fields while it works on rows in
memory. Each holds a ``:``, which no field name may (field names are letters, digits and
``_``), so none can meet a field of the same name. The record index's stored columns are
another matter: record keys may not take their names (:data:`INDEX_COLUMNS`)."""

from __future__ import annotations

POSITION = "cdkds:pos"  # a row's position in its data file, as a scan read it
FILE = "cdkds:file"  # the data file a row was read from or written to
ROW = "cdkds:row"  # of an index entry looked up: the row of its key among the keys looked up
RANK = "cdkds:rank"  # an order among rows or index entries: the greater wins
INPUT_ROW = "cdkds:input_row"  # a row's number in the table it came in
BARE = "cdkds:bare"  # 1 where a row has no ordering value
PAIR, SIDE = "cdkds:pair", "cdkds:side"  # rows compared in pairs: which pair, which side
COUNT = "cdkds:count"  # how many rows hold a key

# The columns an index entry stores beside the record key's (see docs/FORMAT.md).
INDEX_COLUMNS = ("_hash", "_file", "_pos", "_order", "_expires", "_deleted")
