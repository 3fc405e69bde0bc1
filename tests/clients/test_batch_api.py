"""The batch API (``send_many``, ``receive_many``, ``read_many``), blocking and async, and the
blocking consumer's deferred hand-over of acks and dequeue reports, against a real broker."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

import clients
from clients import AsyncClient, InitialPosition, MessageId, Timeout
from tests.clients.conftest import Broker


def test_send_many_more_than_the_pending_window(client: Any, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    # 2,500 messages through a 1,000-message window, without block_if_queue_full: send_many
    # waits for room instead of failing.
    producer = client.create_producer(topic, max_pending_messages=1000)
    payloads = [b"m%d" % i for i in range(2500)]
    ids = producer.send_many(payloads)
    assert len(ids) == 2500 and len(set(ids)) == 2500
    assert ids == sorted(ids)
    got: list[Any] = []
    while len(got) < 2500:
        batch = consumer.receive_many(700, 5000)
        assert 1 <= len(batch) <= 700
        got.extend(batch)
    assert [m.data() for m in got] == payloads
    assert [m.message_id() for m in got] == ids
    with pytest.raises(Timeout):
        consumer.receive_many(10, 100)
    producer.close()
    consumer.close()


def test_send_many_with_a_schema_and_empty_input(client: Any, topic: str) -> None:
    from pulsar.schema import StringSchema  # ours encodes with any object that has encode/decode

    producer = client.create_producer(topic, schema=StringSchema())
    consumer = client.subscribe(topic, "sub", schema=StringSchema())
    assert producer.send_many([]) == []
    producer.send_many(["a", "b"])
    assert [m.value() for m in _drain(consumer)] == ["a", "b"]


def test_acks_leave_without_another_call(broker: Broker, topic: str) -> None:
    """Acks wait in the blocking consumer's thread-side queue; the ack group timer sends them
    even if the application makes no further call (then the client stops without closing)."""
    first = clients.Client(broker.url)
    consumer = first.subscribe(topic, "sub")
    producer = first.create_producer(topic)
    producer.send_many([b"x%d" % i for i in range(20)])
    for msg in consumer.receive_many(20, 5000):
        consumer.acknowledge(msg)
    time.sleep(1.0)  # well past the 100 ms ack group time
    first.shutdown()  # no close: nothing flushes the acks on the way out
    second = clients.Client(broker.url)
    try:
        again = second.subscribe(topic, "sub")
        with pytest.raises(Timeout):
            msg = again.receive(1500)
            pytest.fail(f"acknowledged message {msg.data()!r} was redelivered")
    finally:
        second.close()


def test_unacked_received_messages_come_back(broker: Broker, topic: str) -> None:
    """The deferred dequeue reports must not turn into acks: what was only received returns."""
    first = clients.Client(broker.url)
    consumer = first.subscribe(topic, "sub")
    # Unbatched: a batch is only acked as a whole (without batch-index acks).
    first.create_producer(topic, batching_enabled=False).send_many([b"y%d" % i for i in range(5)])
    got = consumer.receive_many(5, 5000)
    consumer.acknowledge(got[0])
    consumer.close()
    first.close()
    second = clients.Client(broker.url)
    try:
        again = second.subscribe(topic, "sub")
        back = sorted(m.data() for m in again.receive_many(10, 5000) + _drain(again))
        assert back == [b"y1", b"y2", b"y3", b"y4"]
    finally:
        second.close()


def _drain(consumer: Any) -> list[Any]:
    out: list[Any] = []
    while True:
        try:
            out.extend(consumer.receive_many(10, 500))
        except Timeout:
            return out


def test_partitioned_send_many_and_reader_read_many(client: Any, broker: Broker, topic: str) -> None:
    path = topic.removeprefix("persistent://")
    assert httpx.put(f"{broker.admin_url}/admin/v2/persistent/{path}/partitions", json=3).status_code < 300
    producer = client.create_producer(topic, message_routing_mode=clients.PartitionsRoutingMode.RoundRobinDistribution,
                                      batching_enabled=False)
    consumer = client.subscribe(topic, "sub", initial_position=InitialPosition.Earliest)
    ids = producer.send_many([b"p%d" % i for i in range(30)])
    assert len({mid.partition() for mid in ids}) == 3
    got = _drain(consumer)
    assert sorted(m.data() for m in got) == sorted(b"p%d" % i for i in range(30))
    reader = client.create_reader(f"{topic}-partition-0", MessageId.earliest)
    read = reader.read_many(100, 5000)
    assert read and all(m.message_id().partition() in (0, -1) for m in read)
    reader.close()


async def test_async_send_many_receive_many(broker: Broker, topic: str) -> None:
    async with AsyncClient(broker.url) as client:
        consumer = await client.subscribe(topic, "sub")
        producer = await client.create_producer(topic, max_pending_messages=100)
        ids = await producer.send_many([b"a%d" % i for i in range(250)])
        assert ids == sorted(ids) and len(set(ids)) == 250
        got: list[Any] = []
        while len(got) < 250:
            got.extend(await consumer.receive_many(64, 5000))
        assert [m.data() for m in got] == [b"a%d" % i for i in range(250)]
        with pytest.raises(Timeout):
            await consumer.receive_many(5, 100)
        reader = await client.create_reader(topic, MessageId.earliest)
        assert len(await reader.read_many(10, 5000)) >= 1


@pytest.mark.parametrize("batching", [True, False])
def test_sync_sends_mixed_with_send_async_from_another_thread(client: Any, topic: str, batching: bool) -> None:
    """A blocking ``send`` writes from the caller's thread only when nothing else of the producer
    is pending; mixed with another thread's ``send_async`` on the same producer every message
    is acknowledged once, each thread's messages stay in order, and sequence ids follow the
    wire order (an out-of-order receipt would make the producer reconnect and re-send)."""
    import threading

    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_enabled=batching, block_if_queue_full=True)
    n = 300
    acked = threading.Semaphore(0)
    failures: list[Any] = []

    def async_sender() -> None:
        for i in range(n):
            producer.send_async(b"b%d" % i, lambda res, _mid: (failures.append(res) if res != clients.Result.Ok
                                                                else None, acked.release()))

    other = threading.Thread(target=async_sender)
    other.start()
    sync_ids = [producer.send(b"a%d" % i) for i in range(n)]
    other.join(30)
    for _ in range(n):
        assert acked.acquire(timeout=30)
    assert not failures
    assert sync_ids == sorted(sync_ids) and len(set(sync_ids)) == n
    got = _drain(consumer)
    payloads = [m.data() for m in got]
    assert sorted(payloads) == sorted([b"a%d" % i for i in range(n)] + [b"b%d" % i for i in range(n)])
    assert [p for p in payloads if p[:1] == b"a"] == [b"a%d" % i for i in range(n)]
    assert [p for p in payloads if p[:1] == b"b"] == [b"b%d" % i for i in range(n)]
    seqs = [m.sequence_id() for m in got]
    assert seqs == sorted(seqs) and len(set(seqs)) == 2 * n
    assert producer._p._epoch == 1  # connected once: no reconnect
    producer.close()
    consumer.close()
