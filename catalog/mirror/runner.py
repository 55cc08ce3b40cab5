"""Keeping mirrors in step: after every commit (:func:`after_commit`, called by the log like
its checkpoints) and on demand (:func:`update_mirrors`: ``cdkds mirror``, ``Dataset.mirror``).

A mirror brings itself up to a revision from wherever it stopped, so a mirror write that
failed (reported as a :class:`MirrorWarning`; the commit stands) is redone by the next commit
or an update on demand.
"""

from __future__ import annotations

import importlib
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from cdkds.catalog.errors import CdkdsError, MirrorWarning
from cdkds.catalog.mirror.settings import MIRROR_FORMATS, enabled_mirrors

if TYPE_CHECKING:
    from cdkds.catalog.log import TransactionLog
    from cdkds.catalog.log.snapshot import Snapshot
    from cdkds.catalog.storage import ObjectStore

MIRROR_FOLDERS = {"delta": "_delta_log", "iceberg": "metadata"}  # in the dataset's folder
_CLASSES = {"delta": ("cdkds.catalog.mirror.delta", "DeltaMirror"),
            "iceberg": ("cdkds.catalog.mirror.iceberg", "IcebergMirror")}


def mirror_class(name: str) -> type:
    """The class that writes mirror ``name`` (``delta`` or ``iceberg``)."""
    if name not in _CLASSES:
        raise CdkdsError(f"unknown mirror {name!r}; the mirrors are {', '.join(MIRROR_FORMATS)}")
    module, cls = _CLASSES[name]
    return getattr(importlib.import_module(module), cls)


def present_mirrors(store: "ObjectStore", dataset: str) -> list:
    """The mirrors written in the dataset's folder (whether or not a property asks for them)."""
    mirrors = [mirror_class(name)(store, dataset) for name in MIRROR_FORMATS]
    return [m for m in mirrors if m.version() is not None]


@dataclass(frozen=True)
class MirrorReport:
    """What one update of mirror ``name`` did: the revision it now describes (``None``: none
    yet), the versions it wrote and how long it took."""

    name: str
    version: int | None
    written: int
    seconds: float

    def summary(self) -> str:
        state = "no version" if self.version is None else f"revision {self.version}"
        return f"{self.name}: {state} ({self.written} version{'s' * (self.written != 1)} written, {self.seconds:.2f} s)"


def update_mirrors(log: "TransactionLog", snapshot: "Snapshot", names: Iterable[str] | None = None
                   ) -> list[MirrorReport]:
    """Bring mirrors ``names`` (default: those the descriptor enables) up to ``snapshot``, a
    snapshot of ``log``. A format that cannot describe the dataset raises
    :class:`CdkdsError` with the reason; failures of the writes propagate."""
    names = tuple(enabled_mirrors(snapshot.descriptor.properties, recorded=True) if names is None else names)
    reports = []
    for name in names:
        cls = mirror_class(name)
        reason = cls.refusal(snapshot.descriptor)
        if reason is not None:
            raise CdkdsError(f"dataset {log.dataset!r}: cannot mirror as {name}: {reason}")
        start = time.monotonic()
        written = cls(log.store, log.dataset).update(log, snapshot)
        reports.append(MirrorReport(name, snapshot.version, written, time.monotonic() - start))
    return reports


def after_commit(log: "TransactionLog", snapshot: "Snapshot") -> None:
    """Bring the mirrors the descriptor enables up to a revision just committed; a failure
    only warns (the commit stands; the next commit or ``cdkds mirror`` redoes the work)."""
    for name in enabled_mirrors(snapshot.descriptor.properties, recorded=True):
        try:
            update_mirrors(log, snapshot, (name,))
        except Exception as e:  # noqa: BLE001 - derived data: the commit it follows must not fail
            warnings.warn(f"dataset {log.dataset!r}: the {name} mirror of revision {snapshot.version} failed "
                          f"({type(e).__name__}: {e}); the commit stands, and the next commit or `cdkds mirror` "
                          f"writes it", MirrorWarning, stacklevel=4)
