"""Batch and streaming writes, exactly once through broker message deduplication.

Each task produces with a producer name derived from (write id or streaming query id, Spark
partition id) and explicit sequence ids ``epoch << 32 | n`` (epoch = micro-batch id, 0 for a
batch write; ``n`` counts that task's rows per target partition). A retried task or a restarted
query re-sends the same (name, sequence id) pairs and the broker drops what it already stored,
so the topic holds each row once. A task first asks the broker for the last sequence id stored
under its name (``PRODUCER_SUCCESS.last_sequence_id``) and skips those rows itself. This needs deduplication enabled on the target namespace
(``POST /admin/v2/namespaces/<tenant>/<ns>/deduplication true``) or broker-wide.

Columns: ``value`` (binary or string, required), optional ``__topic``, ``__key``,
``__eventTime``, ``__messageProperties``; the target is the ``topic`` option or ``__topic``.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, StringType, StructType

from .errors import PulsarConnectorError, PulsarOptionError
from .options import PulsarOptions

SEQUENCE_EPOCH_SHIFT = 32
PRODUCER_BUSY_RETRY_S = 60.0  # a failed attempt's producer may still be connected for a while


class WriteResult(WriterCommitMessage):
    def __init__(self, rows: int) -> None:
        self.rows = rows


def check_write_schema(opts: PulsarOptions, schema: StructType) -> None:
    fields = {f.name: f for f in schema.fields}
    if "value" not in fields:
        raise PulsarOptionError("value", "the DataFrame needs a 'value' column (binary or string)")
    if not isinstance(fields["value"].dataType, (BinaryType, StringType)):
        raise PulsarOptionError("value", f"must be binary or string, not {fields['value'].dataType.simpleString()}")
    if not opts.topic and "__topic" not in fields:
        raise PulsarOptionError("topic", "give the topic option or a __topic column")


def _millis(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return int(value)
    return int(value.timestamp() * 1000)


class _TaskProducers:
    """The producers of one write task, one per target topic-partition."""

    def __init__(self, opts: PulsarOptions, name: str, epoch: int) -> None:
        import clients

        self.clients = clients
        self.opts = opts
        self.name = name
        self.epoch = epoch
        self.client = clients.Client(opts.service_url or "", **{"operation_timeout_seconds": 30, **opts.client_conf})
        self.partitions: dict[str, list[str]] = {}
        self.producers: dict[str, Any] = {}
        self.counters: dict[str, int] = {}
        self.stored_upto: dict[str, int] = {}
        self.errors: list[BaseException] = []
        self.rr: dict[str, int] = {}

    def _target(self, topic: str, key: str | None) -> str:
        from clients.partitioned_producer import murmur3_32

        parts = self.partitions.get(topic)
        if parts is None:
            parts = self.partitions[topic] = self.client.get_topic_partitions(topic)
        if len(parts) == 1:
            return parts[0]
        if key:
            return parts[murmur3_32(key.encode()) % len(parts)]
        i = self.rr.get(topic, 0)  # deterministic: the same rows go to the same partitions on a retry
        self.rr[topic] = i + 1
        return parts[i % len(parts)]

    def _producer(self, tp: str) -> Any:
        p = self.producers.get(tp)
        if p is None:
            deadline = time.monotonic() + PRODUCER_BUSY_RETRY_S
            while True:
                try:
                    p = self.client.create_producer(tp, producer_name=self.name, **{
                        "batching_enabled": True, "block_if_queue_full": True, "max_pending_messages": 5000,
                        "batching_max_publish_delay_ms": 5, **self.opts.producer_conf})
                    break
                except self.clients.ProducerBusy:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
            self.producers[tp] = p
            # What an earlier attempt already stored under this name: skip it here, so no batch
            # re-sends stored rows (the broker stores a partly-stored batch whole).
            self.stored_upto[tp] = p.last_sequence_id()
        return p

    def _done(self, result: Any, _mid: Any) -> None:
        if result != self.clients.Result.Ok:
            self.errors.append(PulsarConnectorError(f"send failed: {result}"))

    def send(self, value: Any, key: str | None, event_time: Any, props: Any, topic: str) -> None:
        if isinstance(value, str):
            value = value.encode()
        elif value is None:
            value = b""
        elif type(value) is not bytes:
            value = bytes(value)
        tp = self._target(topic, key)
        seq = self.counters.get(tp, 0)
        self.counters[tp] = seq + 1
        producer = self._producer(tp)
        sequence_id = (self.epoch << SEQUENCE_EPOCH_SHIFT) | seq
        if sequence_id <= self.stored_upto[tp]:
            return
        producer.send_async(
            value, self._done,
            properties={str(k): str(v) for k, v in props.items()} if props else None,
            partition_key=key, event_timestamp=_millis(event_time), sequence_id=sequence_id,
        )

    def flush(self) -> None:
        for p in self.producers.values():
            p.flush()
        if self.errors:
            raise PulsarConnectorError(f"{len(self.errors)} sends failed: {self.errors[0]!r}")

    def close(self) -> None:
        try:
            for p in self.producers.values():
                p.close()
        finally:
            self.client.close()


def write_rows(opts: PulsarOptions, schema: StructType, rows: Iterator[Any], name: str, epoch: int,
               attempt: int) -> WriteResult:
    from .topic_names import full_topic_name

    names = schema.fieldNames()

    def col(name: str) -> int | None:
        return names.index(name) if name in names else None

    i_value, i_key, i_event, i_props, i_topic = (col(c) for c in
                                                 ("value", "__key", "__eventTime", "__messageProperties", "__topic"))
    assert i_value is not None
    default_topic = full_topic_name(opts.topic) if opts.topic else None
    topic_names: dict[str, str] = {}
    task = _TaskProducers(opts, name, epoch)
    n = 0
    try:
        for row in rows:
            topic = default_topic
            if i_topic is not None and row[i_topic]:
                raw = row[i_topic]
                topic = topic_names.get(raw) or topic_names.setdefault(raw, full_topic_name(raw))
            if topic is None:
                raise PulsarConnectorError("a row has no __topic and no topic option is set")
            task.send(row[i_value], row[i_key] if i_key is not None else None,
                      row[i_event] if i_event is not None else None,
                      row[i_props] if i_props is not None else None, topic)
            n += 1
            if opts.fail_after_rows is not None and n == opts.fail_after_rows and attempt == 0:
                task.flush()  # the rows so far are stored: the retry must not store them again
                raise PulsarConnectorError(f"test.failAfterRows: failing attempt 0 after {n} rows")
        task.flush()
    finally:
        task.close()
    return WriteResult(n)


class _CheckedWriter:
    """Options and input schema, checked on the driver when the writer is made."""

    def __init__(self, opts: PulsarOptions, schema: StructType) -> None:
        check_write_schema(opts, schema)
        self.opts = opts
        self.schema = schema


class PulsarBatchWriter(_CheckedWriter, DataSourceWriter):
    def write(self, iterator: Iterator[Any]) -> WriteResult:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        part, attempt = (ctx.partitionId(), ctx.attemptNumber()) if ctx else (0, 0)
        return write_rows(self.opts, self.schema, iterator, f"spark-{self.opts.write_id}-{part}", 0, attempt)


class PulsarStreamWriter(_CheckedWriter, DataSourceStreamWriter):
    def write(self, iterator: Iterator[Any]) -> WriteResult:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            raise PulsarConnectorError("no TaskContext: a streaming write must run in a Spark task")
        query = ctx.getLocalProperty("sql.streaming.queryId")
        batch = ctx.getLocalProperty("streaming.sql.batchId")
        if not query or batch is None:
            raise PulsarConnectorError("the streaming query id / batch id are not visible to the task")
        name = f"spark-{self.opts.write_id if self.opts.raw.get('writeid') else query}-{ctx.partitionId()}"
        return write_rows(self.opts, self.schema, iterator, name, int(batch), ctx.attemptNumber())

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # the rows are stored when write() returns; dedup makes replays harmless

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # a replay of this batch re-sends the same sequence ids
