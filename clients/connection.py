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

A blocking ``send`` whose frame went out that way may also read its own receipt
(``read_own``): the reader task lends the socket's read side, so a synchronous sender's round
trip wakes only the caller's thread, not the loop thread and then the caller (trio's wake-up,
epoll re-arm and task step cost more CPU than the rest of the send, and the caller then waited
for the loop thread to let go of the GIL). A borrower that found the socket not lent asks
(``_lend_wanted``); the reader lends after its next read (``_lend``: it stops watching the fd,
so the receipt wakes no one else). A borrower polls and reads under ``_rlock`` and settles only
a read that is one plain receipt of a direct send (``_settle_direct``, under the producer's
lock); any other read goes, whole and in order, to the loop thread, and the socket with it. The
reader takes the socket back at once when the loop writes a frame (its answer is the loop's to
read) or a consumer registers, and otherwise at a check every ``LEND_CHECK_S`` that finds no
borrower read since the last one (what the broker sends unasked while no caller reads waits up
to twice that). The check is that rare because each one takes the GIL in the loop thread: at
load 7 a 10 ms check measured a p50 of 517 µs against 309 µs with 50 ms (presumably a loop
thread preempted while it holds the GIL stalls the caller's next receipt);
``_shutdown`` takes ``_rlock`` before closing the fd.
"""

from __future__ import annotations

import logging
import math
import os
import select
import ssl
import threading
from collections.abc import Callable
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
LEND_CHECK_S = 0.05  # how often a reader that lent the socket looks whether borrowers still read
BORROW_POLL_MS = 100  # a borrower re-checks its send, the connection and the lend this often

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
        self._token = trio.lowlevel.current_trio_token()
        self._rlock = threading.Lock()  # held by a borrower while it reads (see the module doc)
        self._lend_wanted = False  # a blocking sender asked to read its receipts itself
        self._lent = False  # the reader stands aside (set False under _rlock while lent)
        self._returning = False  # a borrower handed a read back: the reader waits until it is dispatched
        self._take_back = trio.Event()  # set: the reader takes the socket back now
        self._borrowed = 0  # reads by borrowers: the reader's take-back and the keep-alive watch it
        self._poller: Any = None  # the borrowers' poll object (made once)

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
            reserved = read_reserved = False
            with trio.move_on_after(1):
                await self._acquire_wlock()  # no direct write may still use the fd we close
                reserved = True
            with trio.move_on_after(1):
                while not self._rlock.acquire(blocking=False):  # nor a borrower's read
                    await trio.sleep(0.0002)
                read_reserved = True
            self._fd = -1
            self._lent = False
            if reserved:
                self._wlock.release()
            if read_reserved:
                self._rlock.release()
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
        self._take_back.set()  # its messages must not wait for a borrower

    def unregister_consumer(self, consumer_id: int, handler: ConsumerHandler | None = None) -> None:
        if handler is None or self._consumers.get(consumer_id) is handler:
            self._consumers.pop(consumer_id, None)

    # -- writing -----------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Queue bytes for the writer task (never blocks; see ``drain``)."""
        if self.is_closed:
            raise errors.NotConnected(f"connection to {self.url} is closed")
        self._outbox.put(data)
        if self._lent:  # what the loop sends, the loop reads the answer of: no wait for a take-back
            self._take_back.set()

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
        fd, read, on_read = self._fd, os.read, self._on_read
        wait_readable = trio.lowlevel.wait_readable
        waited = drained = False
        while True:
            if self._lend_wanted:
                await self._lend()
                drained = False
                continue
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
            on_read(data)

    def _on_read(self, data: bytes) -> None:
        """Dispatch one read's bytes (the loop thread's)."""
        # A synchronous sender's receipt is a read of its own: its four numbers straight
        # from the bytes, no Frame nor BaseCommand (anything else: the general path).
        if len(data) <= MAX_LONE_RECEIPT and not self._decoder.buffered:
            receipt = decode_lone_receipt(data)
            if receipt is not None:
                producer_id, sequence_id, ledger_id, entry_id = receipt
                producer = self._producers.get(producer_id)
                on_ids = getattr(producer, "_on_receipt_ids", None)
                if on_ids is not None:
                    on_ids(self, sequence_id, ledger_id, entry_id)
                    return
                if producer is None:
                    return  # as ``_dispatch``: a receipt for no producer is dropped
        dispatch = self._dispatch
        for frame in self._decoder.feed(data):
            dispatch(frame)

    # -- lending the read side to blocking senders (see the module doc) ------------------------

    async def _lend(self) -> None:
        """Stand aside for borrowers (``read_own``) until told to take the socket back, or
        consumers or requests use the connection, or no borrower read for ``LEND_CHECK_S``."""
        self._lend_wanted = False  # (a stale ask: borrowers ask again when they find it not lent)
        if self._consumers or self._pending:
            return
        take_back = self._take_back = trio.Event()
        self._lent = True
        seen = -1
        try:
            while True:
                if take_back.is_set():
                    await trio.sleep(0.001)  # a borrower still holds the socket: it lets go soon
                else:
                    with trio.move_on_after(LEND_CHECK_S):
                        await take_back.wait()
                if not self._rlock.acquire(blocking=False):
                    continue  # a borrower is reading now
                try:
                    if self._returning:
                        continue  # the read handed back is dispatched first (it then sets take_back)
                    if (not self._lent or take_back.is_set() or self._borrowed == seen or self._consumers
                            or self._pending):
                        self._lent = False  # under _rlock: no borrower reads after this
                        return
                    seen = self._borrowed
                finally:
                    self._rlock.release()
        finally:
            self._lent = False  # (cancelled: the connection closes; _shutdown takes _rlock)

    def read_own(self, done: Callable[[], bool]) -> bool | None:
        """From a user thread whose send went out by ``write_direct``: read the socket here
        until ``done()`` (the receipt settled by ``_settle_direct`` in this thread). True once
        done; False when the loop thread reads for it (not lent: the next read lends; or this
        read something else, or the connection closes or is wanted back): wait for the loop.
        None when this connection does not lend now (consumers, requests pending, closed): the
        loop reads the receipt, the caller need not look again."""
        if self._consumers or self._pending or self._fd < 0:
            return None
        if not self._lent:
            self._lend_wanted = True
            return False
        rlock = self._rlock
        while not rlock.acquire(timeout=BORROW_POLL_MS / 1000):  # another borrower reads: our turn next
            if done():
                return True
            if not self._lent:
                return False
        data = b""
        try:
            if self._poller is None:
                self._poller = select.poll()
                self._poller.register(self._fd, select.POLLIN)
            fd, poll, producers, decoder = self._fd, self._poller.poll, self._producers, self._decoder
            closed, take_back = self.closed, self._take_back
            while not done():
                if (not self._lent or fd != self._fd or closed.is_set() or take_back.is_set() or self._consumers
                        or self._pending):
                    return False
                if not poll(BORROW_POLL_MS):
                    continue
                try:
                    data = os.read(fd, READ_SIZE)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""  # the reader's own read sees the failure (EOF repeats)
                self._borrowed += 1
                if data and len(data) <= MAX_LONE_RECEIPT and not decoder.buffered:
                    receipt = decode_lone_receipt(data)
                    if receipt is not None:
                        settle = getattr(producers.get(receipt[0]), "_settle_direct", None)
                        if settle is not None and settle(self, receipt[1], receipt[2], receipt[3]):
                            data = b""
                            continue
                # Anything else is the loop's, in order: the bytes and the socket go back.
                self._lent = False
                self._returning = True
                self._token.run_sync_soon(self._take_back_read, data)
                data = b""
                return False
            return True
        except trio.RunFinishedError:
            self._lent = False
            return False
        except BaseException:  # (Ctrl-C) bytes read and not handled would be lost: close
            self._lent = False
            if data:
                self._returning = True  # the reader must not read on from the middle of the stream
                try:
                    self._token.run_sync_soon(self.close, "interrupted while reading")
                except trio.RunFinishedError:
                    pass
            raise
        finally:
            rlock.release()

    def _take_back_read(self, data: bytes) -> None:
        """A read a borrower handed back (the loop thread's): dispatch it, then the reader
        reads again (an empty read: it sees the EOF or error itself)."""
        try:
            if data and not self.is_closed:
                self._last_received = trio.current_time()
                self._on_read(data)
        except ProtocolError as exc:
            self.close(f"protocol error: {exc}")
        except errors.NotConnected:
            self.close("closed")
        except Exception:  # as run(): a bug in a handler closes this connection only
            log.exception("connection %s failed", self.url)
            self.close("internal error")
        finally:
            self._returning = False
            self._take_back.set()

    @enable_ki_protection  # a client task: Ctrl-C goes to the application's main task (see async_client)
    async def _keep_alive(self) -> None:
        interval = self._config.keep_alive_interval_s
        pinged = False
        while True:
            before, borrowed = trio.current_time(), self._borrowed
            await trio.sleep(interval)
            if self._last_received < before and pinged and self._borrowed == borrowed:
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
