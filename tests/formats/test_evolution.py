from cdkds.formats.evolution import align_ids, read_problems, top_level_renames
from cdkds.formats.schema import FORMER_NAMES, LAST_FIELD_ID, assign_ids, has_ids, walk_fields

OLD = assign_ids({"type": "record", "name": "R", "fields": [
    {"name": "a", "type": "int"}, {"name": "b", "type": "string"},
    {"name": "s", "type": ["null", {"type": "record", "name": "S", "fields": [{"name": "x", "type": "int"}]}],
     "default": None}]})


def record(*fields):
    return {"type": "record", "name": "R", "fields": list(fields)}


def test_ids_are_given_fields_first_then_nested_and_never_reused():
    assert [(p, f["field-id"]) for p, f in walk_fields(OLD)] == [("a", 1), ("b", 2), ("s", 3), ("s.x", 4)]
    assert OLD[LAST_FIELD_ID] == 4 and has_ids(OLD)
    assert assign_ids({k: v for k, v in OLD.items()}) == OLD  # stable
    dropped = {**OLD, "fields": OLD["fields"][:1] + [{"name": "c", "type": "long"}]}
    assert assign_ids(dropped)["fields"][1]["field-id"] == 5  # after the last id ever given, not after 'a'


def test_read_problems_by_id():
    widened = align_ids(OLD, record({"name": "a", "type": "long"}, {"name": "c", "type": ["null", "string"], "default": None}))
    assert read_problems(OLD, widened) == []
    narrowed = align_ids(OLD, record({"name": "a", "type": "string"}))
    assert "field 'a' cannot change from int to string" in read_problems(OLD, narrowed)[0]
    required = align_ids(OLD, record({"name": "a", "type": "int"}, {"name": "z", "type": "int"}))
    assert "new field 'z' (int) is required and has no default" in read_problems(OLD, required)[0]
    nested = align_ids(OLD, record({"name": "s", "type": ["null", {"type": "record", "name": "S", "fields": [
        {"name": "x", "type": "long"}, {"name": "y", "type": "int"}]}], "default": None}))
    assert read_problems(OLD, nested) == ["new field 's.y' (int) is required and has no default, so existing rows cannot be read"]
    made_required = align_ids(OLD, record({"name": "s", "type": {"type": "record", "name": "S", "fields": [
        {"name": "x", "type": "int"}]}}))
    assert "field 's' cannot become required" in read_problems(OLD, made_required)[0]


def test_align_by_id_follows_renames_and_gives_new_fields_fresh_ids():
    renamed = {**OLD, "fields": [{**OLD["fields"][0], "name": "a2"}, {"name": "b", "type": "string"}]}
    out = align_ids(OLD, renamed)
    assert [(f["name"], f["field-id"]) for f in out["fields"]] == [("a2", 1), ("b", 2)]  # no id: matched by name
    assert out["fields"][0][FORMER_NAMES] == ["a"] and out[LAST_FIELD_ID] == 4
    claimed = {**OLD, "fields": [{**OLD["fields"][1], "name": "a"}, {"name": "b", "type": "string"}]}
    out = align_ids(OLD, claimed)  # 'b' by id is now called 'a'; a field named 'b' without an id is new
    assert [(f["name"], f["field-id"]) for f in out["fields"]] == [("a", 2), ("b", 5)]
    assert top_level_renames(OLD, out) == {"b": "a"}  # old name -> new name of the fields both have
    by_name = align_ids(OLD, record({"name": "b", "type": "string"}, {"name": "a", "type": "int"}))
    assert [(f["name"], f["field-id"]) for f in by_name["fields"]] == [("b", 2), ("a", 1)]
