"""Tags: names for revisions that expiry and vacuum keep readable (``docs/FORMAT.md`` §12).

A tag is a commit of its own (operation ``tag``, a :class:`Tag` action) on a dataset's log;
the first raises the log to :data:`LAYOUT_PROTOCOL` in the same commit, so older readers,
which would expire the tagged revision, refuse the dataset. Tagging writes a checkpoint at
the tagged revision when it has none: once the commits before it are expired, that
checkpoint is the revision's state. Untagging (:class:`Untag`) ends the pin.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from cdkds.catalog.errors import CdkdsError, RefError, RefExistsError, RefNotFoundError
from cdkds.catalog.log.actions import LAYOUT_PROTOCOL, PARTED_CHECKPOINT_PROTOCOL, Action, SetProtocol, Tag, Untag
from cdkds.catalog.log.snapshot import Snapshot

if TYPE_CHECKING:
    from cdkds.catalog.log.transaction import TransactionLog

TAG = "tag"
UNTAG = "untag"
TAG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_tag_name(dataset: str, name: Any) -> str:
    """``name`` when it can name a tag; :class:`RefError` naming the dataset and the name otherwise."""
    if not isinstance(name, str) or not TAG_NAME.fullmatch(name):
        raise RefError(f"dataset {dataset!r}: {name!r} cannot name a tag: a tag name is 1 to 128 letters, digits, "
                       f"'.', '_' or '-', starting with a letter or digit")
    return name


@dataclass(frozen=True)
class TagPlan:
    """The commit that tags ``state`` (the tagged revision's snapshot)."""

    actions: tuple[Action, ...]
    info: Mapping[str, Any]
    state: Snapshot

    @property
    def revision(self) -> int:
        return self.state.version


def plan_tag(log: "TransactionLog", base: Snapshot, name: str, version: int | None) -> TagPlan:
    """Tag ``name`` of revision ``version`` (``None``: ``base``'s) to commit after ``base``,
    the tagged revision's checkpoint written first when it has none. :class:`RefExistsError`
    when ``base`` has the tag already, :class:`RefError` for a malformed name, a revision
    the log does not hold (unknown, expired, not yet written) or a log below protocol 4."""
    dataset = log.dataset
    check_tag_name(dataset, name)
    if name in base.tags:
        raise RefExistsError(f"dataset {dataset!r}: tag {name!r} exists already (revision {base.tags[name]}); "
                             f"untag it first to move it")
    if base.protocol.reader_version < PARTED_CHECKPOINT_PROTOCOL:
        raise RefError(f"dataset {dataset!r}: tag {name!r} needs log version {LAYOUT_PROTOCOL} and this dataset's log "
                       f"is at version {base.protocol.reader_version}: run `cdkds upgrade` (Dataset.upgrade_log()) first")
    revision = base.version if version is None else version
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        raise RefError(f"dataset {dataset!r}: tag {name!r} needs a revision number >= 0, got {version!r}")
    state = base
    if revision != base.version:
        try:
            state = log.snapshot(version=revision)
        except CdkdsError as e:
            raise RefError(f"dataset {dataset!r}: tag {name!r} cannot name revision {revision}: {e}") from None
    if revision > 0:  # commit 0 is never expired
        log.write_checkpoint(state)
    actions: tuple[Action, ...] = (Tag(name, revision),)
    protocol = base.protocol
    if protocol.reader_version < LAYOUT_PROTOCOL or protocol.writer_version < LAYOUT_PROTOCOL:
        actions = (SetProtocol(max(protocol.reader_version, LAYOUT_PROTOCOL),
                               max(protocol.writer_version, LAYOUT_PROTOCOL)), *actions)
    return TagPlan(actions, {"tag": name, "revision": revision}, state)


def plan_untag(dataset: str, base: Snapshot, name: str) -> tuple[Action, ...]:
    """The actions that end tag ``name``; :class:`RefNotFoundError` when ``base`` has no such tag."""
    tag_of(dataset, base, name)
    return (Untag(name),)


def lost_to_expiry(log: "TransactionLog", plan: TagPlan) -> bool:
    """Whether the tagged revision's state is gone although the tag committed: an expiry that
    read the tags before ours landed deleted its checkpoint (and the commits before it). It is
    written again from the state in memory where the parts that state is read from survive."""
    if plan.revision == 0 or log.listing.checkpoint(plan.revision) is not None:
        return False
    try:
        log.write_checkpoint(plan.state)
    except CdkdsError:
        return True
    return log.listing.checkpoint(plan.revision) is None


def tag_of(dataset: str, snapshot: Snapshot, name: str) -> int:
    """The revision tag ``name`` names in ``snapshot``; :class:`RefNotFoundError` when it has none."""
    check_tag_name(dataset, name)
    if name not in snapshot.tags:
        known = ", ".join(repr(t) for t in sorted(snapshot.tags)) or "none"
        raise RefNotFoundError(f"dataset {dataset!r} has no tag {name!r} (its tags: {known})")
    return snapshot.tags[name]
