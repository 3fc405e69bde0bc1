"""Enums and small option classes mirroring the official ``pulsar`` package's names and values."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .protocol import pulsar_api_pb2 as pb


class ConsumerType(enum.IntEnum):
    Exclusive = 0
    Shared = 1
    Failover = 2
    KeyShared = 3


class CompressionType(enum.IntEnum):
    NONE = pb.NONE
    LZ4 = pb.LZ4
    ZLib = pb.ZLIB
    ZSTD = pb.ZSTD
    SNAPPY = pb.SNAPPY


class InitialPosition(enum.IntEnum):
    Latest = 0
    Earliest = 1


class PartitionsRoutingMode(enum.IntEnum):
    UseSinglePartition = 0
    RoundRobinDistribution = 1
    CustomPartition = 2


class ProducerAccessMode(enum.IntEnum):
    Shared = 0
    Exclusive = 1
    WaitForExclusive = 2
    ExclusiveWithFencing = 3


class RegexSubscriptionMode(enum.IntEnum):
    PersistentOnly = 0
    NonPersistentOnly = 1
    AllTopics = 2


class BatchingType(enum.IntEnum):
    Default = 0
    KeyBased = 1


class Result(enum.IntEnum):
    """Outcome passed to ``send_async`` callbacks (subset of the official ``pulsar.Result``)."""

    Ok = 0
    UnknownError = 1
    InvalidConfiguration = 2
    Timeout = 3
    LookupError = 4
    ConnectError = 5
    ReadError = 6
    AlreadyClosed = 12
    ProducerQueueIsFull = 23
    MessageTooBig = 24
    TopicTerminated = 29
    ProducerFenced = 47


@dataclass
class ConsumerDeadLetterPolicy:
    """Send a message to ``dead_letter_topic`` once it was redelivered ``max_redeliver_count`` times."""

    max_redeliver_count: int
    dead_letter_topic: str | None = None
    initial_subscription_name: str | None = None


@dataclass
class BatchReceivePolicy:
    """Limits of ``Consumer.batch_receive`` (-1 = no limit on that axis)."""

    max_num_messages: int = -1
    max_num_bytes: int = 10 * 1024 * 1024
    timeout_ms: int = 100
