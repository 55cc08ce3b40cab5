"""What the table services would do next on a snapshot, and why.

- **Deleted rows**: a data file whose deleted fraction (deletion vectors exactly; rows TTL
  expired, counted by reading the columns its rules use, once per file and minute in a
  process) reaches ``services.deleted.fraction`` is rewritten without them.
- **Tombstones**: a data file a tombstone (a delete of a dataset without a record key)
  applies to is rewritten without the rows it hides, whatever their number: every reader
  pays for a tombstone (and pyarrow's lazy reads cannot apply some), so the services turn
  such deletes into copy-on-write ones, a budget at a time.
- **Partition specs**: a data file written with an older partition spec (before
  ``alter().partition_by(...)``) is rewritten into the current strategy, unless
  ``services.partition.specs`` is false, so that a dataset converges to one layout; inline
  passes take such files too, a budget at a time, wherever they lie.
- **Small files**: a partition with ``services.small.files`` files under three quarters of
  ``services.file.size`` has them bin-packed into files of about that size.
- **Index deltas**: a record-index bucket with ``index.compaction.deltas`` delta files or
  more has them merged into one base.
- **Commit-time TTL**: where ``ttl`` counts from a row's commit time, a file with live rows
  is left as it is (moved, its rows would take the rewrite's commit time and outlive their
  ttl); once its rows expired it is dropped.
- **Log and files**: with ``services.log.retention`` / ``services.vacuum.retention`` set,
  commits and unreferenced files older than that are removed (never by default).

A pass takes, while its input bytes stay within a budget, first the index buckets (most
deltas first) in the budget less the bytes of the first data group that fits it, then the
data groups in that order (most deleted first, then tombstoned files, then files of older
partition specs, then the partitions with most small files; a partition's small files join
its rewritten ones), then buckets again in what is left. Index buckets come first because a
byte of them is cheap to merge and every later keyed write and ``get`` reads them: merging
all 64 buckets of a 10M-row dataset (265 MB) takes ~3 s, rewriting as many bytes of keyed
data files (their rows indexed anew) ~12 s; behind data files, buckets waited for passes
that never had budget left (docs/PERFORMANCE.md). The room kept for one data group is so
that buckets due at every pass cannot starve the data files in turn. An inline pass also
picks no more buckets to merge than :func:`inline_pace` (a rewrite that moves half a bucket's
rows merges it besides): enough to keep up with every write, few
enough that buckets due together are merged over several commits.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from cdkds.catalog.expressions import ALWAYS_TRUE, bind
from cdkds.catalog.expressions.columnar import may_match_mask
from cdkds.catalog.expressions.pruning import SPEC_NAME, FileFilter
from cdkds.catalog.expressions.tree import BoundPredicate
from cdkds.catalog.expressions.visitors import references
from cdkds.catalog.log.actions import AddFile
from cdkds.catalog.keyed.ttl import TimeToLive
from cdkds.catalog.log.checkpointer import checkpoint_interval
from cdkds.catalog.maintenance.compaction import bin_pack
from cdkds.catalog.maintenance.rewrite import keeps_expiry, may_have_expired
from cdkds.catalog.read.scan import file_task, read_task
from cdkds.catalog.services.scope import ServiceScope, partition_key
from cdkds.catalog.services.settings import ServiceSettings
from cdkds.formats.cache import BoundedCache

if TYPE_CHECKING:
    from cdkds.catalog.descriptor import DatasetDescriptor
    from cdkds.catalog.log.snapshot import Snapshot
    from cdkds.catalog.storage import ObjectStore

SMALL_FILE_FRACTION = 0.75  # a file under this share of services.file.size is small
MOMENT_MS = 60_000


@dataclass(frozen=True)
class RewriteGroup:
    """Data files of one partition (of one partition spec) to rewrite together, and why
    (``deleted``, ``tombstones``, ``partition spec N`` or ``small``)."""

    partition: tuple
    files: tuple[AddFile, ...]
    reason: str

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class BucketMerge:
    """A record-index bucket whose deltas are to be merged into one base."""

    bucket: int
    deltas: int
    bytes: int


@dataclass(frozen=True)
class ServicePlan:
    """The work the services would do on one snapshot: index buckets and data files, each in
    the order a pass takes them (buckets first, see the module docstring)."""

    settings: ServiceSettings
    groups: tuple[RewriteGroup, ...] = ()
    buckets: tuple[BucketMerge, ...] = ()
    deleted: tuple[tuple[str, float], ...] = ()  # files at or over the threshold, with their fraction
    small: tuple[tuple[tuple, int], ...] = ()  # partitions at or over the small-file count
    tombstoned: int = 0  # files tombstones apply to
    next_checkpoint: int = 0
    expire_log: bool = False
    vacuum: bool = False
    left: tuple[str, ...] = field(default=())  # work over the budget, said in words
    current_spec: int = 0  # the descriptor's current partition spec
    kept: int = 0  # files with live rows whose ttl counts from their commit time: left as they are
    outdated: tuple[tuple[int, int], ...] = ()  # (older partition spec, files written with it)

    @property
    def files(self) -> list[AddFile]:
        return [f for g in self.groups for f in g.files]

    @property
    def bytes(self) -> int:
        return sum(g.bytes for g in self.groups) + sum(b.bytes for b in self.buckets)

    @property
    def reasons(self) -> list[str]:
        """Why its rewrite is done: ``deleted``, ``tombstones``, ``partition spec N``, ``small``, ``index``."""
        return sorted({g.reason for g in self.groups} | ({"index"} if self.buckets else set()))

    @property
    def empty(self) -> bool:
        return not self.groups and not self.buckets and not self.expire_log and not self.vacuum

    def within(self, budget: int | None, most_buckets: int | None = None) -> "ServicePlan":
        """The work of this plan that fits ``budget`` input bytes (``None``: all of it), in
        order, merging at most ``most_buckets`` index buckets (``None``: as many as fit)."""
        if budget is None and most_buckets is None:
            return self
        budget = self.bytes if budget is None else budget
        taken: list[RewriteGroup] = []
        chosen: set[int] = set()  # buckets
        spent = 0

        def take_buckets(limit: int) -> None:
            nonlocal spent
            for merge in self.buckets:
                if merge.bucket not in chosen and spent + merge.bytes <= limit:
                    chosen.add(merge.bucket)
                    spent += merge.bytes

        # room kept for the first data group that fits at all: buckets due at every pass
        # (writes merge a bucket themselves when the services fall behind; nothing rewrites
        # data files but the services) must not starve the data files in turn
        take_buckets(budget - next((g.bytes for g in self.groups if g.bytes <= budget), 0))
        for group in self.groups:
            if spent + group.bytes <= budget:
                taken.append(group)
                spent += group.bytes
        take_buckets(budget)
        # the pace only takes work out of a pass: the budget the buckets over it would have
        # spent is not given to data files, whose bytes cost four times as much
        merges = [m for m in self.buckets if m.bucket in chosen][:most_buckets]
        chosen = {m.bucket for m in merges}
        left = []
        groups = [g for g in self.groups if g not in taken]
        if groups:
            left.append(f"{sum(len(g.files) for g in groups)} file(s) in {len(groups)} group(s), "
                        f"{sum(g.bytes for g in groups):,} bytes")
        buckets = [m for m in self.buckets if m.bucket not in chosen]
        if buckets:
            left.append(f"{len(buckets)} index bucket(s), {sum(m.bytes for m in buckets):,} bytes")
        return dataclasses.replace(self, groups=tuple(taken), buckets=tuple(merges), left=tuple(left))

    def describe(self) -> list[str]:
        """What the services would do next and why, a line each, in the order a pass takes it
        (index buckets first)."""
        s = self.settings
        lines = [f"inline services: {'on' if s.inline else 'off'} (budget {s.budget:,} bytes a commit)"]
        for merge in self.buckets:
            lines.append(f"index bucket {merge.bucket} has {merge.deltas} deltas: merge them")
        if self.deleted:
            worst = max(f for _, f in self.deleted)
            lines.append(f"{len(self.deleted)} file(s) with at least {s.deleted_fraction:.0%} of their rows deleted "
                         f"or expired (up to {worst:.0%}): rewrite them")
        if self.kept:
            lines.append(f"{self.kept} file(s) whose rows' ttl counts from their commit time: left as they are "
                         f"until their rows expired (a rewrite would make them outlive it)")
        if self.tombstoned:
            lines.append(f"{self.tombstoned} file(s) with rows hidden by tombstones: "
                         + ("rewrite them without those rows" if s.tombstones else "left (services.tombstones is false)"))
        for spec, count in self.outdated:
            lines.append(f"{count} file(s) of partition spec {spec}, older than the current spec "
                         f"{self.current_spec}: " + ("rewrite them into it" if s.partition_specs
                                                   else "left (services.partition.specs is false)"))
        for partition, count in self.small:
            lines.append(f"{count} small files in partition {_partition(partition)} (at least {s.small_files}): "
                         f"bin-pack them")
        lines.append(f"next checkpoint at revision {self.next_checkpoint}")
        lines.append(f"log expiry: {'commits older than ' + str(s.log_retention) if s.log_retention else 'off'}; "
                     f"vacuum: {'files older than ' + str(s.vacuum_retention) if s.vacuum_retention else 'off'}")
        if self.empty:
            lines.append("nothing to do")
        return lines


def inline_pace(descriptor: "DatasetDescriptor") -> int:
    """The most index buckets an inline pass merges: as many as keep up with writes that add
    a delta to every bucket at each commit (a merge takes ``index.compaction.deltas`` of them
    or more), so that buckets falling due at one commit, as all do after writes of random
    keys, are merged over the next few commits rather than all after one (at 10M rows, a
    4 s pass every eighth upsert of 1M rows)."""
    keyed = descriptor.keyed
    return -(-keyed.buckets // max(1, keyed.compaction_deltas - 1))


def plan_services(store: "ObjectStore", snapshot: "Snapshot", now_ms: int,
                  settings: ServiceSettings | None = None, scope: ServiceScope | None = None) -> ServicePlan:
    """The work the services would do on ``snapshot`` at ``now_ms``, all of it (see
    :meth:`ServicePlan.within` for one pass's share): in the data files of ``scope`` (an
    inline pass's: what its write touched), of the whole dataset when it is ``None``. Index
    buckets are always looked at (their files are few, and in the snapshot's memory)."""
    descriptor = snapshot.descriptor
    settings = settings or descriptor.services
    small_size = settings.file_size * SMALL_FILE_FRACTION
    by_partition: dict[tuple, list[AddFile]] = defaultdict(list)
    current = descriptor.partition_spec_id
    files_seen = _candidates(snapshot, settings) if scope is None else _in_scope(snapshot, scope, settings)
    for f in files_seen:
        # an older spec's files are rewritten together, whatever their partition: their rows are partitioned anew
        by_partition[(f.spec_id, partition_key(f) if f.spec_id == current else ())].append(f)
    outdated: dict[int, int] = defaultdict(int)
    moment = now_ms - now_ms % MOMENT_MS  # expiry counted as of the minute, so that counts are remembered
    deleted: list[tuple[AddFile, float]] = []
    tombstoned = kept = 0
    crowded: list[tuple[tuple, int]] = []
    ranked: list[tuple[tuple, RewriteGroup]] = []
    for (spec, partition), files in by_partition.items():
        urgency: dict[str, tuple] = {}  # files due for a rewrite, most deleted first, then tombstoned ones
        small = []
        reasons = ("deleted", "tombstones", f"partition spec {spec}")
        for f in files:
            if not keeps_expiry(descriptor, f, now_ms):
                kept += 1
                continue
            if spec != current:
                outdated[spec] += 1
                if settings.partition_specs:
                    urgency[f.path] = (2, 0.0)  # unless deleted rows or tombstones rank it higher
            if snapshot.tombstones_for(f):
                tombstoned += 1
                if settings.tombstones:
                    urgency[f.path] = (1, 0.0)
                continue  # its deleted fraction is not counted
            fraction = DEAD_ROWS.fraction(store, snapshot, f, moment)
            if fraction >= settings.deleted_fraction:
                urgency[f.path] = (0, -fraction)
                deleted.append((f, fraction))
            elif f.size < small_size and spec == current:  # an older spec's: rewritten for its spec or left
                small.append(f)
        if len(small) >= settings.small_files:
            crowded.append((partition, len(small)))
        elif not urgency:
            continue
        due = [f for f in files if f.path in urgency]
        for group in bin_pack(due + small, settings.file_size):
            ranks = [urgency[f.path] for f in group if f.path in urgency]
            if ranks or len(group) > 1:  # a small file alone is not worth a rewrite
                reason = reasons[min(ranks)[0]] if ranks else "small"
                ranked.append(((min(ranks, default=(3, 0.0)), -len(group)), RewriteGroup(partition, group, reason)))
    ranked.sort(key=lambda item: item[0])
    groups = [g for _, g in ranked]
    deleted.sort(key=lambda item: -item[1])
    crowded.sort(key=lambda item: -item[1])
    buckets: list[BucketMerge] = []
    if descriptor.record_key:
        threshold = descriptor.keyed.compaction_deltas
        for bucket in sorted({e.bucket for e in snapshot.index.values()}):
            files = snapshot.index_files(bucket)
            deltas = sum(not f.base for f in files)
            if deltas >= threshold:
                buckets.append(BucketMerge(bucket, deltas, sum(f.size for f in files)))
        buckets.sort(key=lambda m: -m.deltas)
    interval = checkpoint_interval(descriptor)
    return ServicePlan(settings, tuple(groups), tuple(buckets), tuple((f.path, x) for f, x in deleted), tuple(crowded),
                       tombstoned, (snapshot.version // interval + 1) * interval,
                       settings.log_retention is not None, settings.vacuum_retention is not None,
                       current_spec=current, kept=kept, outdated=tuple(sorted(outdated.items())))


def _candidates(snapshot: "Snapshot", settings: ServiceSettings) -> Iterable[AddFile]:
    """The files the services may have work for: without TTL (whose rules are read per
    file), the small ones, those whose deletion vectors reach the threshold and those a
    tombstone may apply to, and those of older partition specs — picked column-wise, so the files of a large dataset with
    nothing to do are never made objects (the rest decide nothing below)."""
    if TimeToLive.of(snapshot.descriptor) is not None:
        return snapshot.files.values()
    files = snapshot.files.table()
    if not len(files):
        return ()
    table = files.table
    rows = table.column("rows")
    due = pc.or_(pc.less(table.column("size"), settings.file_size * SMALL_FILE_FRACTION),
                 pc.and_(pc.greater(rows, 0), pc.greater_equal(
                     pc.divide(pc.cast(table.column("deleted_rows"), pa.float64()), pc.cast(rows, pa.float64())),
                     settings.deleted_fraction)))
    if "spec" in table.schema.names:
        due = pc.or_(due, pc.not_equal(table.column("spec"), snapshot.descriptor.partition_spec_id))
    for tombstone in snapshot.tombstones:
        applies = FileFilter.of(bind(tombstone.predicate, snapshot.descriptor.fields), snapshot.descriptor)
        due = pc.or_(due, pc.and_(pc.less(table.column("revision"), tombstone.revision),
                                  may_match_mask(applies, files)))
    return files.filter(due).files()


def _in_scope(snapshot: "Snapshot", scope: ServiceScope, settings: ServiceSettings) -> list[AddFile]:
    """The files of an inline pass: those of ``scope``, and (unless
    ``services.partition.specs`` is false) those of older partition specs wherever they lie,
    found by their spec alone (checkpoint parts of the current spec only are not read)."""
    files = scope.files(snapshot)
    descriptor = snapshot.descriptor
    if not descriptor.has_past_specs or not settings.partition_specs:
        return files
    older = FileFilter(ALWAYS_TRUE, BoundPredicate("ne", SPEC_NAME, descriptor.partition_spec_id, kind="long"),
                       by_spec=True)
    seen = {f.path for f in files}
    return files + [f for f in snapshot.files.matching(older) if f.path not in seen]


def _partition(key: tuple) -> str:
    spec = dict(key).get(SPEC_NAME)
    text = ", ".join(f"{k}={v}" for k, v in key if k != SPEC_NAME) or "(unpartitioned)"
    return text if spec is None else f"{text} (partition spec {spec})"


class _DeadRows:
    """The deleted fraction of data files, remembered per file and set of rules (files are
    immutable; a new tombstone, deletion vector or TTL moment makes a new entry)."""

    def __init__(self, capacity: int = 65536):
        self._known: BoundedCache[float] = BoundedCache(capacity, lambda _: 1)

    def fraction(self, store: "ObjectStore", snapshot: "Snapshot", f: AddFile, now_ms: int) -> float:
        if f.row_count <= 0:
            return 0.0
        task = file_task(snapshot, f, now_ms)
        if task.visible is ALWAYS_TRUE or not may_have_expired(snapshot.descriptor, f, now_ms):
            return f.deleted_rows / f.row_count  # tombstones are not counted: a file they apply to is rewritten anyway
        key = (store.url, f.path, len(f.deletes), task.tombstones, str(task.visible))
        known = self._known.get(key)
        if known is not None:
            return known
        descriptor = snapshot.descriptor
        names = set()
        for rule in (*task.tombstones, task.visible):
            names |= references(rule)  # the columns the rules read: a fraction of the file's bytes
        columns = [n for n in descriptor.fields if n in names] or [next(iter(descriptor.fields))]
        live = sum(b.num_rows for b in read_task(store, descriptor, ALWAYS_TRUE, columns, task))
        fraction = 1 - live / f.row_count
        self._known.put(key, fraction)
        return fraction


DEAD_ROWS = _DeadRows()
