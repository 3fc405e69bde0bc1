"""The blocking API, mirroring the official ``pulsar`` package (``Client``, ``Producer`` ...).

A ``Client`` runs an ``AsyncClient`` on a trio event loop in a background thread; each blocking
call hands its coroutine to that loop (``trio.from_thread``) and waits. Callbacks
(``send_async``) run on the loop thread, as the official client runs them on its I/O thread;
message listeners run on one listener thread per consumer.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import Any

import trio

from . import errors
from .async_client import AsyncClient, result_of
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
from .producer import ProducerConfig

log = logging.getLogger(__name__)


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

    A call is stored as ``(fn, arg)`` (no closure per message on the receive/ack hot paths).
    Ordering with ``_LoopThread.run`` holds because both go through the loop's FIFO
    ``run_sync_soon`` queue."""

    def __init__(self, loop: _LoopThread) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._calls: list[tuple[Callable[[Any], None], Any]] = []
        self._scheduled = False

    def call_soon(self, fn: Callable[[Any], None], arg: Any) -> None:
        with self._lock:
            self._calls.append((fn, arg))
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self._loop.run_sync_soon(self._drain)
        except errors.AlreadyClosed:
            with self._lock:
                self._calls.clear()
                self._scheduled = False
            raise

    def _drain(self) -> None:
        with self._lock:
            calls, self._calls, self._scheduled = self._calls, [], False
        for fn, arg in calls:
            try:
                fn(arg)
            except Exception:
                log.exception("deferred client call failed")


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
        if authentication is not None or use_tls:
            raise errors.InvalidConfiguration("authentication and TLS are not supported by this client")
        AsyncClient(service_url)  # validate the URL in the caller's thread
        self._loop = _LoopThread(
            lambda: AsyncClient(
                service_url,
                operation_timeout_seconds=operation_timeout_seconds,
                connection_timeout_ms=connection_timeout_ms,
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


class _SendDone:
    """Completion of one blocking ``send_async``: frees its pending slot, then runs the user's
    official-style ``callback(result, message_id)`` (one small object instead of closures)."""

    __slots__ = ("_room", "_callback")

    def __init__(self, room: threading.Semaphore, callback: Callable[[Any, MessageId | None], None] | None) -> None:
        self._room = room
        self._callback = callback

    def __call__(self, error: BaseException | None, message_id: MessageId | None) -> None:
        self._room.release()
        if self._callback is not None:
            self._callback(Result.Ok if error is None else result_of(error), message_id)


class Producer:
    """Blocking producer. ``send_async`` hands messages to the loop thread without waiting for it
    (a thread-side semaphore of ``max_pending_messages`` applies back-pressure), so it costs
    microseconds rather than a thread round trip per message."""

    def __init__(self, loop: _LoopThread, inner: Any, max_pending: int, block_if_queue_full: bool) -> None:
        self._loop = loop
        self._p = inner
        self._room = threading.Semaphore(max(1, max_pending))
        self._block = block_if_queue_full
        self._calls = _LoopCalls(loop)
        self._closed = False

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
        return self._loop.run(
            self._p.send,
            content,
            properties=properties,
            partition_key=partition_key,
            ordering_key=ordering_key,
            sequence_id=sequence_id,
            event_timestamp=event_timestamp,
            deliver_at=deliver_at,
            deliver_after=deliver_after,
        )

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
        msg = self._p.make_message(
            content, properties=properties, partition_key=partition_key, ordering_key=ordering_key,
            sequence_id=sequence_id, event_timestamp=event_timestamp, deliver_at=deliver_at,
            deliver_after=deliver_after,
        )
        if not self._room.acquire(blocking=self._block):
            raise errors.ProducerQueueIsFull("max_pending_messages reached")
        try:
            self._calls.call_soon(self._submit, (msg, _SendDone(self._room, callback)))
        except errors.AlreadyClosed:
            self._room.release()
            raise

    def _submit(self, item: tuple[Any, "_SendDone"]) -> None:
        """On the loop thread: queue one message handed over by ``send_async``."""
        msg, done = item
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
        self._calls = _LoopCalls(loop)
        self._listener = _Listener(self, self.receive, listener) if listener is not None else None

    def topic(self) -> str:
        return self._c.topic()

    def subscription_name(self) -> str:
        return self._c.subscription_name()

    def consumer_name(self) -> str:
        return self._c.consumer_name()

    def is_connected(self) -> bool:
        return self._loop.run_sync(self._c.is_connected)

    def receive(self, timeout_millis: int | None = None) -> Message:
        self._c._check_open()
        msg = self._c._queue.get_blocking(None if timeout_millis is None else timeout_millis / 1000)
        self._calls.call_soon(self._c._dequeued, msg)
        return msg

    def batch_receive(self) -> list[Message]:
        return self._loop.run(self._c.batch_receive)

    def _owner_and_id(self, message: Message | MessageId) -> tuple[Any, MessageId]:
        self._c._check_open()
        mid = message._id if type(message) is Message else MessageId.coerce(message)
        return self._c._owner_of(message), mid

    def acknowledge(self, message: Message | MessageId) -> None:
        owner, mid = self._owner_and_id(message)
        self._calls.call_soon(owner._ack, mid)

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        if self._c._config.consumer_type in (ConsumerType.Shared, ConsumerType.KeyShared):
            raise errors.CumulativeAcknowledgementNotAllowedError("cumulative ack on a Shared subscription")
        owner, mid = self._owner_and_id(message)
        self._calls.call_soon(owner._ack_cumulative, mid)

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        owner, mid = self._owner_and_id(message)
        self._calls.call_soon(owner._nack, mid)

    def redeliver_unacknowledged_messages(self) -> None:
        self._loop.run(self._c.redeliver_unacknowledged_messages)

    def seek(self, messageid: MessageId | int | Any) -> None:
        self._loop.run(self._c.seek, messageid if isinstance(messageid, int) else MessageId.coerce(messageid))

    def get_last_message_id(self) -> MessageId:
        return self._loop.run(self._c.get_last_message_id)

    def unsubscribe(self) -> None:
        if self._listener is not None:
            self._listener.stop()
        self._loop.run(self._c.unsubscribe)

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
            self._loop.run(self._c.close)
        except errors.AlreadyClosed:
            pass


class Reader:
    def __init__(self, loop: _LoopThread, inner: Any, listener: Callable[..., None] | None = None) -> None:
        self._loop = loop
        self._r = inner
        self._calls = _LoopCalls(loop)
        self._listener = _Listener(self, self.read_next, listener) if listener is not None else None

    def topic(self) -> str:
        return self._r.topic()

    def read_next(self, timeout_millis: int | None = None) -> Message:
        consumer = self._r._consumer
        consumer._check_open()
        msg = consumer._queue.get_blocking(None if timeout_millis is None else timeout_millis / 1000)
        self._calls.call_soon(self._r._consumed, msg)
        return msg

    def has_message_available(self) -> bool:
        return self._loop.run(self._r.has_message_available)

    def seek(self, messageid: MessageId | int | Any) -> None:
        self._loop.run(self._r.seek, messageid)

    def is_connected(self) -> bool:
        return self._loop.run_sync(self._r.is_connected)

    def close(self) -> None:
        if self._listener is not None:
            self._listener.stop()
        try:
            self._loop.run(self._r.close)
        except errors.AlreadyClosed:
            pass
