"""The dispatcher asks its cursor to read ahead after every read, before it sends what it
read (the managed ledger side is tests/managed_ledger/test_read_ahead.py)."""

from __future__ import annotations

import pulsar
import pytest
import trio

from tests.broker.conftest import client_for, in_thread, start_broker
from tests.broker.memory_ml import MemoryCursor


@pytest.mark.parametrize("ahead_bytes", [64 * 1024, 0])
async def test_dispatcher_reads_the_next_range_ahead_of_sending(nursery: trio.Nursery, ahead_bytes: int) -> None:
    service = await start_broker(nursery, dispatcher_max_read_batch_size=50, dispatcher_read_ahead_max_bytes=ahead_bytes)
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
    averages: list[float] = []  # the subscription's mean entry size at each read_ahead call
    real_read_ahead = cursor.read_ahead

    def read_ahead(max_entries: int) -> None:
        averages.append(sub.avg_entry_bytes)
        real_read_ahead(max_entries)

    cursor.read_ahead = read_ahead  # type: ignore[method-assign]

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
    if not ahead_bytes:  # read-ahead off
        assert cursor.read_aheads == [] and sent_before_read_ahead[:5] == [0, 0, 0, 0, 0]
        nursery.cancel_scope.cancel()
        return
    # after every read of 50, from where that read ended and before its entries were routed
    # to the consumer, the cursor is asked to keep dispatcher_read_ahead_max_bytes ahead: as
    # many entries as that holds at the mean entry size so far (at least one read's worth)
    assert [p for p, _ in cursor.read_aheads[:5]] == [50, 100, 150, 200, 230]
    assert [n for _, n in cursor.read_aheads] == [max(50, int(ahead_bytes / avg)) for avg in averages]
    assert cursor.read_aheads[0][1] < cursor.read_aheads[-1][1]  # small entries: more of them
    assert sent_before_read_ahead[:5] == [1, 2, 3, 4, 5]
    nursery.cancel_scope.cancel()
