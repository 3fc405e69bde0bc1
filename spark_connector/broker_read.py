"""Executor side of ``readMode=broker``: one range of one topic-partition through a Pulsar reader.

Uses our own ``clients`` package (pure Python, a trio loop thread created inside the task): it
is safe in Spark's forked Python workers (no native threads inherited across fork, no C++
logger calling back into an exiting interpreter), and its ``MessageId.serialize()`` is
byte-compatible with the official client's. The reader is non-durable: nothing pins retention.
"""

from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa

from .admin import PARTITION_SUFFIX
from .errors import PulsarConnectorError
from .positions import EARLIEST, Pos
from .rows import BatchBuilder, MessageIdEncoder, message_id

IDLE_CHECK_MS = 200  # a read that waits this long asks the broker whether anything is left


def read_range(service_url: str, topic: str, start: Pos, end: Pos, *, poll_timeout_ms: int,
               batch_rows: int, starting_time: int | None = None, ending_time: int | None = None,
               client_conf: dict[str, Any] | None = None, reader_conf: dict[str, Any] | None = None
               ) -> Iterator[pa.RecordBatch]:
    import clients
    from clients.message_id import MessageId

    builder = BatchBuilder(topic)
    partition = int(topic.rsplit(PARTITION_SUFFIX, 1)[1]) if PARTITION_SUFFIX in topic else -1
    encoder = MessageIdEncoder(partition)
    last_entry = Pos(end.ledger_id, end.entry_id - 1) if end.batch_index < 0 and end.entry_id > 0 else None
    client = clients.Client(service_url, **{"operation_timeout_seconds": 30, **(client_conf or {})})
    try:
        start_id = MessageId.earliest if start == EARLIEST else MessageId(
            -1, start.ledger_id, start.entry_id, start.batch_index)
        reader = client.create_reader(topic, start_id, start_message_id_inclusive=True,
                                      **{"receiver_queue_size": 2000, **(reader_conf or {})})
        waited = 0.0
        while True:
            try:
                msg = reader.read_next(IDLE_CHECK_MS)
            except clients.Timeout:
                if not reader.has_message_available():
                    break  # the range ends at the topic's end
                waited += IDLE_CHECK_MS
                if waited >= poll_timeout_ms:
                    raise PulsarConnectorError(
                        f"{topic}: no message within pollTimeoutMs={poll_timeout_ms} before {end}") from None
                continue
            waited = 0.0
            mid = msg.message_id()
            ledger, entry, batch = mid.ledger_id(), mid.entry_id(), mid.batch_index()
            if (ledger, entry, batch if batch > 0 else 0) >= end:
                break
            publish = msg.publish_timestamp()
            if ending_time is not None and publish >= ending_time:
                break
            if starting_time is None or publish >= starting_time:
                # ids as the official client reports them (with the partition index)
                mid_bytes = encoder.encode(ledger, entry, batch, mid.batch_size) if not mid.chunk_ids else \
                    message_id(partition, ledger, entry, batch, mid.batch_size, mid.chunk_ids).serialize()
                builder.add(msg.data(), msg.partition_key(), mid_bytes, publish, msg.event_timestamp(),
                            msg.properties())
                if len(builder) >= batch_rows:
                    yield builder.flush()
            if last_entry is not None and (ledger, entry) == last_entry[:2] \
                    and not reader.has_message_available():
                break
        reader.close()
    finally:
        client.close()
    if len(builder):
        yield builder.flush()
