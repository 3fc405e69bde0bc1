"""Topic names: ``persistent://tenant/namespace/local``, partitions ``<topic>-partition-<i>``."""

from __future__ import annotations

from .errors import InvalidTopicName

PARTITION_SUFFIX = "-partition-"


def fully_qualified(topic: str) -> str:
    """Expand ``x`` and ``tenant/ns/x`` to ``persistent://tenant/ns/x`` (defaults public/default)."""
    if "://" in topic:
        scheme, rest = topic.split("://", 1)
        if scheme not in ("persistent", "non-persistent") or len(rest.split("/")) < 3:
            raise InvalidTopicName(topic)
        return topic
    parts = topic.split("/")
    if len(parts) == 1 and parts[0]:
        return f"persistent://public/default/{topic}"
    if len(parts) == 3 and all(parts):
        return f"persistent://{topic}"
    raise InvalidTopicName(topic)


def partition_name(topic: str, index: int) -> str:
    return f"{topic}{PARTITION_SUFFIX}{index}"


def base_topic(topic: str) -> str:
    """Strip a ``-partition-N`` suffix."""
    head, sep, tail = topic.rpartition(PARTITION_SUFFIX)
    return head if sep and tail.isdigit() else topic


def partition_index(topic: str) -> int:
    """The N of ``-partition-N``, or -1."""
    head, sep, tail = topic.rpartition(PARTITION_SUFFIX)
    return int(tail) if sep and tail.isdigit() else -1


def namespace_of(topic: str) -> str:
    """``tenant/ns`` of a fully qualified topic."""
    rest = fully_qualified(topic).split("://", 1)[1]
    tenant, ns = rest.split("/")[:2]
    return f"{tenant}/{ns}"
