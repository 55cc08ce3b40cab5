"""The descriptor properties of the mirrors: ``mirror.delta`` and ``mirror.iceberg``, each
``true`` or ``false`` (default), checked when set: a misspelt ``mirror.*`` name, a value that
is not a boolean, or a dataset the format cannot describe (the mirror's ``refusal``) raise
:class:`InvalidDescriptorError` naming the property and the reason."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

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
