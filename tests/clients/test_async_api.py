"""The trio API (``async with AsyncClient``) and broker-driven behaviour: unload, seek by time,
delayed delivery, pattern discovery, exclusive-producer waiting."""

from __future__ import annotations

import re
import time
import uuid

import httpx
import pytest
import trio

from clients import (
    AlreadyClosed,
    AsyncClient,
    ConsumerType,
    InitialPosition,
    MessageId,
    ProducerAccessMode,
    Timeout,
)
from tests.clients.conftest import Broker


async def test_async_produce_consume_read(broker: Broker, topic: str) -> None:
    async with AsyncClient(broker.url) as client:
        consumer = await client.subscribe(topic, "sub")
        producer = await client.create_producer(topic, batching_max_publish_delay_ms=20)
        futures = [await producer.send_async(b"m%d" % i, properties={"i": str(i)}) for i in range(50)]
        await producer.flush()
        ids = [await f.wait() for f in futures]
        got = []
        for _ in range(50):
            msg = await consumer.receive(5000)
            got.append(msg)
            await consumer.acknowledge(msg)
        assert [m.message_id() for m in got] == ids
        assert [m.properties()["i"] for m in got] == [str(i) for i in range(50)]
        reader = await client.create_reader(topic, MessageId.earliest)
        assert (await reader.read_next(5000)).data() == b"m0"
        assert await reader.has_message_available()
        assert (await consumer.get_last_message_id()).entry_id() == ids[-1].entry_id()
    # Leaving the block closed everything.
    with pytest.raises(AlreadyClosed):
        await producer.send(b"late")


async def test_unload_makes_clients_reconnect(broker: Broker, topic: str) -> None:
    path = topic.replace("persistent://", "")
    async with AsyncClient(broker.url) as client, httpx.AsyncClient(base_url=broker.admin_url) as admin:
        consumer = await client.subscribe(topic, "sub")
        producer = await client.create_producer(topic, batching_enabled=False)
        for i in range(5):
            await producer.send(b"before-%d" % i)
        r = await admin.put(f"/admin/v2/persistent/{path}/unload")
        assert r.status_code in (200, 204), r.text
        for i in range(5):  # CLOSE_PRODUCER -> re-lookup -> re-create, transparently
            await producer.send(b"after-%d" % i)
        got = []
        for _ in range(10):
            msg = await consumer.receive(10000)
            got.append(msg.data())
            await consumer.acknowledge(msg)
        assert got == [b"before-%d" % i for i in range(5)] + [b"after-%d" % i for i in range(5)]
        assert producer.is_connected() and consumer.is_connected()


async def test_seek_by_publish_time(broker: Broker, topic: str) -> None:
    async with AsyncClient(broker.url) as client:
        consumer = await client.subscribe(topic, "sub")
        producer = await client.create_producer(topic, batching_enabled=False)
        for i in range(3):
            await producer.send(b"old-%d" % i)
        await trio.sleep(0.05)
        cut = int(time.time() * 1000)
        await trio.sleep(0.05)
        for i in range(2):
            await producer.send(b"new-%d" % i)
        for _ in range(5):
            await consumer.acknowledge(await consumer.receive(5000))
        await consumer.seek(cut)
        assert [(await consumer.receive(5000)).data() for _ in range(2)] == [b"new-0", b"new-1"]


async def test_deliver_after(broker: Broker, topic: str) -> None:
    async with AsyncClient(broker.url) as client:
        consumer = await client.subscribe(topic, "sub", consumer_type=ConsumerType.Shared)
        producer = await client.create_producer(topic)
        start = time.time()
        await producer.send(b"later", deliver_after=1.0)
        await producer.send(b"now")
        first = await consumer.receive(5000)
        assert first.data() == b"now"
        second = await consumer.receive(5000)
        assert second.data() == b"later" and time.time() - start >= 0.9


async def test_pattern_discovers_new_topics(broker: Broker) -> None:
    prefix = f"pat-{uuid.uuid4().hex[:6]}"
    async with AsyncClient(broker.url) as client:
        first = f"persistent://public/default/{prefix}-a"
        await (await client.create_producer(first)).send(b"a0")
        consumer = await client.subscribe(re.compile(f"persistent://public/default/{prefix}-.*"), "sub",
                                          pattern_auto_discovery_period=1,
                                          initial_position=InitialPosition.Earliest)
        assert (await consumer.receive(5000)).data() == b"a0"
        late = await client.create_producer(f"persistent://public/default/{prefix}-b")
        await late.send(b"b0")
        msg = await consumer.receive(10000)
        assert msg.data() == b"b0" and msg.topic_name().endswith(f"{prefix}-b")
        other = await client.create_producer(f"persistent://public/default/other-{prefix}")
        await other.send(b"x")
        with pytest.raises(Timeout):
            await consumer.receive(2500)


async def test_wait_for_exclusive_producer(broker: Broker, topic: str) -> None:
    async with AsyncClient(broker.url) as client:
        first = await client.create_producer(topic, access_mode=ProducerAccessMode.Exclusive)
        got: list = []

        async def second() -> None:
            got.append(await client.create_producer(topic, access_mode=ProducerAccessMode.WaitForExclusive))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(second)
            await trio.sleep(0.5)
            assert not got  # queued behind the exclusive producer
            await first.close()
            with trio.fail_after(10):
                while not got:
                    await trio.sleep(0.05)
        await got[0].send(b"mine now")


async def test_small_receiver_queue_refills_permits(broker: Broker, topic: str) -> None:
    async with AsyncClient(broker.url) as client:
        consumer = await client.subscribe(topic, "sub", receiver_queue_size=4)
        producer = await client.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
        for i in range(40):
            await producer.send_async(b"%d" % i)
        await producer.flush()
        await trio.sleep(0.3)
        assert len(consumer._queue) <= 4  # the broker never exceeds the granted permits
        got = []
        for _ in range(40):
            msg = await consumer.receive(5000)
            got.append(msg.data())
            await consumer.acknowledge(msg)
        assert got == [b"%d" % i for i in range(40)]


async def test_pending_queue_full(broker: Broker, topic: str) -> None:
    from clients import ProducerQueueIsFull

    async with AsyncClient(broker.url) as client:
        producer = await client.create_producer(topic, max_pending_messages=2, batching_max_publish_delay_ms=500)
        first = [await producer.send_async(b"a"), await producer.send_async(b"b")]
        with pytest.raises(ProducerQueueIsFull):
            await producer.send_async(b"c")
        await producer.flush()
        assert [(await f.wait()).batch_index() for f in first] == [0, 1]
        await producer.send_async(b"d")  # room again once acknowledged


async def test_partitions_added_later_are_used(broker: Broker, topic: str) -> None:
    path = topic.replace("persistent://", "")
    async with AsyncClient(broker.url) as client, httpx.AsyncClient(base_url=broker.admin_url) as admin:
        assert (await admin.put(f"/admin/v2/persistent/{path}/partitions", json=2)).status_code in (200, 204)
        consumer = await client.subscribe(topic, "sub", partitions_update_interval_s=0.3)
        producer = await client.create_producer(topic, batching_enabled=False, partitions_update_interval_s=0.3)
        assert (await admin.post(f"/admin/v2/persistent/{path}/partitions", json=3)).status_code in (200, 204)
        with trio.fail_after(10):
            while len(producer._children) < 3 or len(consumer._children) < 3:
                await trio.sleep(0.1)
        ids = [await producer.send(b"%d" % i) for i in range(6)]
        assert {m.partition() for m in ids} == {0, 1, 2}
        got = sorted([(await consumer.receive(5000)).data() for _ in range(6)])
        assert got == [b"%d" % i for i in range(6)]
