"""``Message``: what ``receive()`` returns, with the official client's accessor names."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .message_id import MessageId

if TYPE_CHECKING:
    from .consumer import Consumer


class Message:
    """A received message (payload, metadata and the id to acknowledge it by)."""

    __slots__ = (
        "_data", "_properties", "_partition_key", "_ordering_key", "_publish_ts", "_event_ts",
        "_id", "_redelivery", "_topic", "_producer", "_schema", "_consumer", "_null", "_seq", "_schema_version",
    )

    def __init__(
        self,
        data: bytes,
        message_id: MessageId,
        topic: str,
        properties: dict[str, str] | None = None,
        partition_key: str = "",
        ordering_key: bytes = b"",
        publish_timestamp: int = 0,
        event_timestamp: int = 0,
        redelivery_count: int = 0,
        producer_name: str = "",
        sequence_id: int = -1,
        null_value: bool = False,
        schema: Any = None,
        consumer: "Consumer | None" = None,
        schema_version: bytes = b"",
    ) -> None:
        self._data = data
        self._id = message_id
        self._topic = topic
        self._properties = properties or {}
        self._partition_key = partition_key
        self._ordering_key = ordering_key
        self._publish_ts = publish_timestamp
        self._event_ts = event_timestamp
        self._redelivery = redelivery_count
        self._producer = producer_name
        self._seq = sequence_id
        self._null = null_value
        self._schema = schema
        self._consumer = consumer  # the single-topic consumer that must ack it
        self._schema_version = schema_version

    def data(self) -> bytes:
        return self._data

    def value(self) -> Any:
        """The payload decoded by the consumer's schema (bytes when none)."""
        return self._schema.decode(self._data) if self._schema is not None else self._data

    def properties(self) -> dict[str, str]:
        return dict(self._properties)

    def partition_key(self) -> str:
        return self._partition_key

    def ordering_key(self) -> str:
        """As the official client: a ``str`` (the wire field is bytes)."""
        return self._ordering_key.decode("utf-8", "replace")

    def publish_timestamp(self) -> int:
        return self._publish_ts

    def event_timestamp(self) -> int:
        return self._event_ts

    def message_id(self) -> MessageId:
        return self._id

    def redelivery_count(self) -> int:
        return self._redelivery

    def topic_name(self) -> str:
        return self._topic

    def producer_name(self) -> str:
        return self._producer

    def sequence_id(self) -> int:
        return self._seq

    def schema_version(self) -> str:
        """The producer's schema version ('' without a schema), a ``str`` as the official client's."""
        return self._schema_version.decode("utf-8", "replace")

    def has_null_value(self) -> bool:
        return self._null

    def __repr__(self) -> str:
        return f"Message(id={self._id}, topic={self._topic!r}, {len(self._data)} bytes)"
