"""``Reader``: a non-durable exclusive subscription that reads from a start message id."""

from __future__ import annotations

from typing import Any

from .consumer import Consumer, ConsumerBase
from .message import Message
from .message_id import MessageId


class Reader:
    """Reads a topic from ``start_message_id`` on; nothing is acknowledged or retained for it."""

    def __init__(self, consumer: Consumer | ConsumerBase) -> None:
        self._consumer = consumer

    def topic(self) -> str:
        return self._consumer.topic()

    def is_connected(self) -> bool:
        return self._consumer.is_connected()

    async def read_next(self, timeout_millis: int | None = None) -> Message:
        msg = await self._consumer.receive(timeout_millis)
        self._ack(msg)
        return msg

    async def read_many(self, max_messages: int = 1000, timeout_millis: int | None = None) -> list[Message]:
        """The next message (waiting up to ``timeout_millis``) and up to ``max_messages - 1``
        more already received."""
        msgs = await self._consumer.receive_many(max_messages, timeout_millis)
        for msg in msgs:
            self._ack(msg)
        return msgs

    def _consumed_many(self, msgs: list[Message]) -> None:
        """Bookkeeping for messages the blocking facade took from the queue itself."""
        self._consumer._dequeued_many(msgs)
        for msg in msgs:
            self._ack(msg)

    def _ack(self, msg: Message) -> None:
        # Acks are meaningless for a non-durable cursor but keep the broker's unacked count low.
        self._consumer._owner_of(msg)._ack(msg.message_id())

    async def has_message_available(self) -> bool:
        return await self._consumer.has_message_available()

    async def seek(self, target: MessageId | int | Any) -> None:
        await self._consumer.seek(target if isinstance(target, int) else MessageId.coerce(target))

    async def close(self) -> None:
        await self._consumer.close()
        self._consumer._ctx.forget(self)
