"""Binary-protocol lookup: partitioned-topic metadata and the owning broker, with redirects."""

from __future__ import annotations

from collections.abc import Callable

from . import errors
from .connection_pool import ConnectionPool
from .protocol import commands as cmds
from .protocol.pulsar_api_pb2 import (
    CommandGetTopicsOfNamespace,
    CommandLookupTopicResponse,
    CommandPartitionedTopicMetadataResponse,
)

MAX_REDIRECTS = 20


class LookupService:
    """Lookups go to the service URL first and follow Redirect answers (up to 20)."""

    def __init__(self, pool: ConnectionPool, service_url: str, next_request_id: Callable[[], int],
                 operation_timeout_s: float) -> None:
        self._pool = pool
        self.service_url = service_url
        self.tls = service_url.startswith("pulsar+ssl://")
        self._rid = next_request_id
        self._timeout = operation_timeout_s

    async def partitions(self, topic: str) -> int:
        """Number of partitions of ``topic`` (0: not partitioned)."""
        cnx = await self._pool.get(self.service_url)
        rid = self._rid()
        resp = (await cnx.request(cmds.partitioned_metadata(topic, rid), rid)).partitionMetadataResponse
        if not resp.HasField("response") or resp.response != CommandPartitionedTopicMetadataResponse.Success:
            raise _lookup_error(resp.error if resp.HasField("error") else None, resp.message, topic)
        return resp.partitions

    async def broker_url(self, topic: str) -> str:
        """The ``pulsar://`` (``pulsar+ssl://`` over TLS) URL of the broker that serves ``topic``."""
        url, authoritative = self.service_url, False
        for _ in range(MAX_REDIRECTS):
            cnx = await self._pool.get(url)
            rid = self._rid()
            reply = await cnx.request(cmds.lookup(topic, rid, authoritative=authoritative), rid)
            resp = reply.lookupTopicResponse
            if not resp.HasField("response") or resp.response == CommandLookupTopicResponse.Failed:
                raise _lookup_error(resp.error if resp.HasField("error") else None, resp.message, topic)
            target = resp.brokerServiceUrlTls if self.tls and resp.brokerServiceUrlTls else resp.brokerServiceUrl
            if resp.response == CommandLookupTopicResponse.Redirect:
                url, authoritative = target, resp.authoritative
                continue
            if resp.proxy_through_service_url:
                return self.service_url
            return target or url
        raise errors.LookupError(f"too many lookup redirects for {topic}")

    async def topics_of_namespace(self, namespace: str, mode: int = CommandGetTopicsOfNamespace.PERSISTENT) -> list[str]:
        cnx = await self._pool.get(self.service_url)
        rid = self._rid()
        resp = await cnx.request(cmds.get_topics_of_namespace(rid, namespace, mode), rid)
        return list(resp.getTopicsOfNamespaceResponse.topics)


def _lookup_error(code: int | None, message: str, topic: str) -> errors.PulsarException:
    if code is None:
        return errors.LookupError(f"lookup of {topic} failed: {message}")
    return errors.from_server_error(code, message or f"lookup of {topic} failed")


class Backoff:
    """Exponential back-off between reconnect attempts: 100 ms doubling up to ``max_s``."""

    def __init__(self, initial_s: float = 0.1, max_s: float = 30.0) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self._next = initial_s

    def next(self) -> float:
        delay = self._next
        self._next = min(self._next * 2, self.max_s)
        return delay

    def reset(self) -> None:
        self._next = self.initial_s
