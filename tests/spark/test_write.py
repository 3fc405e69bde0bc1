"""Exactly-once batch writes (broker deduplication) from a real Spark session to ``quire standalone``."""

from __future__ import annotations

import datetime as dt
from typing import Any

from tests.spark.conftest import admin_call, create_partitioned


def read_all(spark: Any, node: Any, topic: str, **options: str) -> list[Any]:
    return (spark.read.format("pulsar").option("service.url", node.url).option("admin.url", node.admin)
            .option("topic", topic).options(**options).load().collect())


def enable_dedup(node: Any) -> None:
    admin_call(node, "POST", "/admin/v2/namespaces/public/default/deduplication", True)


def source_df(spark: Any, n: int, parts: int) -> Any:
    from pyspark.sql import functions as F

    return (spark.range(n, numPartitions=parts)
            .select(F.format_string("row-%05d", "id").cast("binary").alias("value"),
                    F.format_string("k%d", F.col("id") % 7).alias("__key"),
                    F.create_map(F.lit("id"), F.col("id").cast("string")).alias("__messageProperties"),
                    F.timestamp_millis(F.col("id") + F.lit(1_700_000_000_000)).alias("__eventTime")))


def test_batch_write_metadata_retry_and_rewrite_store_each_row_once(spark: Any, pulsar_node: Any) -> None:
    enable_dedup(pulsar_node)
    topic = "spark-write-once"
    create_partitioned(pulsar_node, topic, 3)
    df = source_df(spark, 300, 2)
    writer = (df.write.format("pulsar").option("service.url", pulsar_node.url).option("topic", topic)
              .option("writeId", "job-1").mode("append"))
    # attempt 0 of every task stores 60 rows, then fails; Spark retries the task (local[2,3])
    writer.option("test.failAfterRows", "60").save()
    rows = read_all(spark, pulsar_node, topic)
    values = sorted(bytes(r.value) for r in rows)
    assert values == sorted(b"row-%05d" % i for i in range(300))
    one = next(r for r in rows if bytes(r.value) == b"row-00010")
    assert one["__key"] == "k3" and dict(one["__messageProperties"]) == {"id": "10"}
    assert one["__eventTime"] == dt.datetime.fromtimestamp(1_700_000_000.010, dt.timezone.utc).replace(tzinfo=None) \
        or int(one["__eventTime"].timestamp() * 1000) == 1_700_000_000_010
    # a key goes to one partition
    by_key: dict[str, set[str]] = {}
    for r in rows:
        by_key.setdefault(r["__key"], set()).add(r["__topic"])
    assert all(len(t) == 1 for t in by_key.values())
    # the same job run again (same writeId): nothing new
    writer.save()
    assert len(read_all(spark, pulsar_node, topic)) == 300


def test_write_target_from_topic_column(spark: Any, pulsar_node: Any) -> None:
    from pyspark.sql import functions as F

    enable_dedup(pulsar_node)
    df = spark.range(10, numPartitions=1).select(
        F.col("id").cast("string").alias("value"),
        F.when(F.col("id") % 2 == 0, "spark-write-even").otherwise("spark-write-odd").alias("__topic"))
    # pass-through options reach the producers and readers: unbatched, each row is its own entry
    df.write.format("pulsar").option("service.url", pulsar_node.url).option("pulsar.producer.batchingEnabled", "false") \
        .option("pulsar.client.operationTimeoutMs", "20000").mode("append").save()
    even = sorted(int(bytes(r.value)) for r in read_all(spark, pulsar_node, "spark-write-even",
                                                        **{"pulsar.reader.receiverQueueSize": "2"}))
    odd = sorted(int(bytes(r.value)) for r in read_all(spark, pulsar_node, "spark-write-odd"))
    assert even == [0, 2, 4, 6, 8] and odd == [1, 3, 5, 7, 9]
    stats: Any = admin_call(pulsar_node, "GET", "/admin/v2/persistent/public/default/spark-write-even/internalStats")
    assert stats["numberOfEntries"] == 5


def test_write_needs_a_topic_and_a_value(spark: Any, pulsar_node: Any) -> None:
    import pytest

    with pytest.raises(Exception, match="'topic'"):
        spark.range(1).selectExpr("'x' as value").write.format("pulsar") \
            .option("service.url", pulsar_node.url).mode("append").save()
    with pytest.raises(Exception, match="'value'"):
        spark.range(1).write.format("pulsar").option("service.url", pulsar_node.url) \
            .option("topic", "t").mode("append").save()
