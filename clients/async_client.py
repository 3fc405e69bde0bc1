"""``AsyncClient``: the trio client (``async with AsyncClient(url) as client``).

The client owns one nursery. Connections (``ConnectionPool``) and every producer's and
consumer's service tasks (batch timer, reconnect loop, ack timer ...) run in it, each under its
own cancel scope, so closing a producer stops exactly its tasks and closing the client stops
everything.

Those tasks, and the calls that start them, are KI-protected (``enable_ki_protection``): Ctrl-C
reaches the application's main task at its next checkpoint, never the middle of a connection's
reader or of trio's ``nursery.start_soon``, which, interrupted between adding a child and
scheduling it, leaves a child that never runs and its nursery waiting for it forever.
"""

from __future__ import annotations

import logging
import re
import secrets
from typing import Any

import trio
from trio.lowlevel import enable_ki_protection

from . import errors
from .auth import Authentication, tls_context
from .client_context import ClientConfig, ClientContext
from .connection import ConnectionConfig
from .connection_pool import ConnectionPool, parse_service_url
from .consumer import Consumer, ConsumerBase, ConsumerConfig
from .lookup import LookupService
from .message_id import MessageId
from .multi_consumer import REGEX_MODES, MultiTopicsConsumer
from .options import ConsumerType, Result
from .partitioned_producer import PartitionedProducer
from .producer import Producer, ProducerConfig
from .reader import Reader
from .topic_name import fully_qualified, namespace_of, partition_name

log = logging.getLogger(__name__)


class AsyncClient:
    """Entry point of the async API. Use as ``async with AsyncClient("pulsar://localhost:6650")``."""

    def __init__(
        self,
        service_url: str,
        *,
        operation_timeout_seconds: float = 30,
        connection_timeout_ms: int = 10_000,
        keep_alive_interval_seconds: float = 30,
        authentication: Authentication | None = None,
        use_tls: bool = False,
        tls_trust_certs_file_path: str | None = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = False,
    ) -> None:
        parse_service_url(service_url)  # validate early: InvalidUrl
        if authentication is not None and not isinstance(authentication, Authentication):
            raise errors.InvalidConfiguration("authentication must be a clients.Authentication* object")
        tls = None
        if use_tls or service_url.startswith("pulsar+ssl://"):
            tls = tls_context(trust_certs_file_path=tls_trust_certs_file_path,
                              allow_insecure_connection=tls_allow_insecure_connection,
                              validate_hostname=tls_validate_hostname, authentication=authentication)
        self.service_url = service_url
        self._config = ClientConfig(operation_timeout_seconds, connection_timeout_ms, keep_alive_interval_seconds)
        self._cnx_config = ConnectionConfig(
            operation_timeout_s=float(operation_timeout_seconds),
            connection_timeout_s=connection_timeout_ms / 1000,
            keep_alive_interval_s=float(keep_alive_interval_seconds),
            authentication=authentication,
            tls_context=tls,
        )
        self._nursery: trio.Nursery | None = None
        self._ctx: ClientContext  # what producers and consumers get (set when entered)
        self._pool: ConnectionPool
        self._lookup: LookupService
        self._closed = False
        self._handles: set[Any] = set()

    # -- lifecycle ------------------------------------------------------------------------------

    @enable_ki_protection  # interrupted after opening its nursery, it would leave it open (trio: corrupted)
    async def __aenter__(self) -> "AsyncClient":
        self._nursery_cm = trio.open_nursery()
        self._nursery = await self._nursery_cm.__aenter__()
        self._pool = ConnectionPool(self._nursery, self._cnx_config)
        self._ctx = ClientContext(self._config, self._nursery, self._pool, self.service_url, self.create_producer)
        self._lookup = self._ctx.lookup
        self._handles = self._ctx.handles
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._nursery is not None
        # Already cancelled: a service task ended with an exception none of them catches (a
        # KeyboardInterrupt raised in it): connections and reconnect loops are gone, so a flush or
        # a CLOSE request can never complete. Close locally at once, not after the timeout.
        timeout_s = 0.0 if self._nursery.cancel_scope.cancel_called else 10.0
        try:
            with trio.CancelScope(shield=True):
                await self.close(timeout_s)
        finally:
            self._nursery.cancel_scope.cancel()
            result = await self._nursery_cm.__aexit__(*exc)
        return result

    async def close(self, timeout_s: float = 10.0) -> None:
        """Close every producer (flushing it) and consumer, then the connections.

        Bounded by ``timeout_s``: whatever has not closed by then is cancelled (its pending
        sends fail) when the client's nursery closes."""
        if self._closed:
            return
        self._closed = True
        deadline = trio.current_time() + timeout_s
        for handle in list(self._handles):
            # One scope each: a handle still gets its local close (pending sends failed, receive
            # woken) after an earlier one used up the time.
            with trio.move_on_at(deadline):
                try:
                    await handle.close()
                except errors.PulsarException as exc:
                    log.info("closing %s: %s", handle, exc)
        self._pool.close_all()

    def _check_open(self) -> None:
        if self._closed or self._nursery is None:
            raise errors.AlreadyClosed("client is closed (or not entered with `async with`)")

    # -- producers ----------------------------------------------------------------------------

    async def create_producer(
        self, topic: str, config: ProducerConfig | None = None, **options: Any
    ) -> Producer | PartitionedProducer:
        """A ``Producer`` (or ``PartitionedProducer``); options as ``ProducerConfig`` fields."""
        self._check_open()
        cfg = config or ProducerConfig(**options)
        name = fully_qualified(topic)
        partitions = await self._lookup.partitions(name)
        producer: Producer | PartitionedProducer
        if partitions > 0:
            producer = partitioned = PartitionedProducer(self._ctx, name, cfg, partitions)
            await partitioned._start()
        else:
            producer = Producer(self._ctx, name, cfg)
            await self._ctx.start_child(producer)
        self._handles.add(producer)
        return producer

    # -- consumers ----------------------------------------------------------------------------

    @enable_ki_protection  # starts client tasks: Ctrl-C must not land in start_soon (see async_client)
    async def subscribe(
        self,
        topic: str | list[str] | re.Pattern[str],
        subscription_name: str,
        config: ConsumerConfig | None = None,
        **options: Any,
    ) -> ConsumerBase:
        """Subscribe to a topic, a list of topics or a regex pattern (``re.compile(...)``)."""
        self._check_open()
        cfg = config or ConsumerConfig(**options)
        cfg.subscription_name = subscription_name
        if isinstance(topic, re.Pattern):
            return await self._subscribe_pattern(topic, cfg)
        if isinstance(topic, (list, tuple)):
            names = [fully_qualified(t) for t in topic]
            multi = MultiTopicsConsumer(self._ctx, cfg, topic_label=",".join(names))
            children: list[tuple[str, int]] = []
            for name in names:
                n = await self._lookup.partitions(name)
                children += [(partition_name(name, i), i) for i in range(n)] if n else [(name, -1)]
            await multi.add_topics(children)
            self._handles.add(multi)
            return multi
        name = fully_qualified(topic)
        n = await self._lookup.partitions(name)
        if n > 0:
            multi = MultiTopicsConsumer(self._ctx, cfg, topic_label=name)
            await multi.add_topics([(partition_name(name, i), i) for i in range(n)])
            assert self._nursery is not None
            await self._nursery.start(multi.watch_partitions, name)
            self._handles.add(multi)
            return multi
        consumer = Consumer(self._ctx, name, cfg)
        await self._ctx.start_child(consumer)
        self._handles.add(consumer)
        return consumer

    @enable_ki_protection  # starts client tasks: Ctrl-C must not land in start_soon (see async_client)
    async def _subscribe_pattern(self, pattern: re.Pattern[str], cfg: ConsumerConfig) -> MultiTopicsConsumer:
        text = pattern.pattern
        full = text if "://" in text else f"persistent://public/default/{text}"
        namespace = namespace_of(full)
        compiled = re.compile(full)
        multi = MultiTopicsConsumer(self._ctx, cfg, topic_label=full)
        mode = REGEX_MODES[cfg.regex_subscription_mode]
        await multi.discover(namespace, compiled, mode)
        assert self._nursery is not None
        await self._nursery.start(multi.run_pattern_discovery, namespace, compiled, mode)
        self._handles.add(multi)
        return multi

    async def create_reader(
        self,
        topic: str,
        start_message_id: Any,
        *,
        start_message_id_inclusive: bool = False,
        receiver_queue_size: int = 1000,
        reader_name: str | None = None,
        subscription_role_prefix: str | None = None,
        is_read_compacted: bool = False,
        schema: Any = None,
    ) -> Reader:
        """A non-durable exclusive subscription starting at ``start_message_id``."""
        self._check_open()
        name = fully_qualified(topic)
        partitions = await self._lookup.partitions(name)
        start = MessageId.coerce(start_message_id)
        if partitions > 0 and not (start.is_earliest() or start.is_latest()):
            raise errors.OperationNotSupported("a reader on a partitioned topic starts at earliest or latest")
        prefix = subscription_role_prefix or "reader"
        cfg = ConsumerConfig(
            subscription_name=f"{prefix}-{secrets.token_hex(5)}",
            consumer_type=ConsumerType.Exclusive,
            receiver_queue_size=receiver_queue_size,
            consumer_name=reader_name,
            durable=False,
            start_message_id=start,
            start_message_id_inclusive=start_message_id_inclusive,
            is_read_compacted=is_read_compacted,
            schema=schema,
        )
        consumer: Consumer | MultiTopicsConsumer
        if partitions > 0:
            consumer = MultiTopicsConsumer(self._ctx, cfg, topic_label=name)
            await consumer.add_topics([(partition_name(name, i), i) for i in range(partitions)])
        else:
            consumer = Consumer(self._ctx, name, cfg)
            await self._ctx.start_child(consumer)
        reader = Reader(consumer)
        self._handles.add(reader)
        return reader

    async def get_topic_partitions(self, topic: str) -> list[str]:
        name = fully_qualified(topic)
        n = await self._lookup.partitions(name)
        return [partition_name(name, i) for i in range(n)] if n else [name]


def result_of(error: BaseException) -> Any:
    """The official ``Result`` value for one of our exceptions."""
    return getattr(Result, type(error).__name__, Result.UnknownError)
