"""Every ``services.*`` property is checked when it is set; a bad budget is refused."""

from __future__ import annotations

import pytest

from cdkds.catalog import DatasetDescriptor
from cdkds.catalog.errors import CdkdsError, InvalidDescriptorError
from cdkds.catalog.services.settings import SERVICE_PROPERTIES, ServiceSettings

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}
BAD = [
    ("services.inline", "yes"), ("services.inline", ""), ("services.inline", "1"),
    ("services.tombstones", "no"), ("services.tombstones", ""),
    ("services.partition.specs", "sometimes"), ("services.partition.specs", "off"),
    ("services.budget", "-1"), ("services.budget", "lots"), ("services.budget", "1.5x"), ("services.budget", ""),
    ("services.deleted.fraction", "0"), ("services.deleted.fraction", "0.001"), ("services.deleted.fraction", "2"),
    ("services.deleted.fraction", "nan"), ("services.deleted.fraction", "inf"), ("services.deleted.fraction", "half"),
    ("services.small.files", "1"), ("services.small.files", "-3"), ("services.small.files", "2.5"),
    ("services.small.files", "many"), ("services.small.files", "\u00b2"), ("services.small.files", "\u0663"),
    ("services.small.files", " 3"),
    ("services.file.size", "10"), ("services.file.size", "0"), ("services.file.size", "big"),
    ("services.log.retention", "1s"), ("services.log.retention", "0"), ("services.log.retention", "forever"),
    ("services.vacuum.retention", "1m"), ("services.vacuum.retention", "soon"),
]


def test_every_property_has_a_bad_value_here():
    assert {name for name, _ in BAD} == set(SERVICE_PROPERTIES)


def test_a_misspelt_services_property_is_refused_not_kept():
    with pytest.raises(InvalidDescriptorError, match="services.inlin.*services.inline"):
        DatasetDescriptor(SCHEMA, properties={"services.inlin": "false"})
    assert ServiceSettings.parse({"services.inlin": "false"}, recorded=True) == ServiceSettings()


@pytest.mark.parametrize("name,value", BAD)
def test_a_bad_value_is_refused_at_create(mem_repo, name, value):
    with pytest.raises(InvalidDescriptorError) as e:
        mem_repo.create("d", DatasetDescriptor(SCHEMA, properties={name: value}))
    assert name in str(e.value) and repr(value) in str(e.value)
    assert not mem_repo.exists("d")


@pytest.mark.parametrize("name,value", BAD)
def test_a_bad_value_is_refused_at_update(mem_repo, name, value):
    ds = mem_repo.create("d", DatasetDescriptor(SCHEMA))
    with pytest.raises(InvalidDescriptorError) as e:
        mem_repo.update("d", DatasetDescriptor(SCHEMA, properties={name: value}))
    assert name in str(e.value) and repr(value) in str(e.value)
    with pytest.raises(InvalidDescriptorError):
        ds.update_descriptor(DatasetDescriptor(SCHEMA, properties={name: value}))
    assert mem_repo.load("d").version == 0


@pytest.mark.parametrize("name", ["checkpoint.interval", "index.buckets", "index.compaction.deltas"])
@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "0", "-1", "x"])
def test_counts_are_ascii_digits(mem_repo, name, value):
    """``str.isdigit`` takes '²' (which ``int`` refuses) and other scripts' digits."""
    with pytest.raises(InvalidDescriptorError, match=name):
        mem_repo.create("d", DatasetDescriptor(SCHEMA, record_key="id", properties={name: value}))


def test_good_values_are_read():
    s = ServiceSettings.parse({"services.inline": "False", "services.budget": "1m", "services.deleted.fraction": "0.5",
                               "services.small.files": "2", "services.file.size": "1k",
                               "services.log.retention": "2h", "services.vacuum.retention": "7 days"})
    assert (s.inline, s.budget, s.deleted_fraction, s.small_files, s.file_size) == (False, 2 ** 20, 0.5, 2, 1024)
    assert s.log_retention.total_seconds() == 7200 and s.vacuum_retention.days == 7


def test_a_recorded_bad_value_reads_as_the_defaults():
    assert ServiceSettings.parse({"services.budget": "lots"}, recorded=True) == ServiceSettings()


@pytest.mark.parametrize("budget", [-1, 1.5, "10", "1m", True, float("nan"), [1]])
def test_maintain_refuses_a_bad_budget(mem_repo, budget):
    ds = mem_repo.create("d", DatasetDescriptor(SCHEMA, properties={"services.small.files": "2"}))
    for i in range(3):
        with ds.writer() as w:
            w.write({"id": i})
    with pytest.raises(CdkdsError) as e:
        ds.maintain(budget=budget)
    assert "'d'" in str(e.value) and "budget" in str(e.value) and repr(budget) in str(e.value)
    assert mem_repo.load("d").version == 3
