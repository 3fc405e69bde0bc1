"""Structured Streaming against ``quire standalone``: checkpointed Parquet sink, stop/restart,
backlog drained by commits, failOnDataLoss, exactly-once streaming writes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.spark.conftest import admin_call, create_partitioned


def produce(node: Any, topic: str, values: list[bytes]) -> None:
    c = node.client()
    try:
        p = c.create_producer(topic, batching_enabled=False)
        for v in values:
            p.send_async(v, None)
        p.flush()
        p.close()
    finally:
        c.close()


def stream(spark: Any, node: Any, **options: str) -> Any:
    r = spark.readStream.format("pulsar").option("service.url", node.url).option("admin.url", node.admin)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def backlogs(node: Any, topic: str, parts: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in range(parts):
        st: Any = admin_call(node, "GET", f"/admin/v2/persistent/public/default/{topic}-partition-{i}/stats")
        for name, sub in st["subscriptions"].items():
            out[name] = out.get(name, 0) + sub["msgBacklog"]
    return out


def test_stream_to_parquet_stop_restart_exactly_once_and_backlog_drains(
        spark: Any, pulsar_node: Any, tmp_path: Path) -> None:
    topic = "spark-stream-parquet"
    create_partitioned(pulsar_node, topic, 2)
    first = [b"a-%04d" % i for i in range(300)]
    produce(pulsar_node, topic, first)
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")

    def start(**trigger: Any) -> Any:
        df = stream(spark, pulsar_node, topic=topic, startingOffsets="earliest", maxEntriesPerTrigger="40")
        return (df.select("value", "__topic", "__messageId").writeStream.format("parquet")
                .option("path", out).option("checkpointLocation", ckpt).trigger(**trigger).start())

    q = start(processingTime="200 milliseconds")
    try:
        deadline = time.monotonic() + 120
        while (q.lastProgress is None or q.lastProgress["batchId"] < 2) and time.monotonic() < deadline:
            assert q.exception() is None
            time.sleep(0.2)
        assert q.lastProgress is not None and q.lastProgress["batchId"] >= 2
    finally:
        q.stop()  # mid-stream: 300 entries at 40 per trigger need 8 batches
    partial = spark.read.parquet(out).count()
    assert 0 < partial < 300
    # the query's subscription exists and holds only what is not committed yet
    subs = backlogs(pulsar_node, topic, 2)
    assert len(subs) == 1 and 0 < list(subs.values())[0] < 300

    second = [b"b-%04d" % i for i in range(100)]
    produce(pulsar_node, topic, second)
    q = start(availableNow=True)
    q.awaitTermination(180)
    assert q.exception() is None
    values = [bytes(r.value) for r in spark.read.parquet(out).collect()]
    assert len(values) == len(set(values)) == 400
    assert set(values) == set(first + second)
    # the caught-up query released everything: its subscription's backlog is 0 (not one batch behind)
    assert backlogs(pulsar_node, topic, 2) == {list(subs)[0]: 0}


def test_streaming_write_exactly_once_across_retry_and_restart(spark: Any, pulsar_node: Any, tmp_path: Path) -> None:
    admin_call(pulsar_node, "POST", "/admin/v2/namespaces/public/default/deduplication", True)
    src, dst = "spark-stream-src", "spark-stream-dst"
    produce(pulsar_node, src, [b"m-%04d" % i for i in range(120)])
    ckpt = str(tmp_path / "ckpt")

    def run(**extra: str) -> None:
        df = stream(spark, pulsar_node, topic=src, startingOffsets="earliest", maxEntriesPerTrigger="50")
        w = (df.selectExpr("value", "__key").writeStream.format("pulsar").option("service.url", pulsar_node.url)
             .option("topic", dst).option("checkpointLocation", ckpt))
        for k, v in extra.items():
            w = w.option(k, v)
        q = w.trigger(availableNow=True).start()
        q.awaitTermination(180)
        assert q.exception() is None

    run(**{"test.failAfterRows": "20"})  # every task's first attempt fails after storing 20 rows
    produce(pulsar_node, src, [b"m-%04d" % i for i in range(120, 150)])
    run()  # a restart from the checkpoint
    rows = (spark.read.format("pulsar").option("service.url", pulsar_node.url)
            .option("admin.url", pulsar_node.admin).option("topic", dst).load().collect())
    values = sorted(bytes(r.value) for r in rows)
    assert values == [b"m-%04d" % i for i in range(150)]


def test_stream_picks_up_new_partitions_and_topics(spark: Any, pulsar_node: Any) -> None:
    create_partitioned(pulsar_node, "spark-grow", 1)
    produce(pulsar_node, "spark-grow", [b"g0-%d" % i for i in range(5)])
    df = stream(spark, pulsar_node, topicsPattern="spark-grow.*", startingOffsets="earliest")
    q = df.select("value").writeStream.format("memory").queryName("grow").start()
    try:
        q.processAllAvailable()
        admin_call(pulsar_node, "POST", "/admin/v2/persistent/public/default/spark-grow/partitions", 3)
        c = pulsar_node.client()
        try:
            for i in (1, 2):
                p = c.create_producer(f"spark-grow-partition-{i}", batching_enabled=False)
                p.send(b"g%d-new" % i)
                p.close()
        finally:
            c.close()
        produce(pulsar_node, "spark-grow-extra", [b"extra"])
        deadline = time.monotonic() + 60
        want = {b"g0-%d" % i for i in range(5)} | {b"g1-new", b"g2-new", b"extra"}
        got: set[bytes] = set()
        while got != want and time.monotonic() < deadline:
            q.processAllAvailable()
            got = {bytes(r.value) for r in spark.sql("select value from grow").collect()}
        assert got == want
        assert spark.sql("select value from grow").count() == len(want)
        # the running query is caught up: its subscriptions hold no backlog on any partition or topic
        q.processAllAvailable()
        stats = [admin_call(pulsar_node, "GET", f"/admin/v2/persistent/public/default/{t}/stats")
                 for t in ("spark-grow-partition-0", "spark-grow-partition-1", "spark-grow-partition-2",
                           "spark-grow-extra")]
        query_subs = [sub for st in stats for sub in st["subscriptions"].values()]  # type: ignore[index]
        assert len(query_subs) == 4 and [sub["msgBacklog"] for sub in query_subs] == [0, 0, 0, 0]
    finally:
        q.stop()
