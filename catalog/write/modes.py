"""The write modes of a dataset's writer: what else a commit does besides adding its files —
nothing (append), remove every live file (overwrite), remove the live files of the
partitions written (dynamic partition overwrite), or remove the files a compaction rewrote."""

from __future__ import annotations

from abc import ABC, abstractmethod

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import CdkdsError
from cdkds.catalog.log.actions import Action, AddFile, RemoveFile
from cdkds.catalog.log.conflicts import BlindAppend, ConflictRule, ReadPartitions, ReplacePartitions, Rewrite
from cdkds.catalog.log.snapshot import Snapshot


class WriteMode(ABC):
    """What a writer's commit removes besides adding its files, and what it assumes."""

    operation: str

    @abstractmethod
    def plan(self, base: Snapshot, adds: list[AddFile], own: set[str], first: bool) -> tuple[list[Action], ConflictRule]:
        """The removals for a commit of ``adds`` on ``base``; ``own`` holds the files this writer
        committed before, ``first`` says whether this is its first commit."""

    def commits_without_files(self, first: bool) -> bool:
        """Whether a commit that adds no file still changes the dataset (so must be made)."""
        return False


class Append(WriteMode):
    operation = "append"

    def plan(self, base: Snapshot, adds: list[AddFile], own: set[str], first: bool) -> tuple[list[Action], ConflictRule]:
        return [], BlindAppend()


class Overwrite(WriteMode):
    """Replace the whole dataset, atomically: the first commit removes every live file."""

    operation = "overwrite"

    def plan(self, base: Snapshot, adds: list[AddFile], own: set[str], first: bool) -> tuple[list[Action], ConflictRule]:
        if not first:
            return [], BlindAppend()  # a later flush of the same overwrite only adds
        return [RemoveFile(p) for p in base.files], ReadPartitions()

    def commits_without_files(self, first: bool) -> bool:
        return first  # an overwrite with no rows still empties the dataset


class PartitionOverwrite(WriteMode):
    """Replace only the partitions written (Spark's dynamic partition overwrite); after a
    change of partition strategy, also the files of older specs wholly inside them
    (:class:`ReplacePartitions`: refused when a file may lie both inside and outside)."""

    operation = "overwrite_partitions"

    def __init__(self, names: list[str], dataset: str = ""):
        self.names = tuple(names)
        self.dataset = dataset

    def plan(self, base: Snapshot, adds: list[AddFile], own: set[str], first: bool) -> tuple[list[Action], ConflictRule]:
        rule = ReplacePartitions(frozenset(tuple(a.partition.get(n) for n in self.names) for a in adds), self.names,
                                 self.dataset)
        return [RemoveFile(f.path) for f in rule.replaced(base) if f.path not in own], rule


class RewriteFiles(WriteMode):
    """Compaction: the new files replace ``files``, whose rows (less tombstoned ones) they hold."""

    operation = "compact"

    def __init__(self, files: list[AddFile]):
        self.files = tuple(files)

    def plan(self, base: Snapshot, adds: list[AddFile], own: set[str], first: bool) -> tuple[list[Action], ConflictRule]:
        return [RemoveFile(f.path) for f in self.files], Rewrite(self.files)

    def commits_without_files(self, first: bool) -> bool:
        return first  # files whose rows are all deleted are removed and replaced by nothing


def write_mode(mode: "str | WriteMode", descriptor: DatasetDescriptor, dataset: str = "") -> WriteMode:
    """The write mode named ``mode`` for dataset ``dataset`` with ``descriptor``."""
    if isinstance(mode, WriteMode):
        return mode
    modes = {"append": Append, "overwrite": Overwrite}
    if mode in modes:
        return modes[mode]()
    if mode in ("overwrite_partitions", "dynamic"):
        strategy = descriptor.partition_strategy
        return PartitionOverwrite(strategy.names if strategy is not None else [], dataset)
    raise CdkdsError(f"unknown write mode {mode!r}; use 'append', 'overwrite' or 'overwrite_partitions'")
