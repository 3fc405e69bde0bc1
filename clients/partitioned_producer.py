"""Producer over a partitioned topic: one ``Producer`` per partition plus a message router.

Routing as the official clients: a message with a partition key goes to
``murmur3_32(key) % partitions`` (Java's default hashing); otherwise RoundRobinDistribution
rotates partitions (switching once per batch when batching is on, so batches stay full),
UseSinglePartition picks one random partition for the producer's life, and CustomPartition
calls ``message_router(message, num_partitions)``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import trio
from trio.lowlevel import enable_ki_protection

from . import errors
from .message_id import MessageId
from .options import PartitionsRoutingMode
from .producer import OutgoingMessage, Producer, ProducerConfig, SendFuture, batch_message_limit, settle_all
from .protocol.murmur3 import murmur3_32
from .topic_name import partition_name

if TYPE_CHECKING:
    from .client_context import ClientContext


class _RoutingView:
    """What a custom ``message_router`` sees (the official router gets a Message)."""

    def __init__(self, msg: OutgoingMessage) -> None:
        self._msg = msg

    def data(self) -> bytes:
        return self._msg.payload

    def partition_key(self) -> str:
        return self._msg.partition_key or ""

    def properties(self) -> dict[str, str]:
        return dict(self._msg.properties or {})


class PartitionedProducer:
    """Same API as ``Producer``; routes each message to one partition's producer."""

    def __init__(self, ctx: "ClientContext", topic: str, config: ProducerConfig, partitions: int) -> None:
        self._ctx = ctx
        self._topic = topic
        self._config = config
        self._n = partitions
        self._children: list[Producer] = []
        self._rr = random.randrange(partitions)
        self._rr_count = 0
        self._single = random.randrange(partitions)
        self._scope = trio.CancelScope()

    @enable_ki_protection  # starts client tasks: Ctrl-C must not land in start_soon (see async_client)
    async def _start(self) -> None:
        try:
            await self._add_partitions(self._n)
        except BaseException:
            with trio.CancelScope(shield=True):
                for child in self._children:
                    await child.close()
            raise
        await self._ctx.nursery.start(self._watch_partitions)

    async def _add_partitions(self, count: int) -> None:
        for i in range(len(self._children), count):
            child = Producer(self._ctx, partition_name(self._topic, i), self._config, partition=i)
            await self._ctx.start_child(child)
            self._children.append(child)
        self._n = len(self._children)

    @enable_ki_protection  # a client task: Ctrl-C goes to the application's main task (see async_client)
    async def _watch_partitions(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Pick up partitions added to the topic (every ``partitions_update_interval_s``)."""
        with self._scope:
            task_status.started()
            while True:
                await trio.sleep(self._config.partitions_update_interval_s)
                try:
                    count = await self._ctx.lookup.partitions(self._topic)
                    if count > len(self._children):
                        await self._add_partitions(count)
                except errors.PulsarException:
                    continue  # retried at the next interval

    def topic(self) -> str:
        return self._topic

    def producer_name(self) -> str:
        return self._children[0].producer_name() if self._children else ""

    def last_sequence_id(self) -> int:
        return max((c.last_sequence_id() for c in self._children), default=-1)

    def is_connected(self) -> bool:
        return all(c.is_connected() for c in self._children)

    def _route(self, msg: OutgoingMessage) -> int:
        mode = self._config.message_routing_mode
        if mode == PartitionsRoutingMode.CustomPartition and self._config.message_router is not None:
            index = int(self._config.message_router(_RoutingView(msg), self._n))
            if not 0 <= index < self._n:
                raise errors.InvalidConfiguration(f"message_router returned {index} for {self._n} partitions")
            return index
        if msg.partition_key:
            return murmur3_32(msg.partition_key.encode()) % self._n
        if mode == PartitionsRoutingMode.UseSinglePartition:
            return self._single
        per_partition = (batch_message_limit(self._config.batching_max_messages, self._config.max_pending_messages)
                         if self._config.batching_enabled else 1)  # one batch per partition in turn
        self._rr_count += 1
        if self._rr_count >= per_partition:
            self._rr_count = 0
            self._rr = (self._rr + 1) % self._n
        return self._rr

    async def send(self, content: Any, **kwargs: Any) -> MessageId:
        fut = await self.send_async(content, **kwargs)
        self.flush_open_batch()
        return await fut.wait()

    async def send_many(self, contents: Iterable[Any]) -> list[MessageId]:
        """As ``Producer.send_many``, each message routed to its partition."""
        futures = []
        for content in contents:
            msg = self._children[0].make_message(content)
            futures.append(await self._children[self._route(msg)].queue_waiting(msg))
        self.flush_open_batch()
        return await settle_all(futures)

    def flush_open_batch(self) -> None:
        for child in self._children:
            child.flush_open_batch()

    async def send_async(self, content: Any, callback: Any = None, **kwargs: Any) -> SendFuture:
        msg = self._children[0].make_message(content, **kwargs)
        return await self._children[self._route(msg)].send_message(msg, callback)

    def send_nowait(self, msg: OutgoingMessage, callback: Any = None) -> SendFuture:
        return self._children[self._route(msg)].send_nowait(msg, callback)

    def make_message(self, content: Any, **kwargs: Any) -> OutgoingMessage:
        return self._children[0].make_message(content, **kwargs)

    async def flush(self) -> None:
        for child in self._children:
            await child.flush()

    async def close(self) -> None:
        self._scope.cancel()
        for child in self._children:
            await child.close()
        self._ctx.forget(self)

