"""Consumer of one topic partition: flow permits, batch unpacking, acks, redelivery, reconnect.

Permits: after subscribing the consumer grants ``receiver_queue_size`` permits (FLOW) and grants
more once the application has dequeued half of them, so the receiver queue stays bounded.
Acks are grouped (every ``ack_group_time_ms`` or 1000 ids) into one ACK command; a batch is
acked whole once every message in it was acked (or partially with ``batch_index_ack_enabled``).
Negative acks and ack timeouts turn into REDELIVER_UNACKNOWLEDGED_MESSAGES (with ids for Shared
and Key_Shared, without for Exclusive/Failover, which means "all unacked"); messages redelivered
``max_redeliver_count`` times go to the dead-letter topic instead. Start ids (readers, seek) are
filtered on the client, as the official client does.
"""

from __future__ import annotations

import abc
import logging
import secrets
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio
from trio.lowlevel import enable_ki_protection

from . import errors
from .ack_grouping import AckGroupingTracker
from .chunk_assembler import ChunkAssembler
from .connection_handler import ConnectionHandler
from .message import EntryInfo, Message, extra_of
from .message_id import MessageId
from .message_queue import MessageQueue
from .redelivery_tracker import RedeliveryTracker
from .options import (
    BatchReceivePolicy,
    ConsumerDeadLetterPolicy,
    ConsumerType,
    InitialPosition,
    RegexSubscriptionMode,
)
from .protocol import batch as batch_codec
from .protocol import commands as cmds
from .protocol import compression, frames
from .protocol.errors import ProtocolError
from .protocol.pulsar_api_pb2 import (
    BaseCommand, CommandAck, CommandMessage, CommandSubscribe, KeySharedMode, MessageIdData, MessageMetadata,
)

if TYPE_CHECKING:
    from .client_context import ClientContext
    from .connection import ClientConnection

log = logging.getLogger(__name__)
Key = tuple[int, int]  # (ledger, entry)
# Batched payloads from this size on stay views into their batch until read. Smaller ones are
# copied: a memoryview is a second object the garbage collector tracks per message (beside the
# Message), and with a receiver queue of them alive the collector ran 3-4x as often; at 1 KiB
# its collections took 0.14-0.36 µs per message, more than the copy (bench/results/consume17f.md).
VIEWS_FROM = 2048


@dataclass
class ConsumerConfig:
    """Options of ``subscribe`` / ``create_reader`` (official names and defaults)."""

    subscription_name: str = ""
    consumer_type: ConsumerType = ConsumerType.Exclusive
    receiver_queue_size: int = 1000
    max_total_receiver_queue_size_across_partitions: int = 50_000
    consumer_name: str | None = None
    unacked_messages_timeout_ms: int | None = None
    negative_ack_redelivery_delay_ms: int = 60_000
    initial_position: InitialPosition = InitialPosition.Latest
    dead_letter_policy: ConsumerDeadLetterPolicy | None = None
    batch_index_ack_enabled: bool = False
    properties: dict[str, str] | None = None
    subscription_properties: dict[str, str] | None = None
    is_read_compacted: bool = False
    replicate_subscription_state_enabled: bool = False
    pattern_auto_discovery_period: int = 60
    regex_subscription_mode: RegexSubscriptionMode = RegexSubscriptionMode.PersistentOnly
    batch_receive_policy: BatchReceivePolicy | None = None
    ack_group_time_ms: int = 100
    schema: Any = None
    # Reader options.
    durable: bool = True
    start_message_id: MessageId | None = None
    start_message_id_inclusive: bool = False
    key_shared_sticky: bool = False
    key_shared_policy: Any = None  # ConsumerKeySharedPolicy (ours or the official one)
    partitions_update_interval_s: float = 60.0
    max_pending_chunked_message: int = 10


class ConsumerBase(abc.ABC):
    """API shared by single-topic and multi-topic consumers."""

    _queue: MessageQueue[Message]
    _config: ConsumerConfig
    _ctx: "ClientContext"
    _closed: bool
    _fatal: BaseException | None = None  # what made it unusable (the blocking API checks both)

    def subscription_name(self) -> str:
        return self._config.subscription_name

    async def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; ``Timeout`` after ``timeout_millis``."""
        self._check_open()
        msg = await self._queue.get(None if timeout_millis is None else timeout_millis / 1000)
        self._dequeued(msg)
        return msg

    async def batch_receive(self) -> list[Message]:
        """Messages available within the batch receive policy (at least one unless timed out)."""
        policy = self._config.batch_receive_policy or BatchReceivePolicy()
        out: list[Message] = []
        size = 0
        max_n = policy.max_num_messages if policy.max_num_messages > 0 else 1 << 30
        max_b = policy.max_num_bytes if policy.max_num_bytes > 0 else 1 << 62
        with trio.move_on_after(policy.timeout_ms / 1000 if policy.timeout_ms > 0 else 1e9):
            while len(out) < max_n and size < max_b:
                msg = self._queue.get_nowait()
                if msg is None:
                    if out and policy.timeout_ms <= 0:
                        break
                    msg = await self._queue.get()
                self._dequeued(msg)
                out.append(msg)
                size += len(msg.data())
        return out

    def _dequeued(self, msg: Message) -> None:
        consumer = msg._consumer
        if consumer is not None:
            consumer._on_dequeued(msg)

    def _dequeued_many(self, msgs: list[Message]) -> None:
        for msg in msgs:
            consumer = msg._consumer
            if consumer is not None:
                consumer._on_dequeued(msg)

    async def receive_many(self, max_messages: int = 1000, timeout_millis: int | None = None) -> list[Message]:
        """Up to ``max_messages`` messages: waits (up to ``timeout_millis``, else ``Timeout``) for
        the first, then takes whatever else is already in the receiver queue, without waiting."""
        self._check_open()
        queue = self._queue
        out = [await queue.get(None if timeout_millis is None else timeout_millis / 1000)]
        while len(out) < max_messages:
            msg = queue.get_nowait()
            if msg is None:
                break
            out.append(msg)
        self._dequeued_many(out)
        return out

    @abc.abstractmethod
    def _owner_of(self, target: Message | MessageId) -> "Consumer":
        """The single-topic consumer that delivered ``target``."""

    async def acknowledge(self, target: Message | MessageId) -> None:
        self._owner_of(target)._ack(_id_of(target))

    async def acknowledge_cumulative(self, target: Message | MessageId) -> None:
        if self._config.consumer_type in (ConsumerType.Shared, ConsumerType.KeyShared):
            raise errors.CumulativeAcknowledgementNotAllowedError("cumulative ack on a Shared subscription")
        self._owner_of(target)._ack_cumulative(_id_of(target))

    async def negative_acknowledge(self, target: Message | MessageId) -> None:
        self._owner_of(target)._nack(_id_of(target))

    @abc.abstractmethod
    def _check_open(self) -> None:
        """Raise if the consumer is closed or failed."""

    # The rest of the public API, which each kind implements its own way (one topic, or fanned
    # out to its children): readers, the blocking facade and the CLI hold a ConsumerBase.

    @abc.abstractmethod
    def topic(self) -> str: ...

    @abc.abstractmethod
    def consumer_name(self) -> str: ...

    @abc.abstractmethod
    def is_connected(self) -> bool: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    async def unsubscribe(self) -> None: ...

    @abc.abstractmethod
    async def redeliver_unacknowledged_messages(self) -> None: ...

    @abc.abstractmethod
    async def seek(self, target: MessageId | int) -> None: ...

    @abc.abstractmethod
    async def get_last_message_id(self) -> MessageId: ...

    @abc.abstractmethod
    async def has_message_available(self) -> bool: ...


def _id_of(target: Message | MessageId) -> MessageId:
    return target.message_id() if isinstance(target, Message) else MessageId.coerce(target)


class Consumer(ConsumerBase):
    """Async consumer of one topic or partition. Create via ``AsyncClient.subscribe``."""

    def __init__(
        self,
        ctx: "ClientContext",
        topic: str,
        config: ConsumerConfig,
        *,
        partition: int = -1,
        queue: MessageQueue[Message] | None = None,
        receiver_queue_size: int | None = None,
    ) -> None:
        self._ctx = ctx
        self._topic = topic
        self._config = config
        self._partition = partition
        self._consumer_id = ctx.new_consumer_id()
        self._name = config.consumer_name or secrets.token_hex(5)
        self._own_queue = queue is None
        self._queue = queue if queue is not None else MessageQueue()
        self._queue_size = max(1, receiver_queue_size or config.receiver_queue_size)
        self._refill_at = max(1, self._queue_size // 2)  # FLOW once half the queue was consumed
        self._permits = 0
        self._cnx: ClientConnection | None = None
        self._handler = ConnectionHandler(self)
        self._connected = trio.Event()
        self._scope = trio.CancelScope()
        self._closed = False
        self._fatal: BaseException | None = None
        self._epoch = 0
        self._subscriptions = 0  # successful SUBSCRIBEs so far (a seek watches it)
        self._sub_type = {
            ConsumerType.Exclusive: CommandSubscribe.Exclusive,
            ConsumerType.Shared: CommandSubscribe.Shared,
            ConsumerType.Failover: CommandSubscribe.Failover,
            ConsumerType.KeyShared: CommandSubscribe.Key_Shared,
        }[config.consumer_type]
        # Client-side start filter: (id, inclusive) until a later message passed it.
        start = config.start_message_id
        self._start_filter: tuple[MessageId, bool] | None = None
        if start is not None and not start.is_earliest() and not start.is_latest():
            self._start_filter = (start, config.start_message_id_inclusive)
        self._last_dequeued: Message | None = None  # (its id is built only if needed)
        # Acks waiting for the group timer.
        self._acks = AckGroupingTracker(self._consumer_id, config.ack_group_time_ms, lambda: self._cnx)
        # Batches delivered but not fully acked: (ledger, entry) -> batch indexes still unacked.
        self._batch_unacked: dict[Key, set[int]] = {}
        self._batch_sizes: dict[Key, int] = {}
        # Nack and ack-timeout deadlines.
        self._redelivery = RedeliveryTracker(config.negative_ack_redelivery_delay_ms, config.unacked_messages_timeout_ms)
        # Dead-letter candidates: entries delivered with redelivery_count >= max_redeliver_count.
        self._dlq_candidates: dict[Key, list[Message]] = {}
        self._dlq_producer: Any = None
        self._chunks = ChunkAssembler(config.max_pending_chunked_message)
        self.end_of_topic = False
        self.is_active: bool | None = None

    # -- identity -------------------------------------------------------------------------------

    def topic(self) -> str:
        return self._topic

    def consumer_name(self) -> str:
        return self._name

    def is_connected(self) -> bool:
        return self._cnx is not None and not self._cnx.is_closed

    def _owner_of(self, target: Message | MessageId) -> "Consumer":
        return self

    async def acknowledge(self, target: Message | MessageId) -> None:
        # The per-message path: no owner lookup (a single-topic consumer owns what it delivered).
        self._ack(target._id if type(target) is Message else MessageId.coerce(target))

    def _check_open(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        if self._closed:
            raise errors.AlreadyClosed(f"consumer on {self._topic} is closed")

    # -- lifecycle ----------------------------------------------------------------------------

    @enable_ki_protection  # a client task: Ctrl-C goes to the application's main task (see async_client)
    async def _run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        with self._scope:
            await self._establish()
            task_status.started()
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._handler.run)
                    nursery.start_soon(self._acks.run)
                    nursery.start_soon(self._redelivery_timer)
            except* Exception as group:  # a bug here must fail this consumer, not the whole client
                log.error("consumer on %s failed", self._topic, exc_info=group)
                self._fatal = errors.UnknownError(f"consumer failed: {group.exceptions[0]!r}")
                if self._own_queue:
                    self._queue.close()

    def _subscribe_command(self, request_id: int) -> BaseCommand:
        cfg = self._config
        start = None
        if not cfg.durable:
            last = self._last_dequeued
            sid = (last._id if last is not None else None) or cfg.start_message_id or MessageId.latest
            start = sid.to_proto(with_batch=False)
        return cmds.subscribe(
            self._topic,
            cfg.subscription_name,
            self._sub_type,
            self._consumer_id,
            request_id,
            consumer_name=self._name,
            durable=cfg.durable,
            start_message_id=start,
            metadata=cfg.properties,
            read_compacted=cfg.is_read_compacted or None,
            initial_position=int(cfg.initial_position),
            replicate_subscription_state=cfg.replicate_subscription_state_enabled or None,
            subscription_properties=cfg.subscription_properties,
            consumer_epoch=self._epoch,
            **self._key_shared_options(),
        )

    def _key_shared_options(self) -> dict[str, Any]:
        """keySharedMeta from ``key_shared_policy`` (ours or the official class: same properties)."""
        if self._sub_type != CommandSubscribe.Key_Shared:
            return {}
        policy = self._config.key_shared_policy
        if policy is None:
            sticky = self._config.key_shared_sticky
            return {"key_shared_mode": KeySharedMode.STICKY if sticky else KeySharedMode.AUTO_SPLIT}
        ranges = [(int(a), int(b)) for a, b in policy.sticky_ranges or []]
        return {
            "key_shared_mode": KeySharedMode.STICKY if int(policy.key_shared_mode) == 1 else KeySharedMode.AUTO_SPLIT,
            "allow_out_of_order_delivery": bool(policy.allow_out_of_order_delivery),
            "hash_ranges": ranges,
        }

    # -- the ConnectionHandler's view (clients.connection_handler.Reconnectable) --------------

    @property
    def closed(self) -> bool:
        return self._closed

    def describe(self) -> str:
        return f"consumer {self._name} on {self._topic}"

    async def establish(self) -> None:
        await self._establish()

    def fail(self, error: errors.PulsarException) -> None:
        self._fatal = error
        if self._own_queue:
            self._queue.close()

    async def _establish(self) -> None:
        ctx = self._ctx
        url = await ctx.lookup.broker_url(self._topic)
        cnx = await ctx.pool.get(url)
        rid = ctx.new_request_id()
        cnx.register_consumer(self._consumer_id, self)
        try:
            await cnx.request(self._subscribe_command(rid), rid)
        except BaseException:
            cnx.unregister_consumer(self._consumer_id, self)
            raise
        if cnx.is_closed:  # died after the reply (see Producer._establish): try again
            cnx.unregister_consumer(self._consumer_id, self)
            raise errors.NotConnected(f"connection to {cnx.url} closed: {cnx.close_reason or 'closed'}")
        self._subscriptions += 1
        # Whatever was queued from the previous connection will be redelivered: drop it.
        self._clear_queue()
        self._batch_unacked.clear()
        self._chunks.clear()
        self._handler.connected()
        self._cnx = cnx
        self._permits = 0
        cnx.send(cmds.flow(self._consumer_id, self._queue_size))
        self._acks.flush()
        self._connected.set()
        if cnx.is_closed:
            self._on_disconnected(cnx)

    def _clear_queue(self) -> int:
        if self._own_queue:
            return self._queue.clear()
        return self._queue.remove_if(lambda m: m._consumer is self)

    def _on_disconnected(self, cnx: "ClientConnection") -> None:
        if cnx is self._cnx:
            self._cnx = None
            self._connected = trio.Event()
            self._handler.connection_lost()

    def _on_active_change(self, active: bool) -> None:
        self.is_active = active

    def _on_end_of_topic(self) -> None:
        self.end_of_topic = True

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._acks.flush()
        cnx, self._cnx = self._cnx, None
        if cnx is not None and not cnx.is_closed:
            cnx.unregister_consumer(self._consumer_id, self)
            rid = self._ctx.new_request_id()
            with trio.move_on_after(5):
                try:
                    await cnx.request(cmds.close_consumer(self._consumer_id, rid), rid)
                except errors.PulsarException as e:  # closed locally all the same
                    log.debug("%s: CLOSE_CONSUMER failed: %s", self.describe(), e)
        if self._dlq_producer is not None:
            await self._dlq_producer.close()
        self._scope.cancel()
        if self._own_queue:
            self._queue.close()
        self._ctx.forget(self)

    async def unsubscribe(self) -> None:
        self._check_open()
        cnx = await self._wait_connected()
        rid = self._ctx.new_request_id()
        await cnx.request(cmds.unsubscribe(self._consumer_id, rid), rid)
        await self.close()

    async def _wait_connected(self, timeout: float | None = None) -> "ClientConnection":
        timeout = self._ctx.config.operation_timeout_s if timeout is None else timeout
        with trio.move_on_after(timeout):
            while True:
                cnx = self._cnx
                if cnx is not None and not cnx.is_closed:
                    return cnx
                self._check_open()
                await self._connected.wait()
        raise errors.NotConnected(f"consumer on {self._topic} is not connected")

    # -- incoming ----------------------------------------------------------------------------

    def _credit(self, n: int) -> None:
        """Return ``n`` permits; send FLOW once half the queue size accumulated."""
        self._permits += n
        cnx = self._cnx
        if cnx is not None and self._permits >= self._refill_at:
            try:
                cnx.send(cmds.flow(self._consumer_id, self._permits))
                self._permits = 0
            except errors.NotConnected:
                pass

    def flow_frame(self, permits: int) -> bytes:
        """A FLOW frame granting ``permits`` (a pure encoding: the blocking facade writes it
        from the consuming thread, see ``blocking._ThreadFlow``)."""
        return frames.encode_command(cmds.flow(self._consumer_id, permits))

    def _credit_on(self, cnx: "ClientConnection", n: int) -> None:
        """``_credit`` of permits counted for ``cnx`` elsewhere (a FLOW the consuming thread
        could not write itself); none if a reconnect since granted a whole queue afresh."""
        if cnx is self._cnx:
            self._credit(n)

    def _dequeued_many(self, msgs: list[Message], permits: bool = True) -> None:
        """``_on_dequeued`` for many of our own messages at once: one permit check, one
        last-dequeued update (the blocking facade reports what it took in bulk; ``permits``
        False: it returned their permits itself)."""
        if not self._own_queue or not msgs:  # a child of a multi-topic consumer: route each
            super()._dequeued_many(msgs)
            return
        if permits:
            self._permits += len(msgs)
            if self._permits >= self._refill_at:
                self._credit(0)
        self._last_dequeued = msgs[-1]
        if self._config.unacked_messages_timeout_ms:
            now, delivered = trio.current_time(), self._redelivery.delivered
            for msg in msgs:
                delivered(msg._entry.key, now)

    def _ack_many(self, msgs: "deque[Message]") -> None:
        """``_ack`` of messages of ours the blocking facade queued (popped here, while it may
        still append): an id is only built for the message that completes its entry."""
        self._check_open()
        ack, pop = self._ack, msgs.popleft
        unacked = self._batch_unacked
        index_acks = self._config.batch_index_ack_enabled
        # Acks come in runs of one entry's messages: its pending set is looked up once a run
        # (and again after ``ack``, which may drop it).
        last: EntryInfo | None = None
        pending: set[int] | None = None
        while msgs:
            msg = pop()
            batch = msg._batch  # >= 0 only for a batched message (a chunked one has -1)
            if batch >= 0 and not index_acks:
                # Most acks only tick off one message of a batch: the entry is acked with the last.
                entry = msg._entry
                if entry is not last:
                    last, pending = entry, unacked.get(entry.key)
                if pending is not None and len(pending) > 1 and batch in pending:
                    pending.discard(batch)
                    continue
            last = None
            ack(msg._id)

    def _on_dequeued(self, msg: Message) -> None:
        self._permits += 1
        if self._permits >= self._refill_at:
            self._credit(0)
        self._last_dequeued = msg
        if self._config.unacked_messages_timeout_ms:
            self._redelivery.delivered(msg._entry.key, trio.current_time())

    def _discard(self, cnx: "ClientConnection", mid: MessageIdData, error: int, count: int) -> None:
        log.warning("%s: discarding entry %s (validation error %s)", self._topic, cmds.message_id_tuple(mid), error)
        cnx.send(cmds.ack(self._consumer_id, [cmds.message_id(mid.ledgerId, mid.entryId)], validation_error=error))
        self._credit(count)

    def _is_prior(self, ledger: int, entry: int, batch_index: int) -> bool:
        """True if a message lies before the start id (readers, seek): drop it."""
        start, inclusive = self._start_filter  # type: ignore[misc]
        key, skey = (ledger, entry), (start.ledger_id(), start.entry_id())
        if key != skey:
            if key > skey:
                self._start_filter = None  # past the start: stop filtering
            return key < skey
        if batch_index < 0 or start.batch_index() < 0:
            return not inclusive
        return batch_index < start.batch_index() if inclusive else batch_index <= start.batch_index()

    def _on_message(self, cnx: "ClientConnection", cmd: CommandMessage, frame: frames.Frame) -> None:
        if cnx is not self._cnx:
            return
        if cmd.HasField("consumer_epoch") and cmd.consumer_epoch < self._epoch:
            self._credit(1)
            return  # sent before our redeliver-all: it will come again
        wire_id = cmd.message_id
        if frame.checksum_ok is False:
            self._discard(cnx, wire_id, CommandAck.ChecksumMismatch, 1)
            return
        try:
            meta = frame.metadata()
            payload = frame.payload()
        except ProtocolError:
            self._discard(cnx, wire_id, CommandAck.BatchDeSerializeError, 1)
            return
        ledger, entry = cmds.signed64(wire_id.ledgerId), cmds.signed64(wire_id.entryId)
        partition = wire_id.partition if wire_id.partition >= 0 else self._partition
        batched = meta.HasField("num_messages_in_batch")
        n = meta.num_messages_in_batch if batched else 1
        if meta.HasField("num_chunks_from_msg") and meta.num_chunks_from_msg > 1:
            self._on_chunk(cmd, meta, payload, ledger, entry, partition)
            return
        limit = self._ctx.max_message_size * 2 + 1024 * 1024
        if meta.compression:
            if meta.uncompressed_size > limit:
                self._discard(cnx, wire_id, CommandAck.UncompressedSizeCorruption, n)
                return
            try:
                data = compression.decompress(meta.compression, payload, meta.uncompressed_size)
            except ProtocolError:
                self._discard(cnx, wire_id, CommandAck.DecompressionError, n)
                return
            start, end = 0, len(data)
        elif batched and frame.buffer is not None:
            # Split in place, in the bytes the frame was received in: no copy of the batch
            # (the payloads of its messages are views of it from VIEWS_FROM bytes on).
            data, end = frame.buffer, frame.end
            start = end - len(payload)
        else:
            data = bytes(payload)
            start, end = 0, len(data)
        redelivery = cmd.redelivery_count
        key = (ledger, entry)
        topic = self._topic  # set in every id: lets a multi-topic consumer route acks by id alone
        info = EntryInfo(topic, meta.publish_time, redelivery, meta.producer_name, self._config.schema,
                         meta.schema_version, key, partition, n if batched else 0)
        out: list[Message] = []
        columns = None  # a batch of plain records of one size, read column-wise
        if batched and not cmd.ack_set and self._start_filter is None and type(data) is bytes:
            columns = batch_codec.split_uniform_batch(data, n, VIEWS_FROM, start, end)
        if not batched:
            if self._start_filter is None or not self._is_prior(ledger, entry, -1):
                props = {kv.key: kv.value for kv in meta.properties} if meta.properties else None
                out.append(
                    Message(
                        data, MessageId(partition, ledger, entry, -1, 0, topic), info, meta.sequence_id, self,
                        extra_of(props, meta.partition_key, meta.ordering_key, meta.event_time, meta.null_value),
                    )
                )
        elif columns is not None:
            # What producers write for a run of messages: no per-record parsing, and no
            # per-message filter to apply (no ack set, no start id).
            seqs, bodies = columns
            out = [Message(body, None, info, seq, self, None, i) for i, seq, body in zip(range(n), seqs, bodies)]
        else:
            try:
                items = batch_codec.split_batch(data, n, VIEWS_FROM, start, end)
            except ProtocolError:
                self._discard(cnx, wire_id, CommandAck.BatchDeSerializeError, n)
                return
            # Hot loop (one iteration per message): positional arguments, no per-message dicts;
            # plain records (smm None: no properties/keys/event time) skip protobuf entirely, and
            # the message id is built from ``info`` and the batch index only if asked for.
            deliver = batch_codec.unacked_indexes(list(cmd.ack_set), n) if cmd.ack_set else None
            first_seq = meta.sequence_id
            append = out.append
            if deliver is None and self._start_filter is None:
                for i, (smm, seq, body) in enumerate(items):
                    if smm is None:
                        append(Message(body, None, info, seq if seq >= 0 else first_seq + i, self, None, i))
                    elif not smm.compacted_out:
                        append(self._batched(smm, body, i, info, first_seq + i))
            else:
                for i, (smm, seq, body) in enumerate(items):
                    if deliver is not None and i not in deliver:
                        continue
                    if self._start_filter is not None and self._is_prior(ledger, entry, i):
                        continue
                    if smm is None:
                        append(Message(body, None, info, seq if seq >= 0 else first_seq + i, self, None, i))
                    elif not smm.compacted_out:
                        append(self._batched(smm, body, i, info, first_seq + i))
        if batched and out:
            self._batch_unacked[key] = set(range(n)) if len(out) == n else {m._batch for m in out}
            self._batch_sizes[key] = n
        skipped = n - len(out)
        if skipped > 0:
            self._credit(skipped)
        dlq = self._config.dead_letter_policy
        if dlq is not None and redelivery >= dlq.max_redeliver_count and out:
            self._dlq_candidates[key] = out
        if out:
            self._queue.put_many(out)

    def _batched(self, smm: Any, body: bytes | memoryview, index: int, info: EntryInfo, default_seq: int) -> Message:
        """A batched message with its own metadata (properties, keys, event time)."""
        props = {kv.key: kv.value for kv in smm.properties} if smm.properties else None
        return Message(
            body, None, info, smm.sequence_id if smm.HasField("sequence_id") else default_seq, self,
            extra_of(props, smm.partition_key, smm.ordering_key, smm.event_time, smm.null_value), index,
        )

    def _on_chunk(
        self, cmd: CommandMessage, meta: MessageMetadata, payload: memoryview, ledger: int, entry: int, partition: int
    ) -> None:
        done = self._chunks.add(meta.uuid, meta.chunk_id, meta.num_chunks_from_msg, payload, (ledger, entry))
        if done is None:
            # an intermediate chunk is consumed now (the last one is counted on dequeue), and so
            # is one out of sequence (e.g. after a redelivery of a partial message)
            self._credit(1)
            return
        whole, chunk_ids = done
        if meta.compression:
            try:
                whole = compression.decompress(meta.compression, whole, meta.uncompressed_size)
            except ProtocolError:
                self._credit(1)
                return
        mid = MessageId(partition, ledger, entry, -1)
        mid.chunk_ids = chunk_ids
        mid.topic = self._topic
        if self._start_filter is not None and self._is_prior(ledger, entry, -1):
            self._credit(1)
            return
        info = EntryInfo(self._topic, meta.publish_time, cmd.redelivery_count, meta.producer_name,
                         self._config.schema, meta.schema_version, (ledger, entry), partition)
        props = {kv.key: kv.value for kv in meta.properties} if meta.properties else None
        extra = extra_of(props, meta.partition_key, meta.ordering_key, meta.event_time, meta.null_value)
        self._queue.put(Message(whole, mid, info, meta.sequence_id, self, extra))

    # -- acknowledgements --------------------------------------------------------------------

    def _ack(self, mid: MessageId) -> None:
        self._check_open()
        key = (mid._ledger, mid._entry)
        if mid.chunk_ids:
            for k in mid.chunk_ids:
                self._queue_ack(k)
            self._redelivery.acked(key)
            return
        pending = self._batch_unacked.get(key)
        if pending is not None and mid._batch >= 0:
            pending.discard(mid._batch)
            if pending:
                if self._config.batch_index_ack_enabled:
                    self._acks.add(key, batch_codec.ack_set_of(pending, self._batch_sizes.get(key, mid.batch_size)))
                return
            del self._batch_unacked[key]
            self._batch_sizes.pop(key, None)
        # Only now is the whole entry acknowledged: a nack of another message of the same
        # batch must survive acks of its siblings.
        self._redelivery.acked(key)
        if self._dlq_candidates:
            self._dlq_candidates.pop(key, None)
        self._queue_ack(key)

    def _queue_ack(self, key: Key) -> None:
        self._acks.add(key)

    def _ack_cumulative(self, mid: MessageId) -> None:
        self._check_open()
        key = (mid.ledger_id(), mid.entry_id())
        if 0 <= mid.batch_index() < (mid.batch_size or 0) - 1:
            target = (key[0], key[1] - 1)  # inside a batch: everything before this entry
        else:
            target = key
        self._redelivery.acked_up_to(key)
        for k in [k for k in self._batch_unacked if k < key]:
            del self._batch_unacked[k]
        self._acks.add_cumulative(target)

    # -- redelivery ----------------------------------------------------------------------------

    def _nack(self, mid: MessageId) -> None:
        self._check_open()
        key = (mid.ledger_id(), mid.entry_id())
        self._redelivery.nacked(key, trio.current_time())

    @enable_ki_protection  # a client task: Ctrl-C goes to the application's main task (see async_client)
    async def _redelivery_timer(self) -> None:
        tick = self._redelivery.tick_s
        while True:
            await trio.sleep(tick)
            due = self._redelivery.pop_due(trio.current_time())
            if due:
                await self._redeliver(due)

    async def _redeliver(self, keys: list[Key]) -> None:
        dlq = self._config.dead_letter_policy
        if dlq is not None:
            rest = []
            for k in keys:
                msgs = self._dlq_candidates.pop(k, None)
                if msgs and await self._send_to_dlq(msgs):
                    self._batch_unacked.pop(k, None)
                    self._queue_ack(k)
                else:
                    rest.append(k)
            keys = rest
        if not keys:
            return
        cnx = self._cnx
        if cnx is None or cnx.is_closed:
            return  # the broker redelivers everything unacked after the reconnect anyway
        for k in keys:
            self._batch_unacked.pop(k, None)
        if self._sub_type in (CommandSubscribe.Shared, CommandSubscribe.Key_Shared):
            ids = [cmds.message_id(ledger, entry) for ledger, entry in keys]
            cnx.send(cmds.redeliver_unacknowledged(self._consumer_id, ids))
        else:
            await self.redeliver_unacknowledged_messages()

    async def redeliver_unacknowledged_messages(self) -> None:
        """Ask the broker to resend every unacked message of this consumer."""
        cnx = self._cnx
        if cnx is None or cnx.is_closed:
            return
        self._epoch += 1
        cleared = self._clear_queue()
        self._batch_unacked.clear()
        self._redelivery.forget_unacked()
        cnx.send(cmds.redeliver_unacknowledged(self._consumer_id, consumer_epoch=self._epoch))
        if cleared:
            self._credit(cleared)

    async def _send_to_dlq(self, msgs: list[Message]) -> bool:
        dlq = self._config.dead_letter_policy
        assert dlq is not None
        try:
            if self._dlq_producer is None:
                from .producer import ProducerConfig

                topic = dlq.dead_letter_topic or f"{self._topic}-{self._config.subscription_name}-DLQ"
                self._dlq_producer = await self._ctx.create_producer(
                    topic,
                    ProducerConfig(batching_enabled=False, initial_subscription_name=dlq.initial_subscription_name),
                )
            for m in msgs:
                props = m.properties()
                props.setdefault("REAL_TOPIC", m.topic_name())
                props.setdefault("ORIGIN_MESSAGE_ID", str(m.message_id()))
                await self._dlq_producer.send(m.data(), properties=props, partition_key=m.partition_key() or None)
            return True
        except errors.PulsarException as exc:
            log.warning("%s: sending to the dead-letter topic failed: %s", self._topic, exc)
            return False

    # -- seek and last message id --------------------------------------------------------------

    async def seek(self, target: MessageId | int) -> None:
        """Reset the subscription to a message id or to a publish time (ms since epoch)."""
        self._check_open()
        cnx = await self._wait_connected()
        rid = self._ctx.new_request_id()
        if isinstance(target, int):
            command = cmds.seek(self._consumer_id, rid, publish_time=target)
            new_filter = None
        else:
            mid = MessageId.coerce(target)
            command = cmds.seek(self._consumer_id, rid, message_id_=mid.to_proto(with_batch=False))
            new_filter = None if mid.is_earliest() or mid.is_latest() else (mid, True)
        self._acks.forget()
        if not self._config.durable:
            # A reader re-subscribes from its start id: make that the seek target now, in case the
            # broker's CLOSE_CONSUMER makes us re-subscribe before the seek reply arrives.
            self._last_dequeued = None
            self._config.start_message_id = None if new_filter is None else new_filter[0]
        subscriptions_before = self._subscriptions
        await cnx.request(command, rid)
        self._start_filter = new_filter
        self._redelivery.forget_nacked()
        if self._subscriptions != subscriptions_before:
            # The broker closed us for the seek and we already re-subscribed (which dropped the
            # stale queue): what is queued now comes from the new position, keep it.
            return
        # Messages queued before the seek are stale; the broker restarts delivery at the target.
        cleared = self._clear_queue()
        self._batch_unacked.clear()
        self._redelivery.forget_unacked()
        self._last_dequeued = None
        if self._cnx is cnx and not cnx.is_closed:
            self._credit(cleared)
        else:
            await self._wait_connected()  # the broker closed us for the seek: wait for resubscribe

    async def get_last_message_id(self) -> MessageId:
        return (await self._last_ids())[0]

    async def _last_ids(self) -> tuple[MessageId, MessageId | None]:
        cnx = await self._wait_connected()
        rid = self._ctx.new_request_id()
        resp = (await cnx.request(cmds.get_last_message_id(self._consumer_id, rid), rid)).getLastMessageIdResponse
        last = MessageId.from_proto(resp.last_message_id)
        mark = MessageId.from_proto(resp.consumer_mark_delete_position) if resp.HasField("consumer_mark_delete_position") else None
        return last, mark

    async def has_message_available(self) -> bool:
        """Whether a reader positioned here has more to read (asks the broker for the last id)."""
        if len(self._queue):
            return True
        last, mark = await self._last_ids()
        if last.entry_id() < 0:
            return False
        last_key = last._key()
        if self._last_dequeued is not None:
            return last_key > self._last_dequeued._id._key()
        start = self._config.start_message_id
        if start is None or start.is_latest():
            # The mark-delete position covers whole entries: compare (ledger, entry) only.
            return mark is not None and last_key[:2] > mark._key()[:2]
        if start.is_earliest():
            return True
        entry_key = start._key()[:2]
        if self._config.start_message_id_inclusive:
            return last_key[:2] >= entry_key
        return last_key > start._key() if start.batch_index() >= 0 else last_key[:2] > entry_key
