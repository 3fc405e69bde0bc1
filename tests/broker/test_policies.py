"""Unacked limits, message TTL, Key_Shared sticky ranges, ack receipts and consumer stats."""

from __future__ import annotations

import time

import pulsar
import pytest
import trio

from broker.names import NamespaceName
from clients.protocol import commands as C
from clients.protocol import frames
from clients.protocol import pulsar_api_pb2 as pb
from tests.broker.conftest import client_for, in_thread, start_broker

T = pb.BaseCommand


async def test_unacked_limit_per_consumer_blocks_until_acks(nursery: trio.Nursery) -> None:
    broker = await start_broker(nursery, max_unacked_messages_per_consumer=5)

    def work() -> None:
        client = client_for(broker)
        try:
            c = client.subscribe("t-unacked", "s", consumer_type=pulsar.ConsumerType.Shared)
            p = client.create_producer("t-unacked", batching_enabled=False)
            for i in range(12):
                p.send(str(i).encode())
            first = []
            try:
                while True:
                    first.append(c.receive(timeout_millis=500))
            except pulsar.Timeout:
                pass
            assert len(first) == 5
            for m in first:
                c.acknowledge(m)
            more = [c.receive(timeout_millis=5000) for _ in range(5)]
            assert [m.data() for m in more] == [str(i).encode() for i in range(5, 10)]
        finally:
            client.close()

    await in_thread(work)


async def test_unacked_limit_per_subscription_spans_consumers(nursery: trio.Nursery) -> None:
    broker = await start_broker(nursery, max_unacked_messages_per_subscription=6)

    def work() -> None:
        client = client_for(broker)
        try:
            consumers = [client.subscribe("t-unacked-sub", "s", consumer_type=pulsar.ConsumerType.Shared)
                         for _ in range(2)]
            p = client.create_producer("t-unacked-sub", batching_enabled=False)
            for i in range(15):
                p.send(str(i).encode())
            got = [_drain(c) for c in consumers]
            assert sum(len(g) for g in got) == 6  # the limit is shared by both consumers
            for c, msgs in zip(consumers, got):
                for m in msgs:
                    c.acknowledge(m)
            more = [m for c in consumers for m in _drain(c, 700)]
            assert len(more) == 6  # dispatch resumed after the acks, up to the limit again
        finally:
            client.close()

    await in_thread(work)


def _drain(consumer: pulsar.Consumer, timeout_ms: int = 500) -> list[pulsar.Message]:
    out = []
    try:
        while True:
            out.append(consumer.receive(timeout_millis=timeout_ms))
    except pulsar.Timeout:
        return out


async def test_message_ttl_expires_backlog(broker) -> None:  # type: ignore[no-untyped-def]
    ns = NamespaceName("public", "default")
    await broker.namespaces.set_policy(ns, "message_ttl_in_seconds", 1)

    def work() -> None:
        client = client_for(broker)
        try:
            client.subscribe("t-ttl", "s").close()
            p = client.create_producer("t-ttl", batching_enabled=False)
            for _ in range(3):
                p.send(b"old")
        finally:
            client.close()

    await in_thread(work)
    topic = broker.topics["persistent://public/default/t-ttl"]
    await broker.on_policies_changed(ns)
    assert topic.subscriptions["s"].cursor.number_of_entries_in_backlog == 3
    await trio.sleep(1.2)
    await broker.expire_messages(topic)
    assert topic.subscriptions["s"].cursor.number_of_entries_in_backlog == 0
    assert topic.subscriptions["s"].stats()["totalMsgExpired"] >= 1


async def test_key_shared_sticky_ranges(broker) -> None:  # type: ignore[no-untyped-def]
    def work() -> None:
        client = client_for(broker)
        try:
            lo = client.subscribe("t-sticky", "s", consumer_type=pulsar.ConsumerType.KeyShared,
                                  key_shared_policy=pulsar.ConsumerKeySharedPolicy(
                                      pulsar.KeySharedMode.Sticky, sticky_ranges=[(0, 32767)]))
            hi = client.subscribe("t-sticky", "s", consumer_type=pulsar.ConsumerType.KeyShared,
                                  key_shared_policy=pulsar.ConsumerKeySharedPolicy(
                                      pulsar.KeySharedMode.Sticky, sticky_ranges=[(32768, 65535)]))
            try:
                client.subscribe("t-sticky", "s", consumer_type=pulsar.ConsumerType.KeyShared,
                                 key_shared_policy=pulsar.ConsumerKeySharedPolicy(
                                     pulsar.KeySharedMode.Sticky, sticky_ranges=[(100, 200)]))
                raise AssertionError("an overlapping sticky range must be refused")
            except pulsar.PulsarException:
                pass
            p = client.create_producer("t-sticky", batching_enabled=False)
            for i in range(40):
                p.send(b"x", partition_key=f"key-{i % 8}")
            n = 0
            for c in (lo, hi):
                try:
                    while True:
                        c.receive(timeout_millis=300)
                        n += 1
                except pulsar.Timeout:
                    pass
            assert n == 40
        finally:
            client.close()

    await in_thread(work)


async def _read_until(stream: trio.SocketStream, decoder: frames.FrameDecoder, kind: int) -> list[frames.Frame]:
    got: list[frames.Frame] = []
    with trio.fail_after(5):
        while not any(f.command.type == kind for f in got):
            got.extend(decoder.feed(await stream.receive_some(65536)))
    return got


async def test_ack_response_and_consumer_stats_over_raw_protocol(broker) -> None:  # type: ignore[no-untyped-def]
    topic = "persistent://public/default/t-raw"
    stream = await trio.open_tcp_stream("127.0.0.1", broker.port)
    dec = frames.FrameDecoder()
    async with stream:
        await stream.send_all(frames.encode_command(C.connect("raw", protocol_version=20)))
        await _read_until(stream, dec, T.CONNECTED)
        await stream.send_all(frames.encode_command(C.subscribe(topic, "s", 0, 7, 1)))
        await _read_until(stream, dec, T.SUCCESS)
        await stream.send_all(frames.encode_command(C.producer(topic, 3, 2)))
        await _read_until(stream, dec, T.PRODUCER_SUCCESS)
        md = C.message_metadata("raw-p", 0, int(time.time() * 1000))
        await stream.send_all(frames.encode_payload_command(C.send(3, 0), md, b"hello"))
        receipt = (await _read_until(stream, dec, T.SEND_RECEIPT))[-1].command.send_receipt
        await stream.send_all(frames.encode_command(C.flow(7, 10)))
        msg = next(f for f in await _read_until(stream, dec, T.MESSAGE) if f.command.type == T.MESSAGE)
        assert bytes(msg.payload()) == b"hello"
        assert msg.command.message.message_id.partition == -1
        assert msg.command.message.message_id.entryId == receipt.message_id.entryId
        mid = C.message_id(C.signed64(receipt.message_id.ledgerId), C.signed64(receipt.message_id.entryId))
        await stream.send_all(frames.encode_command(C.ack(7, [mid], request_id=9)))
        resp = next(f for f in await _read_until(stream, dec, T.ACK_RESPONSE) if f.command.type == T.ACK_RESPONSE)
        assert resp.command.ackResponse.request_id == 9 and not resp.command.ackResponse.HasField("error")
        await stream.send_all(frames.encode_command(C.consumer_stats(7, 10)))
        stats = next(f for f in await _read_until(stream, dec, T.CONSUMER_STATS_RESPONSE)
                     if f.command.type == T.CONSUMER_STATS_RESPONSE).command.consumerStatsResponse
        assert stats.request_id == 10 and stats.availablePermits == 9 and stats.type == "Exclusive"
        await stream.send_all(frames.encode_command(C.get_topics_of_namespace(11, "public/default")))
        topics = next(f for f in await _read_until(stream, dec, T.GET_TOPICS_OF_NAMESPACE_RESPONSE)
                      if f.command.type == T.GET_TOPICS_OF_NAMESPACE_RESPONSE).command.getTopicsOfNamespaceResponse
        assert topic in topics.topics
        await stream.send_all(frames.encode_command(C.ping()))
        await _read_until(stream, dec, T.PONG)


async def test_keep_alive_pings_and_closes_silent_clients(nursery: trio.Nursery) -> None:
    broker = await start_broker(nursery, keep_alive_interval_seconds=1)
    stream = await trio.open_tcp_stream("127.0.0.1", broker.port)
    dec = frames.FrameDecoder()
    seen: list[int] = []
    async with stream:
        await stream.send_all(frames.encode_command(C.connect("silent", protocol_version=20)))
        with trio.fail_after(10):
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    break  # the broker gave up on us
                seen.extend(f.command.type for f in dec.feed(data))
    assert seen[0] == T.CONNECTED and T.PING in seen


async def test_auto_topic_creation_policy(broker) -> None:  # type: ignore[no-untyped-def]
    ns = NamespaceName("public", "default")
    await broker.namespaces.set_policy(ns, "autoTopicCreationOverride", {
        "allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 3})

    def partitioned() -> None:
        client = client_for(broker)
        try:
            p = client.create_producer("t-auto-part", batching_enabled=False)
            parts = {p.send(str(i).encode()).partition() for i in range(6)}
            assert parts == {0, 1, 2}
        finally:
            client.close()

    await in_thread(partitioned)
    await broker.namespaces.set_policy(ns, "autoTopicCreationOverride", {"allowAutoTopicCreation": False})

    def refused() -> None:
        client = client_for(broker)
        try:
            try:
                client.create_producer("t-auto-none")
                raise AssertionError("auto-creation is off")
            except pulsar.TopicNotFound:
                pass
            client.create_producer("t-auto-part")  # existing topics still work
        finally:
            client.close()

    await in_thread(refused)


async def test_lookup_answers_with_the_address_the_client_used(nursery: trio.Nursery) -> None:
    # The advertised address is not reachable (the broker listens on 127.0.0.1 only): a
    # single broker still works because LOOKUP answers with the client's own address.
    broker = await start_broker(nursery, advertised_address="127.0.0.9")

    def work() -> None:
        client = client_for(broker)
        try:
            consumer = client.subscribe("t-lookup-addr", "s")
            client.create_producer("t-lookup-addr").send(b"reached")
            assert consumer.receive(timeout_millis=5000).data() == b"reached"
        finally:
            client.close()

    await in_thread(work)


async def test_invalid_subscription_names_are_rejected(broker) -> None:  # type: ignore[no-untyped-def]
    stream = await trio.open_tcp_stream("127.0.0.1", broker.port)
    dec = frames.FrameDecoder()
    async with stream:
        await stream.send_all(frames.encode_command(C.connect("raw", protocol_version=20)))
        await _read_until(stream, dec, T.CONNECTED)
        for i, name in enumerate(["", "a/b", ".."]):
            await stream.send_all(frames.encode_command(C.subscribe("t-subname", name, 0, i, i)))
            err = next(f for f in await _read_until(stream, dec, T.ERROR) if f.command.type == T.ERROR).command.error
            assert err.request_id == i and err.error == pb.ServerError.NotAllowedError
        await stream.send_all(frames.encode_command(C.subscribe("t-subname", "ok", 0, 9, 9)))
        await _read_until(stream, dec, T.SUCCESS)


async def test_concurrent_subscribes_to_a_new_subscription(broker) -> None:  # type: ignore[no-untyped-def]
    """Many consumers creating the same durable subscription at once all succeed, and the
    topic stays open (two concurrent cursor creations used to look like a takeover)."""
    topic = "persistent://public/default/t-concurrent-sub"
    streams = [await trio.open_tcp_stream("127.0.0.1", broker.port) for _ in range(6)]
    decoders = [frames.FrameDecoder() for _ in streams]
    for s, d in zip(streams, decoders):
        await s.send_all(frames.encode_command(C.connect("raw", protocol_version=20)))
        await _read_until(s, d, T.CONNECTED)
    # the topic exists first, so the subscribes race on the cursor only
    await streams[0].send_all(frames.encode_command(C.producer(topic, 1, 1)))
    await _read_until(streams[0], decoders[0], T.PRODUCER_SUCCESS)
    for i, s in enumerate(streams):
        await s.send_all(frames.encode_command(C.subscribe(topic, "s", 1, 10 + i, 10 + i)))
    async with trio.open_nursery() as nursery:
        for s, d in zip(streams, decoders):
            nursery.start_soon(_read_until, s, d, T.SUCCESS)
    loaded = broker.topics[topic]
    assert not loaded.closed and not loaded.fenced
    assert len(loaded.subscriptions["s"].consumers) == 6
    for s in streams:
        await s.aclose()


async def test_topic_level_metrics_can_be_turned_off(nursery: trio.Nursery) -> None:
    broker = await start_broker(nursery, expose_topic_level_metrics_in_prometheus=False)

    def work() -> None:
        client = client_for(broker)
        try:
            client.create_producer("t-metrics-off").send(b"x")
        finally:
            client.close()

    await in_thread(work)
    text = broker.metrics.render().decode()
    assert 'topic="' not in text  # only broker-wide series
    assert 'pulsar_broker_storage_size{cluster="standalone"}' in text
    assert "pulsar_broker_in_messages_total 1.0" in text


async def test_redelivery_tracker_can_be_turned_off(nursery: trio.Nursery) -> None:
    broker = await start_broker(nursery, subscription_redelivery_tracker_enabled=False)

    def work() -> None:
        client = client_for(broker)
        try:
            c = client.subscribe("t-no-tracker", "s", consumer_type=pulsar.ConsumerType.Shared,
                                 negative_ack_redelivery_delay_ms=50)
            client.create_producer("t-no-tracker").send(b"x")
            m = c.receive(timeout_millis=5000)
            c.negative_acknowledge(m)
            again = c.receive(timeout_millis=5000)
            assert again.data() == b"x" and again.redelivery_count() == 0
        finally:
            client.close()

    await in_thread(work)


async def test_connected_carries_max_message_size(nursery: trio.Nursery) -> None:
    broker = await start_broker(nursery, max_message_size=1024 * 1024)

    def work() -> None:
        client = client_for(broker)
        try:
            p = client.create_producer("t-max-size", batching_enabled=False)
            p.send(b"a" * (900 * 1024))
            with pytest.raises(pulsar.MessageTooBig):  # the client learnt the 1 MiB limit
                p.send(b"b" * (2 * 1024 * 1024))
        finally:
            client.close()

    await in_thread(work)
