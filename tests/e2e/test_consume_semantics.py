"""Subscription types, acks, redelivery, readers, seek, last message id and unsubscribe with
the official pulsar-client, against a real ``quire standalone`` and a real cluster (ZooKeeper +
bookie processes + broker process): every test runs on both."""

from __future__ import annotations

import time
import uuid

import httpx
import pulsar
import pytest
from pulsar.schema import Integer, JsonSchema, Record, String, StringSchema

from tests.e2e.conftest import Cluster, Standalone

CT = pulsar.ConsumerType


def topic() -> str:
    return f"persistent://public/default/sem-{uuid.uuid4().hex[:8]}"


def drain(consumer: pulsar.Consumer | pulsar.Reader, timeout_ms: int = 500) -> list[pulsar.Message]:
    out = []
    read = consumer.read_next if isinstance(consumer, pulsar.Reader) else consumer.receive
    while True:
        try:
            out.append(read(timeout_millis=timeout_ms))
        except pulsar.Timeout:
            return out


def send_batch(client: pulsar.Client, t: str, n: int) -> list[pulsar.MessageId]:
    """``n`` messages in one batch entry; returns their ids (same entry, batch index 0..n-1)."""
    producer = client.create_producer(t, batching_enabled=True, batching_max_messages=n,
                                      batching_max_publish_delay_ms=1000)
    ids: list[pulsar.MessageId] = []
    for i in range(n):
        producer.send_async(f"b{i}".encode(), lambda res, mid: ids.append(mid))
    producer.flush()
    producer.close()
    return sorted(ids, key=lambda m: m.batch_index())


def test_exclusive_and_failover(node_client: pulsar.Client) -> None:
    t = topic()
    node_client.subscribe(t, "ex", consumer_type=CT.Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        node_client.subscribe(t, "ex", consumer_type=CT.Exclusive)
    first = node_client.subscribe(t, "fo", consumer_type=CT.Failover, consumer_name="a")
    second = node_client.subscribe(t, "fo", consumer_type=CT.Failover, consumer_name="b")
    producer = node_client.create_producer(t, batching_enabled=False)
    for i in range(6):
        producer.send(f"{i}".encode())
    # one active consumer gets everything; the standby gets nothing
    got_a, got_b = drain(first, 300), drain(second, 300)
    active, standby = (first, second) if got_a else (second, first)
    assert [m.data() for m in got_a + got_b] == [f"{i}".encode() for i in range(6)] and not (got_a and got_b)
    for m in (got_a or got_b)[:3]:
        active.acknowledge(m)
    time.sleep(0.3)  # the client groups acks for 100 ms
    active.close()
    # the standby takes over from the first unacknowledged message
    assert [m.data() for m in drain(standby, 1000)] == [b"3", b"4", b"5"]


def test_shared_and_key_shared(node_client: pulsar.Client) -> None:
    t = topic()
    shared = [node_client.subscribe(t, "sh", consumer_type=CT.Shared, receiver_queue_size=5) for _ in range(2)]
    keyed = [node_client.subscribe(t, "ks", consumer_type=CT.KeyShared) for _ in range(2)]
    producer = node_client.create_producer(t, batching_enabled=False)
    for i in range(40):
        producer.send(f"{i}".encode(), partition_key=f"key-{i % 8}")
    got = [drain(c, 500) for c in shared]
    assert all(got) and sorted(m.data() for g in got for m in g) == sorted(f"{i}".encode() for i in range(40))
    by_consumer = [drain(c, 500) for c in keyed]
    assert sum(len(g) for g in by_consumer) == 40
    keys = [{m.partition_key() for m in g} for g in by_consumer]
    assert not keys[0] & keys[1]  # a key is served by one consumer only
    for g in by_consumer:  # in order per key
        for k in {m.partition_key() for m in g}:
            seq = [int(m.data()) for m in g if m.partition_key() == k]
            assert seq == sorted(seq)


def test_individual_and_cumulative_acks_survive_reconnect(node_client: pulsar.Client) -> None:
    t = topic()
    consumer = node_client.subscribe(t, "ind", consumer_type=CT.Shared)
    cumulative = node_client.subscribe(t, "cum", consumer_type=CT.Exclusive)
    producer = node_client.create_producer(t, batching_enabled=False)
    for i in range(10):
        producer.send(f"{i}".encode())
    msgs = [consumer.receive(timeout_millis=5000) for _ in range(10)]
    for m in msgs[::2]:
        consumer.acknowledge(m)
    cmsgs = [cumulative.receive(timeout_millis=5000) for _ in range(10)]
    cumulative.acknowledge_cumulative(cmsgs[5])
    time.sleep(0.3)
    consumer.close()
    cumulative.close()
    again = node_client.subscribe(t, "ind", consumer_type=CT.Shared)
    assert sorted(m.data() for m in drain(again)) == [f"{i}".encode() for i in range(1, 10, 2)]
    again_c = node_client.subscribe(t, "cum", consumer_type=CT.Exclusive)
    assert [m.data() for m in drain(again_c)] == [b"6", b"7", b"8", b"9"]


def test_batch_index_ack(node_client: pulsar.Client) -> None:
    t = topic()
    consumer = node_client.subscribe(t, "s", consumer_type=CT.Shared, batch_index_ack_enabled=True)
    ids = send_batch(node_client, t, 8)
    assert len({(m.ledger_id(), m.entry_id()) for m in ids}) == 1  # one entry
    got = [consumer.receive(timeout_millis=5000) for _ in range(8)]
    for m in got[:5]:
        consumer.acknowledge(m)
    time.sleep(0.3)
    consumer.close()
    # only the unacknowledged messages of the batch come back
    again = node_client.subscribe(t, "s", consumer_type=CT.Shared, batch_index_ack_enabled=True)
    assert [m.data() for m in drain(again)] == [b"b5", b"b6", b"b7"]


def test_negative_ack_redelivery_count(node_client: pulsar.Client) -> None:
    t = topic()
    consumer = node_client.subscribe(t, "s", consumer_type=CT.Shared, negative_ack_redelivery_delay_ms=100)
    producer = node_client.create_producer(t, batching_enabled=False)
    producer.send(b"a")
    producer.send(b"b")
    first = [consumer.receive(timeout_millis=5000) for _ in range(2)]
    consumer.acknowledge(first[1])
    consumer.negative_acknowledge(first[0])
    m = consumer.receive(timeout_millis=5000)
    assert (m.data(), m.redelivery_count()) == (b"a", 1)
    consumer.negative_acknowledge(m)
    m = consumer.receive(timeout_millis=5000)
    assert (m.data(), m.redelivery_count()) == (b"a", 2)
    consumer.acknowledge(m)
    assert drain(consumer, 400) == []


def test_readers_earliest_latest_and_inside_a_batch(node_client: pulsar.Client) -> None:
    t = topic()
    ids = send_batch(node_client, t, 6)
    producer = node_client.create_producer(t, batching_enabled=False)
    ids.append(producer.send(b"single"))
    earliest = node_client.create_reader(t, pulsar.MessageId.earliest)
    assert [m.data() for m in drain(earliest)] == [f"b{i}".encode() for i in range(6)] + [b"single"]
    # a start id inside a batch: exclusive starts after it, inclusive at it
    after = node_client.create_reader(t, ids[2])
    assert after.read_next(timeout_millis=5000).data() == b"b3"
    at = node_client.create_reader(t, ids[2], start_message_id_inclusive=True)
    assert at.read_next(timeout_millis=5000).data() == b"b2"
    latest = node_client.create_reader(t, pulsar.MessageId.latest)
    assert not latest.has_message_available()
    producer.send(b"new")
    assert latest.has_message_available()
    assert latest.read_next(timeout_millis=5000).data() == b"new"
    assert not latest.has_message_available()


def test_seek_by_id_and_time_and_last_message_id(node_client: pulsar.Client) -> None:
    t = topic()
    consumer = node_client.subscribe(t, "s")
    producer = node_client.create_producer(t, batching_enabled=False)
    ids = [producer.send(f"{i}".encode()) for i in range(4)]
    time.sleep(0.05)
    mid_time = int(time.time() * 1000)
    time.sleep(0.05)
    ids += [producer.send(f"{i}".encode()) for i in range(4, 8)]
    last = consumer.get_last_message_id()
    assert (last.ledger_id(), last.entry_id()) == (ids[-1].ledger_id(), ids[-1].entry_id())
    for m in drain(consumer):
        consumer.acknowledge(m)
    consumer.seek(ids[2])
    # the broker rewinds to the id; the client skips the id itself (start id not inclusive)
    assert [m.data() for m in drain(consumer)] == [f"{i}".encode() for i in range(3, 8)]
    consumer.seek(mid_time)
    assert [m.data() for m in drain(consumer)] == [f"{i}".encode() for i in range(4, 8)]
    consumer.seek(pulsar.MessageId.earliest)
    assert len(drain(consumer)) == 8


def test_unsubscribe(node: Standalone | Cluster, node_client: pulsar.Client) -> None:
    t = topic()
    name = t.rsplit("/", 1)[1]
    consumer = node_client.subscribe(t, "gone")
    node_client.subscribe(t, "kept").close()
    producer = node_client.create_producer(t, batching_enabled=False)
    producer.send(b"x")
    consumer.unsubscribe()
    subs = httpx.get(f"{node.admin}/admin/v2/persistent/public/default/{name}/subscriptions").json()
    assert subs == ["kept"]
    # a new subscription of that name starts afresh (latest): the old backlog is gone
    fresh = node_client.subscribe(t, "gone")
    assert drain(fresh, 300) == []


class Reading(Record):
    sensor = String()
    value = Integer()


def test_schemas_are_registered_and_checked(node_client: pulsar.Client) -> None:
    t = topic()
    producer = node_client.create_producer(t, schema=JsonSchema(Reading))
    consumer = node_client.subscribe(t, "s", schema=JsonSchema(Reading), initial_position=pulsar.InitialPosition.Earliest)
    producer.send(Reading(sensor="a", value=7))
    got = consumer.receive(timeout_millis=5000).value()
    assert (got.sensor, got.value) == ("a", 7)
    with pytest.raises(pulsar.IncompatibleSchema):
        node_client.create_producer(t, schema=StringSchema())
