"""Writing checkpoints: every ``checkpoint.interval`` commits, and on request.

A checkpoint is derived data (the state of its revision), so a damaged one may be
replaced: writing the checkpoint of a revision whose object fails to read overwrites it.
"""

from __future__ import annotations

import json
import warnings

from cdkds.catalog.descriptor import DatasetDescriptor
from cdkds.catalog.errors import CorruptLogWarning
from cdkds.catalog.log import checkpoint
from cdkds.catalog.log.listing import HINT_KEY, LogListing, checkpoint_key
from cdkds.catalog.log.snapshot import Snapshot

DEFAULT_CHECKPOINT_INTERVAL = 10


def checkpoint_interval(descriptor: DatasetDescriptor) -> int:
    return int(descriptor.properties.get("checkpoint.interval", DEFAULT_CHECKPOINT_INTERVAL))


class Checkpointer:
    """Writes the checkpoints of one dataset and points the hint at the newest."""

    def __init__(self, listing: LogListing):
        self.listing = listing
        self.store = listing.store

    def write(self, snapshot: Snapshot) -> None:
        """Write the checkpoint of ``snapshot`` (replacing a damaged one) and point the hint at it."""
        key = checkpoint_key(snapshot.version)
        data = checkpoint.encode(snapshot)
        try:
            self.store.put_if_absent(key, data)
        except FileExistsError:
            existing = self.listing.fetch(key)
            if existing is not None and self.listing.decode_checkpoint(existing, snapshot.version) is None:
                self.store.put(key, data)  # it was damaged; a checkpoint of a revision has one possible content
        hint = self.listing.hint()
        if hint is None or hint < snapshot.version:
            self.store.put(HINT_KEY, json.dumps({"revision": snapshot.version}).encode())

    def after_commit(self, snapshot: Snapshot) -> None:
        """Write the checkpoint of a revision the interval falls on; a failure only warns."""
        if snapshot.version % checkpoint_interval(snapshot.descriptor) == 0:
            try:
                self.write(snapshot)
            except Exception as e:  # noqa: BLE001 - the commit stands; the next checkpoint or listing covers it
                warnings.warn(f"dataset {self.listing.dataset!r}: checkpoint at revision {snapshot.version} "
                              f"failed: {e}", CorruptLogWarning, stacklevel=4)
