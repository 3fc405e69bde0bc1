"""``Message``: what ``receive()`` returns, with the official client's accessor names.

A consumer builds one ``Message`` per received message, on its hottest path, so a message only
stores what differs from its siblings: payload, id, sequence id and the consumer to ack it by.
What all messages of an entry share (topic, publish time, producer, redelivery count, schema)
sits in one ``EntryInfo``, with the entry's position; a batched message adds its batch index, and
its ``MessageId`` is only built when asked for (the blocking consumer acks by message, so a
receive-and-ack loop never builds one). Properties, keys, event time and the null flag, absent
from most messages, sit in an optional ``extra`` tuple. A large payload stays a view into its
batch until ``data()`` is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from .message_id import MessageId

if TYPE_CHECKING:
    from .consumer import Consumer


class EntryInfo(NamedTuple):
    """What the messages of one entry (a batch, or a single message) have in common."""

    topic: str
    publish_timestamp: int = 0
    redelivery_count: int = 0
    producer_name: str = ""
    schema: Any = None
    schema_version: bytes = b""
    # The entry's position (what a batched message's id is built from).
    key: tuple[int, int] = (-1, -1)  # (ledger, entry)
    partition: int = -1
    batch_size: int = 0  # messages in the batch (0: not a batch)


class Extra(NamedTuple):
    """A message's optional metadata (``None`` in its place means all defaults)."""

    properties: dict[str, str] | None = None
    partition_key: str = ""
    ordering_key: bytes = b""
    event_timestamp: int = 0
    null_value: bool = False


_NO_EXTRA = Extra()


def extra_of(properties: dict[str, str] | None, partition_key: str, ordering_key: bytes, event_timestamp: int,
             null_value: bool) -> Extra | None:
    """The ``extra`` of a message, ``None`` when every field is at its default."""
    if properties or partition_key or ordering_key or event_timestamp or null_value:
        return Extra(properties or None, partition_key, ordering_key, event_timestamp, null_value)
    return None


class Message:
    """A received message (payload, metadata and the id to acknowledge it by)."""

    __slots__ = ("_data", "_mid", "_entry", "_batch", "_seq", "_consumer", "_extra")

    def __init__(
        self,
        data: bytes | memoryview,
        message_id: MessageId | None,
        entry: EntryInfo,
        sequence_id: int = -1,
        consumer: "Consumer | None" = None,
        extra: Extra | None = None,
        batch_index: int = -1,
    ) -> None:
        self._data = data
        self._mid = message_id  # None: built from ``entry`` and ``batch_index`` on first use
        self._entry = entry
        self._batch = batch_index
        self._seq = sequence_id
        self._consumer = consumer  # the single-topic consumer that must ack it
        self._extra = extra

    @property
    def _id(self) -> MessageId:
        mid = self._mid
        if mid is None:
            e = self._entry
            key = e.key
            mid = self._mid = MessageId(e.partition, key[0], key[1], self._batch, e.batch_size, e.topic)
        return mid

    def data(self) -> bytes:
        data = self._data
        if type(data) is not bytes:  # a view into its batch: copied once someone reads it
            data = self._data = bytes(data)
        return data

    def value(self) -> Any:
        """The payload decoded by the consumer's schema (bytes when none)."""
        schema = self._entry.schema
        return schema.decode(self.data()) if schema is not None else self.data()

    def properties(self) -> dict[str, str]:
        extra = self._extra
        return dict(extra.properties) if extra is not None and extra.properties else {}

    def partition_key(self) -> str:
        return (self._extra or _NO_EXTRA).partition_key

    def ordering_key(self) -> str:
        """As the official client: a ``str`` (the wire field is bytes)."""
        return (self._extra or _NO_EXTRA).ordering_key.decode("utf-8", "replace")

    def publish_timestamp(self) -> int:
        return self._entry.publish_timestamp

    def event_timestamp(self) -> int:
        return (self._extra or _NO_EXTRA).event_timestamp

    def message_id(self) -> MessageId:
        mid = self._mid
        return mid if mid is not None else self._id

    def redelivery_count(self) -> int:
        return self._entry.redelivery_count

    def topic_name(self) -> str:
        return self._entry.topic

    def producer_name(self) -> str:
        return self._entry.producer_name

    def sequence_id(self) -> int:
        return self._seq

    def schema_version(self) -> str:
        """The producer's schema version ('' without a schema), a ``str`` as the official client's."""
        return self._entry.schema_version.decode("utf-8", "replace")

    def has_null_value(self) -> bool:
        return (self._extra or _NO_EXTRA).null_value

    def __repr__(self) -> str:
        return f"Message(id={self._id}, topic={self._entry.topic!r}, {len(self._data)} bytes)"
