"""Found by the guide's keyed example (docs/guide/keyed-datasets.md): a dataset object whose
write was followed by an inline pass plans its next commit on the services' commit
(docs/guide/maintenance.md, "When they run"), `rebuild_index()` included — it used to plan on
the write's revision and fail against the pass's own `compact` (ConcurrentRewriteError)."""

from __future__ import annotations

from cdkds.catalog import DatasetDescriptor, DatasetRepository

SCHEMA = {"type": "record", "name": "U", "fields": [{"name": "k", "type": "long"}, {"name": "v", "type": "string"}]}


def test_rebuild_index_after_an_inline_pass(inline_services):
    repo = DatasetRepository("memory://rebuild-after-pass")
    users = repo.create("users", DatasetDescriptor(SCHEMA, record_key=["k"]))
    users.upsert([{"k": i, "v": "a"} for i in range(10)])
    users.delete_keys([{"k": i} for i in range(5)])  # half the rows deleted: the inline pass rewrites the file
    assert users.last_services is not None and users.last_services.revisions
    users.rebuild_index()
    assert sorted(r["k"] for r in repo.load("users").reader()) == [5, 6, 7, 8, 9]
