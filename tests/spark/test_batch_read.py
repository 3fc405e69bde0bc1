"""Batch reads through a real local Spark session against a real ``quire standalone``."""

from __future__ import annotations

import json
import time
from typing import Any

import pulsar
import pytest

from tests.spark.conftest import create_partitioned

from clients.message_id import MessageId


def produce_mixed(node: Any, topic: str) -> dict[bytes, dict[str, Any]]:
    """Batched, LZ4-compressed, unbatched and chunked messages; returns what each message carried."""
    sent: dict[bytes, dict[str, Any]] = {}
    c = node.client()
    try:
        batched = c.create_producer(topic, batching_enabled=True, batching_max_messages=50,
                                    compression_type=pulsar.CompressionType.LZ4)
        for i in range(400):
            value = b"b-%04d-" % i + b"x" * 90
            props = {"i": str(i), "kind": "batched"}
            batched.send_async(value, None, partition_key=f"key-{i % 13}", properties=props,
                               event_timestamp=1_700_000_000_000 + i)
            sent[value] = {"key": f"key-{i % 13}", "props": props, "event": 1_700_000_000_000 + i}
        batched.flush()
        single = c.create_producer(topic, batching_enabled=False, chunking_enabled=True)
        for i in range(40):
            value = b"s-%04d-" % i + b"y" * 30
            props = {"i": str(i), "kind": "single"}
            single.send(value, properties=props)
            sent[value] = {"key": None, "props": props, "event": None}
        for i in range(3):  # chunked: above the node's 64 KiB max message size
            value = b"c-%04d-" % i + bytes(range(256)) * 600
            single.send(value, partition_key="big", properties={"kind": "chunked"})
            sent[value] = {"key": "big", "props": {"kind": "chunked"}, "event": None}
        batched.close()
        single.close()
    finally:
        c.close()
    return sent


def read(spark: Any, node: Any, **options: str) -> Any:
    r = spark.read.format("pulsar").option("service.url", node.url).option("admin.url", node.admin)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_batch_read_equals_what_was_produced(spark: Any, pulsar_node: Any) -> None:
    topic = "spark-batch-mixed"
    create_partitioned(pulsar_node, topic, 4)
    before = int(time.time() * 1000)
    sent = produce_mixed(pulsar_node, topic)
    after = int(time.time() * 1000)
    df = read(spark, pulsar_node, topic=topic)
    assert df.rdd.getNumPartitions() == 1  # four small topic-partitions packed into one task
    assert sorted(bytes(r.value) for r in read(spark, pulsar_node, topic=topic, minPartitions="4").collect()) \
        == sorted(sent) and read(spark, pulsar_node, topic=topic, minPartitions="4").rdd.getNumPartitions() == 4
    rows = df.collect()
    assert len(rows) == len(sent)
    got = {bytes(r["value"]): r for r in rows}
    assert set(got) == set(sent)
    for value, want in sent.items():
        r = got[value]
        assert r["__key"] == want["key"]
        assert dict(r["__messageProperties"]) == want["props"]
        if want["event"] is None:
            assert r["__eventTime"] is None
        else:
            assert int(r["__eventTime"].timestamp() * 1000) == want["event"]
        assert before - 1000 <= r["__publishTime"].timestamp() * 1000 <= after + 1000
        assert r["__topic"].startswith(f"persistent://public/default/{topic}-partition-")
        mid = MessageId.deserialize(bytes(r["__messageId"]))
        assert r["__topic"].endswith(f"-partition-{mid.partition()}")
    # ids are unique and per partition in order
    ids = [(r["__topic"], MessageId.deserialize(bytes(r["__messageId"]))) for r in rows]
    assert len({(t, str(m)) for t, m in ids}) == len(rows)
    # the same through the official client's reader ids: bytes equal
    c = pulsar_node.client()
    try:
        reader = c.create_reader(f"{topic}-partition-0", pulsar.MessageId.earliest)
        official = set()
        while reader.has_message_available():
            mid = reader.read_next(5000).message_id()
            official.add((mid.partition(), mid.ledger_id(), mid.entry_id(), mid.batch_index()))
        reader.close()
    finally:
        c.close()
    ours = {(m.partition(), m.ledger_id(), m.entry_id(), m.batch_index())
            for m in (MessageId.deserialize(bytes(r["__messageId"])) for r in rows)
            if m.partition() == 0}
    assert ours == official
    # readers are non-durable: the batch reads left no subscription pinning retention
    from tests.spark.conftest import admin_call
    assert admin_call(pulsar_node, "GET", f"/admin/v2/persistent/public/default/{topic}/subscriptions") == []
    # nor a non-durable one: the read closes its connection without closing its consumer first
    deadline = time.monotonic() + 10
    while True:
        left = {i: admin_call(pulsar_node, "GET", f"/admin/v2/persistent/public/default/{topic}-partition-{i}/stats")
                ["subscriptions"] for i in range(4)}  # type: ignore[index]
        if not any(left.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not any(left.values()), left


def test_offsets_and_times_select_ranges(spark: Any, pulsar_node: Any) -> None:
    topic = "spark-batch-ranges"
    c = pulsar_node.client()
    try:
        p = c.create_producer(topic, batching_enabled=False)
        ids = [p.send(b"m%d" % i) for i in range(30)]
        time.sleep(0.05)
        mark = int(time.time() * 1000)
        time.sleep(0.05)
        ids += [p.send(b"m%d" % i) for i in range(30, 40)]
        p.close()
    finally:
        c.close()
    tp = f"persistent://public/default/{topic}"
    start, end = ids[5], ids[25]
    df = read(spark, pulsar_node, topic=topic,
              startingOffsets=json.dumps({tp: list(start.serialize())}),
              endingOffsets=json.dumps({tp: f"{end.ledger_id()}:{end.entry_id()}"}))
    assert sorted(bytes(r.value) for r in df.collect()) == sorted(b"m%d" % i for i in range(5, 25))
    late = read(spark, pulsar_node, topic=topic, startingTime=str(mark))
    assert sorted(bytes(r.value) for r in late.collect()) == sorted(b"m%d" % i for i in range(30, 40))
    early = read(spark, pulsar_node, topic=topic, endingTime=str(mark))
    assert early.count() == 30
    assert read(spark, pulsar_node, topic=topic, startingOffsets="latest").count() == 0


def test_topics_and_pattern_and_empty_topic(spark: Any, pulsar_node: Any) -> None:
    c = pulsar_node.client()
    try:
        for name, n in (("spark-pat-a", 3), ("spark-pat-b", 5)):
            p = c.create_producer(name)
            for i in range(n):
                p.send(b"%s-%d" % (name.encode(), i))
            p.close()
        c.create_producer("spark-pat-empty").close()
    finally:
        c.close()
    assert read(spark, pulsar_node, topics="spark-pat-a,spark-pat-b").count() == 8
    assert read(spark, pulsar_node, topicsPattern="spark-pat-.*").count() == 8
    assert read(spark, pulsar_node, topic="spark-pat-empty").count() == 0


def test_large_backlog_splits_by_ledger(spark: Any, pulsar_node: Any) -> None:
    from tests.spark.conftest import admin_call

    topic = "spark-batch-split"
    c = pulsar_node.client()
    try:
        p = c.create_producer(topic, batching_enabled=False)
        for i in range(60):
            p.send_async(b"%d" % i, None)
            if i % 20 == 19:
                p.flush()
                admin_call(pulsar_node, "PUT", f"/admin/v2/persistent/public/default/{topic}/unload")
                p.close()
                p = c.create_producer(topic, batching_enabled=False)
        p.close()
    finally:
        c.close()
    df = read(spark, pulsar_node, topic=topic, entriesPerPartition="20")
    assert df.rdd.getNumPartitions() >= 3
    assert sorted(int(r.value) for r in df.collect()) == list(range(60))
    # by size: a batched entry holds many messages, so ranges also split by bytes
    by_bytes = read(spark, pulsar_node, topic=topic, bytesPerPartition="100")
    assert by_bytes.rdd.getNumPartitions() >= 3
    assert sorted(int(r.value) for r in by_bytes.collect()) == list(range(60))


@pytest.mark.parametrize("options,named", [
    ({}, "topic"),
    ({"topic": "a", "topics": "b"}, "topic"),
    ({"topic": "a", "bogus": "1"}, "bogus"),
    ({"topic": "a", "startingOffsets": "{not json"}, "startingOffsets"),
    ({"topic": "a", "endingOffsets": "earliest"}, "endingOffsets"),
    ({"topic": "a", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"topic": "a", "readMode": "magic"}, "readMode"),
    ({"topic": "a", "readMode": "direct"}, "metadata.url"),
    ({"topic": "a", "startingTime": "soon"}, "startingTime"),
    ({"topic": "a", "startingTime": "5", "startingOffsets": "earliest"}, "startingTime"),
    ({"topic": "a", "maxEntriesPerTrigger": "5"}, "maxEntriesPerTrigger"),
    ({"topicsPattern": "("}, "topicsPattern"),
    ({"topic": "a", "pulsar.client.statsIntervalSeconds": "5"}, "pulsar.client.statsintervalseconds"),
    ({"topic": "a", "pulsar.producer.batchingEnabled": "true"}, "pulsar.producer.batchingEnabled"),
])
def test_option_errors_name_the_option(spark: Any, pulsar_node: Any, options: dict[str, str], named: str) -> None:
    with pytest.raises(Exception) as info:
        read(spark, pulsar_node, **options).schema  # analysis only
        read(spark, pulsar_node, **options).count()
    assert f"'{named}'" in str(info.value)


def test_fail_on_data_loss_both_ways(spark: Any, pulsar_node: Any) -> None:
    from tests.spark.conftest import admin_call

    topic = "spark-data-loss"
    c = pulsar_node.client()
    try:
        c.create_producer(topic + "-warmup").send(b"x")  # ledger ids are cluster-wide: ours is not 0
        p = c.create_producer(topic, batching_enabled=False)
        for i in range(5):
            p.send(b"%d" % i)
        p.close()
    finally:
        c.close()
    tp = f"persistent://public/default/{topic}"
    stats: Any = admin_call(pulsar_node, "GET", f"/admin/v2/persistent/public/default/{topic}/internalStats")
    first = stats["ledgers"][0]["ledgerId"]
    assert first > 0
    gone = json.dumps({tp: f"{first - 1}:3"})  # a position before the first stored entry: deleted
    with pytest.raises(Exception, match="already deleted"):
        read(spark, pulsar_node, topic=topic, startingOffsets=gone).count()
    df = read(spark, pulsar_node, topic=topic, startingOffsets=gone, failOnDataLoss="false")
    assert sorted(int(r.value) for r in df.collect()) == list(range(5))
    with pytest.raises(Exception, match="already deleted"):
        q = (spark.readStream.format("pulsar").option("service.url", pulsar_node.url)
             .option("admin.url", pulsar_node.admin).option("topic", topic).option("startingOffsets", gone)
             .load().writeStream.format("memory").queryName("lossy").trigger(availableNow=True).start())
        q.awaitTermination(120)


def test_partition_nobody_used_yet_reads_as_empty(spark: Any, pulsar_node: Any) -> None:
    topic = "spark-unused-parts"
    create_partitioned(pulsar_node, topic, 3)
    c = pulsar_node.client()
    try:
        p = c.create_producer(f"{topic}-partition-1", batching_enabled=False)
        p.send(b"only")
        p.close()
    finally:
        c.close()
    assert [bytes(r.value) for r in read(spark, pulsar_node, topic=topic).collect()] == [b"only"]


def test_broker_read_past_the_topic_end_asks_the_broker_and_ends(pulsar_node: Any) -> None:
    """A broker-mode range whose end lies past the topic's last entry (its end moved on, or was
    planned past it) waits IDLE_CHECK_MS after the last entry, asks the broker whether anything
    is left and ends: the entries it dequeued answer has_message_available (it failed with an
    AttributeError on the last entry's id)."""
    from spark_connector.broker_read import read_range
    from spark_connector.positions import EARLIEST, Pos

    topic = "persistent://public/default/spark-read-past-end"
    c = pulsar_node.client()
    try:
        p = c.create_producer(topic, batching_enabled=False)
        ids = [p.send(b"v%d" % i) for i in range(5)]
        p.close()
    finally:
        c.close()
    last = ids[-1]
    batches = list(read_range(pulsar_node.url, topic, EARLIEST, Pos(last.ledger_id(), last.entry_id() + 10),
                              poll_timeout_ms=10_000, batch_rows=100))
    assert [v for b in batches for v in b.column("value").to_pylist()] == [b"v%d" % i for i in range(5)]
