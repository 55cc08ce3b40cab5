"""Running the table services: one pass plans the work (:mod:`~cdkds.catalog.services.planner`),
takes what fits its budget, and commits it as one ``compact`` commit of its own, marked
``service`` in its info; then expires the log and vacuums when the dataset asks for it.

A pass never costs a user's write anything: it runs after that write's commit, a conflict
with a concurrent commit makes it plan once more on the latest revision and then give the
work up (a later pass tries again), and an inline pass reports failures as a
:class:`ServiceWarning` instead of raising. A user's write that loses a race to a service's
commit is planned again and committed (:class:`ConcurrentRewriteError`). A pass killed
mid-way leaves only uncommitted files, which ``vacuum`` removes.
"""

from __future__ import annotations

import logging
import numbers
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from cdkds.catalog.errors import CdkdsError, CommitConflictError, ServiceWarning
from cdkds.catalog.log.checkpointer import checkpoint_interval
from cdkds.catalog.log.commit import clock
from cdkds.catalog.maintenance.rewrite import Rewritten, rewrite
from cdkds.catalog.services.planner import ServicePlan, inline_pace, plan_services
from cdkds.catalog.services.scope import ServiceScope

if TYPE_CHECKING:
    from cdkds.catalog.dataset import Dataset

LOG = logging.getLogger("cdkds.services")
PASS_ATTEMPTS = 2  # a pass that lost a race plans once more on the latest revision, then gives up


@dataclass(frozen=True)
class ServiceReport:
    """What one pass of the services did (``trigger``: ``inline`` after a write, or ``maintain``)."""

    trigger: str
    revisions: tuple[int, ...] = ()
    rewritten_files: int = 0
    written_files: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    merged_buckets: int = 0
    expired: int = 0  # log objects removed
    vacuumed: int = 0  # data files removed
    seconds: float = 0.0
    left: tuple[str, ...] = ()  # work over the budget, for a later pass
    gave_up: tuple[str, ...] = ()  # work given up (conflicts, failures), with the reason

    @property
    def did_work(self) -> bool:
        return bool(self.revisions or self.expired or self.vacuumed)

    def summary(self) -> str:
        """One line saying what the pass did."""
        parts = []
        if self.revisions:
            parts.append(f"rewrote {self.rewritten_files} file(s) ({self.bytes_read:,} bytes) into "
                         f"{self.written_files} ({self.bytes_written:,} bytes)"
                         + (f", merged {self.merged_buckets} index bucket(s)" if self.merged_buckets else "")
                         + f" at revision {', '.join(map(str, self.revisions))}")
        if self.expired:
            parts.append(f"expired {self.expired} log object(s)")
        if self.vacuumed:
            parts.append(f"vacuumed {self.vacuumed} file(s)")
        if self.left:
            parts.append(f"left for later: {'; '.join(self.left)}")
        if self.gave_up:
            parts.append(f"gave up: {'; '.join(self.gave_up)}")
        return ("; ".join(parts) or "nothing to do") + f" ({self.seconds:.2f} s)"


Rewriter = Callable[["Dataset", ServicePlan, Mapping[str, Any]], Rewritten]


def rewrite_here(dataset: "Dataset", plan: ServicePlan, info: Mapping[str, Any]) -> Rewritten:
    """The rewrite of ``plan`` in this process, committed with ``info``."""
    return rewrite(dataset, plan.files, plan.settings.file_size, info, [m.bucket for m in plan.buckets])


def maintain(dataset: "Dataset", budget: int | None = None, trigger: str = "maintain",
             rewriter: Rewriter = rewrite_here, scope: ServiceScope | None = None) -> ServiceReport:
    """One pass of the services over the latest revision of ``dataset`` (a detached pass,
    ``maintain``, refreshes it first; it moves to what the pass commits), within ``budget`` input bytes (``None``: all the work there is), its
    rewrite done by ``rewriter`` (a Spark job passes its own), over the data files of
    ``scope`` (``None``: every file). Raises what reading or the store raise; a lost race
    is reported in ``gave_up``."""
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, numbers.Integral) or budget < 0):
        raise CdkdsError(f"dataset {dataset.name!r}: the services' budget must be a number of bytes, got {budget!r}")
    budget = None if budget is None else int(budget)
    start = time.monotonic()
    if trigger == "maintain":  # a caller's object may be stale; an inline pass follows its write, a Spark job opens it
        dataset.refresh()
    first = dataset.version
    settings = dataset.descriptor.services
    done: list[Rewritten] = []
    gave_up: list[str] = []
    left: tuple[str, ...] = ()
    for attempt in range(PASS_ATTEMPTS):
        pace = inline_pace(dataset.descriptor) if trigger == "inline" and dataset.descriptor.record_key else None
        plan = plan_services(dataset.store, dataset.snapshot, clock(), settings, scope).within(budget, pace)
        left = plan.left
        if not plan.groups and not plan.buckets:
            break
        try:
            done.append(rewriter(dataset, plan, {"service": trigger, "reasons": plan.reasons}))
            break
        except CommitConflictError as e:
            if attempt == PASS_ATTEMPTS - 1:
                gave_up.append(f"the rewrite lost to a concurrent commit ({e}); a later pass tries again")
            else:
                dataset.refresh()
    expired = vacuumed = 0
    if settings.log_retention is not None or settings.vacuum_retention is not None:
        due = trigger != "inline" or _crossed_an_interval(first, dataset.version, checkpoint_interval(dataset.descriptor))
        if due and settings.log_retention is not None:
            expired = len(dataset.expire_log(settings.log_retention))
        if due and settings.vacuum_retention is not None:
            vacuumed = len(dataset.vacuum(settings.vacuum_retention, dry_run=False))
    report = ServiceReport(trigger, tuple(r.revision for r in done), sum(r.files_read for r in done),
                           sum(r.files_written for r in done), sum(r.bytes_read for r in done),
                           sum(r.bytes_written for r in done), sum(r.merged_buckets for r in done),
                           expired, vacuumed, time.monotonic() - start, left, tuple(gave_up))
    if report.did_work or report.gave_up:
        LOG.info("dataset %r: services (%s): %s", dataset.name, trigger, report.summary())
    return report


def after_write(dataset: "Dataset", scope: ServiceScope) -> ServiceReport | None:
    """The inline pass after a write's commit (``None`` when ``services.inline`` is off, or the
    environment variable ``CDKDS_INLINE_SERVICES`` is ``off``): within ``services.budget``,
    over the files of ``scope``, what the write touched (see :mod:`.scope`); any failure
    becomes a :class:`ServiceWarning`, never the write's."""
    settings = dataset.descriptor.services
    if not settings.runs_inline:
        return None
    start = time.monotonic()
    try:
        return maintain(dataset, settings.budget, "inline", scope=scope)
    except Exception as e:  # noqa: BLE001 - the write committed; its services must not fail it
        warnings.warn(f"dataset {dataset.name!r}: the table services after revision {dataset.version} failed "
                      f"({type(e).__name__}: {e}); the write stands, and a later pass or `cdkds maintain` "
                      f"tries again", ServiceWarning, stacklevel=3)
        return ServiceReport("inline", seconds=time.monotonic() - start, gave_up=(f"{type(e).__name__}: {e}",))


def _crossed_an_interval(first: int, last: int, interval: int) -> bool:
    """Whether a revision from ``first`` to ``last`` is a multiple of ``interval``: an inline
    pass expires and vacuums once an interval, whichever of the write's and its own commits
    reach it."""
    return last // interval * interval >= first
