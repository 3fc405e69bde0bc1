"""One pipelined TCP connection to one bookie, and the pool of them.

Requests carry a per-connection request id and complete through a *callback* run by the
connection's reader task, so an add sent to WQ bookies costs no trio task per bookie.
``send`` / ``send_add`` are synchronous: on an idle plain-TCP connection they write the encoded
frame to the socket at once (no wait for a scheduler round), else they put it in the
connection's ``quire.outbox.Outbox``, whose writer task sends everything queued since its last
send at once: adds to one bookie are batched per write under load.
A timeout monitor fails requests past their deadline with ``CLIENT_TIMEOUT``; a broken
connection fails every outstanding request with ``CLIENT_CONNECTION_LOST`` and the next
``send`` reconnects. Callbacks receive ``(status, response_or_None)``; an ADD's reply comes as
``(status, None)``: the status is all an add needs (no Response built per add reply).
"""

from __future__ import annotations

import logging
import os
import ssl
import time
from functools import partial
from typing import Any, Awaitable, Callable, Mapping

import trio

from bookie.client.config import ClientConfig
from bookie.client.distribution import CLIENT_CONNECTION_LOST, CLIENT_TIMEOUT
from bookie.client.errors import BKClientClosedError
from bookie.client.local_bookie import LocalBookieConnection, RequestHandler
from quire import hop_trace, local_socket, socket_io
from quire.outbox import JOIN_BELOW, Outbox, deferred_writes
from bookie.protocol import (
    FrameDecoder,
    Op,
    ProtocolError,
    Request,
    Response,
    Status,
    decode_add_ack,
    decode_response,
    encode_add_request,
    encode_request,
)

__all__ = ["BookieConnection", "BookieConnectionPool", "Callback", "parse_bookie_id"]

log = logging.getLogger(__name__)

Callback = Callable[[int, "Response | None"], None]
# Looks up the abstract Unix socket a bookie advertises in its registration (None: none)
ResolveLocal = Callable[[str], Awaitable["str | None"]]

_RECV_SIZE = 256 * 1024
# A reply at least this large (a range read's) is received into a buffer of its own size that
# its entries are then views of: one copy out of the socket, not three
_LARGE_FRAME = 128 * 1024
# Longest a connect waits for the bookie's registration (its local socket) before using TCP
_LOOKUP_TIMEOUT_S = 1.0
# Deadlines use the monotonic clock directly: trio.current_time() costs ~4x more per call and
# send() is on the per-entry hot path.
_now = time.monotonic


def parse_bookie_id(bookie_id: str) -> tuple[str, int]:
    host, _, port = bookie_id.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"bookie id {bookie_id!r} is not host:port")
    return host, int(port)


async def _start_tls(stream: trio.SocketStream, ctx: ssl.SSLContext, host: str) -> Any:
    """The TLS handshake over a fresh connection (the bookie's certificate checked by ``ctx``)."""
    try:
        stream.setsockopt(6, 1, 1)  # TCP_NODELAY before the wrapper hides the socket
    except OSError:
        pass
    tls = trio.SSLStream(stream, ctx, server_hostname=host)
    try:
        await tls.do_handshake()
    except BaseException:
        await trio.aclose_forcefully(stream)
        raise
    return tls


class BookieConnection:
    """Pipelined request/response channel to one bookie; tasks live in the pool's nursery."""

    def __init__(self, bookie_id: str, nursery: trio.Nursery, config: ClientConfig,
                 on_failure: Callable[[str], None] | None = None,
                 resolve_local: ResolveLocal | None = None) -> None:
        self.bookie_id = bookie_id
        self._resolve_local = resolve_local  # bookie id -> its advertised local socket, or None
        self.transport = ""  # of the current or last connection: "tcp" or "unix" (local socket)
        self._local_name: str | None = None  # the bookie's local socket that worked last
        self._nursery = nursery
        self._config = config
        self._on_failure = on_failure
        # request id -> (callback, deadline, sent at); a tuple is the cheapest record per request
        self._pending: dict[int, tuple[Callback, float, float]] = {}
        self._min_timeout = float("inf")  # lets the timeout scan stop early (see _timeouts)
        self._monitor_sleep: trio.CancelScope | None = None  # the timeout monitor's sleep
        self.timeout_scans = 0  # times the monitor looked for expired requests
        self._outbox = Outbox()
        # The connected socket's direct write (plain TCP only: TLS goes through its stream)
        self._write: Callable[[bytes], int] | None = None
        port = bookie_id.rpartition(":")[2]
        self._port = int(port) if port.isdigit() else 0  # (names the connection in hop traces)
        self._next_id = 1
        self._running = False
        self._closed = False
        self._cancel: trio.CancelScope | None = None
        self._token = config.auth_token()  # presented first on every connection, if configured
        self._tls = config.tls_context()

    @property
    def outstanding(self) -> int:
        return len(self._pending)

    def send(self, req: Request, callback: Callback, timeout_s: float) -> None:
        """Queue ``req`` (its request_id is assigned here); ``callback`` fires exactly once."""
        if self._closed:
            callback(CLIENT_CONNECTION_LOST, None)
            return
        rid = self._next_id
        self._next_id = rid + 1
        req.request_id = rid
        now = _now()
        self._pending[rid] = (callback, now + timeout_s, now)
        if timeout_s < self._min_timeout:
            self._shorter_timeout(timeout_s)
        self._queue(encode_request(req))

    def send_add(self, ledger_id: int, entry_id: int, flags: int, master_key: bytes, entry: bytes,
                 callback: Callback, timeout_s: float) -> None:
        """``send`` of an ADD request without building a Request (the per-entry hot path)."""
        if self._closed:
            callback(CLIENT_CONNECTION_LOST, None)
            return
        rid = self._next_id
        self._next_id = rid + 1
        now = _now()
        self._pending[rid] = (callback, now + timeout_s, now)
        if timeout_s < self._min_timeout:
            self._shorter_timeout(timeout_s)
        if hop_trace.ENABLED:
            hop_trace.mark("b.bkq", ledger_id << 32 | entry_id, self._port)
        self._queue(encode_add_request(rid, ledger_id, entry_id, flags, master_key, entry))

    def _queue(self, frame: bytes) -> None:
        if self._write is not None and len(frame) < JOIN_BELOW:
            # Connected and the writer idle: the add leaves now, not one scheduler round later
            # when the writer task runs (a partial write leaves the rest to it, and only then is
            # it woken). A large entry is left to the writer: its send_all takes a partly sent
            # frame without a copy.
            self._outbox.put_written(frame, self._write)
        else:
            self._outbox.put(frame)
        if not self._running:
            self._running = True
            self._nursery.start_soon(self._run)

    def _shorter_timeout(self, timeout_s: float) -> None:
        """A request with the shortest timeout yet: the monitor, which sleeps until the
        earliest deadline the previous shortest allowed, must look again (rare: once per
        distinct shorter timeout)."""
        self._min_timeout = timeout_s
        if self._monitor_sleep is not None:
            self._monitor_sleep.cancel()

    def close(self) -> None:
        self._closed = True
        if self._cancel is not None:
            self._cancel.cancel()
        self._fail_all(CLIENT_CONNECTION_LOST)

    # -- internals ---------------------------------------------------------------------------

    def _fail_all(self, status: int) -> None:
        pending, self._pending = self._pending, {}
        old, self._outbox = self._outbox, Outbox()  # what was queued is failed here, never sent
        self._write = None
        old.close()
        for callback, _deadline, _sent in pending.values():
            self._complete(callback, status, None)

    @staticmethod
    def _complete(callback: Callback, status: int, resp: Response | None) -> None:
        try:
            callback(status, resp)
        except Exception:  # a bug in one op must not take the connection (and its peers) down
            log.exception("ledger client callback failed")

    async def _run(self) -> None:
        self._error: BaseException | None = None
        try:
            with trio.CancelScope() as scope:
                self._cancel = scope
                try:
                    host, port = parse_bookie_id(self.bookie_id)
                    stream = None
                    if self._tls is None:
                        with trio.move_on_after(self._config.client_connect_timeout_ms / 1000):
                            stream = await self._connect_local()
                    if stream is None:
                        self.transport = "tcp"
                        with trio.fail_after(self._config.client_connect_timeout_ms / 1000):
                            stream = await trio.open_tcp_stream(host, port)
                            if self._tls is not None:
                                stream = await _start_tls(stream, self._tls, host)
                except (OSError, ValueError, trio.TooSlowError, trio.BrokenResourceError) as exc:
                    self._error = exc
                else:
                    async with stream:
                        try:
                            stream.setsockopt(6, 1, 1)  # TCP_NODELAY: latency of small acks matters
                        except (OSError, AttributeError):  # (a TLS stream: set before the handshake)
                            pass
                        if self._token is not None:  # before any queued request: the bookie checks it first
                            await stream.send_all(encode_request(Request(Op.AUTH, 0, body=self._token)))
                        if isinstance(stream, trio.SocketStream):
                            self._write = partial(os.write, stream.socket.fileno())
                            if hop_trace.ENABLED:
                                self._write = hop_trace.traced_write(self._write, "b.bkout", self._port)
                        try:
                            async with trio.open_nursery() as inner:
                                stop = inner.cancel_scope
                                inner.start_soon(self._guard, self._writer, stream, stop)
                                inner.start_soon(self._guard, self._timeouts, stream, stop)
                                await self._guard(self._reader, stream, stop)
                        finally:
                            self._write = None  # before the stream closes: its fd number may be reused
        finally:
            self._cancel = None
            self._running = False
            self._fail_all(CLIENT_CONNECTION_LOST)
        if self._error is not None:
            log.info("connection to bookie %s failed: %r", self.bookie_id, self._error)
            if self._on_failure is not None and not self._closed:
                self._on_failure(self.bookie_id)

    async def _connect_local(self) -> trio.SocketStream | None:
        """A stream to the bookie's advertised abstract Unix socket when it runs on this host
        (quire/local_socket.py), else None: the caller connects by TCP. The name that worked
        last is tried first, without a store read (a metadata store that is down must not slow a
        reconnect); once refused (the bookie restarted: a new name) the registration is read
        again, for at most _LOOKUP_TIMEOUT_S."""
        if self._resolve_local is None or not local_socket.SUPPORTED:
            return None
        name = self._local_name
        if name is not None:
            try:
                stream = await local_socket.connect(name)
            except OSError:
                self._local_name = name = None
            else:
                self.transport = "unix"
                return stream
        with trio.move_on_after(min(_LOOKUP_TIMEOUT_S, self._config.client_connect_timeout_ms / 2000)):
            name = await self._resolve_local(self.bookie_id)
        if name is None:
            return None
        try:
            stream = await local_socket.connect(name)
        except OSError:  # another host's bookie (or one gone since): TCP
            return None
        self._local_name = name
        self.transport = "unix"
        return stream

    async def _guard(self, fn: Callable[[trio.SocketStream], Awaitable[None]], stream: trio.SocketStream,
                     stop: trio.CancelScope) -> None:
        """Run one side of the connection; a network or protocol failure ends the whole connection."""
        try:
            await fn(stream)
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, ProtocolError, EOFError) as exc:
            if self._error is None:
                self._error = exc
        stop.cancel()

    async def _writer(self, stream: trio.SocketStream) -> None:
        send_all: Callable[[bytes], Awaitable[object]] = stream.send_all
        if hop_trace.ENABLED:
            send_all = hop_trace.traced_send_all(send_all, "b.bkout", self._port)
        await self._outbox.run(send_all)

    async def _reader(self, stream: trio.SocketStream) -> None:
        fd = socket_io.stream_fd(stream)  # plain TCP: wait, then read (no failed read per reply)
        decoder = FrameDecoder(self._config.netty_max_frame_size_bytes, _LARGE_FRAME if fd is not None else 0)
        pending = self._pending
        while True:
            rest = decoder.pending_large() if fd is not None else None
            if rest is not None:
                got = await socket_io.receive_into(stream, fd, rest)  # type: ignore[arg-type]
                rest.release()
                if not got:
                    raise EOFError("bookie closed the connection")
                large = decoder.large_received(got)
                if large is None:
                    continue
                frames: list[bytes] = [large]  # type: ignore[list-item]  # a bytes-like frame
            else:
                if fd is None:
                    data = await stream.receive_some(_RECV_SIZE)
                else:
                    data = await socket_io.receive_some(stream, fd, _RECV_SIZE)
                if not data:
                    raise EOFError("bookie closed the connection")
                if hop_trace.ENABLED:
                    hop_trace.mark("b.bkrx", self._port, len(data))
                frames = decoder.feed(data)
            # The replies' completions (adds reaching their ack quorum -> receipts) write their
            # frames when this synchronous block ends, one write per client connection, instead
            # of waking each connection's writer task for another scheduler round.
            with deferred_writes():
                for frame in frames:
                    ack = decode_add_ack(frame)
                    if ack is not None:  # an add's reply: its callback takes the status only
                        rid, status, resp = ack[0], ack[1], None
                    else:
                        resp = decode_response(frame)
                        rid, status = resp.request_id, resp.status
                    p = pending.pop(rid, None)
                    if p is None:  # it already timed out
                        if resp is not None and resp.op == Op.AUTH and status != Status.OK:
                            raise ProtocolError(f"bookie {self.bookie_id} refused this client's identity (UNAUTHORIZED)")
                        continue
                    try:  # (inlined _complete: once per reply)
                        p[0](status, resp)
                    except Exception:
                        log.exception("ledger client callback failed")

    async def _timeouts(self, _stream: trio.SocketStream) -> None:
        interval = self._config.timeout_monitor_interval_ms / 1000
        while True:
            self.timeout_scans += 1
            now = _now()
            shortest = self._min_timeout
            # Requests sit in send order (dict insertion order). Once one was sent less than the
            # shortest timeout ago, no later one can have expired: stop there instead of
            # scanning every outstanding add. What the scan saw also says when the next one
            # can expire at the earliest: an older request's own deadline, else the send of the
            # first recent one (or, with none, a send from now on) plus the shortest timeout.
            recent = now - shortest
            expired = []
            due = float("inf")
            for rid, p in self._pending.items():
                if p[1] <= now:
                    expired.append(rid)
                elif p[2] > recent:
                    due = min(due, p[2] + shortest)
                    break
                elif p[1] < due:
                    due = p[1]
            else:
                due = min(due, now + shortest)
            for rid in expired:
                if rid in self._pending:  # a completion callback may have dropped it meanwhile
                    self._complete(self._pending.pop(rid)[0], CLIENT_TIMEOUT, None)
            if self._min_timeout < shortest:  # a callback sent a request with a shorter timeout
                due = now
            # Asleep until then, but at least ``interval``: an idle connection, or one whose
            # adds are answered in time, wakes once per timeout instead of 10 times a second
            # (every wake-up of the five processes of a cluster on two cores is scheduling
            # delay for someone's add); expiry is as precise as before. A request sent with a
            # shorter timeout than any before cuts the sleep short (_shorter_timeout).
            with trio.CancelScope() as self._monitor_sleep:
                await trio.sleep(max(due - _now(), interval))
            self._monitor_sleep = None


class BookieConnectionPool:
    """Connections by bookie id, created on first use; owned by the BookKeeper client."""

    def __init__(self, nursery: trio.Nursery, config: ClientConfig,
                 on_failure: Callable[[str], None] | None = None,
                 local_bookies: Mapping[str, RequestHandler] | None = None,
                 resolve_local: ResolveLocal | None = None) -> None:
        self._nursery = nursery
        self._resolve_local = resolve_local
        self._local = dict(local_bookies or {})  # bookie id -> in-process request processor
        self._config = config
        self._on_failure = on_failure
        self._conns: dict[str, BookieConnection | LocalBookieConnection] = {}
        self._closed = False

    def get(self, bookie_id: str) -> BookieConnection | LocalBookieConnection:
        if self._closed:
            raise BKClientClosedError("the BookKeeper client is closed")
        conn = self._conns.get(bookie_id)
        if conn is None:
            local = self._local.get(bookie_id)
            if local is not None:  # standalone: the co-located bookie, reached without a socket
                conn = LocalBookieConnection(bookie_id, local, self._nursery, self._config)
            else:
                conn = BookieConnection(bookie_id, self._nursery, self._config, self._on_failure, self._resolve_local)
            self._conns[bookie_id] = conn
        return conn

    def send(self, bookie_id: str, req: Request, callback: Callback, timeout_s: float) -> None:
        self.get(bookie_id).send(req, callback, timeout_s)

    def close(self) -> None:
        self._closed = True
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
