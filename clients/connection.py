"""One TCP connection to a broker: handshake, request/response matching, dispatch, keep-alive.

The connection only moves bytes and routes decoded frames: producers and consumers register
under their ids and receive their commands through small ``_on_*`` callbacks that never block
the reader. Writes are appended to an outgoing buffer that a writer task flushes in one
``send_all`` (many small commands coalesce into one syscall); ``drain()`` lets a fast producer
wait while that buffer is above its high-water mark, so it stays bounded.

A user thread of the blocking API may write one frame straight to the socket
(``write_direct``): the socket's writes then go under ``_wlock``, a thread lock that the writer
task only ever tries (it yields and retries, so the loop never blocks on it) and that a direct
write holds for one non-blocking ``os.write``, and only when the outbox is idle, so frames never
interleave.
"""

from __future__ import annotations

import logging
import math
import os
import select
import ssl
import threading
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import trio
from trio.lowlevel import enable_ki_protection

from quire.outbox import Outbox

from . import errors
from .auth import Authentication
from .protocol import commands as cmds
from .protocol import frames
from .protocol.errors import ProtocolError
from .protocol.lone_receipt import MAX_LONE_RECEIPT, decode_lone_receipt
from .protocol.pulsar_api_pb2 import BaseCommand, CommandMessage, CommandSendError, CommandSendReceipt

log = logging.getLogger(__name__)
T = BaseCommand.Type
READ_SIZE = 256 * 1024  # bytes asked of the socket per read
_MESSAGE, _SEND_RECEIPT = T.MESSAGE, T.SEND_RECEIPT  # protobuf enum lookups cost ~0.5 µs: once, not per frame

CLIENT_VERSION = "Pulsar-Python-quire-0.1"
# The C++ client's default when CONNECTED carries no max_message_size.
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024 - 10 * 1024
WRITE_HIGH_WATER = 4 * 1024 * 1024

_RESPONSE_TYPES = {
    T.SUCCESS, T.ERROR, T.PRODUCER_SUCCESS, T.LOOKUP_RESPONSE, T.PARTITIONED_METADATA_RESPONSE,
    T.GET_LAST_MESSAGE_ID_RESPONSE, T.GET_TOPICS_OF_NAMESPACE_RESPONSE, T.CONSUMER_STATS_RESPONSE,
    T.GET_SCHEMA_RESPONSE, T.GET_OR_CREATE_SCHEMA_RESPONSE, T.ACK_RESPONSE,
}


class ProducerHandler(Protocol):
    # A handler may also have ``_on_receipt_ids(cnx, sequence_id, ledger_id, entry_id)``: the
    # reader then gives it a lone receipt's numbers without building the protobuf command.
    def _on_receipt(self, cnx: "ClientConnection", receipt: CommandSendReceipt) -> None: ...
    def _on_send_error(self, cnx: "ClientConnection", error: CommandSendError) -> None: ...
    def _on_disconnected(self, cnx: "ClientConnection") -> None: ...


class ConsumerHandler(Protocol):
    def _on_message(self, cnx: "ClientConnection", message: CommandMessage, frame: frames.Frame) -> None: ...
    def _on_disconnected(self, cnx: "ClientConnection") -> None: ...
    def _on_active_change(self, active: bool) -> None: ...
    def _on_end_of_topic(self) -> None: ...


@dataclass
class ConnectionConfig:
    operation_timeout_s: float = 30.0
    connection_timeout_s: float = 10.0
    keep_alive_interval_s: float = 30.0
    # The client accepts any frame the broker sends (as the C++ client); this only guards memory.
    max_frame_size: int = 64 * 1024 * 1024
    authentication: Authentication | None = None
    # TLS (pulsar+ssl://): the context verifies the broker's certificate against the trust file
    # (unless tls_allow_insecure_connection) and, with hostname verification, its name.
    tls_context: ssl.SSLContext | None = None


class _Waiter:
    __slots__ = ("event", "response", "error")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.response: BaseCommand | None = None
        self.error: BaseException | None = None


class ClientConnection:
    """A handshaken connection; run ``run()`` in a nursery, then use ``write``/``request``."""

    def __init__(self, url: str, stream: trio.abc.Stream, config: ConnectionConfig) -> None:
        self.url = url
        self._stream = stream
        self._config = config
        self._decoder = frames.FrameDecoder(config.max_frame_size)
        self._outbox = Outbox()  # the one coalescing writer every connection of the project uses
        sock = getattr(stream, "socket", None)  # a SocketStream's non-blocking socket (flush_now)
        self._fd = sock.fileno() if sock is not None else -1
        self._sock = sock
        self._wlock = threading.Lock()  # held by whoever writes the socket (see the module doc)
        self._pending: dict[int, _Waiter] = {}
        self._producers: dict[int, ProducerHandler] = {}
        self._consumers: dict[int, ConsumerHandler] = {}
        self._scope = trio.CancelScope()
        self.closed = trio.Event()
        self.close_reason: str = ""
        self.max_message_size = DEFAULT_MAX_MESSAGE_SIZE
        self.server_version = ""
        self.protocol_version = 0
        self._last_received = trio.current_time()

    # -- setup ------------------------------------------------------------------------------

    async def handshake(self, *, proxy_to_broker_url: str | None = None) -> None:
        """Send CONNECT and wait for CONNECTED (anything else fails the connection)."""
        auth = self._config.authentication
        await self._stream.send_all(frames.encode_command(cmds.connect(
            CLIENT_VERSION, proxy_to_broker_url=proxy_to_broker_url,
            auth_method_name=auth.method if auth is not None else "none",
            auth_data=auth.auth_data() if auth is not None else None)))
        while True:
            data = await self._stream.receive_some(65536)
            if not data:
                raise errors.ConnectError(f"{self.url} closed the connection during the handshake")
            try:
                got = self._decoder.feed(data)
            except ProtocolError as exc:
                raise errors.ConnectError(f"{self.url}: bad handshake reply: {exc}") from None
            if not got:
                continue
            cmd = got[0].command
            if cmd.type == T.ERROR:
                raise errors.from_server_error(cmd.error.error, cmd.error.message)
            if cmd.type != T.CONNECTED:
                raise errors.ConnectError(f"{self.url}: expected CONNECTED, got {cmds.type_name(cmd)}")
            c = cmd.connected
            self.server_version = c.server_version
            self.protocol_version = c.protocol_version
            if c.HasField("max_message_size"):
                self.max_message_size = c.max_message_size
            for frame in got[1:]:
                self._dispatch(frame)
            return

    @enable_ki_protection  # a client task: Ctrl-C goes to the application's main task (see async_client)
    async def run(self) -> None:
        """Reader, writer and keep-alive until the connection fails or ``close()``; never raises."""
        try:
            with self._scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._writer)
                    nursery.start_soon(self._keep_alive)
                    await self._reader()
                    nursery.cancel_scope.cancel()
        except* (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as group:
            self.close_reason = f"I/O error: {group.exceptions[0]}"
        except* ProtocolError as group:
            self.close_reason = f"protocol error: {group.exceptions[0]}"
            log.warning("closing %s: %s", self.url, group.exceptions[0])
        except* errors.NotConnected:
            # closed (close() from a handler, a producer, the user) while the reader still
            # handled frames of the same read: an answer to one of them (a PONG) has nowhere to go
            if not self.close_reason:
                self.close_reason = "closed"
        except* Exception:  # a bug in a handler must not take the whole client down
            self.close_reason = "internal error"
            log.exception("connection %s failed", self.url)
        finally:
            await self._shutdown()

    async def _shutdown(self) -> None:
        self.closed.set()
        with trio.CancelScope(shield=True):
            reserved = False
            with trio.move_on_after(1):
                await self._acquire_wlock()  # no direct write may still use the fd we close
                reserved = True
            self._fd = -1
            if reserved:
                self._wlock.release()
            with trio.move_on_after(1):
                await self._stream.aclose()
        failure = errors.NotConnected(f"connection to {self.url} closed: {self.close_reason or 'closed'}")
        for waiter in self._pending.values():
            waiter.error = failure
            waiter.event.set()
        self._pending.clear()
        self._outbox.close()  # releases drain() waiters
        producers, consumers = list(self._producers.values()), list(self._consumers.values())
        self._producers.clear()
        self._consumers.clear()
        handlers: list[ProducerHandler | ConsumerHandler] = [*producers, *consumers]
        for handler in handlers:
            handler._on_disconnected(self)

    def close(self, reason: str = "closed by client") -> None:
        if not self.close_reason:
            self.close_reason = reason
        self._scope.cancel()

    @property
    def is_closed(self) -> bool:
        return self.closed.is_set() or self._scope.cancel_called

    # -- registration ----------------------------------------------------------------------

    def register_producer(self, producer_id: int, handler: ProducerHandler) -> None:
        self._producers[producer_id] = handler

    def unregister_producer(self, producer_id: int, handler: ProducerHandler | None = None) -> None:
        if handler is None or self._producers.get(producer_id) is handler:
            self._producers.pop(producer_id, None)

    def register_consumer(self, consumer_id: int, handler: ConsumerHandler) -> None:
        self._consumers[consumer_id] = handler

    def unregister_consumer(self, consumer_id: int, handler: ConsumerHandler | None = None) -> None:
        if handler is None or self._consumers.get(consumer_id) is handler:
            self._consumers.pop(consumer_id, None)

    # -- writing -----------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Queue bytes for the writer task (never blocks; see ``drain``)."""
        if self.is_closed:
            raise errors.NotConnected(f"connection to {self.url} is closed")
        self._outbox.put(data)

    def send(self, command: BaseCommand) -> None:
        self.write(frames.encode_command(command))

    def flush_now(self) -> None:
        """Write what is buffered at once, from the loop thread, when the writer task is idle:
        a synchronous send then leaves without waiting a scheduler round for that task. What the
        socket does not take (or any error) stays for the writer task, which owns failures."""
        if self._fd >= 0 and not self.is_closed and self._wlock.acquire(blocking=False):
            try:
                self._outbox.write_now(partial(os.write, self._fd))
            finally:
                self._wlock.release()

    def write_direct(self, data: bytes) -> memoryview | None:
        """From a user thread: write ``data`` to the socket now, if nothing else is queued or
        being written. ``None``: nothing was written (use ``write``). Otherwise what the socket
        did not take: empty when all went out; else the socket stays reserved and the caller
        must hand the rest to ``finish_direct`` before anything else is written."""
        if self._fd < 0 or self.closed.is_set() or not self._wlock.acquire(blocking=False):
            return None  # (``is_closed`` reads trio's clock: not from this thread)
        try:
            if not self._outbox.idle or self._fd < 0:
                self._wlock.release()
                return None
            n = os.write(self._fd, data)
        except OSError:  # EAGAIN, or a broken connection the reader will notice
            self._wlock.release()
            return None
        rest = memoryview(data)[n:]
        if not rest:
            self._wlock.release()
        return rest

    def finish_direct(self, rest: memoryview, timeout_s: float) -> None:
        """Write the rest of a partial ``write_direct`` (socket reserved), waiting for the socket
        in this thread; a peer that takes nothing for ``timeout_s`` breaks the connection (the
        stream is mid-frame: the reconnect re-sends what is pending)."""
        try:
            poller = select.poll()
            poller.register(self._fd, select.POLLOUT)
            while rest:
                if not poller.poll(timeout_s * 1000):
                    raise OSError("peer took nothing")
                rest = rest[os.write(self._fd, rest):]
        except OSError:
            if self._sock is not None:
                try:
                    self._sock.shutdown(2)  # SHUT_RDWR: the reader sees the failure
                except OSError:
                    pass
        finally:
            self._wlock.release()

    async def _acquire_wlock(self) -> None:
        """Take the socket from the loop: a direct write holds it for microseconds (or, after a
        partial write, until the socket takes the rest), so retry rather than block the loop."""
        while not self._wlock.acquire(blocking=False):
            await trio.sleep(0.0002)

    async def _send_all(self, data: bytes) -> None:
        await self._acquire_wlock()
        try:
            await self._stream.send_all(data)
        finally:
            self._wlock.release()

    @property
    def buffered(self) -> int:
        return self._outbox.queued_bytes

    async def drain(self) -> None:
        """Wait until the outgoing buffer is below the high-water mark (or the connection closed)."""
        await self._outbox.wait_below(WRITE_HIGH_WATER)

    @enable_ki_protection  # a client task: Ctrl-C goes to the application's main task (see async_client)
    async def _writer(self) -> None:
        await self._outbox.run(self._send_all)

    # -- requests ----------------------------------------------------------------------------

    async def request(self, command: BaseCommand, request_id: int, timeout: float | None = None) -> BaseCommand:
        """Send a command and wait for the reply with its request_id; ERROR replies raise."""
        waiter = _Waiter()
        self._pending[request_id] = waiter
        try:
            self.send(command)
            timeout = self._config.operation_timeout_s if timeout is None else timeout
            with trio.move_on_after(timeout if timeout > 0 else math.inf):
                await waiter.event.wait()
        finally:
            self._pending.pop(request_id, None)
        if waiter.error is not None:
            raise waiter.error
        if waiter.response is None:
            raise errors.Timeout(f"{cmds.type_name(command)} to {self.url} timed out after {timeout}s")
        response = waiter.response
        if response.type == T.ERROR:
            raise errors.from_server_error(response.error.error, response.error.message)
        return response

    # -- reading -----------------------------------------------------------------------------

    async def _reader(self) -> None:
        if self._fd < 0:  # not a plain socket (TLS): the stream's own reads
            while True:
                data = await self._stream.receive_some(READ_SIZE)
                if not data:
                    self.close_reason = "closed by broker"
                    return
                self._last_received = trio.current_time()
                for frame in self._decoder.feed(data):
                    self._dispatch(frame)
        # A plain socket is read with os.read and trio's readiness wait: what
        # ``SocketStream.receive_some`` does, without its per-read context managers (a
        # synchronous sender pays one read per receipt). As trio, a read that did not have to
        # wait still yields to the other tasks. A short read drained the socket: the next read
        # waits for readiness first rather than fail with EAGAIN (one syscall and one exception
        # less per receipt of a synchronous sender).
        fd, read, feed, dispatch = self._fd, os.read, self._decoder.feed, self._dispatch
        decoder, producers = self._decoder, self._producers
        wait_readable = trio.lowlevel.wait_readable
        waited = drained = False
        while True:
            if drained:
                await wait_readable(fd)
                waited = True
            try:
                data = read(fd, READ_SIZE)
            except BlockingIOError:
                await wait_readable(fd)
                waited = True
                drained = False
                continue
            if not data:
                self.close_reason = "closed by broker"
                return
            if not waited:  # (shielded, as trio's: the bytes read must be dispatched)
                await trio.lowlevel.cancel_shielded_checkpoint()
            waited = False
            drained = len(data) < READ_SIZE
            self._last_received = trio.current_time()
            # A synchronous sender's receipt is a read of its own: its four numbers straight
            # from the bytes, no Frame nor BaseCommand (anything else: the general path).
            if len(data) <= MAX_LONE_RECEIPT and not decoder.buffered:
                receipt = decode_lone_receipt(data)
                if receipt is not None:
                    producer_id, sequence_id, ledger_id, entry_id = receipt
                    producer = producers.get(producer_id)
                    on_ids = getattr(producer, "_on_receipt_ids", None)
                    if on_ids is not None:
                        on_ids(self, sequence_id, ledger_id, entry_id)
                        continue
                    if producer is None:
                        continue  # as ``_dispatch``: a receipt for no producer is dropped
            for frame in feed(data):
                dispatch(frame)

    @enable_ki_protection  # a client task: Ctrl-C goes to the application's main task (see async_client)
    async def _keep_alive(self) -> None:
        interval = self._config.keep_alive_interval_s
        pinged = False
        while True:
            before = trio.current_time()
            await trio.sleep(interval)
            if self._last_received < before and pinged:
                self.close_reason = "keep-alive timeout"
                self._scope.cancel()
                return
            self.send(cmds.ping())
            pinged = True

    def _dispatch(self, frame: frames.Frame) -> None:
        cmd = frame.command
        t = cmd.type
        if t == _MESSAGE:
            consumer = self._consumers.get(cmd.message.consumer_id)
            if consumer is not None:
                consumer._on_message(self, cmd.message, frame)
        elif t == _SEND_RECEIPT:
            producer = self._producers.get(cmd.send_receipt.producer_id)
            if producer is not None:
                producer._on_receipt(self, cmd.send_receipt)
        elif t == T.SEND_ERROR:
            producer = self._producers.get(cmd.send_error.producer_id)
            if producer is not None:
                producer._on_send_error(self, cmd.send_error)
        elif t in _RESPONSE_TYPES:
            rid = cmds.sub_command(cmd).request_id
            if t == T.PRODUCER_SUCCESS and not cmd.producer_success.producer_ready:
                return  # queued behind an exclusive producer: a second PRODUCER_SUCCESS follows
            waiter = self._pending.get(rid)
            if waiter is not None:
                waiter.response = cmd
                waiter.event.set()
        elif t == T.PING:
            self.send(cmds.pong())
        elif t == T.PONG:
            pass
        elif t == T.CLOSE_PRODUCER:
            producer = self._producers.pop(cmd.close_producer.producer_id, None)
            if producer is not None:
                producer._on_disconnected(self)
        elif t == T.CLOSE_CONSUMER:
            consumer = self._consumers.pop(cmd.close_consumer.consumer_id, None)
            if consumer is not None:
                consumer._on_disconnected(self)
        elif t == T.TOPIC_MIGRATED:
            m = cmd.topicMigrated
            table: dict = self._consumers if m.resource_type == m.Consumer else self._producers
            handler = table.pop(m.resource_id, None)
            if handler is not None:
                handler._on_disconnected(self)
        elif t == T.ACTIVE_CONSUMER_CHANGE:
            consumer = self._consumers.get(cmd.active_consumer_change.consumer_id)
            if consumer is not None:
                consumer._on_active_change(cmd.active_consumer_change.is_active)
        elif t == T.REACHED_END_OF_TOPIC:
            consumer = self._consumers.get(cmd.reachedEndOfTopic.consumer_id)
            if consumer is not None:
                consumer._on_end_of_topic()
        elif t == T.AUTH_CHALLENGE:
            auth = self._config.authentication
            self.send(cmds.auth_response(CLIENT_VERSION, auth.method if auth is not None else "none",
                                         auth.auth_data() if auth is not None else b"", cmds.PROTOCOL_VERSION))
        else:
            raise ProtocolError(f"unexpected command {cmds.type_name(cmd)} from {self.url}")
