"""Topic names as the connector spells them (no I/O: executors import this, not the admin client)."""

from __future__ import annotations

PARTITION_SUFFIX = "-partition-"


def full_topic_name(topic: str) -> str:
    """``t`` -> ``persistent://public/default/t``; ``tenant/ns/t`` -> ``persistent://tenant/ns/t``."""
    if "://" in topic:
        return topic
    parts = topic.split("/")
    if len(parts) == 1:
        return f"persistent://public/default/{topic}"
    if len(parts) == 3:
        return f"persistent://{topic}"
    raise ValueError(f"invalid topic name {topic!r}")


def partition_index(topic: str) -> int:
    """The partition number of a ``...-partition-N`` topic, -1 for a non-partitioned one."""
    return int(topic.rsplit(PARTITION_SUFFIX, 1)[1]) if PARTITION_SUFFIX in topic else -1


def registry_topic(topic: str) -> str:
    """The name the schema registry keys ``topic``'s schemas by (partitions share their topic's)."""
    return topic.rsplit(PARTITION_SUFFIX, 1)[0] if PARTITION_SUFFIX in topic else topic
