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


class KeySharedMode(enum.IntEnum):
    AutoSplit = 0
    Sticky = 1


class BatchingType(enum.IntEnum):
    Default = 0
    KeyBased = 1


class Result(enum.IntEnum):
    """Outcome passed to ``send_async`` callbacks (the official ``pulsar.Result`` names and values)."""

    Ok = 0
    UnknownError = 1
    InvalidConfiguration = 2
    Timeout = 3
    LookupError = 4
    ConnectError = 5
    ReadError = 6
    AuthenticationError = 7
    AuthorizationError = 8
    ErrorGettingAuthenticationData = 9
    BrokerMetadataError = 10
    BrokerPersistenceError = 11
    ChecksumError = 12
    ConsumerBusy = 13
    NotConnected = 14
    AlreadyClosed = 15
    InvalidMessage = 16
    ConsumerNotInitialized = 17
    ProducerNotInitialized = 18
    ProducerBusy = 19
    TooManyLookupRequestException = 20
    InvalidTopicName = 21
    InvalidUrl = 22
    ServiceUnitNotReady = 23
    OperationNotSupported = 24
    ProducerBlockedQuotaExceededError = 25
    ProducerBlockedQuotaExceededException = 26
    ProducerQueueIsFull = 27
    MessageTooBig = 28
    TopicNotFound = 29
    SubscriptionNotFound = 30
    ConsumerNotFound = 31
    UnsupportedVersionError = 32
    TopicTerminated = 33
    CryptoError = 34
    IncompatibleSchema = 35
    ConsumerAssignError = 36
    CumulativeAcknowledgementNotAllowedError = 37
    TransactionCoordinatorNotFoundError = 38
    InvalidTxnStatusError = 39
    NotAllowedError = 40
    TransactionConflict = 41
    TransactionNotFound = 42
    ProducerFenced = 43
    MemoryBufferIsFull = 44
    Interrupted = 45


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


ConsumerBatchReceivePolicy = BatchReceivePolicy  # the official package's name for it


class ConsumerKeySharedPolicy:
    """Key_Shared options with the official signature and read-only properties: hash ranges are
    inclusive ``(start, end)`` pairs within 0..65535, required in Sticky mode."""

    def __init__(
        self,
        key_shared_mode: KeySharedMode = KeySharedMode.AutoSplit,
        allow_out_of_order_delivery: bool = False,
        sticky_ranges: list[tuple[int, int]] | None = None,
    ) -> None:
        if int(key_shared_mode) == KeySharedMode.Sticky and sticky_ranges is None:
            raise ValueError("When using key_shared_mode = KeySharedMode.Sticky you must also provide sticky_ranges")
        self._mode = KeySharedMode(int(key_shared_mode))
        self._out_of_order = allow_out_of_order_delivery
        self._ranges = list(sticky_ranges or [])

    @property
    def key_shared_mode(self) -> KeySharedMode:
        return self._mode

    @property
    def allow_out_of_order_delivery(self) -> bool:
        return self._out_of_order

    @property
    def sticky_ranges(self) -> list[tuple[int, int]]:
        return list(self._ranges)
