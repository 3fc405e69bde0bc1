"""Produce/consume with the official pulsar-client against a real ``quire standalone`` and a
real cluster (ZooKeeper + bookie processes + broker process): every test runs on both."""

from __future__ import annotations

import re
import threading
import time
import uuid

import httpx
import pulsar
import pytest

from tests.e2e.conftest import Cluster, Standalone

CT = pulsar.ConsumerType


def topic() -> str:
    return f"persistent://public/default/e2e-{uuid.uuid4().hex[:8]}"


def drain(consumer: pulsar.Consumer, timeout_ms: int = 500) -> list[pulsar.Message]:
    out = []
    while True:
        try:
            out.append(consumer.receive(timeout_millis=timeout_ms))
        except pulsar.Timeout:
            return out


@pytest.mark.parametrize("batching,compression", [
    (False, pulsar.CompressionType.NONE),
    (True, pulsar.CompressionType.LZ4),
    (True, pulsar.CompressionType.ZSTD),
])
def test_sync_and_async_with_keys_properties_event_time(node_client: pulsar.Client, batching: bool, compression: object) -> None:
    t = topic()
    consumer = node_client.subscribe(t, "s", consumer_type=CT.Shared)
    producer = node_client.create_producer(t, batching_enabled=batching, compression_type=compression,
                                      batching_max_publish_delay_ms=20)
    ids = [producer.send(f"sync-{i}".encode(), properties={"i": str(i)}, partition_key=f"k{i}",
                         event_timestamp=1_000_000 + i) for i in range(5)]
    done = threading.Event()
    results: list[object] = []

    def cb(res: object, mid: object) -> None:
        results.append(res)
        if len(results) == 100:
            done.set()

    for i in range(100):
        producer.send_async(f"async-{i}".encode(), cb)
    producer.flush()
    assert done.wait(10) and all(r == pulsar.Result.Ok for r in results)
    got = [consumer.receive(timeout_millis=5000) for _ in range(105)]
    assert [m.data() for m in got[:5]] == [f"sync-{i}".encode() for i in range(5)]
    assert [m.message_id() for m in got[:5]] == ids
    assert got[3].properties() == {"i": "3"} and got[3].partition_key() == "k3"
    assert got[3].event_timestamp() == 1_000_003
    assert sorted(m.data() for m in got[5:]) == sorted(f"async-{i}".encode() for i in range(100))
    for m in got:
        consumer.acknowledge(m)
    producer.close()
    consumer.close()


def test_partitioned_topic_routing_and_partition_index(node: Standalone | Cluster, node_client: pulsar.Client) -> None:
    name = f"e2e-part-{uuid.uuid4().hex[:8]}"
    r = httpx.put(f"{node.admin}/admin/v2/persistent/public/default/{name}/partitions", json=3)
    assert r.status_code == 204, r.text
    assert httpx.get(f"{node.admin}/admin/v2/persistent/public/default/{name}/partitions").json() == {"partitions": 3}
    t = f"persistent://public/default/{name}"
    consumer = node_client.subscribe(t, "s")
    rr = node_client.create_producer(t, message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
                                batching_enabled=False)
    single = node_client.create_producer(t, message_routing_mode=pulsar.PartitionsRoutingMode.UseSinglePartition,
                                    batching_enabled=False)
    sent = [rr.send(f"rr-{i}".encode()) for i in range(9)] + [single.send(f"sp-{i}".encode()) for i in range(3)]
    assert {m.partition() for m in sent[:9]} == {0, 1, 2}
    assert len({m.partition() for m in sent[9:]}) == 1
    got = drain(consumer, 1000)
    assert sorted(m.data() for m in got) == sorted([f"rr-{i}".encode() for i in range(9)] + [f"sp-{i}".encode() for i in range(3)])
    assert {m.message_id().partition() for m in got} == {0, 1, 2}
    assert sorted(str(m.message_id()) for m in got) == sorted(str(m) for m in sent)
    stats = httpx.get(f"{node.admin}/admin/v2/persistent/public/default/{name}/partitioned-stats").json()
    assert stats["metadata"]["partitions"] == 3 and stats["msgInCounter"] == 12


def test_pattern_subscription(node_client: pulsar.Client) -> None:
    prefix = f"e2e-pat-{uuid.uuid4().hex[:6]}"
    producers = [node_client.create_producer(f"persistent://public/default/{prefix}-{i}") for i in range(2)]
    consumer = node_client.subscribe(re.compile(f"persistent://public/default/{prefix}-.*"), "s",
                                initial_position=pulsar.InitialPosition.Earliest)
    for i, p in enumerate(producers):
        p.send(f"from-{i}".encode())
    got = drain(consumer, 2000)
    assert sorted(m.data() for m in got) == [b"from-0", b"from-1"]


def test_dead_letter_queue(node_client: pulsar.Client) -> None:
    t = topic()
    dlq = t + "-DLQ"
    consumer = node_client.subscribe(t, "s", consumer_type=CT.Shared, negative_ack_redelivery_delay_ms=100,
                                dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(
                                    max_redeliver_count=2, dead_letter_topic=dlq, initial_subscription_name="dlq-sub"))
    producer = node_client.create_producer(t, batching_enabled=False)
    producer.send(b"poison")
    counts = []
    for _ in range(3):
        m = consumer.receive(timeout_millis=5000)
        counts.append(m.redelivery_count())
        consumer.negative_acknowledge(m)
    assert counts == [0, 1, 2]
    dead = node_client.subscribe(dlq, "dlq-sub")
    assert dead.receive(timeout_millis=10000).data() == b"poison"


def test_delayed_delivery_on_shared(node_client: pulsar.Client) -> None:
    t = topic()
    consumer = node_client.subscribe(t, "s", consumer_type=CT.Shared)
    producer = node_client.create_producer(t, batching_enabled=False)
    start = time.time()
    producer.send(b"later", deliver_after=__import__("datetime").timedelta(milliseconds=1500))
    producer.send(b"now")
    first = consumer.receive(timeout_millis=5000)
    assert first.data() == b"now"
    second = consumer.receive(timeout_millis=5000)
    assert second.data() == b"later" and time.time() - start >= 1.4


def test_large_messages_and_chunking(node_client: pulsar.Client) -> None:
    t = topic()
    consumer = node_client.subscribe(t, "s")
    big = node_client.create_producer(t, batching_enabled=False)
    payload = bytes(range(250)) * 20_000  # 5 MB: fits in one frame under the 5 MiB limit
    big.send(payload)
    assert consumer.receive(timeout_millis=15000).data() == payload
    # CONNECTED told the client max_message_size (5 MiB): larger needs chunking
    with pytest.raises(pulsar.MessageTooBig):
        big.send(b"y" * (6 * 1024 * 1024))
    chunked = node_client.create_producer(t, batching_enabled=False, chunking_enabled=True)
    huge = b"x" * (12 * 1024 * 1024)
    chunked.send(huge)
    got = consumer.receive(timeout_millis=30000)
    assert got.data() == huge


def test_reader_from_message_id_and_seek_by_time(node_client: pulsar.Client) -> None:
    t = topic()
    producer = node_client.create_producer(t, batching_enabled=False)
    ids = [producer.send(str(i).encode()) for i in range(5)]
    time.sleep(0.05)
    mid_time = int(time.time() * 1000)
    time.sleep(0.05)
    ids += [producer.send(str(i).encode()) for i in range(5, 10)]
    reader = node_client.create_reader(t, ids[3])
    assert reader.read_next(timeout_millis=5000).data() == b"4"
    reader.seek(mid_time)
    assert reader.read_next(timeout_millis=5000).data() == b"5"
    reader2 = node_client.create_reader(t, ids[3], start_message_id_inclusive=True)
    assert reader2.read_next(timeout_millis=5000).data() == b"3"


def test_broker_deduplication(node: Standalone | Cluster, node_client: pulsar.Client) -> None:
    t = topic()
    r = httpx.post(f"{node.admin}/admin/v2/namespaces/public/default/deduplication", json=True)
    assert r.status_code == 204, r.text
    try:
        consumer = node_client.subscribe(t, "s")
        p = node_client.create_producer(t, producer_name="dedup-p", batching_enabled=False)
        for seq in [0, 1, 2, 1, 2, 3]:
            p.send(f"m{seq}".encode(), sequence_id=seq)
        got = drain(consumer, 1000)
        assert [m.data() for m in got] == [b"m0", b"m1", b"m2", b"m3"]
        p.close()
        p2 = node_client.create_producer(t, producer_name="dedup-p", batching_enabled=False)
        assert p2.last_sequence_id() == 3
    finally:
        httpx.delete(f"{node.admin}/admin/v2/namespaces/public/default/deduplication")


def test_dedup_stores_a_partly_new_batch(node: Standalone | Cluster, node_client: pulsar.Client) -> None:
    """A re-sent batch whose first sequence id is stored but whose highest one is not is stored:
    it used to be dropped whole as a duplicate, losing its new (acknowledged) messages. Our
    ``clients`` producer sets highest_sequence_id on a batch (the official C++ client does not)."""
    import clients

    t = topic()
    r = httpx.post(f"{node.admin}/admin/v2/namespaces/public/default/deduplication", json=True)
    assert r.status_code == 204, r.text
    c = clients.Client(node.url, operation_timeout_seconds=15)
    try:
        reader = node_client.create_reader(t, pulsar.MessageId.earliest)
        for seqs in (range(0, 10), range(5, 15), range(0, 15)):  # the last batch: all stored already
            p = c.create_producer(t, producer_name="dedup-batch", batching_enabled=True,
                                  batching_max_messages=100, batching_max_publish_delay_ms=60_000)
            acked: list[int] = []
            for seq in seqs:
                p.send_async(f"m{seq}".encode(), lambda res, _mid, s=seq: acked.append(s)
                             if res == clients.Result.Ok else None, sequence_id=seq)
            p.flush()
            assert sorted(acked) == list(seqs)
            p.close()
        got = []
        while True:
            try:
                got.append(reader.read_next(timeout_millis=1000).data())
            except pulsar.Timeout:
                break
        # 0..9, then the partly-new batch whole (5..9 again: stored before, re-sent in one batch with 10..14)
        assert got == [f"m{i}".encode() for i in list(range(10)) + list(range(5, 15))]
    finally:
        c.close()
        httpx.delete(f"{node.admin}/admin/v2/namespaces/public/default/deduplication")
