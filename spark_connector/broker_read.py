"""Executor side of ``readMode=broker``: one range of one topic-partition, whole entries at a time.

A non-durable exclusive subscription of our own ``clients`` package (pure Python: safe in
Spark's forked workers, no native threads inherited across fork), whose consumer queues each
delivered entry (ledger, entry, metadata, payload) instead of one ``Message`` per message; the
entries are decoded column-wise by :class:`EntryDecoder`, as ``readMode=direct`` does. Nothing
pins retention; the subscription vanishes with the connection.
"""

from __future__ import annotations

import secrets
import threading
from typing import Any, Iterator, cast

import pyarrow as pa

from .entries import EntryDecoder
from .errors import PulsarConnectorError
from .positions import EARLIEST, Pos
from .pump import FetchChain, Put, pumped
from .task_trace import mark
from .topic_names import partition_index
from .value_schema import ValueSchema
from .writer_schemas import fetch_from_broker, missing_versions

IDLE_CHECK_MS = 200  # a read that waits this long asks the broker whether anything is left
DRAIN_MAX = 64  # entries handed over per chunk


def _entry_consumer_class() -> Any:
    from clients.consumer import Consumer
    from clients.protocol import commands as cmds
    from clients.protocol.errors import ProtocolError

    class EntryConsumer(Consumer):
        """Queues ``(ledger, entry, metadata, payload, messages)`` per delivered entry."""

        def _on_message(self, cnx: Any, cmd: Any, frame: Any) -> None:
            if cnx is not self._cnx:
                return
            wire = cmd.message_id
            ledger, entry = cmds.signed64(wire.ledgerId), cmds.signed64(wire.entryId)
            try:
                if frame.checksum_ok is False:
                    raise ProtocolError("checksum mismatch")
                meta, payload = frame.metadata(), frame.payload()
            except ProtocolError as exc:
                self._queue.put(cast(Any, PulsarConnectorError(f"{self._topic}: entry {ledger}:{entry} unreadable: {exc}")))
                return
            n = meta.num_messages_in_batch if meta.HasField("num_messages_in_batch") else 1
            # the payload stays a view into the received frame: the decoder joins a run of them once
            self._queue.put(cast(Any, (ledger, entry, meta, payload, n)))

        async def next_entries(self, timeout_s: float) -> list[Any]:
            """At least one entry (``errors.Timeout`` after ``timeout_s``), at most DRAIN_MAX."""
            out: list[Any] = [await self._queue.get(timeout_s)]
            while len(out) < DRAIN_MAX and (item := self._queue.get_nowait()) is not None:
                out.append(item)
            permits = 0
            for item in out:
                if isinstance(item, BaseException):
                    raise item
                permits += item[4]
            self._credit(permits)
            return out

    return EntryConsumer


def read_range(service_url: str, topic: str, start: Pos, end: Pos, *, poll_timeout_ms: int,
               batch_rows: int, starting_time: int | None = None, ending_time: int | None = None,
               client_conf: dict[str, Any] | None = None, reader_conf: dict[str, Any] | None = None,
               value_schema: ValueSchema | None = None, chain: FetchChain | None = None) -> Iterator[pa.RecordBatch]:
    partition = partition_index(topic)
    # the last entry inside [start, end): reaching it ends the read without asking the broker
    if end.batch_index >= 0:
        last_entry: tuple[int, int] | None = (end.ledger_id, end.entry_id)
    else:
        last_entry = (end.ledger_id, end.entry_id - 1) if end.entry_id > 0 else None
    reader_conf = dict(reader_conf or {})

    async def fetch(put: Put, stop: threading.Event) -> None:
        from clients import errors
        from clients.async_client import AsyncClient
        from clients.consumer import ConsumerConfig
        from clients.message import Message
        from clients.message_id import MessageId
        from clients.options import ConsumerType

        entry_consumer = _entry_consumer_class()
        start_id = MessageId.earliest if start == EARLIEST else MessageId(
            partition, start.ledger_id, start.entry_id, start.batch_index)
        cfg = ConsumerConfig(
            subscription_name=f"{reader_conf.get('subscription_role_prefix') or 'spark-reader'}-{secrets.token_hex(5)}",
            consumer_type=ConsumerType.Exclusive, durable=False, start_message_id=start_id,
            start_message_id_inclusive=True, receiver_queue_size=reader_conf.get("receiver_queue_size", 20_000),
            consumer_name=reader_conf.get("reader_name"))
        async with AsyncClient(service_url, **{"operation_timeout_seconds": 30, **(client_conf or {})}) as client:
            consumer = entry_consumer(client._ctx, topic, cfg, partition=partition)
            await client._ctx.start_child(consumer)
            mark("subscribed")
            # no CLOSE_CONSUMER at the end (a round trip of 15-25 ms after the last entry, on the
            # task's critical path): the client closes the connection, which drops the consumer
            # and its non-durable subscription at the broker
            waited = 0
            while not stop.is_set():
                try:
                    got = await consumer.next_entries(IDLE_CHECK_MS / 1000)
                except errors.Timeout:
                    if not await consumer.has_message_available():
                        return  # the range ends at the topic's end
                    waited += IDLE_CHECK_MS
                    if waited >= poll_timeout_ms:
                        raise PulsarConnectorError(
                            f"{topic}: no message within pollTimeoutMs={poll_timeout_ms} before {end}") from None
                    continue
                waited = 0
                ledger, entry, _, _, n = got[-1]
                # what the consumer dequeued last is a Message (has_message_available and a
                # reconnect's resubscribe read its id): one standing for the entry's last record
                consumer._last_dequeued = Message(b"", MessageId(partition, ledger, entry, n - 1 if n > 1 else -1),
                                                  cast(Any, None))
                if value_schema is not None and (versions := missing_versions(value_schema, topic, got)):
                    await fetch_from_broker(consumer._cnx, client._ctx.new_request_id, value_schema, topic,
                                            versions)
                await put(got)
                if (ledger, entry) >= (end.ledger_id, end.entry_id) or (ledger, entry) == last_entry:
                    mark("fetched")
                    return

    decoder = EntryDecoder(topic, partition, start, end, starting_time=starting_time, ending_time=ending_time,
                           value_schema=value_schema)
    return decoder.batches(pumped(fetch, "pulsar-broker-read", chain=chain), batch_rows)
