"""The dispatcher asks its cursor to read ahead after every read, before it sends what it
read (the managed ledger side is tests/managed_ledger/test_read_ahead.py)."""

from __future__ import annotations

from typing import Any, Callable

import pulsar
import pytest
import trio

from tests.broker.conftest import client_for, in_thread, start_broker
from tests.broker.memory_ml import MemoryCursor


async def _subscribe_and_publish(service: Any, topic: str, send: Callable[[Any], None]) -> tuple[Any, MemoryCursor]:
    """Subscription "s" from the earliest (so its cursor exists before the entries), then
    ``send(client)`` publishes; the subscription and its in-memory cursor."""

    def publish() -> None:
        client = client_for(service)
        try:
            client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest).close()
            send(client)
        finally:
            client.close()

    await in_thread(publish)
    sub = service.topics[topic].subscriptions["s"]
    assert isinstance(sub.cursor, MemoryCursor)
    return sub, sub.cursor


@pytest.mark.parametrize("ahead_bytes", [64 * 1024, 0])
async def test_dispatcher_reads_the_next_range_ahead_of_sending(nursery: trio.Nursery, ahead_bytes: int) -> None:
    service = await start_broker(nursery, dispatcher_max_read_batch_size=50, dispatcher_read_ahead_max_bytes=ahead_bytes)
    topic = "persistent://public/default/read-ahead"

    def send(client: Any) -> None:
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(230):
            producer.send(b"m%d" % i)

    sub, cursor = await _subscribe_and_publish(service, topic, send)
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
        assert cursor.read_aheads == [] and sent_before_read_ahead[:6] == [0, 0, 0, 0, 0, 0]
        nursery.cancel_scope.cancel()
        return
    # after every read (one entry first, to learn the entries' size, then reads of 50), from
    # where that read ended and before its entries were routed to the consumer, the cursor is
    # asked to keep dispatcher_read_ahead_max_bytes ahead: as many entries as that holds at the
    # mean entry size so far, the entries just read included (at least one read's worth)
    assert [p for p, _ in cursor.read_aheads[:6]] == [1, 51, 101, 151, 201, 230]
    assert [n for _, n in cursor.read_aheads] == [max(1 if i == 0 else 50, int(ahead_bytes / avg))
                                                  for i, avg in enumerate(averages)]
    assert averages[0] < 100  # the first entry's own size (b"m0" and its metadata), not 1 KiB
    assert sent_before_read_ahead[:6] == [1, 2, 3, 4, 5, 6]
    nursery.cancel_scope.cancel()


async def test_first_read_of_batches_stays_within_permits_and_sizes_the_read_ahead(nursery: trio.Nursery) -> None:
    """Before any entry was read the dispatcher knows neither how many messages an entry holds
    nor its size: it reads one entry first. (It used to guess one message of 1 KiB: a consumer
    of 1,000 permits on 126-message batches got a whole read of 100 entries, 12,600 messages
    and 13 MB at once, and the read-ahead after it asked for 1 MiB / 1 KiB = 1,024 entries.)"""
    ahead_bytes = 64 * 1024
    service = await start_broker(nursery, dispatcher_read_ahead_max_bytes=ahead_bytes)
    topic = "persistent://public/default/first-read-of-batches"
    payload = b"x" * 200

    def send(client: Any) -> None:
        producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=20,
                                          batching_max_publish_delay_ms=60_000)
        for _ in range(800):
            producer.send_async(payload, None)
        producer.flush()

    sub, cursor = await _subscribe_and_publish(service, topic, send)
    permits_after_route: list[int] = []
    real_route = type(sub)._route

    async def route(self, deliveries, replayed=False):
        delivered = await real_route(self, deliveries, replayed)
        permits_after_route.append(min(c.permits for c in self.consumers))
        return delivered

    sub._route = route.__get__(sub)  # type: ignore[method-assign]

    def consume() -> int:
        client = client_for(service)
        try:
            consumer = client.subscribe(topic, "s", receiver_queue_size=100)
            n = 0
            for _ in range(800):
                consumer.acknowledge(consumer.receive(timeout_millis=5000))
                n += 1
            consumer.close()
            return n
        finally:
            client.close()

    assert await in_thread(consume) == 800
    # never more than one entry (20 messages) past the consumer's permits
    assert min(permits_after_route) > -20, permits_after_route[:5]
    # the read-ahead counts entries at the size of the entries read, not at a 1 KiB guess
    entry_bytes = sub.avg_entry_bytes
    assert 20 * 200 < entry_bytes < 20 * 200 + 1024
    assert cursor.read_aheads[0][1] == int(ahead_bytes / entry_bytes)
    nursery.cancel_scope.cancel()
