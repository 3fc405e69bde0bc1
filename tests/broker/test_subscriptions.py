"""Subscription types, acks, redelivery, seek and readers through the official client."""

from __future__ import annotations

import time

import pulsar
import pytest

from broker.service import BrokerService
from tests.broker.conftest import client_for, in_thread

CT = pulsar.ConsumerType


def drain(consumer: pulsar.Consumer, timeout_ms: int = 300) -> list[pulsar.Message]:
    out = []
    while True:
        try:
            out.append(consumer.receive(timeout_millis=timeout_ms))
        except pulsar.Timeout:
            return out


async def test_batching_and_compression_pass_through(broker: BrokerService) -> None:
    def work() -> None:
        client = client_for(broker)
        try:
            for i, comp in enumerate([pulsar.CompressionType.NONE, pulsar.CompressionType.LZ4, pulsar.CompressionType.ZSTD]):
                topic = f"t-batch-{i}"
                consumer = client.subscribe(topic, "s")
                producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=50,
                                                  batching_max_publish_delay_ms=50, compression_type=comp)
                for n in range(200):
                    producer.send_async(f"m-{n}".encode() * 10, None, properties={"n": str(n)})
                producer.flush()
                got = [consumer.receive(timeout_millis=5000) for _ in range(200)]
                assert [m.data() for m in got] == [f"m-{n}".encode() * 10 for n in range(200)]
                assert got[0].message_id().batch_index() == 0
                for m in got:
                    consumer.acknowledge(m)
                assert drain(consumer) == []
        finally:
            client.close()

    await in_thread(work)


async def test_exclusive_rejects_second_consumer(broker: BrokerService) -> None:
    def work() -> None:
        client = client_for(broker)
        try:
            client.subscribe("t-excl", "s", consumer_type=CT.Exclusive)
            with pytest.raises(pulsar.ConsumerBusy):
                client.subscribe("t-excl", "s", consumer_type=CT.Exclusive)
        finally:
            client.close()

    await in_thread(work)


async def test_shared_round_robin_and_redelivery_of_closed_consumer(broker: BrokerService) -> None:
    def work() -> None:
        client = client_for(broker)
        try:
            c1 = client.subscribe("t-shared", "s", consumer_type=CT.Shared, receiver_queue_size=10)
            c2 = client.subscribe("t-shared", "s", consumer_type=CT.Shared, receiver_queue_size=10)
            p = client.create_producer("t-shared", batching_enabled=False)
            for n in range(20):
                p.send(str(n).encode())
            a = drain(c1)
            b = drain(c2)
            assert len(a) + len(b) == 20 and a and b
            for m in a:
                c1.acknowledge(m)
            c2.close()  # its unacked messages go to c1
            again = drain(c1, 1000)
            assert sorted(m.data() for m in again) == sorted(m.data() for m in b)
            assert all(m.redelivery_count() >= 1 for m in again)
        finally:
            client.close()

    await in_thread(work)


async def test_failover_single_active(broker: BrokerService) -> None:
    def work() -> None:
        client = client_for(broker)
        try:
            c1 = client.subscribe("t-fo", "s", consumer_type=CT.Failover, consumer_name="a")
            c2 = client.subscribe("t-fo", "s", consumer_type=CT.Failover, consumer_name="b")
            p = client.create_producer("t-fo", batching_enabled=False)
            for n in range(10):
                p.send(str(n).encode())
            a, b = drain(c1), drain(c2)
            assert len(a) == 10 and b == []
            c1.close()
            for n in range(10, 15):
                p.send(str(n).encode())
            b = drain(c2, 1000)
            # everything c1 did not ack moves to c2, in order
            assert [m.data() for m in b] == [str(n).encode() for n in range(15)]
        finally:
            client.close()

    await in_thread(work)


async def test_key_shared_keeps_keys_on_one_consumer(broker: BrokerService) -> None:
    def work() -> None:
        client = client_for(broker)
        try:
            c1 = client.subscribe("t-ks", "s", consumer_type=CT.KeyShared)
            c2 = client.subscribe("t-ks", "s", consumer_type=CT.KeyShared)
            p = client.create_producer("t-ks", batching_enabled=False)
            for n in range(60):
                p.send(str(n).encode(), partition_key=f"k{n % 6}")
            a, b = drain(c1), drain(c2)
            assert len(a) + len(b) == 60
            keys_a = {m.partition_key() for m in a}
            keys_b = {m.partition_key() for m in b}
            assert not keys_a & keys_b
            for ms in (a, b):
                for k in {m.partition_key() for m in ms}:
                    seq = [int(m.data()) for m in ms if m.partition_key() == k]
                    assert seq == sorted(seq)
        finally:
            client.close()

    await in_thread(work)


async def test_negative_ack_redelivers_with_count(broker: BrokerService) -> None:
    def work() -> None:
        client = client_for(broker)
        try:
            c = client.subscribe("t-nack", "s", consumer_type=CT.Shared, negative_ack_redelivery_delay_ms=100)
            p = client.create_producer("t-nack", batching_enabled=False)
            p.send(b"x")
            m = c.receive(timeout_millis=5000)
            assert m.redelivery_count() == 0
            c.negative_acknowledge(m)
            m2 = c.receive(timeout_millis=5000)
            assert m2.data() == b"x" and m2.redelivery_count() == 1
            c.acknowledge(m2)
            assert drain(c) == []
        finally:
            client.close()

    await in_thread(work)


async def test_cumulative_ack_and_restart_of_consumer(broker: BrokerService) -> None:
    def work() -> None:
        client = client_for(broker)
        try:
            c = client.subscribe("t-cum", "s")
            p = client.create_producer("t-cum", batching_enabled=False)
            for n in range(10):
                p.send(str(n).encode())
            got = [c.receive(timeout_millis=5000) for _ in range(10)]
            c.acknowledge_cumulative(got[5])
            time.sleep(0.3)  # the client groups acks for 100 ms
            c.close()
            c = client.subscribe("t-cum", "s")
            rest = drain(c, 1000)
            assert [m.data() for m in rest] == [str(n).encode() for n in range(6, 10)]
        finally:
            client.close()

    await in_thread(work)


async def test_batch_index_ack(broker: BrokerService) -> None:
    def work() -> None:
        client = client_for(broker)
        try:
            c = client.subscribe("t-bia", "s", consumer_type=CT.Shared, batch_index_ack_enabled=True)
            p = client.create_producer("t-bia", batching_enabled=True, batching_max_messages=10,
                                       batching_max_publish_delay_ms=100)
            for n in range(10):
                p.send_async(str(n).encode(), None)
            p.flush()
            got = [c.receive(timeout_millis=5000) for _ in range(10)]
            for m in got[:4]:
                c.acknowledge(m)
            time.sleep(0.3)
            c.redeliver_unacknowledged_messages()
            again = drain(c, 1000)
            assert sorted(m.data() for m in again) == [str(n).encode() for n in range(4, 10)]
        finally:
            client.close()

    await in_thread(work)


async def test_seek_by_id_and_time(broker: BrokerService) -> None:
    def work() -> None:
        client = client_for(broker)
        try:
            c = client.subscribe("t-seek", "s")
            p = client.create_producer("t-seek", batching_enabled=False)
            ids = [p.send(str(n).encode()) for n in range(5)]
            time.sleep(0.05)
            t_mid = int(time.time() * 1000)
            time.sleep(0.05)
            ids += [p.send(str(n).encode()) for n in range(5, 10)]
            got = [c.receive(timeout_millis=5000) for _ in range(10)]
            for m in got:
                c.acknowledge(m)
            c.seek(ids[2])
            after = drain(c, 1000)
            # seek to an id redelivers from that message on (the client drops nothing here)
            assert after[0].data() in (b"2", b"3")
            assert after[-1].data() == b"9"
            c.seek(t_mid)
            after = drain(c, 1000)
            assert [m.data() for m in after] == [str(n).encode() for n in range(5, 10)]
            c.seek(pulsar.MessageId.earliest)
            assert len(drain(c, 1000)) == 10
        finally:
            client.close()

    await in_thread(work)


async def test_readers_and_last_message_id(broker: BrokerService) -> None:
    def work() -> None:
        client = client_for(broker)
        try:
            p = client.create_producer("t-read", batching_enabled=True, batching_max_messages=5,
                                       batching_max_publish_delay_ms=50)
            for n in range(10):
                p.send_async(str(n).encode(), None)
            p.flush()
            r = client.create_reader("t-read", pulsar.MessageId.earliest)
            got = []
            while r.has_message_available():
                got.append(r.read_next(timeout_millis=5000))
            assert [m.data() for m in got] == [str(n).encode() for n in range(10)]
            # start inside a batch, exclusive of the start id
            r2 = client.create_reader("t-read", got[6].message_id())
            assert r2.read_next(timeout_millis=5000).data() == b"7"
            r3 = client.create_reader("t-read", pulsar.MessageId.latest)
            assert not r3.has_message_available()
            p.send(b"new")
            assert r3.read_next(timeout_millis=5000).data() == b"new"
        finally:
            client.close()

    await in_thread(work)


async def test_unsubscribe_removes_subscription(broker: BrokerService) -> None:
    def work() -> None:
        client = client_for(broker)
        try:
            c = client.subscribe("t-unsub", "s")
            c.unsubscribe()
        finally:
            client.close()

    await in_thread(work)
    topic = broker.topics["persistent://public/default/t-unsub"]
    assert "s" not in topic.subscriptions


async def test_failover_spreads_partitions(broker: BrokerService) -> None:
    from broker.names import TopicName

    await broker.namespaces.create_partitioned(TopicName.parse("t-fo-part"), 2)

    def work() -> None:
        client = client_for(broker)
        try:
            a = client.subscribe("t-fo-part", "s", consumer_type=CT.Failover, consumer_name="a")
            b = client.subscribe("t-fo-part", "s", consumer_type=CT.Failover, consumer_name="b")
            p = client.create_producer("t-fo-part", batching_enabled=False,
                                       message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
            for i in range(20):
                p.send(str(i).encode())
            got_a, got_b = drain(a), drain(b)
            assert len(got_a) + len(got_b) == 20
            # each partition has exactly one active consumer, and each consumer one partition
            assert {m.message_id().partition() for m in got_a}.isdisjoint({m.message_id().partition() for m in got_b})
            assert got_a and got_b
        finally:
            client.close()

    await in_thread(work)


def _undecodable_entry() -> bytes:
    """A stored entry with a correct CRC32C whose MessageMetadata does not parse."""
    import struct

    from clients.protocol.frames import crc32c

    section = struct.pack(">I", 3) + b"\xff\xff\xff" + b"payload"
    return b"\x0e\x01" + struct.pack(">I", crc32c(section)) + section


@pytest.mark.parametrize("sub_type", [CT.Exclusive, CT.Shared, CT.KeyShared])
async def test_undecodable_entry_is_skipped_counted_and_logged_once(
        broker: BrokerService, caplog: pytest.LogCaptureFixture, sub_type: pulsar.ConsumerType) -> None:
    """Issue 10 #2: an entry whose metadata does not parse (stored behind SEND validation's
    back) must not end the dispatcher, nor the server: it is skipped (acknowledged, as Pulsar
    does), counted in /metrics and logged once; the good messages around it are delivered."""
    name = f"t-bad-entry-{sub_type.value}"

    def produce(first: int) -> None:
        client = client_for(broker)
        try:
            p = client.create_producer(name, batching_enabled=False)
            for n in range(first, first + 3):
                p.send(str(n).encode())
        finally:
            client.close()

    def consume() -> list[bytes]:
        client = client_for(broker)
        try:
            c = client.subscribe(name, "s", consumer_type=sub_type,
                                 initial_position=pulsar.InitialPosition.Earliest)
            got = drain(c, 1000)
            for m in got:
                c.acknowledge(m)
            return [m.data() for m in got]
        finally:
            client.close()

    await in_thread(lambda: produce(0))
    topic = broker.topics[f"persistent://public/default/{name}"]
    await topic.ml.add_entry(_undecodable_entry())
    await in_thread(lambda: produce(3))
    assert await in_thread(consume) == [str(n).encode() for n in range(6)]
    # The server still serves, and a second consumer does not meet the entry again.
    assert await in_thread(consume) == []
    text = broker.metrics.render().decode()  # the body /metrics serves
    assert "pulsar_broker_dispatch_undecodable_entries_total 1.0" in text
    logged = [r for r in caplog.records if "undecodable" in r.getMessage()]
    assert len(logged) == 1 and "3" in logged[0].getMessage()


async def test_failover_standby_redelivery_does_not_rewind_the_active_consumer(broker: BrokerService) -> None:
    """Only the active consumer may ask for a rewind (as Pulsar): a standby's redelivery
    request used to send the active consumer earlier messages again after later ones."""
    def work() -> None:
        client = client_for(broker)
        try:
            active = client.subscribe("t-fo-standby", "s", consumer_type=CT.Failover, consumer_name="a")
            standby = client.subscribe("t-fo-standby", "s", consumer_type=CT.Failover, consumer_name="b")
            p = client.create_producer("t-fo-standby", batching_enabled=False)
            for n in range(10):
                p.send(str(n).encode())
            assert [m.data() for m in drain(active)] == [str(n).encode() for n in range(10)]
            standby.redeliver_unacknowledged_messages()
            assert drain(active, 500) == [] and drain(standby, 100) == []
            active.redeliver_unacknowledged_messages()  # the active consumer's own request works
            assert [m.data() for m in drain(active)] == [str(n).encode() for n in range(10)]
        finally:
            client.close()

    await in_thread(work)


async def test_key_shared_newcomer_gets_a_key_in_order_after_churn(broker: BrokerService) -> None:
    """A Key_Shared consumer that joins while another holds unacked messages of keys it takes
    over gets none of the later messages of those keys before the earlier ones (Pulsar's
    draining hashes)."""
    keys = [f"k{i}" for i in range(20)]

    def work() -> None:
        client = client_for(broker)
        try:
            first = client.subscribe("t-ks-join", "s", consumer_type=CT.KeyShared, receiver_queue_size=1000)
            p = client.create_producer("t-ks-join", batching_enabled=False)
            for n in range(40):
                p.send(str(n).encode(), partition_key=keys[n % 20])
            assert len(drain(first)) == 40  # not acked
            second = client.subscribe("t-ks-join", "s", consumer_type=CT.KeyShared, receiver_queue_size=1000)
            for n in range(40, 80):
                p.send(str(n).encode(), partition_key=keys[n % 20])
            got = drain(second)
            first.close()  # its 40 messages go to the second consumer
            while True:
                more = drain(second, 1000)
                if not more:
                    break
                got += more
                for m in more:
                    second.acknowledge(m)
            order: dict[str, list[int]] = {}
            for m in got:
                order.setdefault(m.partition_key(), []).append(int(m.data()))
            assert all(ns == sorted(ns) for ns in order.values()), order
            assert sorted(n for ns in order.values() for n in ns) == list(range(80))
        finally:
            client.close()

    await in_thread(work)
