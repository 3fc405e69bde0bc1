"""The blocking API against a real ``quire standalone``: every call of issue 7 end to end."""

from __future__ import annotations

import re
import threading
import time
import uuid

import pytest

import clients as pulsar
from tests.clients.conftest import Broker


def drain(consumer, timeout_ms: int = 1500, ack: bool = True) -> list:  # type: ignore[no-untyped-def]
    out = []
    while True:
        try:
            msg = consumer.receive(timeout_ms)
        except pulsar.Timeout:
            return out
        out.append(msg)
        if ack:
            consumer.acknowledge(msg)


def test_send_receive_fields(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, producer_name="p-fields", batching_enabled=False)
    mid = producer.send(b"payload", properties={"a": "1"}, partition_key="key-1", ordering_key="ok",
                        event_timestamp=1234, sequence_id=10)
    msg = consumer.receive(5000)
    assert msg.data() == b"payload" and msg.value() == b"payload"
    assert msg.properties() == {"a": "1"}
    assert msg.partition_key() == "key-1" and msg.ordering_key() == "ok"
    assert msg.event_timestamp() == 1234
    assert abs(msg.publish_timestamp() - time.time() * 1000) < 60_000
    assert msg.message_id() == mid and mid.batch_index() == -1 and mid.partition() == -1
    assert msg.redelivery_count() == 0 and msg.topic_name() == topic
    assert producer.last_sequence_id() == 10 and producer.producer_name() == "p-fields"
    consumer.acknowledge(msg)
    assert producer.topic() == topic and consumer.topic() == topic and consumer.subscription_name() == "sub"
    producer.close()
    consumer.close()


def test_batching_ids_and_order(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_max_messages=50, batching_max_publish_delay_ms=50,
                                      block_if_queue_full=True)
    results: dict[int, object] = {}
    done = threading.Event()

    def callback(i: int):  # type: ignore[no-untyped-def]
        def cb(res, mid):  # type: ignore[no-untyped-def]
            results[i] = (res, mid)
            if len(results) == 200:
                done.set()
        return cb

    for i in range(200):
        producer.send_async(f"m{i}".encode(), callback(i))
    producer.flush()
    assert done.wait(10)
    assert all(r[0] == pulsar.Result.Ok for r in results.values())
    ids = [results[i][1] for i in range(200)]
    assert any(m.batch_index() > 0 for m in ids)  # really batched
    assert ids == sorted(ids)
    got = drain(consumer)
    assert [m.data() for m in got] == [f"m{i}".encode() for i in range(200)]
    assert [m.message_id() for m in got] == ids


def test_same_size_batches_keep_ids_sequence_ids_and_acks(client, topic: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Batches of same-size plain records are read column-wise (``split_uniform_batch``); the
    batch whose sequence ids cross a varint width (127 -> 128) is read record by record."""
    from clients.protocol import batch as batch_codec

    uniform = []
    split = batch_codec.split_uniform_batch

    def counted(*args):  # type: ignore[no-untyped-def]
        out = split(*args)
        uniform.append(out is not None)
        return out

    monkeypatch.setattr(batch_codec, "split_uniform_batch", counted)
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_max_messages=50, batching_max_publish_delay_ms=50)
    payloads = [bytes([i % 256]) * 1024 for i in range(300)]
    ids = producer.send_many(payloads)
    assert len({(m.ledger_id(), m.entry_id()) for m in ids}) >= 6  # really batched, 50 a batch
    got = drain(consumer)
    assert [m.data() for m in got] == payloads
    assert [m.sequence_id() for m in got] == list(range(300))
    assert [m.message_id() for m in got] == ids
    assert True in uniform and False in uniform  # both paths taken
    consumer.close()
    consumer = client.subscribe(topic, "sub")
    assert drain(consumer, 500) == []  # every ack reached the broker
    producer.close()
    consumer.close()


@pytest.mark.parametrize("codec", ["LZ4", "ZLib", "ZSTD", "SNAPPY"])
def test_compression(client, topic: str, codec: str) -> None:  # type: ignore[no-untyped-def]
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, compression_type=getattr(pulsar.CompressionType, codec))
    bodies = [(b"compressible " * 100) + str(i).encode() for i in range(20)]
    for b in bodies:
        producer.send_async(b, None)
    producer.send(b"last", properties={"x": "y"})
    assert [m.data() for m in drain(consumer)] == bodies + [b"last"]


def test_chunking(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False)
    big = bytes(range(256)) * (7 * 1024 * 1024 // 256)  # 7 MiB > 5 MiB max message size
    mid = producer.send(big, properties={"big": "yes"})
    msg = consumer.receive(20000)
    assert msg.data() == big and msg.properties() == {"big": "yes"}
    assert msg.message_id() == mid
    consumer.acknowledge(msg)
    plain = client.create_producer(topic, batching_enabled=False)
    with pytest.raises(pulsar.MessageTooBig):
        plain.send(big)
    results: list = []
    plain.send_async(big, lambda res, mid: results.append((res, mid)))
    plain.flush()  # runs after the send on the client's loop: the callback has run
    assert results == [(pulsar.Result.MessageTooBig, None)]


def test_negative_ack_redelivery(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=200)
    producer = client.create_producer(topic)
    producer.send(b"retry-me")
    first = consumer.receive(5000)
    consumer.negative_acknowledge(first)
    again = consumer.receive(5000)
    assert again.data() == b"retry-me" and again.redelivery_count() == 1
    assert again.message_id() == first.message_id()
    consumer.acknowledge(again)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(700)


def test_ack_timeout_redelivery_exclusive(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    consumer = client.subscribe(topic, "sub", unacked_messages_timeout_ms=500)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"a")
    producer.send(b"b")
    assert [consumer.receive(5000).data() for _ in range(2)] == [b"a", b"b"]
    again = [consumer.receive(5000) for _ in range(2)]  # not acked: both come back
    # (Exclusive subscriptions need not count redeliveries: Pulsar tracks them for Shared only.)
    assert [m.data() for m in again] == [b"a", b"b"]
    for m in again:
        consumer.acknowledge(m)


def test_cumulative_ack_and_resubscribe(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(6):
        producer.send(b"%d" % i)
    msgs = [consumer.receive(5000) for _ in range(6)]
    consumer.acknowledge_cumulative(msgs[3])
    consumer.close()
    consumer = client.subscribe(topic, "sub")
    assert [m.data() for m in drain(consumer)] == [b"4", b"5"]
    shared = client.subscribe(topic, "shared-sub", consumer_type=pulsar.ConsumerType.Shared)
    with pytest.raises(pulsar.CumulativeAcknowledgementNotAllowedError):
        shared.acknowledge_cumulative(msgs[0])


def test_batch_index_ack(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                batch_index_ack_enabled=True)
    producer = client.create_producer(topic, batching_max_publish_delay_ms=200)
    for i in range(4):
        producer.send_async(b"%d" % i, None)
    producer.flush()
    msgs = [consumer.receive(5000) for _ in range(4)]
    assert len({(m.message_id().ledger_id(), m.message_id().entry_id()) for m in msgs}) == 1
    consumer.acknowledge(msgs[0])
    consumer.acknowledge(msgs[2])
    time.sleep(0.3)  # let the grouped ack go out
    consumer.close()
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                batch_index_ack_enabled=True)
    assert sorted(m.data() for m in drain(consumer)) == [b"1", b"3"]


def test_dead_letter_topic(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    dlq = topic + "-dlq"
    dlq_consumer = client.subscribe(dlq, "dlq-sub")
    consumer = client.subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Shared, negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=2, dead_letter_topic=dlq),
    )
    producer = client.create_producer(topic)
    producer.send(b"poison", properties={"p": "1"})
    seen = 0
    while True:
        try:
            msg = consumer.receive(3000)
        except pulsar.Timeout:
            break
        seen += 1
        consumer.negative_acknowledge(msg)
    assert seen == 3  # first delivery + 2 redeliveries
    dead = dlq_consumer.receive(5000)
    assert dead.data() == b"poison" and dead.properties()["p"] == "1"
    assert dead.properties()["REAL_TOPIC"] == topic


def test_seek_by_id_and_time(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_enabled=False)
    ids = []
    for i in range(5):
        ids.append(producer.send(b"%d" % i))
        time.sleep(0.02)
    assert len(drain(consumer)) == 5
    consumer.seek(ids[2])
    assert [m.data() for m in drain(consumer)] == [b"2", b"3", b"4"]
    consumer.seek(pulsar.MessageId.earliest)
    msgs = drain(consumer)
    assert len(msgs) == 5
    consumer.seek(msgs[3].publish_timestamp())  # by publish time (ms): from the first at or after it
    assert [m.data() for m in drain(consumer)] == [b"3", b"4"]
    assert drain(consumer, 300) == []


def test_reader(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(b"%d" % i) for i in range(5)]
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    got = []
    while reader.has_message_available():
        got.append(reader.read_next(5000).data())
    assert got == [b"%d" % i for i in range(5)]
    exclusive = client.create_reader(topic, ids[1])
    assert exclusive.read_next(5000).data() == b"2"
    inclusive = client.create_reader(topic, ids[1], start_message_id_inclusive=True)
    assert inclusive.read_next(5000).data() == b"1"
    latest = client.create_reader(topic, pulsar.MessageId.latest)
    assert not latest.has_message_available()
    producer.send(b"new")
    assert latest.has_message_available()
    assert latest.read_next(5000).data() == b"new"
    reader.seek(ids[3])
    assert reader.read_next(5000).data() == b"3"
    for r in (reader, exclusive, inclusive, latest):
        r.close()


def test_reader_inside_batch(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    producer = client.create_producer(topic, batching_max_publish_delay_ms=100)
    futures: list = []
    for i in range(5):
        producer.send_async(b"%d" % i, lambda res, mid: futures.append(mid))
    producer.flush()
    futures.sort()
    reader = client.create_reader(topic, futures[2])
    assert [reader.read_next(5000).data() for _ in range(2)] == [b"3", b"4"]


def test_unsubscribe_and_errors(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    consumer = client.subscribe(topic, "sub")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "sub")
    producer = client.create_producer(topic, producer_name="only-one")
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic, producer_name="only-one")
    producer.send(b"x")
    consumer.unsubscribe()
    again = client.subscribe(topic, "sub")  # a fresh subscription starts at latest
    with pytest.raises(pulsar.Timeout):
        again.receive(300)
    producer.close()
    with pytest.raises(pulsar.AlreadyClosed):
        producer.send(b"y")
    with pytest.raises(pulsar.InvalidTopicName):
        client.create_producer("a/b")
    for make in (lambda t: client.create_producer(t), lambda t: client.subscribe(t, "s")):
        with pytest.raises(pulsar.TopicNotFound):  # its namespace does not exist
            make(f"persistent://no-such-tenant/ns/{uuid.uuid4().hex[:6]}")
    tiny = client.create_producer(topic, max_pending_messages=1, batching_enabled=False)
    with pytest.raises(pulsar.ProducerQueueIsFull):  # block_if_queue_full is off by default
        for _ in range(100):
            tiny.send_async(b"z", None)
    tiny.flush()


def test_exclusive_producer_access_mode(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    client.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
    with pytest.raises((pulsar.ProducerFenced, pulsar.ProducerBusy)):
        client.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)


def test_partitioned_topic(client, broker: Broker, topic: str) -> None:  # type: ignore[no-untyped-def]
    import httpx

    path = topic.replace("persistent://", "")
    r = httpx.put(f"{broker.admin_url}/admin/v2/persistent/{path}/partitions", json=3)
    assert r.status_code in (200, 204), r.text
    assert client.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(3)]
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(b"%d" % i) for i in range(9)]
    assert {m.partition() for m in ids} == {0, 1, 2}  # round robin
    keyed = [producer.send(b"k", partition_key="same-key") for _ in range(3)]
    assert len({m.partition() for m in keyed}) == 1
    got = drain(consumer)
    assert sorted(m.data() for m in got) == sorted([b"%d" % i for i in range(9)] + [b"k"] * 3)
    assert {m.topic_name() for m in got} == {f"{topic}-partition-{i}" for i in range(3)}
    single = client.create_producer(topic, message_routing_mode=pulsar.PartitionsRoutingMode.UseSinglePartition)
    assert len({single.send(b"s").partition() for _ in range(4)}) == 1
    custom = client.create_producer(topic, message_routing_mode=pulsar.PartitionsRoutingMode.CustomPartition,
                                    message_router=lambda msg, n: 2)
    assert custom.send(b"c").partition() == 2


def test_multi_topic_and_pattern(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    other = topic + "-other"
    multi = client.subscribe([topic, other], "sub")
    for t in (topic, other):
        client.create_producer(t).send(t.encode())
    got = drain(multi)
    assert sorted(m.data() for m in got) == sorted([topic.encode(), other.encode()])
    prefix = topic.rsplit("/", 1)[1]
    pattern = client.subscribe(re.compile(f"persistent://public/default/{prefix}.*"), "psub",
                               initial_position=pulsar.InitialPosition.Earliest)
    assert sorted(m.data() for m in drain(pattern)) == sorted([topic.encode(), other.encode()])


def test_batch_receive_and_listener(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    consumer = client.subscribe(topic, "sub", batch_receive_policy=pulsar.BatchReceivePolicy(10, -1, 500))
    producer = client.create_producer(topic)
    for i in range(15):
        producer.send_async(b"%d" % i, None)
    producer.flush()
    first = consumer.batch_receive()
    assert len(first) == 10
    rest = consumer.batch_receive()
    assert len(first) + len(rest) == 15
    received: list[bytes] = []
    done = threading.Event()

    def listener(c, msg):  # type: ignore[no-untyped-def]
        received.append(msg.data())
        c.acknowledge(msg)
        if len(received) == 3:
            done.set()

    lt = f"{topic}-{uuid.uuid4().hex[:4]}"
    lc = client.subscribe(lt, "sub", message_listener=listener)
    lp = client.create_producer(lt)
    for i in range(3):
        lp.send(b"%d" % i)
    assert done.wait(10) and received == [b"0", b"1", b"2"]
    lc.close()


def test_reader_on_partitioned_topic(client, broker: Broker, topic: str) -> None:  # type: ignore[no-untyped-def]
    import httpx

    path = topic.replace("persistent://", "")
    r = httpx.put(f"{broker.admin_url}/admin/v2/persistent/{path}/partitions", json=2)
    assert r.status_code in (200, 204), r.text
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(6):
        producer.send(b"%d" % i)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    got = []
    while reader.has_message_available():
        got.append(reader.read_next(5000).data())
    assert sorted(got) == [b"%d" % i for i in range(6)]
    with pytest.raises(pulsar.OperationNotSupported):
        client.create_reader(topic, pulsar.MessageId(0, 1, 1, -1))


def test_key_shared_routes_each_key_to_one_consumer(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    consumers = [client.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared,
                                  consumer_name=f"c{i}") for i in range(2)]
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(40):
        producer.send(b"%d" % i, partition_key=f"key-{i % 8}")
    # Key-based batches hold one key each and carry it in the batch metadata, so the broker
    # routes whole batches by key too.
    batched = client.create_producer(topic, batching_type=pulsar.BatchingType.KeyBased,
                                     batching_max_publish_delay_ms=50)
    for i in range(40):
        batched.send_async(b"b%d" % i, None, partition_key=f"key-{i // 5}")
    batched.flush()
    owners: dict[str, set[int]] = {}
    total = batch_members = 0
    for idx, consumer in enumerate(consumers):
        for msg in drain(consumer, 1000):
            owners.setdefault(msg.partition_key(), set()).add(idx)
            total += 1
            batch_members += msg.message_id().batch_index() > 0
    assert total == 80 and batch_members > 0
    assert all(len(who) == 1 for who in owners.values())
    assert len({next(iter(who)) for who in owners.values()}) == 2  # both consumers got keys


def test_schema_objects_encode_and_decode(client, official, topic: str) -> None:  # type: ignore[no-untyped-def]
    from pulsar.schema import StringSchema

    consumer = client.subscribe(topic, "sub", schema=StringSchema())
    producer = client.create_producer(topic, schema=StringSchema())
    producer.send("héllo")
    msg = consumer.receive(5000)
    assert msg.value() == "héllo" and msg.data() == "héllo".encode()
    assert msg.schema_version() == ""  # this client does not register schemas
    # The official producer registers its schema: the broker's version reaches our Message.
    theirs = official.subscribe(topic, "official-sub", schema=StringSchema())
    official.create_producer(topic, schema=StringSchema()).send("from c++")
    ours, reference = consumer.receive(5000), theirs.receive(5000)
    assert ours.value() == "from c++" and ours.schema_version() == reference.schema_version() != ""


def test_failover_subscription(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    producer = client.create_producer(topic, batching_enabled=False)
    consumers = [client.subscribe(topic, "fo", consumer_type=pulsar.ConsumerType.Failover, consumer_name=name)
                 for name in ("a", "b")]
    for i in range(4):
        producer.send(b"%d" % i)
    got = [drain(c, 1000) for c in consumers]
    active = 0 if got[0] else 1
    assert [m.data() for m in got[active]] == [b"0", b"1", b"2", b"3"] and got[1 - active] == []
    consumers[active].close()  # the standby takes over
    producer.send(b"4")
    assert consumers[1 - active].receive(10000).data() == b"4"


def test_delayed_delivery(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    from datetime import timedelta

    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic)
    start = time.time()
    producer.send(b"at", deliver_at=int(start * 1000) + 1000)
    producer.send(b"after", deliver_after=timedelta(seconds=1))
    producer.send(b"now")
    got = []
    for _ in range(3):
        got.append((consumer.receive(5000).data(), time.time() - start))
    assert got[0][0] == b"now"
    assert sorted(data for data, _ in got[1:]) == [b"after", b"at"]
    assert all(elapsed >= 0.95 for _, elapsed in got[1:])  # held back by the broker until due


def test_key_shared_sticky_ranges(client, topic: str) -> None:  # type: ignore[no-untyped-def]
    import pulsar as official_pulsar

    from clients.partitioned_producer import murmur3_32

    policies = [  # our policy class and the official one are both accepted
        pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, sticky_ranges=[(0, 32767)]),
        official_pulsar.ConsumerKeySharedPolicy(official_pulsar.KeySharedMode.Sticky, sticky_ranges=[(32768, 65535)]),
    ]
    consumers = [client.subscribe(topic, "sticky", consumer_type=pulsar.ConsumerType.KeyShared, key_shared_policy=p)
                 for p in policies]
    producer = client.create_producer(topic, batching_enabled=False)
    keys = [f"k{i}" for i in range(16)]
    for key in keys:
        producer.send(key.encode(), partition_key=key)
    for idx, consumer in enumerate(consumers):
        got = {m.partition_key() for m in drain(consumer, 1000)}
        # Pulsar's sticky hash: murmur3_32(key) mod 65536 picks the range (and so the consumer).
        assert got == {k for k in keys if (murmur3_32(k.encode()) & 0xFFFF >= 32768) == bool(idx)}
