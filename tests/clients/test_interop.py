"""Interoperability with the official ``pulsar-client`` through the same broker, both ways."""

from __future__ import annotations

import threading

import pulsar as official_pulsar
import pytest

import clients as quire
from tests.clients.conftest import Broker

CODECS = ["NONE", "LZ4", "ZLib", "ZSTD", "SNAPPY"]


def _drain_official(consumer) -> list:  # type: ignore[no-untyped-def]
    out = []
    while True:
        try:
            msg = consumer.receive(1500)
        except official_pulsar.Timeout:
            return out
        out.append(msg)
        consumer.acknowledge(msg)


def _drain_ours(consumer) -> list:  # type: ignore[no-untyped-def]
    out = []
    while True:
        try:
            msg = consumer.receive(1500)
        except quire.Timeout:
            return out
        out.append(msg)
        consumer.acknowledge(msg)


def _send_batch(producer, n: int, **kw) -> list:  # type: ignore[no-untyped-def]
    ids: list = [None] * n
    done = threading.Event()

    def cb(i):  # type: ignore[no-untyped-def]
        def inner(res, mid):  # type: ignore[no-untyped-def]
            ids[i] = mid
            if all(x is not None for x in ids):
                done.set()
        return inner

    for i in range(n):
        producer.send_async(b"msg-%d" % i, cb(i), properties={"i": str(i)}, partition_key=f"k{i}", **kw)
    producer.flush()
    assert done.wait(10)
    return ids


@pytest.mark.parametrize("codec", CODECS)
def test_ours_to_official(client, official, topic: str, codec: str) -> None:  # type: ignore[no-untyped-def]
    consumer = official.subscribe(topic, "sub")
    producer = client.create_producer(topic, compression_type=getattr(quire.CompressionType, codec),
                                      batching_max_publish_delay_ms=50)
    ids = _send_batch(producer, 30)
    got = _drain_official(consumer)
    assert [m.data() for m in got] == [b"msg-%d" % i for i in range(30)]
    assert [m.properties() for m in got] == [{"i": str(i)} for i in range(30)]
    assert [m.partition_key() for m in got] == [f"k{i}" for i in range(30)]
    assert [m.message_id().serialize() for m in got] == [i.serialize() for i in ids]
    assert any(m.message_id().batch_index() > 0 for m in got)


@pytest.mark.parametrize("codec", CODECS)
def test_official_to_ours(client, official, topic: str, codec: str) -> None:  # type: ignore[no-untyped-def]
    consumer = client.subscribe(topic, "sub")
    producer = official.create_producer(topic, compression_type=getattr(official_pulsar.CompressionType, codec),
                                        batching_enabled=True, batching_max_publish_delay_ms=50)
    ids = _send_batch(producer, 30)
    single = official.create_producer(topic, batching_enabled=False)
    last = single.send(b"single", event_timestamp=77, ordering_key="ok")
    got = _drain_ours(consumer)
    assert [m.data() for m in got] == [b"msg-%d" % i for i in range(30)] + [b"single"]
    assert [m.properties() for m in got[:30]] == [{"i": str(i)} for i in range(30)]
    assert [m.partition_key() for m in got[:30]] == [f"k{i}" for i in range(30)]
    assert [m.message_id().serialize() for m in got] == [i.serialize() for i in ids] + [last.serialize()]
    assert got[-1].event_timestamp() == 77 and got[-1].ordering_key() == "ok"


def test_chunked_both_ways(client, official, topic: str) -> None:  # type: ignore[no-untyped-def]
    big = bytes(range(256)) * (6 * 1024 * 1024 // 256)
    theirs = official.subscribe(topic, "official-sub")
    ours = client.subscribe(topic, "our-sub")
    client.create_producer(topic, chunking_enabled=True, batching_enabled=False).send(big, properties={"from": "quire"})
    official.create_producer(topic, chunking_enabled=True, batching_enabled=False).send(big, properties={"from": "cpp"})
    got_theirs = [theirs.receive(20000) for _ in range(2)]
    got_ours = [ours.receive(20000) for _ in range(2)]
    for got in (got_theirs, got_ours):
        assert [m.data() == big for m in got] == [True, True]
        assert [m.properties()["from"] for m in got] == ["quire", "cpp"]


def test_partitioned_both_ways(client, official, broker: Broker, topic: str) -> None:  # type: ignore[no-untyped-def]
    import httpx

    path = topic.replace("persistent://", "")
    r = httpx.put(f"{broker.admin_url}/admin/v2/persistent/{path}/partitions", json=4)
    assert r.status_code in (200, 204), r.text
    theirs = official.subscribe(topic, "official-sub", consumer_type=official_pulsar.ConsumerType.Shared)
    ours = client.subscribe(topic, "our-sub", consumer_type=quire.ConsumerType.Shared)
    p1 = client.create_producer(topic, batching_enabled=False)
    p2 = official.create_producer(topic, batching_enabled=False)
    sent = []
    for i in range(8):
        sent.append((p1.send(b"q%d" % i).partition(), b"q%d" % i))
        sent.append((p2.send(b"o%d" % i).partition(), b"o%d" % i))
    assert {p for p, _ in sent} == {0, 1, 2, 3}
    want = sorted(d for _, d in sent)
    assert sorted(m.data() for m in _drain_official(theirs)) == want
    got = _drain_ours(ours)
    assert sorted(m.data() for m in got) == want
    assert all(m.message_id().partition() == int(m.topic_name().rsplit("-", 1)[1]) for m in got)


def test_message_id_from_official_seek(client, official, topic: str) -> None:  # type: ignore[no-untyped-def]
    producer = official.create_producer(topic, batching_enabled=False)
    ids = [producer.send(b"%d" % i) for i in range(4)]
    reader = client.create_reader(topic, ids[1])  # an official MessageId given to our reader
    assert reader.read_next(5000).data() == b"2"
    stored = quire.MessageId.deserialize(ids[2].serialize())
    reader.seek(stored)
    assert reader.read_next(5000).data() == b"2"


def test_compressed_chunks_both_ways(client, official, topic: str) -> None:  # type: ignore[no-untyped-def]
    import os

    big = os.urandom(6 * 1024 * 1024)  # incompressible: still above the max size after LZ4
    theirs = official.subscribe(topic, "official-sub")
    ours = client.subscribe(topic, "our-sub")
    client.create_producer(topic, chunking_enabled=True, batching_enabled=False,
                           compression_type=quire.CompressionType.LZ4).send(big)
    official.create_producer(topic, chunking_enabled=True, batching_enabled=False,
                             compression_type=official_pulsar.CompressionType.ZSTD).send(big)
    assert [theirs.receive(20000).data() == big for _ in range(2)] == [True, True]
    assert [ours.receive(20000).data() == big for _ in range(2)] == [True, True]
