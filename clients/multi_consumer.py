"""Consumers over several topics: partitioned topics, topic lists and regex patterns.

Each topic (or partition) has its own single-topic ``Consumer`` with its own permits, acks and
reconnects; they all feed one shared receiver queue. A message remembers the child that
delivered it, so acks go back to the right partition. The per-child queue is
``min(receiver_queue_size, max_total_receiver_queue_size_across_partitions / children)`` as in
the C++ client. Pattern consumers re-list the namespace every ``pattern_auto_discovery_period``
seconds and subscribe to new matching topics.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

import trio
from trio.lowlevel import enable_ki_protection

from . import errors
from .consumer import Consumer, ConsumerBase, ConsumerConfig
from .message import Message
from .message_id import MessageId
from .message_queue import MessageQueue
from .options import RegexSubscriptionMode
from .topic_name import base_topic, partition_name

if TYPE_CHECKING:
    from .client_context import ClientContext

log = logging.getLogger(__name__)


class MultiTopicsConsumer(ConsumerBase):
    """One consumer API over many single-topic consumers."""

    def __init__(self, ctx: "ClientContext", config: ConsumerConfig, *, topic_label: str) -> None:
        self._ctx = ctx
        self._config = config
        self._label = topic_label
        self._queue: MessageQueue[Message] = MessageQueue()
        self._children: dict[str, Consumer] = {}
        self._closed = False
        self._scopes: list[trio.CancelScope] = []  # discovery tasks, cancelled on close

    def topic(self) -> str:
        return self._label

    def consumer_name(self) -> str:
        return next(iter(self._children.values())).consumer_name() if self._children else ""

    def is_connected(self) -> bool:
        return bool(self._children) and all(c.is_connected() for c in self._children.values())

    def _check_open(self) -> None:
        if self._closed:
            raise errors.AlreadyClosed(f"consumer on {self._label} is closed")

    def _owner_of(self, target: Message | MessageId) -> Consumer:
        if isinstance(target, Message) and target._consumer is not None:
            return target._consumer
        mid = MessageId.coerce(target)
        if mid.topic and mid.topic in self._children:
            return self._children[mid.topic]
        matches = [c for c in self._children.values() if c._partition == mid.partition()]
        if len(matches) == 1:
            return matches[0]
        raise errors.InvalidMessage(f"cannot tell which topic message id {mid} belongs to")

    async def add_topics(self, topics: list[tuple[str, int]]) -> None:
        """Subscribe a child for each (topic, partition index); all of them or none."""
        count = max(1, len(self._children) + len(topics))
        per_child = min(
            self._config.receiver_queue_size,
            max(1, self._config.max_total_receiver_queue_size_across_partitions // count),
        )
        created: list[Consumer] = []
        try:
            for topic, partition in topics:
                child = Consumer(
                    self._ctx, topic, self._config, partition=partition, queue=self._queue,
                    receiver_queue_size=per_child,
                )
                await self._ctx.start_child(child)
                created.append(child)
                self._children[topic] = child
        except BaseException:
            for child in created:
                self._children.pop(child.topic(), None)
                with trio.CancelScope(shield=True):
                    await child.close()
            raise

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for scope in self._scopes:
            scope.cancel()
        for child in list(self._children.values()):
            await child.close()
        self._queue.close()
        self._ctx.forget(self)

    async def unsubscribe(self) -> None:
        self._check_open()
        for child in list(self._children.values()):
            await child.unsubscribe()
        await self.close()

    async def redeliver_unacknowledged_messages(self) -> None:
        for child in self._children.values():
            await child.redeliver_unacknowledged_messages()

    async def seek(self, target: MessageId | int) -> None:
        if isinstance(target, int):
            for child in self._children.values():
                await child.seek(target)
            return
        mid = MessageId.coerce(target)
        if mid.is_earliest() or mid.is_latest():
            for child in self._children.values():
                await child.seek(mid)
            return
        await self._owner_of(mid).seek(mid)

    async def get_last_message_id(self) -> MessageId:
        raise errors.OperationNotSupported("get_last_message_id on a multi-topic consumer")

    async def has_message_available(self) -> bool:
        if len(self._queue):
            return True
        for child in self._children.values():
            if await child.has_message_available():
                return True
        return False

    # -- partition and pattern discovery -------------------------------------------------------

    @enable_ki_protection  # a client task: Ctrl-C goes to the application's main task (see async_client)
    async def watch_partitions(self, topic: str, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Subscribe to partitions added to ``topic`` (every ``partitions_update_interval_s``)."""
        scope = trio.CancelScope()
        self._scopes.append(scope)
        with scope:
            task_status.started()
            while True:
                await trio.sleep(self._config.partitions_update_interval_s)
                try:
                    count = await self._ctx.lookup.partitions(topic)
                    known = {c._partition for c in self._children.values() if base_topic(c.topic()) == topic}
                    new = [(partition_name(topic, i), i) for i in range(count) if i not in known]
                    if new:
                        await self.add_topics(new)
                except errors.PulsarException as exc:
                    log.info("partition update of %s failed: %s", topic, exc)


    @enable_ki_protection  # a client task: Ctrl-C goes to the application's main task (see async_client)
    async def run_pattern_discovery(
        self, namespace: str, pattern: re.Pattern[str], mode: int, *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        scope = trio.CancelScope()
        self._scopes.append(scope)
        with scope:
            task_status.started()
            while True:
                await trio.sleep(max(1, self._config.pattern_auto_discovery_period))
                try:
                    await self.discover(namespace, pattern, mode)
                except errors.PulsarException as exc:
                    log.info("pattern discovery in %s failed: %s", namespace, exc)

    async def discover(self, namespace: str, pattern: re.Pattern[str], mode: int) -> None:
        names = await self._ctx.lookup.topics_of_namespace(namespace, mode)
        wanted: list[tuple[str, int]] = []
        for base in sorted({base_topic(n) for n in names}):
            if not pattern.fullmatch(base):
                continue
            if base in self._children or any(base_topic(t) == base for t in self._children):
                continue
            n = await self._ctx.lookup.partitions(base)
            wanted += [(partition_name(base, i), i) for i in range(n)] if n else [(base, -1)]
        if wanted:
            await self.add_topics(wanted)


REGEX_MODES = {
    RegexSubscriptionMode.PersistentOnly: 0,
    RegexSubscriptionMode.NonPersistentOnly: 1,
    RegexSubscriptionMode.AllTopics: 2,
}
