"""Connections pooled by broker URL: one live connection per ``pulsar://host:port``.

Concurrent callers asking for the same URL share one connect attempt. Each connection's
``run()`` is a task in the pool's nursery (owned by the client), so closing the client closes
every connection.
"""

from __future__ import annotations

import ssl
from urllib.parse import urlsplit

import trio
from trio.lowlevel import enable_ki_protection

from . import errors
from .connection import ClientConnection, ConnectionConfig


def parse_service_url(url: str) -> list[tuple[str, int]]:
    """``pulsar://h1:6650,h2:6651`` -> [(h1, 6650), (h2, 6651)] (``pulsar+ssl://``: TLS, port 6651)."""
    parts = urlsplit(url)
    if parts.scheme not in ("pulsar", "pulsar+ssl"):
        raise errors.InvalidUrl(f"unsupported service URL {url!r} (expected pulsar://host:port)")
    default_port = "6651" if parts.scheme == "pulsar+ssl" else "6650"
    out = []
    for hostport in parts.netloc.split(","):
        host, _, port = hostport.rpartition(":")
        if not host:
            host, port = hostport, default_port
        try:
            out.append((host.strip("[]"), int(port)))
        except ValueError:
            raise errors.InvalidUrl(f"bad port in {url!r}") from None
    if not out:
        raise errors.InvalidUrl(url)
    return out


class ConnectionPool:
    """Owns the broker connections of one client."""

    def __init__(self, nursery: trio.Nursery, config: ConnectionConfig) -> None:
        self._nursery = nursery
        self._config = config
        self._connections: dict[str, ClientConnection] = {}
        self._locks: dict[str, trio.Lock] = {}
        self._rr = 0

    async def get(self, url: str) -> ClientConnection:
        """A live connection to ``url`` (connects and handshakes when needed)."""
        cnx = self._connections.get(url)
        if cnx is not None and not cnx.is_closed:
            return cnx
        lock = self._locks.setdefault(url, trio.Lock())
        async with lock:
            cnx = self._connections.get(url)
            if cnx is not None and not cnx.is_closed:
                return cnx
            cnx = await self._connect(url)
            self._connections[url] = cnx
            return cnx

    @enable_ki_protection  # starts client tasks: Ctrl-C must not land in start_soon (see async_client)
    async def _connect(self, url: str) -> ClientConnection:
        """Connect to one of the URL's hosts: round robin, falling through to the next on failure."""
        hosts = parse_service_url(url)
        start = self._rr
        self._rr += 1
        failure: errors.PulsarException | None = None
        for i in range(len(hosts)):
            host, port = hosts[(start + i) % len(hosts)]
            try:
                cnx = await self._connect_host(url, host, port)
            except errors.ConnectError as exc:
                failure = exc
                continue
            self._nursery.start_soon(cnx.run)
            return cnx
        assert failure is not None
        raise failure

    async def _connect_host(self, url: str, host: str, port: int) -> ClientConnection:
        try:
            with trio.fail_after(self._config.connection_timeout_s):
                stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
                if url.startswith("pulsar+ssl://"):
                    if self._config.tls_context is None:
                        raise errors.InvalidConfiguration(f"{url} needs TLS: set use_tls or a trust file")
                    tls = trio.SSLStream(stream, self._config.tls_context, server_hostname=host)
                    try:
                        await tls.do_handshake()
                    except (trio.BrokenResourceError, ssl.SSLError) as exc:
                        await trio.aclose_forcefully(stream)
                        raise errors.ConnectError(f"TLS handshake with {host}:{port} failed: "
                                                  f"{exc.__cause__ or exc}") from None
                    stream = tls
                cnx = ClientConnection(url, stream, self._config)
                try:
                    await cnx.handshake()
                except BaseException:
                    await trio.aclose_forcefully(stream)
                    raise
        except trio.TooSlowError:
            raise errors.ConnectError(f"connecting to {host}:{port} timed out") from None
        except trio.BrokenResourceError as exc:  # e.g. TLS 1.3: the broker refused our certificate after the handshake
            raise errors.ConnectError(f"{host}:{port} closed the connection: {exc.__cause__ or exc}") from None
        except OSError as exc:
            raise errors.ConnectError(f"cannot connect to {host}:{port}: {exc}") from None
        return cnx

    def close_all(self) -> None:
        for cnx in self._connections.values():
            cnx.close()
        self._connections.clear()
