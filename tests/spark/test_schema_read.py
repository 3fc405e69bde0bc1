"""Topics with a JSON or AVRO schema (registered by the official client's ``pulsar.schema``
producers) read as the record's columns, in both read modes, batch and streaming."""

from __future__ import annotations

from typing import Any

import pulsar
import pytest
from pulsar.schema import Array, AvroSchema, Boolean, Double, Integer, JsonSchema, Long, Map, Record, String

from tests.spark.conftest import create_partitioned


class Inner(Record):
    x = Integer()


class Reading(Record):
    sensor = String()
    seq = Long(required=True)
    value = Double()
    ok = Boolean()
    tags = Array(String())
    attrs = Map(String())
    inner = Inner()


def sent_records(n: int) -> list[Reading]:
    return [Reading(sensor=f"s{i % 3}", seq=i, value=i / 4, ok=i % 2 == 0, tags=[f"t{i}"] * (i % 3),
                    attrs={"i": str(i)}, inner=Inner(x=i * 10) if i % 5 else None) for i in range(n)]


def produce(node: Any, topic: str, schema: Any, records: list[Reading]) -> None:
    c = node.client()
    try:
        p = c.create_producer(topic, schema=schema, batching_enabled=True, batching_max_messages=7)
        for i, r in enumerate(records):
            p.send_async(r, None, partition_key=f"k{i}")
        p.flush()
        p.close()
    finally:
        c.close()


def as_tuple(r: Any) -> tuple:
    inner = r["inner"]["x"] if r["inner"] is not None else None
    return (r["sensor"], r["seq"], r["value"], r["ok"], list(r["tags"] or []), dict(r["attrs"] or {}), inner)


def expected(records: list[Reading]) -> list[tuple]:
    return sorted(((r.sensor, r.seq, r.value, r.ok, list(r.tags or []), dict(r.attrs or {}),
                    r.inner.x if r.inner is not None else None) for r in records), key=lambda t: t[1])


@pytest.mark.parametrize("kind", ["json", "avro"])
def test_schema_topic_reads_as_record_columns(spark: Any, pulsar_node: Any, kind: str) -> None:
    topic = f"spark-schema-{kind}"
    create_partitioned(pulsar_node, topic, 2)
    records = sent_records(40)
    produce(pulsar_node, topic, JsonSchema(Reading) if kind == "json" else AvroSchema(Reading), records)

    def load(mode: str) -> Any:
        r = (spark.read.format("pulsar").option("service.url", pulsar_node.url).option("admin.url", pulsar_node.admin)
             .option("topic", topic).option("readMode", mode))
        if mode == "direct":
            r = r.option("metadata.url", f"rocksdb://{pulsar_node.data_dir / 'metadata'}")
        return r.load()

    for mode in ("broker", "direct"):
        df = load(mode)
        assert df.columns == ["sensor", "seq", "value", "ok", "tags", "attrs", "inner", "__key", "__topic",
                              "__messageId", "__publishTime", "__eventTime", "__messageProperties"], mode
        assert df.schema["seq"].dataType.simpleString() == "bigint"
        assert df.schema["inner"].dataType.simpleString() == "struct<x:int>"
        rows = df.collect()
        assert sorted((as_tuple(r) for r in rows), key=lambda t: t[1]) == expected(records), mode
        assert {r["__key"] for r in rows} == {f"k{i}" for i in range(40)}
        assert df.where("seq >= 30 and sensor = 's0'").count() == len([i for i in range(30, 40) if i % 3 == 0])


def test_schema_topic_streams_as_record_columns(spark: Any, pulsar_node: Any) -> None:
    topic = "spark-schema-stream"
    records = sent_records(25)
    produce(pulsar_node, topic, AvroSchema(Reading), records)
    q = (spark.readStream.format("pulsar").option("service.url", pulsar_node.url)
         .option("admin.url", pulsar_node.admin).option("topic", topic).option("startingOffsets", "earliest").load()
         .select("seq", "sensor", "inner").writeStream.format("memory").queryName("schema_stream").start())
    try:
        q.processAllAvailable()
        got = sorted((r.seq, r.sensor, r.inner.x if r.inner else None)
                     for r in spark.sql("select * from schema_stream").collect())
        assert got == [(r.seq, r.sensor, r.inner.x if r.inner else None) for r in records]
    finally:
        q.stop()


def test_topics_with_different_schemas_are_an_option_error(spark: Any, pulsar_node: Any) -> None:
    produce(pulsar_node, "spark-schema-a", JsonSchema(Reading), sent_records(1))
    c = pulsar_node.client()
    try:
        c.create_producer("spark-schema-b").send(b"raw")
    finally:
        c.close()
    with pytest.raises(Exception, match="'topics'.*different value schemas"):
        (spark.read.format("pulsar").option("service.url", pulsar_node.url).option("admin.url", pulsar_node.admin)
         .option("topics", "spark-schema-a,spark-schema-b").load().collect())


_ = pulsar  # the official client is what registers the schemas


def _produce_evolving(node: Any, topic: str, kind: str, runs: Any) -> None:
    """``(version, seqs)`` runs of evolving records, each with a producer of that schema version."""
    c = node.client()
    try:
        for version, seqs in runs:
            schema, record = _evolving(kind, version == 2)
            p = c.create_producer(topic, schema=schema, batching_enabled=True, batching_max_messages=7)
            for i in seqs:
                p.send_async(record(seq=i, name=f"n{i}", **({"level": i} if version == 2 else {})), None,
                             partition_key=f"k{i}")
            p.flush()
            p.close()
    finally:
        c.close()


def _evolving(kind: str, v2: bool) -> Any:
    """Version 1 of an evolving record, or version 2: one field added with a default (the same
    record name, as schema evolution needs)."""
    fields: dict[str, Any] = {"seq": Long(required=True), "name": String()}
    if v2:
        fields["level"] = Integer(required=True, default=7, required_default=True)
    record = type("Evolving", (Record,), fields)
    return JsonSchema(record) if kind == "json" else AvroSchema(record), record


@pytest.mark.parametrize("kind", ["json", "avro"])
def test_rows_written_with_an_older_schema_version_read_with_the_latest_columns(
        spark: Any, pulsar_node: Any, kind: str) -> None:
    """Messages written with schema v1 decode with v1 (their writer schema) and read as v2's
    columns: the field v2 added takes its default; v2's messages keep their own values."""
    topic = f"spark-schema-evolve-{kind}"
    create_partitioned(pulsar_node, topic, 2)
    _produce_evolving(pulsar_node, topic, kind, ((1, range(0, 30)), (2, range(30, 50))))
    want = [(i, f"n{i}", 7 if i < 30 else i) for i in range(50)]
    for mode in ("broker", "direct"):
        r = (spark.read.format("pulsar").option("service.url", pulsar_node.url).option("admin.url", pulsar_node.admin)
             .option("topic", topic).option("readMode", mode)
             .option("metadata.url", f"rocksdb://{pulsar_node.data_dir / 'metadata'}"))
        df = r.load()
        assert df.columns[:3] == ["seq", "name", "level"], mode
        assert sorted((row.seq, row.name, row.level) for row in df.collect()) == want, mode


@pytest.mark.parametrize("kind", ["json", "avro"])
def test_stream_over_an_evolved_schema_reads_older_versions_with_the_latest_columns(
        spark: Any, pulsar_node: Any, kind: str) -> None:
    """A streaming read of a topic whose schema evolved (v1, then v2 adding a defaulted field):
    every micro-batch has v2's columns; v1's messages, before the query started and after (a
    v1 producer still writing), read with the default, v2's with their own values."""
    topic = f"spark-schema-evolve-stream-{kind}"
    create_partitioned(pulsar_node, topic, 2)
    _produce_evolving(pulsar_node, topic, kind, ((1, range(0, 20)), (2, range(20, 35))))
    name = f"evolve_stream_{kind}"
    q = (spark.readStream.format("pulsar").option("service.url", pulsar_node.url)
         .option("admin.url", pulsar_node.admin).option("topic", topic).option("startingOffsets", "earliest").load()
         .select("seq", "name", "level").writeStream.format("memory").queryName(name).start())
    try:
        q.processAllAvailable()
        got = sorted((r.seq, r.name, r.level) for r in spark.sql(f"select * from {name}").collect())
        assert got == [(i, f"n{i}", 7 if i < 20 else i) for i in range(35)]
        _produce_evolving(pulsar_node, topic, kind, ((1, range(35, 45)), (2, range(45, 50))))
        q.processAllAvailable()
        got = sorted((r.seq, r.name, r.level) for r in spark.sql(f"select * from {name}").collect())
        assert got == [(i, f"n{i}", 7 if i < 20 or 35 <= i < 45 else i) for i in range(50)]
    finally:
        q.stop()
