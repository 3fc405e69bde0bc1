"""The blocking API, mirroring the official ``pulsar`` package (``Client``, ``Producer`` ...).

A ``Client`` runs an ``AsyncClient`` on a trio event loop in a background thread; each blocking
call hands its coroutine to that loop (``trio.from_thread``) and waits. Callbacks
(``send_async``) run on the loop thread, as the official client runs them on its I/O thread;
message listeners run on one listener thread per consumer.
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
from collections import deque
from functools import partial
from collections.abc import Callable, Iterable
from typing import Any

import trio

from . import errors
from .async_client import AsyncClient, result_of
from .consumer import Consumer as SingleConsumer
from .consumer import ConsumerConfig
from .message import Message
from .message_id import MessageId
from .options import (
    BatchingType,
    CompressionType,
    ConsumerType,
    InitialPosition,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
    Result,
)
from .producer import OutgoingMessage, ProducerConfig

log = logging.getLogger(__name__)
_OK = Result.Ok  # an enum member lookup costs ~0.2 µs: once, not per settled message
LEND_RETRY_S = 0.001  # a lone send waiting on the loop thread looks this often whether it may read itself


class _LoopThread:
    """A trio loop in a daemon thread that owns one ``AsyncClient``."""

    def __init__(self, make_client: Callable[[], AsyncClient]) -> None:
        self._make_client = make_client
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self.client: AsyncClient | None = None
        self._thread = threading.Thread(target=self._main, name="quire-client-loop", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as exc:  # surfaced to the constructor if startup failed
            if not self._ready.is_set():
                self._error = exc
                self._ready.set()
            else:
                log.exception("client loop failed")

    async def _serve(self) -> None:
        self._stop = trio.Event()
        async with self._make_client() as client:
            self.client = client
            self._token = trio.lowlevel.current_trio_token()
            self._ready.set()
            await self._stop.wait()

    def alive(self) -> bool:
        return self._token is not None and self._thread.is_alive()

    def run(self, afn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self._token is None or not self._thread.is_alive():
            raise errors.AlreadyClosed("client is closed")
        try:
            return trio.from_thread.run(lambda: afn(*args, **kwargs), trio_token=self._token)
        except trio.RunFinishedError:
            raise errors.AlreadyClosed("client is closed") from None

    def run_sync(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._token is None or not self._thread.is_alive():
            raise errors.AlreadyClosed("client is closed")
        try:
            return trio.from_thread.run_sync(fn, *args, trio_token=self._token)
        except trio.RunFinishedError:
            raise errors.AlreadyClosed("client is closed") from None

    def run_sync_soon(self, fn: Callable[[], Any]) -> None:
        """Schedule ``fn`` on the loop thread without waiting for it."""
        if self._token is None or not self._thread.is_alive():
            raise errors.AlreadyClosed("client is closed")
        try:
            self._token.run_sync_soon(fn)
        except trio.RunFinishedError:
            raise errors.AlreadyClosed("client is closed") from None

    def stop(self) -> None:
        if self._token is not None and self._thread.is_alive() and self._stop is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(timeout=30)


class _LoopCalls:
    """Calls handed to the loop thread in order without waiting: one wakeup per burst of calls.

    A call is stored as ``(fn, arg)`` (no closure per message on the hot paths) in a deque, whose
    ``append``/``popleft`` are atomic: no lock for user threads to contend on with the loop. The
    ``_posted`` flag is cleared *before* the loop drains and checked *after* an append, so an
    append the drain misses always posts a new drain. Ordering with ``_LoopThread.run`` holds
    because both go through the loop's FIFO ``run_sync_soon`` queue (``sync`` posts a drain for
    calls that must precede a ``run``)."""

    def __init__(self, loop: _LoopThread) -> None:
        self._loop = loop
        self._calls: deque[tuple[Callable[[Any], None], Any]] = deque()
        self._posted = False

    def call_soon(self, fn: Callable[[Any], None], arg: Any) -> None:
        self._calls.append((fn, arg))
        if not self._posted:
            self._post()

    def _post(self) -> None:
        self._posted = True
        try:
            self._loop.run_sync_soon(self._drain)
        except errors.AlreadyClosed:
            self._calls.clear()
            self._posted = False
            raise

    def sync(self) -> None:
        """Hand over what is queued now (before a following ``_LoopThread.run``)."""
        if self._calls:
            self._post()

    def _drain(self) -> None:
        self._posted = False
        calls = self._calls
        while True:
            try:
                fn, arg = calls.popleft()
            except IndexError:
                return
            try:
                fn(arg)
            except Exception:
                log.exception("deferred client call failed")


class _DeferredCalls(_LoopCalls):
    """Consumer-side calls (dequeue reports, acks, nacks) that may wait a little: they cross to
    the loop thread in bulk, once ``limit`` are queued, when the caller is about to block in
    ``receive`` (``sync``), or at the latest ``delay_s`` after the first of them (the ack group
    time), instead of one thread wakeup per message."""

    def __init__(self, loop: _LoopThread, limit: int, delay_s: float) -> None:
        super().__init__(loop)
        self._limit = max(1, limit)
        self._delay_s = delay_s
        self._timer_armed = False

    def call_soon(self, fn: Callable[[Any], None], arg: Any) -> None:
        calls = self._calls
        calls.append((fn, arg))
        if self._posted:
            return
        if len(calls) >= self._limit:
            self._post()
        elif not self._timer_armed:
            self._timer_armed = True
            try:
                self._loop.run_sync_soon(self._arm)
            except errors.AlreadyClosed:
                self._timer_armed = False
                raise

    def _arm(self) -> None:
        trio.lowlevel.spawn_system_task(self._later)

    async def _later(self) -> None:
        await trio.sleep(self._delay_s)
        self._timer_armed = False
        self._drain()


class Client:
    """Blocking client: ``Client("pulsar://localhost:6650")`` as in the official package."""

    def __init__(
        self,
        service_url: str,
        authentication: Any = None,
        operation_timeout_seconds: int = 30,
        io_threads: int = 1,
        message_listener_threads: int = 1,
        concurrent_lookup_requests: int = 50000,
        log_conf_file_path: str | None = None,
        stats_interval_in_seconds: int = 600,
        use_tls: bool = False,
        tls_trust_certs_file_path: str | None = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = False,
        logger: Any = None,
        connection_timeout_ms: int = 10000,
        listener_name: str | None = None,
        **_: Any,
    ) -> None:
        tls = dict(authentication=authentication, use_tls=use_tls, tls_trust_certs_file_path=tls_trust_certs_file_path,
                   tls_allow_insecure_connection=tls_allow_insecure_connection,
                   tls_validate_hostname=tls_validate_hostname)
        AsyncClient(service_url, **tls)  # validate URL and options in the caller's thread
        self._loop = _LoopThread(
            lambda: AsyncClient(
                service_url,
                operation_timeout_seconds=operation_timeout_seconds,
                connection_timeout_ms=connection_timeout_ms,
                **tls,
            )
        )
        client = self._loop.client
        assert client is not None
        self._async: AsyncClient = client

    def create_producer(
        self,
        topic: str,
        producer_name: str | None = None,
        schema: Any = None,
        initial_sequence_id: int | None = None,
        send_timeout_millis: int = 30000,
        compression_type: CompressionType = CompressionType.NONE,
        max_pending_messages: int = 1000,
        max_pending_messages_across_partitions: int = 50000,
        block_if_queue_full: bool = False,
        batching_enabled: bool = True,
        batching_max_messages: int = 1000,
        batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: int = 10,
        chunking_enabled: bool = False,
        message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution,
        lazy_start_partitioned_producers: bool = False,
        properties: dict[str, str] | None = None,
        batching_type: BatchingType = BatchingType.Default,
        encryption_key: str | None = None,
        crypto_key_reader: Any = None,
        access_mode: ProducerAccessMode = ProducerAccessMode.Shared,
        message_router: Callable[[Any, int], int] | None = None,
    ) -> "Producer":
        if encryption_key is not None or crypto_key_reader is not None:
            raise errors.InvalidConfiguration("end-to-end encryption is not supported by this client")
        cfg = ProducerConfig(
            producer_name=producer_name,
            initial_sequence_id=initial_sequence_id,
            send_timeout_millis=send_timeout_millis,
            compression_type=CompressionType(int(compression_type)),
            max_pending_messages=max_pending_messages,
            block_if_queue_full=block_if_queue_full,
            batching_enabled=batching_enabled,
            batching_max_messages=batching_max_messages,
            batching_max_allowed_size_in_bytes=batching_max_allowed_size_in_bytes,
            batching_max_publish_delay_ms=batching_max_publish_delay_ms,
            chunking_enabled=chunking_enabled,
            message_routing_mode=PartitionsRoutingMode(int(message_routing_mode)),
            message_router=message_router,
            access_mode=ProducerAccessMode(int(access_mode)),
            properties=properties,
            schema=_schema(schema),
            batching_type=BatchingType(int(batching_type)),
        )
        inner = self._loop.run(self._async.create_producer, topic, cfg)
        return Producer(self._loop, inner, max_pending_messages, block_if_queue_full)

    def subscribe(
        self,
        topic: str | list[str] | re.Pattern[str],
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        schema: Any = None,
        message_listener: Callable[["Consumer", Message], None] | None = None,
        receiver_queue_size: int = 1000,
        max_total_receiver_queue_size_across_partitions: int = 50000,
        consumer_name: str | None = None,
        unacked_messages_timeout_ms: int | None = None,
        broker_consumer_stats_cache_time_ms: int = 30000,
        negative_ack_redelivery_delay_ms: int = 60000,
        is_read_compacted: bool = False,
        properties: dict[str, str] | None = None,
        pattern_auto_discovery_period: int = 60,
        initial_position: InitialPosition = InitialPosition.Latest,
        crypto_key_reader: Any = None,
        replicate_subscription_state_enabled: bool = False,
        max_pending_chunked_message: int = 10,
        auto_ack_oldest_chunked_message_on_queue_full: bool = False,
        start_message_id_inclusive: bool = False,
        batch_receive_policy: Any = None,
        key_shared_policy: Any = None,
        batch_index_ack_enabled: bool = False,
        regex_subscription_mode: RegexSubscriptionMode = RegexSubscriptionMode.PersistentOnly,
        dead_letter_policy: Any = None,
        crypto_failure_action: Any = None,
    ) -> "Consumer":
        cfg = ConsumerConfig(
            consumer_type=ConsumerType(int(consumer_type)),
            receiver_queue_size=receiver_queue_size,
            max_total_receiver_queue_size_across_partitions=max_total_receiver_queue_size_across_partitions,
            consumer_name=consumer_name,
            unacked_messages_timeout_ms=unacked_messages_timeout_ms,
            negative_ack_redelivery_delay_ms=negative_ack_redelivery_delay_ms,
            initial_position=InitialPosition(int(initial_position)),
            dead_letter_policy=dead_letter_policy,
            batch_index_ack_enabled=batch_index_ack_enabled,
            properties=properties,
            is_read_compacted=is_read_compacted,
            replicate_subscription_state_enabled=replicate_subscription_state_enabled,
            pattern_auto_discovery_period=pattern_auto_discovery_period,
            regex_subscription_mode=RegexSubscriptionMode(int(regex_subscription_mode)),
            batch_receive_policy=batch_receive_policy,
            start_message_id_inclusive=start_message_id_inclusive,
            max_pending_chunked_message=max_pending_chunked_message,
            schema=_schema(schema),
            key_shared_policy=key_shared_policy,
        )
        inner = self._loop.run(self._async.subscribe, topic, subscription_name, cfg)
        return Consumer(self._loop, inner, message_listener)

    def create_reader(
        self,
        topic: str,
        start_message_id: Any,
        schema: Any = None,
        reader_listener: Callable[["Reader", Message], None] | None = None,
        receiver_queue_size: int = 1000,
        reader_name: str | None = None,
        subscription_role_prefix: str | None = None,
        is_read_compacted: bool = False,
        crypto_key_reader: Any = None,
        start_message_id_inclusive: bool = False,
        crypto_failure_action: Any = None,
    ) -> "Reader":
        inner = self._loop.run(
            self._async.create_reader,
            topic,
            start_message_id,
            start_message_id_inclusive=start_message_id_inclusive,
            receiver_queue_size=receiver_queue_size,
            reader_name=reader_name,
            subscription_role_prefix=subscription_role_prefix,
            is_read_compacted=is_read_compacted,
            schema=_schema(schema),
        )
        return Reader(self._loop, inner, reader_listener)

    def get_topic_partitions(self, topic: str) -> list[str]:
        return self._loop.run(self._async.get_topic_partitions, topic)

    def close(self) -> None:
        try:
            self._loop.run(self._async.close)
        except errors.AlreadyClosed:
            pass
        self._loop.stop()

    def shutdown(self) -> None:
        self._loop.stop()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _schema(schema: Any) -> Any:
    """Schemas are used for encode/decode only; bytes schemas need no work."""
    if schema is None or type(schema).__name__ == "BytesSchema":
        return None
    return schema


class _Room:
    """The blocking producer's pending-message window: a counting semaphore whose uncontended
    acquire and release are one atomic deque operation each (``threading.Semaphore`` takes a
    Condition's lock twice per message, and the loop thread releases while the caller
    acquires). Only a caller that finds no room waits on the condition, in bounded waits, and
    re-checks after registering, so a release between its check and its wait is never lost."""

    __slots__ = ("_tokens", "_cv", "_waiters", "_wake_at", "_size", "_signalled")

    def __init__(self, n: int) -> None:
        self._size = n
        self._tokens: deque[None] = deque([None] * n)
        self._cv = threading.Condition(threading.Lock())
        self._waiters = 0
        # A waiting caller is woken once an eighth of the window is free, not per receipt: it
        # then hands over a burst (receipts come back a batch at a time; whoever waits has a
        # full window in flight, so that much room always comes back).
        self._wake_at = max(1, n // 8)
        self._signalled = False  # a notify is on its way: no other until a waiter woke

    def acquire(self, blocking: bool = True) -> bool:
        try:
            self._tokens.pop()
            return True
        except IndexError:
            if not blocking:
                return False
        with self._cv:
            self._waiters += 1
            try:
                while True:
                    try:
                        self._tokens.pop()
                        return True
                    except IndexError:
                        self._cv.wait(0.05)
                        self._signalled = False
            finally:
                self._waiters -= 1

    def idle(self) -> bool:
        """Nothing of this window is taken: no message queued or in flight."""
        return len(self._tokens) == self._size

    def release(self) -> None:
        tokens = self._tokens
        tokens.append(None)
        if self._waiters and not self._signalled and len(tokens) >= self._wake_at:
            self._signalled = True  # one notify per wakeup, not one per receipt until it runs
            with self._cv:
                self._cv.notify()


class _SendGroup:
    """Messages of ``send_async`` calls, handed to the loop as one call per burst (``posted``
    as in ``_TakenReport``); any other hand-over starts a new group, so none overtakes it."""

    __slots__ = ("items", "posted")

    def __init__(self) -> None:
        self.items: deque[tuple[Any, _SendDone]] = deque()
        self.posted = False


class _SendDone:
    """Completion of one blocking ``send_async``: frees its pending slot, then runs the user's
    official-style ``callback(result, message_id)`` (one small object instead of closures)."""

    __slots__ = ("_room", "_callback")

    def __init__(self, room: "_Room", callback: Callable[[Any, MessageId | None], None] | None) -> None:
        self._room = room
        self._callback = callback

    def __call__(self, error: BaseException | None, message_id: MessageId | None) -> None:
        self._room.release()
        if self._callback is not None:
            self._callback(_OK if error is None else result_of(error), message_id)


class _SendWaiter:
    """Completion of a blocking ``send``/``send_many``: frees each message's pending slot and
    wakes the caller (a plain lock, released by the loop thread) once all settled."""

    __slots__ = ("_room", "_left", "_ids", "_error", "_done")

    def __init__(self, room: "_Room", n: int) -> None:
        self._room = room
        self._left = n
        self._ids: list[MessageId | None] = [None] * n
        self._error: BaseException | None = None
        self._done = threading.Lock()
        self._done.acquire()

    def settle_one(self, error: BaseException | None, message_id: MessageId | None) -> None:
        """The callback of a lone send (a bound method: no closure per send)."""
        self._room.release()
        self._error = error
        self._ids[0] = message_id
        self._done.release()

    def settled(self) -> bool:
        return not self._done.locked()

    def read_own(self, read: Callable[[Callable[[], bool]], bool | None]) -> None:
        """A lone direct send: read its receipt in this thread (``read``: the producer's
        ``read_own_receipt``) whenever the connection lends its socket. While it does not, the
        loop thread reads, but it may lend the socket before this receipt came (it lends after
        a read, and a caller asks as soon as it was woken): look again every millisecond."""
        done = self._done
        while not (own := read(self.settled)):
            if own is None:  # the connection does not lend now (e.g. it has consumers): wait
                return
            if done.acquire(timeout=LEND_RETRY_S):
                done.release()  # (settled: ``wait`` takes it)
                return

    def callback(self, index: int) -> Callable[[BaseException | None, MessageId | None], None]:
        def settled(error: BaseException | None, message_id: MessageId | None) -> None:
            self._room.release()
            if error is not None and self._error is None:
                self._error = error
            self._ids[index] = message_id
            self._left -= 1  # only the loop thread settles sends
            if self._left == 0:
                self._done.release()
        return settled

    def wait(self, loop: _LoopThread) -> list[MessageId]:
        while not self._done.acquire(timeout=1.0):
            if not loop.alive():
                raise errors.AlreadyClosed("client is closed")
        if self._error is not None:
            raise self._error
        return self._ids  # type: ignore[return-value]


class Producer:
    """Blocking producer. ``send_async`` hands messages to the loop thread without waiting for it
    (a thread-side semaphore of ``max_pending_messages`` applies back-pressure), so it costs
    microseconds rather than a thread round trip per message."""

    def __init__(self, loop: _LoopThread, inner: Any, max_pending: int, block_if_queue_full: bool) -> None:
        self._loop = loop
        self._p = inner
        self._room = _Room(max(1, max_pending))
        self._block = block_if_queue_full
        self._calls = _LoopCalls(loop)
        self._group = _SendGroup()
        self._closed = False
        # A single-topic producer can send from the caller's thread (a partitioned one cannot).
        self._direct: Callable[[Any, Callable[..., None]], bool] | None = getattr(inner, "send_direct", None)
        self._read_own: Callable[[Callable[[], bool]], bool | None] | None = getattr(inner, "read_own_receipt", None)
        # Without a schema, bytes with no other argument need no conversion (send_async's hot path).
        self._raw_bytes = inner._config.schema is None

    def topic(self) -> str:
        return self._p.topic()

    def producer_name(self) -> str:
        return self._p.producer_name()

    def last_sequence_id(self) -> int:
        return self._p.last_sequence_id()

    def is_connected(self) -> bool:
        return self._loop.run_sync(self._p.is_connected)

    def send(
        self,
        content: Any,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: Any = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: Any = None,
    ) -> MessageId:
        """Send and wait for the broker's receipt. With nothing else of this producer pending,
        the frame is written to the socket from this thread (``send_direct``) and the receipt
        read here too while the connection lends its socket (``read_own``: one thread wakeup
        per call, no loop work); otherwise one hand-over to the loop thread, the open batch
        flushed at once."""
        if type(content) is bytes and self._raw_bytes and properties is None and partition_key is None and (
            ordering_key is None and sequence_id is None and event_timestamp is None and deliver_at is None
            and deliver_after is None
        ):
            msg = OutgoingMessage(content)  # nothing to convert (as in send_async)
        else:
            msg = self._p.make_message(
                content, properties=properties, partition_key=partition_key, ordering_key=ordering_key,
                sequence_id=sequence_id, event_timestamp=event_timestamp, deliver_at=deliver_at,
                deliver_after=deliver_after,
            )
        direct, room = self._direct, self._room
        if direct is not None and not self._closed and room.idle() and room.acquire(blocking=False):
            waiter = _SendWaiter(room, 1)
            try:
                sent = direct(msg, waiter.settle_one)
            except BaseException:
                room.release()
                raise
            if sent:
                if self._read_own is not None:
                    waiter.read_own(self._read_own)  # this thread reads the receipt when it can
                return waiter.wait(self._loop)[0]
            room.release()
        return self._send_and_wait([msg])[0]

    def send_many(self, contents: Iterable[Any]) -> list[MessageId]:
        """Send many payloads (bytes, or values of the producer's schema) and wait for all their
        receipts; returns their ids in order. They cross to the loop thread in bulk and go out
        in as few batches as the batching limits allow; at most ``max_pending_messages`` are
        handed over at a time (this call blocks for room whatever ``block_if_queue_full``).
        Raises the first failure after every message settled."""
        make = self._p.make_message
        return self._send_and_wait([make(c) for c in contents])

    def _send_and_wait(self, msgs: list[Any]) -> list[MessageId]:
        if self._closed:
            raise errors.AlreadyClosed("producer closed")
        if not msgs:
            return []
        waiter = _SendWaiter(self._room, len(msgs))
        room = self._room
        block = self._block or len(msgs) > 1
        chunk: list[tuple[Any, _SendWaiter, int]] = []
        try:
            for i, msg in enumerate(msgs):
                if not room.acquire(blocking=False):
                    if chunk:  # hand over what we have before waiting for room
                        self._group = _SendGroup()  # later send_async calls queue after it
                        self._calls.call_soon(self._submit_now, chunk)
                        chunk = []
                    if not block:
                        raise errors.ProducerQueueIsFull("max_pending_messages reached")
                    room.acquire()
                chunk.append((msg, waiter, i))
            if chunk:
                self._group = _SendGroup()
                self._calls.call_soon(self._submit_now, chunk)
        except BaseException:
            for _ in chunk:
                room.release()
            raise
        return waiter.wait(self._loop)

    def _submit_now(self, items: list[tuple[Any, "_SendWaiter", int]]) -> None:
        """On the loop thread: queue messages handed over by ``send``/``send_many`` and send the
        open batch at once (a synchronous sender should not wait for the batch timer)."""
        p = self._p
        for msg, waiter, i in items:
            try:
                p.send_nowait(msg, waiter.callback(i))
            except errors.PulsarException as exc:
                waiter.callback(i)(exc, None)
        p.flush_open_batch()

    def send_async(
        self,
        content: Any,
        callback: Callable[[Any, MessageId | None], None] | None,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: Any = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: Any = None,
    ) -> None:
        """Queue a message; ``callback(result, message_id)`` runs when the broker answers."""
        if self._closed:
            raise errors.AlreadyClosed("producer closed")
        if type(content) is bytes and self._raw_bytes and properties is None and partition_key is None and (
            ordering_key is None and sequence_id is None and event_timestamp is None and deliver_at is None
            and deliver_after is None
        ):
            msg = OutgoingMessage(content)
        else:
            msg = self._p.make_message(
                content, properties=properties, partition_key=partition_key, ordering_key=ordering_key,
                sequence_id=sequence_id, event_timestamp=event_timestamp, deliver_at=deliver_at,
                deliver_after=deliver_after,
            )
        room = self._room
        if not room.acquire(blocking=False):
            if not self._block:
                raise errors.ProducerQueueIsFull("max_pending_messages reached")
            # The window is full: nothing more comes until receipts free room, so the open batch
            # goes now instead of waiting to fill (more of the window in flight, not held here).
            self._calls.call_soon(self._flush_open, None)
            room.acquire()
        group = self._group
        group.items.append((msg, _SendDone(room, callback)))
        if not group.posted:
            group.posted = True
            try:
                self._calls.call_soon(self._submit_group, group)
            except errors.AlreadyClosed:
                group.items.clear()
                room.release()
                raise

    def _flush_open(self, _: None) -> None:
        """On the loop thread, after the messages handed over before it: send the open batch."""
        flush = getattr(self._p, "flush_open_batch", None)
        if flush is not None:
            flush()

    def _submit_group(self, group: "_SendGroup") -> None:
        """On the loop thread: queue the messages ``send_async`` handed over (in one go when the
        producer has a bulk path; a failure settles that message's callback)."""
        group.posted = False
        items = group.items
        bulk = getattr(self._p, "send_nowait_many", None)
        if bulk is not None:
            bulk(items)
            return
        while items:
            msg, done = items.popleft()
            try:
                self._p.send_nowait(msg, done)
            except errors.PulsarException as exc:
                done(exc, None)

    def flush(self) -> None:
        self._loop.run(self._p.flush)

    def close(self) -> None:
        self._closed = True
        try:
            self._loop.run(self._p.close)
        except errors.AlreadyClosed:
            pass


class _TakenReport:
    """Messages ``receive`` took, reported to the loop (``dequeued_many``: permits, redelivery
    tracking) in bulk rather than one call per message. The messages wait in a deque;
    ``_posted`` is cleared before the loop drains it and checked after an append (as in
    ``_LoopCalls``), and the report keeps its place in the call order, ahead of the acks of the
    messages it covers. Every ``step`` messages the queued calls cross at once, so permits
    return when the consumer took half its queue, not at the next crossing for other reasons."""

    __slots__ = ("_calls", "_dequeued_many", "_msgs", "_posted", "_step")

    def __init__(self, calls: _DeferredCalls, dequeued_many: Callable[[list[Message]], None], step: int) -> None:
        self._calls = calls
        self._dequeued_many = dequeued_many
        self._msgs: deque[Message] = deque()
        self._posted = False
        self._step = max(1, step)

    def add(self, msg: Message) -> None:
        msgs = self._msgs
        msgs.append(msg)
        if not self._posted:
            self._posted = True
            self._calls.call_soon(self._report, None)
        elif len(msgs) == self._step:
            self._calls.sync()

    def _report(self, _: Any) -> None:
        self._posted = False
        msgs = self._msgs
        taken = []
        while msgs:  # only the loop thread pops
            taken.append(msgs.popleft())
        if taken:
            self._dequeued_many(taken)


class _LastTaken:
    """``_TakenReport`` of a consumer whose report needs only the last message taken (one
    topic, permits returned by ``_ThreadFlow``, no ack timeout to track per message): ``add``
    stores it, and posts a report if none is pending (cleared before the loop reads the last
    message, so a message stored after that read always posts a new report)."""

    __slots__ = ("_calls", "_dequeued_many", "_last", "_posted")

    def __init__(self, calls: _DeferredCalls, dequeued_many: Callable[[list[Message]], None]) -> None:
        self._calls = calls
        self._dequeued_many = dequeued_many
        self._last: Message | None = None
        self._posted = False

    def add(self, msg: Message) -> None:
        self._last = msg
        if not self._posted:
            self._posted = True
            self._calls.call_soon(self._report, None)

    def _report(self, _: Any) -> None:
        self._posted = False
        last = self._last
        if last is not None:
            self._dequeued_many([last])


class _ThreadFlow:
    """Permits of a single-topic consumer, returned from the thread that takes the messages: once
    ``step`` (half the receiver queue, as the official client) were taken, the FLOW frame goes
    straight to the socket (``write_direct``) instead of waiting for the loop thread, which a
    busy consumer holding the GIL keeps waiting for up to a switch interval (5 ms: a whole
    queue at 1 KiB), while the broker, out of permits, sends nothing. If the socket is busy the
    loop sends it (``_credit_on``, dropped if a reconnect meanwhile granted a whole queue).

    Per message it costs one ``next`` of a counter (atomic, so ``receive`` may run on several
    threads): ``taken`` numbers the messages; whoever takes number ``next_at`` or later grants
    every permit up to its number, under a lock, once."""

    __slots__ = ("_c", "_loop", "_lock", "_granted", "_step", "taken", "next_at")

    def __init__(self, loop: _LoopThread, inner: Any, step: int) -> None:
        self._c = inner
        self._loop = loop
        self._lock = threading.Lock()
        self._step = max(1, step)
        self._granted = 0  # messages whose permits went back
        self.taken = itertools.count(1).__next__  # the number of the message just taken
        self.next_at = self._step

    def grant(self, n: int) -> None:
        """Return the permits of messages ``_granted + 1`` .. ``n`` (``n`` from ``taken``)."""
        with self._lock:
            permits = n - self._granted
            if permits < self._step:
                return  # another thread granted them already
            self._granted = n
            self.next_at = n + self._step
        c = self._c
        cnx = c._cnx
        if cnx is None:
            return  # disconnected: the reconnect grants a whole queue
        rest = cnx.write_direct(c.flow_frame(permits))
        if rest is None:
            try:
                self._loop.run_sync_soon(lambda: c._credit_on(cnx, permits))
            except errors.AlreadyClosed:  # the client is closing: no more messages to permit
                pass
        elif rest:
            cnx.finish_direct(rest, c._ctx.config.operation_timeout_s or 30)


class _AckGroup:
    """Messages acknowledged one by one, handed to the loop as one call per burst (``_posted``
    as in ``_TakenReport``). A group only takes acks while it is the newest deferred call: any
    other call (a nack, a cumulative ack) starts a new group, so acks never overtake it. It
    holds the messages, not their ids: the loop builds an id only for the ack that completes
    an entry."""

    __slots__ = ("msgs", "posted")

    def __init__(self) -> None:
        self.msgs: deque[Message] = deque()
        self.posted = False


def _consumer_calls(loop: _LoopThread, config: ConsumerConfig) -> _DeferredCalls:
    """Dequeue reports and acks of a blocking consumer cross in bulk: at most a quarter of the
    receiver queue (so returned permits flow well before the broker runs out of them), within
    the ack group time."""
    group_ms = config.ack_group_time_ms
    limit = 1 if group_ms <= 0 else min(256, max(1, config.receiver_queue_size // 4))
    return _DeferredCalls(loop, limit, group_ms / 1000)


def _take_many(queue: Any, max_messages: int, timeout_millis: int | None,
               before_wait: Callable[[], None]) -> list[Message]:
    """The next message (``before_wait`` runs if we have to wait for it), then up to
    ``max_messages - 1`` more without waiting."""
    msg = queue.get_nowait()
    if msg is None:
        before_wait()
        msg = queue.get_blocking(None if timeout_millis is None else timeout_millis / 1000)
    out = [msg]
    get = queue.get_nowait
    while len(out) < max_messages:
        msg = get()
        if msg is None:
            break
        out.append(msg)
    return out


class _Listener:
    """Runs ``listener(owner, message)`` on its own thread for each received message."""

    def __init__(self, owner: Any, receive: Callable[[int], Message], fn: Callable[[Any, Message], None]) -> None:
        self._owner, self._receive, self._fn = owner, receive, fn
        self._paused = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._main, name="quire-listener", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        while not self._stopped:
            if self._paused.is_set():
                self._paused.wait(0.1)
                continue
            try:
                msg = self._receive(200)
            except errors.Timeout:
                continue
            except errors.PulsarException:
                return
            try:
                self._fn(self._owner, msg)
            except Exception:
                log.exception("message listener failed")

    def pause(self) -> None:
        self._paused.set()

    def resume(self) -> None:
        self._paused.clear()

    def stop(self) -> None:
        self._stopped = True


class Consumer:
    """Blocking consumer. ``receive`` takes messages straight from the receiver queue in the
    caller's thread; returning permits, acks and nacks are handed to the loop without waiting."""

    def __init__(self, loop: _LoopThread, inner: Any, listener: Callable[..., None] | None = None) -> None:
        self._loop = loop
        self._c = inner
        config = inner._config
        self._calls = _consumer_calls(loop, config)
        # A single-topic consumer returns permits from the receiving thread; the loop then only
        # tracks what was taken (last id, ack timeout). A multi-topic one routes them there.
        self._flow: _ThreadFlow | None = None
        report = inner._dequeued_many
        if isinstance(inner, SingleConsumer) and inner._own_queue:
            self._flow = _ThreadFlow(loop, inner, inner._refill_at)
            report = partial(inner._dequeued_many, permits=False)
        self._report = report
        self._taken: _TakenReport | _LastTaken
        if self._flow is not None and not config.unacked_messages_timeout_ms:
            self._taken = _LastTaken(self._calls, report)
        else:
            self._taken = _TakenReport(self._calls, report, config.receiver_queue_size // 8)
        self._acks = _AckGroup()
        self._listener = _Listener(self, self.receive, listener) if listener is not None else None

    def _defer(self, fn: Callable[[Any], None], arg: Any) -> None:
        """A deferred call other than a grouped ack: later acks go to a new group after it."""
        self._acks = _AckGroup()
        self._calls.call_soon(fn, arg)

    def _flush_acks(self, group: _AckGroup) -> None:
        group.posted = False
        try:
            self._c._ack_many(group.msgs)
        except errors.PulsarException:  # closed meanwhile: its acks do not matter any more
            group.msgs.clear()

    def _run(self, afn: Callable[..., Any], *args: Any) -> Any:
        """A call on the loop thread after the deferred ones (acks, dequeue reports) before it."""
        self._acks = _AckGroup()
        self._calls.sync()
        return self._loop.run(afn, *args)

    def topic(self) -> str:
        return self._c.topic()

    def subscription_name(self) -> str:
        return self._c.subscription_name()

    def consumer_name(self) -> str:
        return self._c.consumer_name()

    def is_connected(self) -> bool:
        return self._loop.run_sync(self._c.is_connected)

    def receive(self, timeout_millis: int | None = None) -> Message:
        c = self._c
        if c._closed or c._fatal is not None:
            c._check_open()
        try:  # MessageQueue.get_nowait, inlined (``_items`` is read anew: ``remove_if`` replaces it)
            msg = c._queue._items.popleft()
        except IndexError:
            self._calls.sync()  # returned permits (and acks) leave before we wait
            msg = c._queue.get_blocking(None if timeout_millis is None else timeout_millis / 1000)
        self._taken.add(msg)
        flow = self._flow
        if flow is not None:
            n = flow.taken()
            if n >= flow.next_at:
                flow.grant(n)
        return msg

    def receive_many(self, max_messages: int = 1000, timeout_millis: int | None = None) -> list[Message]:
        """Up to ``max_messages`` messages: waits (up to ``timeout_millis``, else ``Timeout``) for
        the first, then takes whatever else is already in the receiver queue, without waiting."""
        c = self._c
        c._check_open()
        out = _take_many(c._queue, max_messages, timeout_millis, self._calls.sync)
        self._calls.call_soon(self._report, out)  # a dequeue report: acks may pass it
        flow = self._flow
        if flow is not None:
            taken = flow.taken
            for _ in range(len(out) - 1):
                taken()
            n = taken()
            if n >= flow.next_at:
                flow.grant(n)
        return out

    def batch_receive(self) -> list[Message]:
        return self._run(self._c.batch_receive)

    def _owner_and_id(self, message: Message | MessageId) -> tuple[Any, MessageId]:
        self._c._check_open()
        mid = message._id if type(message) is Message else MessageId.coerce(message)
        return self._c._owner_of(message), mid

    def acknowledge(self, message: Message | MessageId) -> None:
        c = self._c
        if type(message) is Message and message._consumer is self._c:  # the per-message path
            if c._closed or c._fatal is not None:
                c._check_open()
            group = self._acks
            group.msgs.append(message)
            if not group.posted:
                group.posted = True
                self._calls.call_soon(self._flush_acks, group)
            return
        owner, mid = self._owner_and_id(message)
        self._defer(owner._ack, mid)

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        if self._c._config.consumer_type in (ConsumerType.Shared, ConsumerType.KeyShared):
            raise errors.CumulativeAcknowledgementNotAllowedError("cumulative ack on a Shared subscription")
        owner, mid = self._owner_and_id(message)
        self._defer(owner._ack_cumulative, mid)

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        owner, mid = self._owner_and_id(message)
        self._defer(owner._nack, mid)

    def redeliver_unacknowledged_messages(self) -> None:
        self._run(self._c.redeliver_unacknowledged_messages)

    def seek(self, messageid: MessageId | int | Any) -> None:
        self._run(self._c.seek, messageid if isinstance(messageid, int) else MessageId.coerce(messageid))

    def get_last_message_id(self) -> MessageId:
        return self._run(self._c.get_last_message_id)

    def unsubscribe(self) -> None:
        if self._listener is not None:
            self._listener.stop()
        self._run(self._c.unsubscribe)

    def pause_message_listener(self) -> None:
        if self._listener is not None:
            self._listener.pause()

    def resume_message_listener(self) -> None:
        if self._listener is not None:
            self._listener.resume()

    def close(self) -> None:
        if self._listener is not None:
            self._listener.stop()
        try:
            self._run(self._c.close)
        except errors.AlreadyClosed:
            pass


class Reader:
    def __init__(self, loop: _LoopThread, inner: Any, listener: Callable[..., None] | None = None) -> None:
        self._loop = loop
        self._r = inner
        self._calls = _consumer_calls(loop, inner._consumer._config)
        self._listener = _Listener(self, self.read_next, listener) if listener is not None else None

    def _run(self, afn: Callable[..., Any], *args: Any) -> Any:
        """A call on the loop thread after the deferred ones (dequeue reports) before it."""
        self._calls.sync()
        return self._loop.run(afn, *args)

    def topic(self) -> str:
        return self._r.topic()

    def read_next(self, timeout_millis: int | None = None) -> Message:
        consumer = self._r._consumer
        consumer._check_open()
        return self.read_many(1, timeout_millis)[0]

    def read_many(self, max_messages: int = 1000, timeout_millis: int | None = None) -> list[Message]:
        """As ``Consumer.receive_many``: the next message (waiting for it), and up to
        ``max_messages - 1`` more already received."""
        consumer = self._r._consumer
        consumer._check_open()
        out = _take_many(consumer._queue, max_messages, timeout_millis, self._calls.sync)
        self._calls.call_soon(self._r._consumed_many, out)
        return out

    def has_message_available(self) -> bool:
        return self._run(self._r.has_message_available)

    def seek(self, messageid: MessageId | int | Any) -> None:
        self._run(self._r.seek, messageid)

    def is_connected(self) -> bool:
        return self._loop.run_sync(self._r.is_connected)

    def close(self) -> None:
        if self._listener is not None:
            self._listener.stop()
        try:
            self._run(self._r.close)
        except errors.AlreadyClosed:
            pass
