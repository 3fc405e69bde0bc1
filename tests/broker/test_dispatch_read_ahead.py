"""The dispatcher asks its cursor to read ahead after every read, before it sends what it
read (the managed ledger side is tests/managed_ledger/test_read_ahead.py)."""

from __future__ import annotations

import pulsar
import trio

from tests.broker.conftest import client_for, in_thread, start_broker
from tests.broker.memory_ml import MemoryCursor


async def test_dispatcher_reads_the_next_range_ahead_of_sending(nursery: trio.Nursery) -> None:
    service = await start_broker(nursery, dispatcher_max_read_batch_size=50)
    topic = "persistent://public/default/read-ahead"

    def publish() -> None:
        client = client_for(service)
        try:
            client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest).close()
            producer = client.create_producer(topic, batching_enabled=False)
            for i in range(230):
                producer.send(b"m%d" % i)
        finally:
            client.close()

    await in_thread(publish)
    sub = service.topics[topic].subscriptions["s"]
    cursor = sub.cursor
    assert isinstance(cursor, MemoryCursor)
    sent_before_read_ahead: list[int] = []
    real_deliver = type(sub)._route

    async def route(self, deliveries, replayed=False):
        sent_before_read_ahead.append(len(cursor.read_aheads))
        return await real_deliver(self, deliveries, replayed)

    sub._route = route.__get__(sub)  # type: ignore[method-assign]

    def consume() -> list[bytes]:
        client = client_for(service)
        try:
            consumer = client.subscribe(topic, "s", receiver_queue_size=1000)
            got = [consumer.receive(timeout_millis=5000).data() for _ in range(230)]
            consumer.close()
            return got
        finally:
            client.close()

    assert await in_thread(consume) == [b"m%d" % i for i in range(230)]
    # after every read of 50, from where that read ended and before its entries were routed
    # to the consumer, the cursor is asked to keep four reads' worth (READ_AHEAD_READS) ahead
    assert cursor.read_aheads[:5] == [(50, 200), (100, 200), (150, 200), (200, 200), (230, 200)]
    assert sent_before_read_ahead[:5] == [1, 2, 3, 4, 5]
    nursery.cancel_scope.cancel()
