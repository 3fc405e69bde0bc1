"""``MessageId``: (ledger, entry, partition, batch_index), compatible with the official client.

Equality compares all four fields; ordering compares (ledger, entry, batch_index) and ignores the
partition, as ``pulsar.MessageId`` does. ``serialize()`` produces the same bytes as the official
client (a ``MessageIdData`` protobuf, partition and batch index only when not -1), so ids can be
stored by one client and used by the other.
"""

from __future__ import annotations

from typing import Any

from .protocol import commands as cmds
from .protocol.pulsar_api_pb2 import MessageIdData

_INT64_MAX = cmds.INT64_MAX


class MessageId:
    """A message's position: ledger, entry, partition index (-1: none) and batch index (-1: none)."""

    __slots__ = ("_ledger", "_entry", "_partition", "_batch", "batch_size", "topic", "chunk_ids")

    earliest: "MessageId"
    latest: "MessageId"

    def __init__(self, partition: int = -1, ledger_id: int = -1, entry_id: int = -1, batch_index: int = -1,
                 batch_size: int = 0, topic: str | None = None) -> None:
        self._ledger = ledger_id
        self._entry = entry_id
        self._partition = partition
        self._batch = batch_index
        self.batch_size = batch_size  # messages in the batch this id belongs to (0: not a batch)
        self.topic = topic  # the consumer's topic (lets a multi-topic consumer route acks by id)
        # For a chunked message: the (ledger, entry) of every chunk, first to last.
        self.chunk_ids: tuple[tuple[int, int], ...] = ()

    def ledger_id(self) -> int:
        return self._ledger

    def entry_id(self) -> int:
        return self._entry

    def batch_index(self) -> int:
        return self._batch

    def partition(self) -> int:
        return self._partition

    # -- serialisation ----------------------------------------------------------------------------

    def to_proto(self, *, with_batch: bool = True) -> MessageIdData:
        return cmds.message_id(
            self._ledger,
            self._entry,
            self._partition if self._partition != -1 else None,
            self._batch if with_batch and self._batch != -1 else None,
            batch_size=self.batch_size or None,
        )

    def serialize(self) -> bytes:
        """The official client's byte representation (a MessageIdData)."""
        mid = self.to_proto()
        if len(self.chunk_ids) > 1:
            first = self.chunk_ids[0]
            mid.first_chunk_message_id.CopyFrom(cmds.message_id(first[0], first[1]))
        return mid.SerializeToString()

    @staticmethod
    def deserialize(data: bytes, topic: str | None = None) -> "MessageId":
        """Inverse of ``serialize`` (also accepts bytes from the official client)."""
        mid = MessageIdData()
        mid.ParseFromString(data)
        return MessageId.from_proto(mid, topic=topic)

    @staticmethod
    def from_proto(mid: MessageIdData, *, topic: str | None = None, partition: int | None = None) -> "MessageId":
        ledger, entry, part, batch = cmds.message_id_tuple(mid)
        out = MessageId(part if partition is None else partition, ledger, entry, batch)
        out.batch_size = mid.batch_size
        out.topic = topic
        return out

    @staticmethod
    def coerce(value: Any) -> "MessageId":
        """Accept our ids, the official client's ids (anything with ``serialize()``)."""
        if isinstance(value, MessageId):
            return value
        if hasattr(value, "serialize"):
            return MessageId.deserialize(value.serialize())
        raise TypeError(f"not a message id: {value!r}")

    # -- comparison ---------------------------------------------------------------------------

    def _key(self) -> tuple[int, int, int]:
        return (self._ledger, self._entry, self._batch)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._key() == other._key() and self._partition == other._partition

    def __hash__(self) -> int:
        return hash((self._ledger, self._entry, self._partition, self._batch))

    def __lt__(self, other: "MessageId") -> bool:
        return self._key() < other._key()

    # As the C++ MessageId: <= is "< or ==" (== includes the partition), > and >= negate them.
    def __le__(self, other: "MessageId") -> bool:
        return self < other or self == other

    def __gt__(self, other: "MessageId") -> bool:
        return not self <= other

    def __ge__(self, other: "MessageId") -> bool:
        return not self < other

    def __str__(self) -> str:
        return f"({self._ledger},{self._entry},{self._partition},{self._batch})"

    __repr__ = __str__

    def is_earliest(self) -> bool:
        return self._ledger == -1 and self._entry == -1

    def is_latest(self) -> bool:
        return self._ledger == _INT64_MAX and self._entry == _INT64_MAX


MessageId.earliest = MessageId(-1, -1, -1, -1)
MessageId.latest = MessageId(-1, _INT64_MAX, _INT64_MAX, -1)
