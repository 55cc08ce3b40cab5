"""The descriptor properties of the mirrors: ``mirror.delta`` and ``mirror.iceberg``, each
``true`` or ``false`` (default), checked when set: a misspelt ``mirror.*`` name, a value that
is not a boolean, or a dataset the format cannot describe (the mirror's ``refusal``) raise
:class:`InvalidDescriptorError` naming the property and the reason."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping

from cdkds.catalog.errors import InvalidDescriptorError

if TYPE_CHECKING:
    from cdkds.catalog.descriptor import DatasetDescriptor

MIRROR_FORMATS = ("delta", "iceberg")
MIRROR_PROPERTIES = tuple(f"mirror.{name}" for name in MIRROR_FORMATS)


def enabled_mirrors(props: Mapping[str, str], recorded: bool = False) -> tuple[str, ...]:
    """The formats whose property is ``true`` (``recorded``: a malformed value, in a
    descriptor read back from a log, is ``false``)."""
    unknown = sorted(k for k in props if k.startswith("mirror.") and k not in MIRROR_PROPERTIES)
    if unknown and not recorded:
        raise InvalidDescriptorError(f"property {unknown[0]} is not a mirror; the mirrors are "
                                     f"{', '.join(MIRROR_PROPERTIES)}")
    out = []
    for name, prop in zip(MIRROR_FORMATS, MIRROR_PROPERTIES):
        text = props.get(prop)
        if text is None:
            continue
        value = text.strip().lower() if isinstance(text, str) else text
        if value not in ("true", "false"):
            if recorded:
                continue
            raise InvalidDescriptorError(f"property {prop} must be true or false, got {text!r}")
        if value == "true":
            out.append(name)
    return tuple(out)


def check_mirrors(descriptor: "DatasetDescriptor") -> None:
    """Refuse a descriptor that enables a mirror its format cannot describe, with the reason."""
    from cdkds.catalog.mirror.runner import mirror_class
    for name in enabled_mirrors(descriptor.properties):
        reason = mirror_class(name).refusal(descriptor)
        if reason is not None:
            raise InvalidDescriptorError(f"property mirror.{name}: {reason}")


def spec_refusal(descriptor: "DatasetDescriptor", described: Callable[[int], Any], table: str) -> str | None:
    """Why a dataset whose partition strategy changed cannot be mirrored (None: it can): a
    mirror table has one partitioning, the partitions it describes (``described(spec_id)``)
    of every spec must be the same — a change of the functions it does not describe (hash,
    ranges, calendar...) is invisible to its readers."""
    if not descriptor.has_past_specs:
        return None
    current = described(descriptor.partition_spec_id)
    for spec_id, strategy in sorted(descriptor.partition_specs.items()):
        if described(spec_id) != current:
            now = descriptor.partition_strategy
            return (f"the partition strategy changed ({strategy.to_text() if strategy else 'unpartitioned'}, partition "
                    f"spec {spec_id}, to {now.to_text() if now else 'unpartitioned'}, spec "
                    f"{descriptor.partition_spec_id}) and files keep the spec they were written with, but a "
                    f"{table} table has one partitioning for all its files: the partitions it would describe differ "
                    f"({_described_text(described(spec_id))} -> {_described_text(current)})")
    return None


def _described_text(described: Any) -> str:
    return ", ".join(map(str, described)) or "none"
