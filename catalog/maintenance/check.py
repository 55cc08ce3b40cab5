"""Checking a dataset end to end (``cdkds check``): its log, checkpoints and every object the log references.

:func:`check_dataset` reads and never writes. It works from the dataset's store and name rather
than from a loaded :class:`~cdkds.catalog.dataset.Dataset`, because a damaged log may not load
at all, and it collects every problem instead of stopping at the first one:

- **the log**: every commit from the oldest retained revision (0, or after expiry the oldest
  checkpoint) to the latest is present, parses (every file it names inside the dataset: a
  relative path without ``..``), matches its checksum and its revision, follows
  the one before it (uuid chain) and is later than it; the chain is replayed as readers replay it;
- **checkpoints**: each parses, matches its checksum and revision, and holds the state replayed
  from the commits (files with their statistics and deletion vectors, tombstones, descriptor,
  protocol, record-index files, application transactions) wherever those commits can be replayed;
  the ``_last_checkpoint`` hint is readable and names a checkpoint that exists;
- **referenced objects**: every data file, record-index file and deletion-vector sidecar that any
  retained revision references exists with the size the log records (one recursive listing per
  top-level folder, never a request per file);
- **contents, as of the latest revision the log replays to**: each record-index file is read whole
  by the index's own reader (size, SHA-256, Parquet page checksums, entry count), each deletion
  vector is loaded (sidecar size, SHA-256 and cardinality) and its positions lie inside its file;
  with ``read_data`` every live data file is also read whole, by the scan's own reader, and must
  hold the rows and the per-column null counts, minimums and maximums the log records.

What it cannot see: the log records no SHA-256 of data files (FORMAT.md §2), so a data file
altered in place that keeps its size is only caught by ``read_data``, and only when it no longer
decodes or its row count or column bounds change. The adds of a missing or unreadable commit are
unknown, so their files are not checked (the report says so). A commit 1 missing below a later
checkpoint reads as an expired prefix, as it does to readers; commits left below the oldest
retained checkpoint by an interrupted expiry are not read. Files no retained revision references
are vacuum's business, not a problem.

Each :class:`Problem` says what it costs: which revisions cannot be read, which reads fail, or
that nothing is lost but something is slower.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from cdkds.catalog.errors import DatasetNotFoundError
from cdkds.catalog.log.commit import commit_key
from cdkds.catalog.log import TransactionLog
from cdkds.catalog.log.listing import LogListing
from cdkds.catalog.mirror.runner import MIRROR_FOLDERS, mirror_class
from cdkds.catalog.mirror.settings import MIRROR_FORMATS
from cdkds.catalog.maintenance.file_check import FileCheck
from cdkds.catalog.maintenance.log_check import LogCheck
from cdkds.catalog.maintenance.problems import PROBLEM_KINDS, Problem, Progress
from cdkds.catalog.storage import ObjectStore

__all__ = ["PROBLEM_KINDS", "CheckReport", "Problem", "check_dataset"]


@dataclass(frozen=True)
class CheckReport:
    """What :func:`check_dataset` checked and found. ``first_revision..latest_revision``: the
    retained log (``None`` when nothing of it could be read); ``checked_revision``: the revision
    whose live index files, deletion vectors (and, with ``contents_read``, data files) were read
    — the latest, unless the log cannot be replayed that far; ``data_files``, ``data_bytes``,
    ``index_files``, ``deletion_vector_files``: the objects of every retained revision checked
    for presence and size; ``notes``: what could not be checked, and why."""

    dataset: str
    first_revision: int | None
    latest_revision: int | None
    checked_revision: int | None
    commits: int
    checkpoints: int
    data_files: int
    data_bytes: int
    index_files: int
    deletion_vector_files: int
    contents_read: bool
    problems: tuple[Problem, ...]
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        out["ok"] = self.ok
        out["problems"] = [p.to_json() for p in self.problems]
        out["notes"] = list(self.notes)
        return out


def check_dataset(store: ObjectStore, name: str, read_data: bool = False,
                  progress: Progress | None = None) -> CheckReport:
    """Check dataset ``name`` whose folder is ``store`` (``repository.store.child(name)``, or
    ``dataset.store``): see the module's documentation. Never writes. Raises
    :class:`DatasetNotFoundError` only when there is no trace of the dataset at all (no log
    object, no data); store errors propagate. ``read_data`` reads every live data file whole."""
    progress = progress or (lambda phase, done, total: None)
    listing = LogListing(store, name)
    listed = listing.list()
    if not listed.commits and not listed.checkpoints:
        return _no_log(store, name)
    log = LogCheck(listing, listed, progress)
    log.run()
    files = FileCheck(store, name, log.refs, log.latest, progress)
    files.check_presence()
    state = log.state or log.last_state
    notes = list(log.notes)
    if state is None:
        notes.append("no revision of the log could be replayed: index files, deletion vectors and data file "
                     "contents were not read")
    else:
        if state.version != log.latest:
            notes.append(f"the log replays only to revision {state.version}: index files, deletion vectors and "
                         f"data file contents were read as of that revision")
        files.check_index(state)
        files.check_vectors(state)
        if read_data:
            files.read_data(state)
            if state.descriptor.record_key and not any(p.kind == "unreadable_index" for p in files.problems):
                files.check_keys(state)
    data = log.refs.of_kind("data")
    problems = [*log.problems, *files.problems, *_mirror_problems(store, name)]
    return CheckReport(name, log.first, log.latest, state.version if state is not None else None, log.commits,
                       log.checkpoints, len(data), sum(r.size for r in data), len(log.refs.of_kind("index")),
                       len(log.refs.of_kind("deletes")), read_data and state is not None,
                       tuple(problems), tuple(notes))


def _mirror_problems(store: ObjectStore, name: str) -> list[Problem]:
    """Where the mirrors in the dataset's folder disagree with the log (see :mod:`cdkds.catalog.mirror`)."""
    out = []
    for mirror_name in MIRROR_FORMATS:
        folder = MIRROR_FOLDERS[mirror_name]
        try:
            mirror = mirror_class(mirror_name)(store, name)
            found = [] if mirror.version() is None else mirror.verify(TransactionLog(store, name))
        except Exception as e:  # noqa: BLE001 - a mirror that cannot be read is what is wrong with it
            found = [f"the {mirror_name} mirror cannot be read: {type(e).__name__}: {e}"]
        out += [Problem("mirror_mismatch", folder, message,
                        f"engines reading the {mirror_name} mirror may see other rows than cdkds; remove {folder}/ "
                        f"and run `cdkds mirror URL --{mirror_name}` to write it again") for message in found]
    return out


def _no_log(store: ObjectStore, name: str) -> CheckReport:
    """The report on a dataset folder whose log holds nothing."""
    data = [key for key, _ in store.walk_files("data")]
    if not data:
        raise DatasetNotFoundError(f"dataset {name!r} does not exist at {store.url}")
    problem = Problem("missing_log", commit_key(0), f"the log is empty but data/ holds {len(data)} files",
                      "the dataset does not exist for readers: every read fails; `cdkds rebuild` rebuilds a log from "
                      "the data files' own metadata")
    return CheckReport(name, None, None, None, 0, 0, 0, 0, 0, 0, False, (problem,))
