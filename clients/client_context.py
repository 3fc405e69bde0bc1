"""``ClientContext``: what producers and consumers need of their client, and nothing more.

BookKeeper's ``ClientContext`` idea on the Pulsar client side: a producer, consumer or
multi-topic consumer holds this small object (lookups, the connection pool, id counters, the
nursery its service tasks run in, the handles the client closes on exit) instead of the whole
``AsyncClient`` and its private members. ``AsyncClient`` creates one when it is entered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

import trio
from trio.lowlevel import enable_ki_protection

from .connection import DEFAULT_MAX_MESSAGE_SIZE
from .connection_pool import ConnectionPool
from .lookup import LookupService


@dataclass
class ClientConfig:
    operation_timeout_seconds: float = 30
    connection_timeout_ms: int = 10_000
    keep_alive_interval_seconds: float = 30

    @property
    def operation_timeout_s(self) -> float:
        return float(self.operation_timeout_seconds)


class ServiceTask(Protocol):
    """A producer or consumer: one service task started in the client's nursery."""

    async def _run(self, *, task_status: Any = ...) -> None: ...

    @property
    def _cnx(self) -> Any: ...


class ClientContext:
    """Shared by every producer and consumer of one ``AsyncClient``."""

    def __init__(self, config: ClientConfig, nursery: trio.Nursery, pool: ConnectionPool, service_url: str,
                 create_producer: Callable[..., Awaitable[Any]]) -> None:
        self.config = config
        self.nursery = nursery
        self.pool = pool
        self._ids = {"request": 0, "producer": 0, "consumer": 0}
        self.lookup = LookupService(pool, service_url, self.new_request_id, config.operation_timeout_s)
        # The broker's limit (CONNECTED.max_message_size), learnt from the first connection.
        self.max_message_size = DEFAULT_MAX_MESSAGE_SIZE
        # Producers and consumers the client closes on exit.
        self.handles: set[Any] = set()
        # For the dead-letter producer a consumer may need (AsyncClient.create_producer).
        self.create_producer = create_producer

    def _new_id(self, kind: str) -> int:
        self._ids[kind] += 1
        return self._ids[kind]

    def new_request_id(self) -> int:
        return self._new_id("request")

    def new_producer_id(self) -> int:
        return self._new_id("producer")

    def new_consumer_id(self) -> int:
        return self._new_id("consumer")

    def forget(self, handle: Any) -> None:
        """A closed producer/consumer: the client no longer closes it on exit."""
        self.handles.discard(handle)

    @enable_ki_protection  # starts client tasks: Ctrl-C must not land in start_soon (see async_client)
    async def start_child(self, child: ServiceTask) -> None:
        """Run a producer's/consumer's service task in the client nursery; creation errors raise here."""
        await self.nursery.start(child._run)
        cnx = child._cnx
        if cnx is not None:
            self.max_message_size = cnx.max_message_size
