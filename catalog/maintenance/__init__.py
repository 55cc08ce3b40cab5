"""Keeping a dataset healthy: compaction, vacuum (garbage collection) and rebuilding a lost log."""

from cdkds.catalog.maintenance.compaction import CompactionPlan, compact, plan_compaction
from cdkds.catalog.maintenance.rebuild import IncompleteRebuildWarning, RebuildReport, Unrecoverable, rebuild_log
from cdkds.catalog.maintenance.vacuum import DEFAULT_RETENTION, MINIMUM_RETENTION, vacuum

__all__ = ["CompactionPlan", "DEFAULT_RETENTION", "IncompleteRebuildWarning", "MINIMUM_RETENTION", "RebuildReport",
           "Unrecoverable", "compact", "plan_compaction", "rebuild_log", "vacuum"]
