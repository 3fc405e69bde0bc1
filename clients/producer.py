"""Producer for one topic partition: batching, compression, chunking, receipts, reconnect.

Every message gets a sequence id; sends wait in ``_pending`` (an ordered queue of encoded SEND
frames, bounded by ``max_pending_messages``) until the broker's receipt for that sequence id
arrives. After a disconnect the producer looks the topic up again, re-creates itself on the
broker under the same id and name, and re-sends every pending frame in order, so with broker
deduplication on nothing is duplicated and nothing acknowledged is lost.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid as uuid_mod
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio
from trio.lowlevel import enable_ki_protection

from . import errors
from .connection_handler import ConnectionHandler
from .message_id import MessageId
from .options import BatchingType, CompressionType, PartitionsRoutingMode, ProducerAccessMode
from .protocol import batch as batch_codec
from .protocol import commands as cmds
from .protocol import compression, frames
from .protocol.pulsar_api_pb2 import CommandSendError, CommandSendReceipt, MessageMetadata, ServerError

if TYPE_CHECKING:
    from .client_context import ClientContext
    from .connection import ClientConnection

log = logging.getLogger(__name__)

# A batch is sent once it holds 1/PIPELINE_DEPTH of ``max_pending_messages`` (when that is less
# than ``batching_max_messages``): with the defaults (1,000 and 1,000) one batch would take the
# whole window, and the producer would fill it, send it, and wait idle for its receipt before
# it could add a message (one batch in flight, no pipelining). Windows too small to split
# (below PIPELINE_DEPTH * MIN_SPLIT_BATCH) keep batching_max_messages.
PIPELINE_DEPTH = 4
MIN_SPLIT_BATCH = 16


@dataclass
class ProducerConfig:
    """Options of ``create_producer`` (official names and defaults, batching on by default)."""

    producer_name: str | None = None
    initial_sequence_id: int | None = None
    send_timeout_millis: int = 30_000
    compression_type: CompressionType = CompressionType.NONE
    max_pending_messages: int = 1000
    block_if_queue_full: bool = False
    batching_enabled: bool = True
    batching_max_messages: int = 1000
    batching_max_allowed_size_in_bytes: int = 128 * 1024
    batching_max_publish_delay_ms: int = 10
    chunking_enabled: bool = False
    message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution
    message_router: Callable[[Any, int], int] | None = None
    access_mode: ProducerAccessMode = ProducerAccessMode.Shared
    properties: dict[str, str] | None = None
    schema: Any = None
    initial_subscription_name: str | None = None
    partitions_update_interval_s: float = 60.0
    batching_type: BatchingType = BatchingType.Default


class SendFuture:
    """The pending result of one ``send_async``: a MessageId or an exception.

    The trio Event is only created when someone waits (most sends only have a callback)."""

    __slots__ = ("_done", "_event", "message_id", "error", "_callback")

    def __init__(self, callback: Callable[[BaseException | None, MessageId | None], None] | None = None) -> None:
        self._done = False
        self._event: trio.Event | None = None
        self.message_id: MessageId | None = None
        self.error: BaseException | None = None
        self._callback = callback

    def done(self) -> bool:
        return self._done

    def _resolve(self, message_id: MessageId | None, error: BaseException | None = None) -> None:
        if self._done:
            return
        self._done = True
        self.message_id, self.error = message_id, error
        if self._event is not None:
            self._event.set()
        if self._callback is not None:
            try:
                self._callback(error, message_id)
            except Exception:  # a user callback must not break the producer
                log.exception("send callback failed")

    async def settled(self) -> None:
        """Wait until the send succeeded or failed (without raising)."""
        if not self._done:
            if self._event is None:
                self._event = trio.Event()
            await self._event.wait()

    async def wait(self) -> MessageId:
        await self.settled()
        if self.error is not None:
            raise self.error
        assert self.message_id is not None
        return self.message_id


class OutgoingMessage:
    """One message as the user gave it (before batching/compression)."""

    __slots__ = ("payload", "properties", "partition_key", "ordering_key", "event_timestamp", "sequence_id",
                 "deliver_at")

    def __init__(
        self,
        payload: bytes,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: bytes | None = None,
        event_timestamp: int | None = None,
        sequence_id: int | None = None,
        deliver_at: int | None = None,  # ms since epoch
    ) -> None:
        self.payload = payload
        self.properties = properties
        self.partition_key = partition_key
        self.ordering_key = ordering_key
        self.event_timestamp = event_timestamp
        self.sequence_id = sequence_id
        self.deliver_at = deliver_at

    def is_plain(self) -> bool:
        """No per-message metadata beyond size and sequence id (the batch fast path)."""
        return not (self.properties or self.partition_key or self.ordering_key or self.event_timestamp)


@dataclass
class _ChunkContext:
    total: int
    ids: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class _OpSend:
    sequence_id: int
    highest_sequence_id: int
    num_messages: int
    frame: bytes
    futures: list[SendFuture]
    created: float
    is_batch: bool = False
    chunk: _ChunkContext | None = None
    holds_slot: bool = True  # False for a direct send (the blocking API's own window counts it)


class Producer:
    """Async producer of one (non-partitioned or partition) topic. Create via ``AsyncClient``."""

    def __init__(self, ctx: "ClientContext", topic: str, config: ProducerConfig, partition: int = -1) -> None:
        self._ctx = ctx
        self._topic = topic
        self._config = config
        self._partition = partition
        self._producer_id = ctx.new_producer_id()
        self._name: str | None = config.producer_name
        self._user_named = config.producer_name is not None
        self._epoch = 0
        self._next_seq = 0 if config.initial_sequence_id is None else config.initial_sequence_id + 1
        self._last_seq_published = -1 if config.initial_sequence_id is None else config.initial_sequence_id
        self._pending: deque[_OpSend] = deque()
        self._slots = trio.Semaphore(max(1, config.max_pending_messages))
        self._batch: list[tuple[OutgoingMessage, int, SendFuture]] = []
        self._batch_bytes = 0
        self._batch_limit = batch_message_limit(config.batching_max_messages, config.max_pending_messages)
        self._batch_started = trio.Event()
        self._cnx: ClientConnection | None = None
        self._handler = ConnectionHandler(self)
        self._scope = trio.CancelScope()
        self._closed = False
        self._fatal: BaseException | None = None
        # ``send_direct`` runs in a user thread: this lock orders it with the loop thread's
        # sequence ids, open batch and pending queue (uncontended otherwise).
        self._lock = threading.RLock()
        self._capture: list[bytes] | None = None  # a direct send's frame, instead of cnx.write
        # The unbatched plain SEND's fixed bytes, for the producer name they were made with.
        self._plain_send: tuple[str | None, cmds.PlainSend] = (None, cmds.PlainSend(self._producer_id, b""))
        try:  # trio's clock is perf_counter plus an offset: ``created`` stamps from any thread
            self._clock_offset = trio.current_time() - time.perf_counter()
        except RuntimeError:
            self._clock_offset = 0.0
        # Key-based batching: a batch only holds messages of one key (Key_Shared consumers get
        # whole batches), so a message with another key closes the open batch. One open batch at
        # a time keeps sequence ids in send order, which broker deduplication relies on.
        self._key_based = config.batching_type == BatchingType.KeyBased
        self._compression = int(config.compression_type)
        if not compression.available(self._compression):
            raise errors.InvalidConfiguration(f"compression {config.compression_type!r} is not available")

    # -- public API ---------------------------------------------------------------------------

    def topic(self) -> str:
        return self._topic

    def producer_name(self) -> str:
        return self._name or ""

    def last_sequence_id(self) -> int:
        return self._last_seq_published

    def is_connected(self) -> bool:
        return self._cnx is not None and not self._cnx.is_closed

    async def send(self, content: bytes, **kwargs: Any) -> MessageId:
        """Send and wait for the broker's receipt."""
        fut = await self.send_async(content, **kwargs)
        self.flush_open_batch()
        return await fut.wait()

    async def send_many(self, contents: Iterable[Any]) -> list[MessageId]:
        """Send many payloads and wait for all their receipts (ids in order). They are queued
        as ``send_async`` would (waiting for room when ``max_pending_messages`` are pending,
        whatever ``block_if_queue_full``), batched, and the open batch is sent at once."""
        futures = [await self.queue_waiting(self.make_message(c)) for c in contents]
        self._flush_batch()
        return await settle_all(futures)

    def flush_open_batch(self) -> None:
        """Send the open batch now: a synchronous sender should not wait for the batch timer
        (nor for the connection's writer task)."""
        self._flush_batch()
        cnx = self._cnx
        if cnx is not None:
            cnx.flush_now()

    async def send_async(
        self,
        content: Any,
        callback: Callable[[BaseException | None, MessageId | None], None] | None = None,
        *,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: bytes | str | None = None,
        event_timestamp: int | None = None,
        sequence_id: int | None = None,
        deliver_at: int | None = None,
        deliver_after: Any = None,
    ) -> SendFuture:
        """Queue a message; returns once it is accepted into the pending queue."""
        msg = self.make_message(
            content, properties=properties, partition_key=partition_key, ordering_key=ordering_key,
            event_timestamp=event_timestamp, sequence_id=sequence_id, deliver_at=deliver_at,
            deliver_after=deliver_after,
        )
        return await self.send_message(msg, callback)

    async def send_message(
        self, msg: OutgoingMessage, callback: Callable[[BaseException | None, MessageId | None], None] | None = None
    ) -> SendFuture:
        """Queue one message, waiting for room if ``block_if_queue_full``."""
        if self._config.block_if_queue_full:
            fut = await self.queue_waiting(msg, callback)
        else:
            fut = self.send_nowait(msg, callback)
        cnx = self._cnx
        if cnx is not None and cnx.buffered > 0:
            await cnx.drain()
        return fut

    async def queue_waiting(
        self, msg: OutgoingMessage, callback: Callable[[BaseException | None, MessageId | None], None] | None = None
    ) -> SendFuture:
        """Queue one message, waiting for room when ``max_pending_messages`` are pending (the
        open batch leaves first, since its messages hold room too)."""
        self._check_usable()
        try:
            self._slots.acquire_nowait()  # fast path: no scheduling round per message
        except trio.WouldBlock:
            self._flush_batch()
            await self._slots.acquire()
            try:
                self._check_usable()
            except errors.PulsarException:
                self._slots.release()
                raise
        return self._submit(msg, callback)

    def send_nowait(
        self, msg: OutgoingMessage, callback: Callable[[BaseException | None, MessageId | None], None] | None = None
    ) -> SendFuture:
        """Queue one message without waiting; ``ProducerQueueIsFull`` when no room."""
        self._check_usable()
        try:
            self._slots.acquire_nowait()
        except trio.WouldBlock:
            raise errors.ProducerQueueIsFull(f"{self._config.max_pending_messages} messages pending") from None
        return self._submit(msg, callback)

    def send_nowait_many(
        self, items: "deque[tuple[OutgoingMessage, Callable[[BaseException | None, MessageId | None], None]]]"
    ) -> None:
        """``send_nowait`` of each ``(message, callback)`` popped from ``items`` (the blocking
        API's ``send_async`` bursts), under one lock; a message that cannot be queued settles its
        callback with the error instead of raising."""
        pop = items.popleft
        with self._lock:
            while items:
                msg, callback = pop()
                try:
                    self._check_usable()
                    try:
                        self._slots.acquire_nowait()
                    except trio.WouldBlock:
                        raise errors.ProducerQueueIsFull(
                            f"{self._config.max_pending_messages} messages pending") from None
                    self._submit_locked(msg, callback)
                except errors.PulsarException as exc:
                    try:
                        callback(exc, None)
                    except Exception:  # a user callback must not stop the others
                        log.exception("send callback failed")

    def _submit(
        self, msg: OutgoingMessage, callback: Callable[[BaseException | None, MessageId | None], None] | None
    ) -> SendFuture:
        with self._lock:
            return self._submit_locked(msg, callback)

    def _submit_locked(
        self, msg: OutgoingMessage, callback: Callable[[BaseException | None, MessageId | None], None] | None
    ) -> SendFuture:
        fut = SendFuture(callback)
        seq = msg.sequence_id
        if seq is None:
            seq = self._next_seq
            self._next_seq = seq + 1
        else:
            self._next_seq = max(self._next_seq, seq + 1)
        if self._can_batch(msg):
            size = len(msg.payload)
            batch = self._batch
            if batch and (
                self._batch_bytes + size > self._config.batching_max_allowed_size_in_bytes
                or (self._key_based and _batch_key(msg) != _batch_key(batch[0][0]))
            ):
                self._flush_batch_locked()
                batch = self._batch
            if not batch:
                self._batch_started.set()
            batch.append((msg, seq, fut))
            self._batch_bytes += size
            if len(batch) >= self._batch_limit:  # (so never full on entry)
                self._flush_batch_locked()
        else:
            self._flush_batch()  # keep sequence order
            self._send_single(msg, seq, fut)
        return fut

    def make_message(
        self,
        content: Any,
        *,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: bytes | str | None = None,
        event_timestamp: int | None = None,
        sequence_id: int | None = None,
        deliver_at: int | None = None,
        deliver_after: Any = None,
    ) -> OutgoingMessage:
        """An ``OutgoingMessage`` from ``send_async``-style arguments."""
        payload = content if type(content) is bytes and self._config.schema is None else self._encode(content)
        if not (properties or partition_key or ordering_key or event_timestamp or sequence_id is not None
                or deliver_at is not None or deliver_after is not None):
            return OutgoingMessage(payload)  # the common case: nothing else to convert
        return OutgoingMessage(
            payload,
            dict(properties) if properties else None,
            partition_key,
            ordering_key.encode() if isinstance(ordering_key, str) else ordering_key,
            event_timestamp,
            sequence_id,
            deliver_at_ms(deliver_at, deliver_after),
        )

    async def flush(self) -> None:
        """Send the open batch and wait until every pending message is acknowledged or failed."""
        self._flush_batch()
        while self._pending:
            await self._pending[-1].futures[-1].settled()

    async def close(self) -> None:
        """Flush, then close on the broker (pending messages are sent first, within send timeout)."""
        if self._closed:
            return
        try:
            timeout = self._config.send_timeout_millis / 1000 or 30
            with trio.move_on_after(timeout):
                await self.flush()
        finally:
            self._closed = True
            self._fail_pending(errors.AlreadyClosed("producer closed"))
            cnx = self._cnx
            self._cnx = None
            if cnx is not None and not cnx.is_closed:
                cnx.unregister_producer(self._producer_id, self)
                rid = self._ctx.new_request_id()
                with trio.move_on_after(5):
                    try:
                        await cnx.request(cmds.close_producer(self._producer_id, rid), rid)
                    except errors.PulsarException as e:  # closed locally all the same
                        log.debug("%s: CLOSE_PRODUCER failed: %s", self.describe(), e)
            self._scope.cancel()
            self._ctx.forget(self)

    # -- message building ----------------------------------------------------------------------

    def _encode(self, content: Any) -> bytes:
        schema = self._config.schema
        if schema is not None:
            return schema.encode(content)
        if isinstance(content, str):
            return content.encode()
        if not isinstance(content, (bytes, bytearray, memoryview)):
            raise TypeError(f"message content must be bytes, got {type(content).__name__}")
        return bytes(content)

    def _can_batch(self, msg: OutgoingMessage) -> bool:
        return self._config.batching_enabled and msg.deliver_at is None and (
            len(msg.payload) < (self._cnx or self._ctx).max_message_size // 2
        )

    def _max_message_size(self) -> int:
        cnx = self._cnx
        return cnx.max_message_size if cnx is not None else self._ctx.max_message_size

    def _metadata(self, msg: OutgoingMessage, seq: int, **extra: Any) -> MessageMetadata:
        return cmds.message_metadata(
            self._name or "",
            seq,
            int(time.time() * 1000),
            properties=msg.properties,
            partition_key=msg.partition_key,
            ordering_key=msg.ordering_key,
            event_time=msg.event_timestamp,
            deliver_at_time=msg.deliver_at,
            **extra,
        )

    def _send_single(self, msg: OutgoingMessage, seq: int, fut: SendFuture) -> None:
        payload = msg.payload
        if self._compression or type(payload) is not bytes:  # (uncompressed bytes: as they are)
            payload = compression.compress(self._compression, payload)
        max_size = self._max_message_size()
        comp = self._compression or None
        if len(payload) <= max_size:
            if comp is None and seq >= 0 and msg.deliver_at is None and msg.is_plain():  # no protobuf objects
                name, plain = self._plain_send
                if name is not self._name:  # (the broker names the producer when it connects)
                    name = self._name
                    plain = cmds.PlainSend(self._producer_id, (name or "").encode())
                    self._plain_send = (name, plain)
                send, plain_meta = plain.parts(seq, int(time.time() * 1000))
                frame = frames.encode_payload_command(send, plain_meta, payload)
            else:
                meta = self._metadata(msg, seq, compression=comp, uncompressed_size=len(msg.payload) if comp else None)
                frame = frames.encode_payload_command(cmds.send(self._producer_id, seq), meta, payload)
            self._enqueue(_OpSend(seq, seq, 1, frame, [fut], self._now()))
            return
        if not self._config.chunking_enabled:
            self._slots.release()
            fut._resolve(None, errors.MessageTooBig(f"{len(payload)} bytes > max_message_size {max_size}"))
            return
        # Chunking: each chunk is its own SEND with the same sequence id and uuid.
        uuid = f"{self._name}-{seq}-{uuid_mod.uuid4().hex[:8]}"
        # As the Java client: a chunk's payload is the max message size minus its metadata.
        probe = self._metadata(
            msg, seq, compression=comp, uncompressed_size=len(msg.payload), uuid=uuid,
            num_chunks_from_msg=len(payload), total_chunk_msg_size=len(payload), chunk_id=len(payload),
        )
        chunk_size = max(1, max_size - probe.ByteSize() - 16)
        n = (len(payload) + chunk_size - 1) // chunk_size
        ctx = _ChunkContext(total=n)
        for i in range(n):
            part = payload[i * chunk_size : (i + 1) * chunk_size]
            meta = self._metadata(
                msg, seq, compression=comp, uncompressed_size=len(msg.payload),
                uuid=uuid, num_chunks_from_msg=n, total_chunk_msg_size=len(payload), chunk_id=i,
            )
            frame = frames.encode_payload_command(cmds.send(self._producer_id, seq, is_chunk=True), meta, part)
            futs = [fut] if i == n - 1 else []
            self._enqueue(_OpSend(seq, seq, 1, frame, futs, self._now(), chunk=ctx))

    def _now(self) -> float:
        """``trio.current_time()``, from any thread."""
        return time.perf_counter() + self._clock_offset

    def send_direct(
        self, msg: OutgoingMessage, callback: Callable[[BaseException | None, MessageId | None], None]
    ) -> bool:
        """From a user thread (the blocking ``send``): when nothing of this producer is queued
        or in flight, build the message's frame and write it to the socket here, without a
        round trip through the loop thread (the receipt still arrives there and settles
        ``callback``). False, with nothing changed, when the loop must send it. The message
        does not take one of ``max_pending_messages`` (the blocking API counts its own)."""
        cnx = self._cnx
        if cnx is None or msg.deliver_at is not None or len(msg.payload) >= cnx.max_message_size // 2:
            return False  # not connected, or a path with timers or chunks: the loop's
        with self._lock:
            if self._pending or self._batch or self._cnx is not cnx or self._fatal is not None or self._closed:
                return False
            next_seq = self._next_seq
            captured: list[bytes] = []
            self._capture = captured
            rest = None
            try:
                fut = SendFuture(callback)
                seq = next_seq if msg.sequence_id is None else msg.sequence_id
                self._next_seq = max(next_seq, seq + 1)
                if self._can_batch(msg):  # a batch of one, as the loop's path sends it
                    self._batch, self._batch_bytes = [(msg, seq, fut)], len(msg.payload)
                    self._flush_batch()
                else:
                    self._send_single(msg, seq, fut)
                if len(captured) == 1 and len(self._pending) == 1:
                    self._pending[0].holds_slot = False  # before the write: its receipt may come at once
                    self._capture = None
                    rest = cnx.write_direct(captured[0])
            finally:
                self._capture = None
                if rest is None:  # nothing written (or a failure building it): as if never called
                    self._pending.clear()
                    self._batch, self._batch_bytes = [], 0
                    self._next_seq = next_seq
            if rest is None:
                return False
        if rest:
            cnx.finish_direct(rest, self._config.send_timeout_millis / 1000 or 30)
        return True

    def _flush_batch(self) -> None:
        with self._lock:
            self._flush_batch_locked()

    def _flush_batch_locked(self) -> None:
        if not self._batch:
            return
        items, self._batch, self._batch_bytes = self._batch, [], 0
        first_seq = items[0][1]
        last_seq = items[-1][1]
        plain_items = [(m.payload, seq) for m, seq, _ in items if seq >= 0 and m.is_plain()]
        if len(plain_items) == len(items):  # the common case: no per-message metadata objects
            body = batch_codec.serialize_plain_batch(plain_items)
        else:
            plain, full = batch_codec.plain_message_metadata, cmds.single_message_metadata
            body = batch_codec.serialize_batch(
                (
                    plain(len(m.payload), seq) if seq >= 0 and m.is_plain() else full(
                        0,
                        properties=m.properties,
                        partition_key=m.partition_key,
                        ordering_key=m.ordering_key,
                        event_time=m.event_timestamp,
                        sequence_id=seq,
                    ),
                    m.payload,
                )
                for m, seq, _ in items
            )
        comp = self._compression or None
        payload = compression.compress(self._compression, body)
        first = items[0][0]
        meta = cmds.message_metadata(
            self._name or "",
            first_seq,
            int(time.time() * 1000),
            # As the official clients: the batch carries its first message's keys, which is what
            # the broker routes a batch by on Key_Shared subscriptions.
            partition_key=first.partition_key,
            ordering_key=first.ordering_key,
            num_messages_in_batch=len(items),
            compression=comp,
            uncompressed_size=len(body) if comp else None,
            highest_sequence_id=last_seq if last_seq != first_seq else None,
        )
        send = cmds.send(
            self._producer_id, first_seq, len(items), highest_sequence_id=last_seq if last_seq != first_seq else None
        )
        frame = frames.encode_payload_command(send, meta, payload)
        self._enqueue(
            _OpSend(first_seq, last_seq, len(items), frame, [f for _, _, f in items], self._now(), is_batch=True)
        )

    def _enqueue(self, op: _OpSend) -> None:
        self._pending.append(op)
        if self._capture is not None:
            self._capture.append(op.frame)
            return
        cnx = self._cnx
        if cnx is not None:
            try:
                cnx.write(op.frame)
            except errors.NotConnected:
                pass  # re-sent after reconnecting

    # -- broker replies ------------------------------------------------------------------------

    def _on_receipt(self, cnx: "ClientConnection", receipt: CommandSendReceipt) -> None:
        mid = receipt.message_id
        self._on_receipt_ids(cnx, receipt.sequence_id, cmds.signed64(mid.ledgerId), cmds.signed64(mid.entryId))

    def _on_receipt_ids(self, cnx: "ClientConnection", seq: int, ledger: int, entry: int) -> None:
        """A receipt's numbers (from ``_on_receipt``, or the connection's hand decode of a
        lone SEND_RECEIPT): settle the oldest pending send."""
        pending = self._pending
        if not pending:
            return  # late receipt for something already timed out
        op = pending[0]
        if seq != op.sequence_id:
            if seq < op.sequence_id:
                return  # duplicate (e.g. after a re-send)
            if seq != op.highest_sequence_id:
                # A receipt ahead of the oldest pending send: we lost track; start over (as C++ does).
                log.warning("%s: receipt for %d while %d is pending; reconnecting", self._topic, seq, op.sequence_id)
                cnx.close("out-of-order receipt")
                return
        pending.popleft()
        if op.highest_sequence_id > self._last_seq_published:
            self._last_seq_published = op.highest_sequence_id
        if op.is_batch:  # the throughput path: one id per message of the batch
            partition, size = self._partition, op.num_messages
            for i, fut in enumerate(op.futures):
                fut._resolve(MessageId(partition, ledger, entry, i, size))
        elif op.chunk is None:  # one message (a synchronous sender's)
            for fut in op.futures:
                fut._resolve(MessageId(self._partition, ledger, entry))
        else:
            op.chunk.ids.append((ledger, entry))
            for fut in op.futures:
                mid = MessageId(self._partition, ledger, entry)
                mid.chunk_ids = tuple(op.chunk.ids)
                fut._resolve(mid)
        if op.holds_slot:
            self._release(op)

    def _settle_direct(self, cnx: "ClientConnection", seq: int, ledger: int, entry: int) -> bool:
        """From the user thread reading its own receipt (``ClientConnection.read_own``): settle
        the direct send this receipt is for, if it is the only one pending; False, with nothing
        changed, for any other receipt (the loop thread's, in order)."""
        with self._lock:
            pending = self._pending
            if len(pending) != 1 or pending[0].holds_slot or pending[0].sequence_id != seq or cnx is not self._cnx:
                return False
            self._on_receipt_ids(cnx, seq, ledger, entry)  # (no slot to release: no trio call)
            return True

    def read_own_receipt(self, done: Callable[[], bool]) -> bool | None:
        """From the user thread of a send that went out directly: read its receipt in this
        thread while the connection lends its socket (``ClientConnection.read_own``); False:
        the loop thread settles it; None: and the caller need not look again."""
        cnx = self._cnx
        return None if cnx is None else cnx.read_own(done)

    def _on_send_error(self, cnx: "ClientConnection", error: CommandSendError) -> None:
        if error.error == ServerError.ChecksumError and self._pending and self._pending[0].sequence_id == error.sequence_id:
            op = self._pending.popleft()
            self._fail_op(op, errors.ChecksumError(error.message))
            return
        if error.error in (ServerError.TopicTerminatedError, ServerError.ProducerFenced):
            self._set_fatal(errors.from_server_error(error.error, error.message))
            return
        cnx.close(f"send error {error.message}")

    def _on_disconnected(self, cnx: "ClientConnection") -> None:
        if cnx is self._cnx:
            self._cnx = None
            self._handler.connection_lost()

    # -- completion ----------------------------------------------------------------------------

    def _release(self, op: _OpSend) -> None:
        if op.holds_slot:
            for _ in range(op.num_messages if op.chunk is None or op.futures else 0):
                self._slots.release()

    def _fail_op(self, op: _OpSend, error: BaseException) -> None:
        for fut in op.futures:
            fut._resolve(None, error)
        self._release(op)

    def _fail_pending(self, error: BaseException) -> None:
        with self._lock:
            self._fail_pending_locked(error)

    def _fail_pending_locked(self, error: BaseException) -> None:
        batch, self._batch, self._batch_bytes = self._batch, [], 0
        for _, _, fut in batch:
            fut._resolve(None, error)
            self._slots.release()
        while self._pending:
            self._fail_op(self._pending.popleft(), error)

    def _set_fatal(self, error: BaseException) -> None:
        self._fatal = error
        self._fail_pending(error)
        if self._cnx is not None:
            self._cnx.unregister_producer(self._producer_id, self)
            self._cnx = None
        self._scope.cancel()

    def _check_usable(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        if self._closed:
            raise errors.AlreadyClosed(f"producer on {self._topic} is closed")

    # -- lifecycle -----------------------------------------------------------------------------

    @enable_ki_protection  # a client task: Ctrl-C goes to the application's main task (see async_client)
    async def _run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Owned by the client's nursery: connect once (errors go to the creator), then serve."""
        with self._scope:
            await self._establish()
            task_status.started()
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._batch_timer)
                    if self._config.send_timeout_millis > 0:
                        nursery.start_soon(self._send_timeout_checker)
                    nursery.start_soon(self._handler.run)
            except* Exception as group:  # a bug here must fail this producer, not the whole client
                log.error("producer on %s failed", self._topic, exc_info=group)
                self._set_fatal(errors.UnknownError(f"producer failed: {group.exceptions[0]!r}"))

    # -- the ConnectionHandler's view (clients.connection_handler.Reconnectable) --------------

    @property
    def closed(self) -> bool:
        return self._closed

    def describe(self) -> str:
        return f"producer {self._name} on {self._topic}"

    async def establish(self) -> None:
        await self._establish()

    def fail(self, error: errors.PulsarException) -> None:
        if not isinstance(error, errors.AlreadyClosed):
            self._set_fatal(error)

    async def _establish(self) -> None:
        ctx = self._ctx
        url = await ctx.lookup.broker_url(self._topic)
        cnx = await ctx.pool.get(url)
        rid = ctx.new_request_id()
        cnx.register_producer(self._producer_id, self)
        waits = self._config.access_mode == ProducerAccessMode.WaitForExclusive
        try:
            reply = await cnx.request(
                cmds.producer(
                    self._topic,
                    self._producer_id,
                    rid,
                    producer_name=self._name,
                    user_provided_name=self._user_named,
                    epoch=self._epoch,
                    access_mode=int(self._config.access_mode),
                    metadata=self._config.properties,
                    initial_subscription_name=self._config.initial_subscription_name,
                ),
                rid,
                timeout=0 if waits else None,
            )
        except BaseException:
            cnx.unregister_producer(self._producer_id, self)
            raise
        if cnx.is_closed:
            # It died after the reply, before we resumed: it already told its producers (we
            # were not installed), so installing it now would leave us on a dead connection
            # with nobody to start the next attempt. Try again instead.
            cnx.unregister_producer(self._producer_id, self)
            raise errors.NotConnected(f"connection to {cnx.url} closed: {cnx.close_reason or 'closed'}")
        ok = reply.producer_success
        if self._name is None:
            self._name = ok.producer_name
        with self._lock:
            # The broker's last persisted sequence id (dedup) moves our counter forward.
            if ok.last_sequence_id >= 0 and self._config.initial_sequence_id is None and not self._pending:
                self._next_seq = max(self._next_seq, ok.last_sequence_id + 1)
                self._last_seq_published = max(self._last_seq_published, ok.last_sequence_id)
            self._epoch += 1
            self._handler.connected()
            self._cnx = cnx
            for op in self._pending:  # re-send in order, before anything new
                cnx.write(op.frame)
        if cnx.is_closed:
            self._on_disconnected(cnx)

    @enable_ki_protection  # a client task: Ctrl-C goes to the application's main task (see async_client)
    async def _batch_timer(self) -> None:
        """Flush an open batch ``batching_max_publish_delay_ms`` after it started; idle otherwise."""
        delay = max(0.001, self._config.batching_max_publish_delay_ms / 1000)
        while True:
            await self._batch_started.wait()
            self._batch_started = trio.Event()
            await trio.sleep(delay)
            self._flush_batch()

    @enable_ki_protection  # a client task: Ctrl-C goes to the application's main task (see async_client)
    async def _send_timeout_checker(self) -> None:
        timeout = self._config.send_timeout_millis / 1000
        while True:
            await trio.sleep(min(timeout / 2, 1.0))
            if self._pending and trio.current_time() - self._pending[0].created > timeout:
                # As the C++ client: once the oldest message timed out, fail everything pending.
                self._fail_pending(errors.Timeout(f"send to {self._topic} timed out after {timeout}s"))


async def settle_all(futures: list[SendFuture]) -> list[MessageId]:
    """Wait for every future; raise the first failure once all settled, else their ids."""
    for fut in futures:
        await fut.settled()
    for fut in futures:
        if fut.error is not None:
            raise fut.error
    return [fut.message_id for fut in futures]  # type: ignore[misc]


def batch_message_limit(batching_max_messages: int, max_pending_messages: int) -> int:
    """How many messages a batch holds before it is sent: ``batching_max_messages``, capped at
    a ``PIPELINE_DEPTH``-th of the pending window so that several batches are in flight."""
    share = max_pending_messages // PIPELINE_DEPTH
    if share < MIN_SPLIT_BATCH:
        return max(1, batching_max_messages)
    return max(1, min(batching_max_messages, share))


def _batch_key(msg: OutgoingMessage) -> bytes | str | None:
    """The key a key-based batch groups by: the ordering key, else the partition key."""
    return msg.ordering_key or msg.partition_key


def deliver_at_ms(deliver_at: int | None, deliver_after: Any) -> int | None:
    if deliver_at is not None:
        return int(deliver_at)
    if deliver_after is not None:
        seconds = deliver_after.total_seconds() if hasattr(deliver_after, "total_seconds") else float(deliver_after)
        return int(time.time() * 1000 + seconds * 1000)
    return None
