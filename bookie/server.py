"""BookieServer connections: bytes in, frames out, with pipelining and bounded concurrency.

Each connection has a reader (decodes everything a ``receive_some`` returned in one go and
hands each request to the :class:`RequestProcessor`) and a writer (sends every reply queued
since its last send with one ``send_all``); on a plain TCP connection whose writer is idle,
the code that makes a reply (a journal group's completion) writes it to the socket at once
instead of waiting a scheduler round for the writer task. At most
``max_pending_requests_per_connection`` requests are outstanding per connection; beyond that
the reader stops reading, so a client that pipelines too much is slowed down by TCP itself. A malformed frame closes the connection:
the stream cannot be resynchronised.

Memory a peer can make the bookie hold is bounded: per connection, one partial request frame
(at most the frame size limit) and queued replies up to ``server_write_buffer_high_water_mark``
(the reader pauses until they drain below the low-water mark); over all connections, partial
frames share ``max_request_buffer_size_mb`` (while it is used up, readers wait before they
receive more). A request frame that does not arrive whole, or replies the peer does
not take, within ``connection_stall_timeout_ms`` close the connection, freeing its buffers.
"""

from __future__ import annotations

import logging
import math
import os
from functools import partial
from typing import Awaitable, Callable

import trio

from bookie.errors import ProtocolError
from bookie.metrics import BookieMetrics
from bookie.auth import BookieAuthenticator
from bookie.protocol import FrameDecoder, Op, Request, Response, Status, encode_response
from quire import hop_trace, input_batch, socket_io
from quire.outbox import JOIN_BELOW, Outbox, OutboxStalled
from bookie.request_processor import RequestProcessor

log = logging.getLogger(__name__)

_RECEIVE_SIZE = 1024 * 1024
_MIN_RECEIVE = 64 * 1024  # a reader waits for at least this much room in the shared budget
_YIELD_EVERY = 32  # frames processed between scheduling points
# Reads of one connection that may run at once (each may become a reply of up to a frame):
# what a peer that does not take its replies can make the bookie hold on top of the queue.
_MAX_READS_IN_FLIGHT = 32
_ADD = int(Op.ADD)
_AUTH = int(Op.AUTH)


class ReceiveBudget:
    """Bytes all connections together may keep in partial request frames.

    What a reader's decoder keeps (a partial frame) stays charged to it until the frame
    completes or the connection closes. A read itself is reserved before it happens, so the
    readers together never receive past the limit: while the readers that wait in a plain
    ``receive_some`` reserve at most half the budget (a full read each), a reader does that,
    as before (the common case); otherwise it waits until its socket is readable and then
    receives at most the room left at that instant (at least ``_MIN_RECEIVE``, else it waits
    for room). Idle connections never hold more than that read reservation.
    """

    def __init__(self, limit: int, metrics: BookieMetrics) -> None:
        self.limit = max(limit, 2 * _RECEIVE_SIZE)
        self.used = 0  # partial frames kept + sized reads reserved
        self.direct = 0  # readers in a plain receive_some, _RECEIVE_SIZE reserved each
        self._waiting = False  # a reader waits for room
        self.metrics = metrics
        self._freed = trio.Event()

    def _free(self) -> int:
        return self.limit - self.used - self.direct * _RECEIVE_SIZE

    async def wait_for_room(self) -> None:
        while self._free() < _MIN_RECEIVE:
            self._waiting = True
            await self._freed.wait()

    def room(self) -> int:
        """How many bytes a reader may receive now (at least ``_MIN_RECEIVE`` after a wait)."""
        return min(_RECEIVE_SIZE, max(self._free(), 0))

    def enter_direct(self) -> bool:
        """Reserve a full read for a plain ``receive_some`` if that stays within the limits."""
        if (self.direct + 1) * _RECEIVE_SIZE <= self.limit // 2 and self._free() >= _RECEIVE_SIZE:
            self.direct += 1
            return True
        return False

    def leave_direct(self, received: int) -> None:
        """The plain read returned ``received`` bytes: they stay reserved, the rest is freed."""
        self.direct -= 1
        self.used += received
        self._changed(True)

    def charge(self, delta: int) -> None:
        if delta:
            self.used += delta
            self._changed(delta < 0)

    def _changed(self, freed: bool) -> None:
        # (the gauge is set from ``used`` on scrape: nothing per read on the hot path)
        if freed and self._waiting:
            self._waiting = False
            self._freed.set()
            self._freed = trio.Event()


def _rest(parts: list[bytes | memoryview], sent: int) -> list[bytes | memoryview]:
    """The parts after their first ``sent`` bytes."""
    for i, part in enumerate(parts):
        if sent < len(part):
            return [memoryview(part)[sent:], *parts[i + 1:]]
        sent -= len(part)
    return []


class _ReadReply:
    """The reply sink of one read run as a task: frees its read slot when it answers."""

    __slots__ = ("conn",)

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def send(self, frame: bytes) -> None:
        self.conn.read_done()
        self.conn.send(frame)

    def send_parts(self, parts: list[bytes | memoryview], nbytes: int) -> None:
        self.conn.read_done()
        self.conn.send_parts(parts, nbytes)


class Connection:
    """One client connection; ``send`` is synchronous so journal callbacks can call it."""

    def __init__(
        self, stream: trio.abc.Stream, max_pending: int, high_water: int = 512 * 1024, low_water: int = 384 * 1024,
        stall_timeout: float = 30.0,
    ) -> None:
        self.stream = stream
        self.max_pending = max_pending
        self.pending = 0
        self.closed = False
        self.stalled = False
        self.frame_deadline = math.inf  # by when the partial request frame held must be whole
        self.high_water = high_water
        self.low_water = low_water
        self.stall_timeout = stall_timeout
        self.outbox = Outbox()
        # Replies are written from the sender when the writer has nothing in hand (plain TCP
        # only: a TLS stream encrypts in its send_all); None once the connection closes.
        self.write: Callable[[bytes], int] | None = None
        # the plain socket's fd, read without trio's per-call socket machinery (None for TLS)
        self.fd = socket_io.stream_fd(stream)
        if isinstance(stream, trio.SocketStream):
            self.write = partial(os.write, stream.socket.fileno())
            if hop_trace.ENABLED:
                self.write = hop_trace.traced_write(self.write, "k.out")
        self._room = trio.Event()
        self.reads_in_flight = 0  # reads running as tasks (their replies are not queued yet)
        self.authenticated = True  # False until an AUTH request proves the peer's identity
        self._read_slot = trio.Event()

    def send_parts(self, parts: list[bytes | memoryview], nbytes: int) -> None:
        """``send`` of a frame given as ``parts`` (``nbytes`` in all: a range read's head and
        entries): written with one ``writev`` when nothing is queued before it, so the entries
        are copied only by the kernel; what the socket does not take is queued as it is."""
        n = 0
        if self.write is not None and self.fd is not None and self.outbox.idle and not self.closed:
            try:
                n = os.writev(self.fd, parts)
            except OSError:  # EAGAIN, or a failure the writer task will meet and report
                n = 0
        self.pending -= 1
        if n < nbytes and not self.closed:
            # the rest for the writer task, entries as they are (it sends large ones without
            # a join, joins small ones as it joins small frames)
            self.outbox.put_many(_rest(parts, n), nbytes - n)  # type: ignore[arg-type]
        if self.pending < self.max_pending:
            self._room.set()

    def send(self, frame: bytes) -> None:
        self.pending -= 1
        if self.closed:
            return
        if self.write is not None and len(frame) < JOIN_BELOW:
            # (see send_many; a large read reply is left to the writer: its send_all takes a
            # partly sent frame without copying the rest)
            self.outbox.put_written(frame, self.write)
        else:
            self.outbox.put(frame)
        if self.pending < self.max_pending:
            self._room.set()

    def send_many(self, buffers: list[bytes], count: int) -> None:
        """Queue ``count`` replies at once (a journal group's acks for this connection)."""
        self.pending -= count
        if self.closed:
            return
        if self.write is not None:
            # The writer idle: the group's replies leave now, not one scheduler round later
            # when the writer task runs (a partial write leaves the rest to it, and only then
            # is it woken).
            self.outbox.put_many_written(buffers, self.write)
        else:
            self.outbox.put_many(buffers)
        if self.pending < self.max_pending:
            self._room.set()

    @property
    def has_output(self) -> bool:
        return not self.outbox.idle

    @property
    def out_bytes(self) -> int:
        """Replies queued or being sent."""
        return self.outbox.queued_bytes

    async def writer(self, scope: trio.CancelScope) -> None:
        send_all: Callable[[bytes], Awaitable[object]] = self.stream.send_all
        if hop_trace.ENABLED:
            send_all = hop_trace.traced_send_all(send_all, "k.out")
        try:
            await self.outbox.run(send_all, self.stall_timeout)
        except OutboxStalled:
            # The peer does not read its replies: stop holding them for it.
            log.warning("closing connection: replies not taken for %.0f s", self.stall_timeout)
            self.stalled = True
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        # The peer is gone or stalled: nothing more can be answered on this connection.
        self.closed = True
        self.write = None
        self.outbox.close()
        self._room.set()
        scope.cancel()

    async def wait_read_slot(self) -> None:
        """Pause the reader while ``_MAX_READS_IN_FLIGHT`` reads run for this connection."""
        while self.reads_in_flight >= _MAX_READS_IN_FLIGHT and not self.closed:
            self._read_slot = trio.Event()
            await self._read_slot.wait()

    def read_done(self) -> None:
        self.reads_in_flight -= 1
        self._read_slot.set()

    async def wait_drained(self) -> None:
        """Pause the reader while the peer has more than the high-water mark of replies queued."""
        if self.out_bytes > self.high_water and not self.closed:
            await self.outbox.wait_below(self.low_water)

    async def wait_for_room(self) -> None:
        while self.pending >= self.max_pending and not self.closed:
            self._room = trio.Event()
            await self._room.wait()


async def serve_connection(
    stream: trio.SocketStream, processor: RequestProcessor, metrics: BookieMetrics, max_frame_size: int, max_pending: int,
    budget: ReceiveBudget | None = None, high_water: int = 512 * 1024, low_water: int = 384 * 1024,
    stall_timeout: float = 30.0, auth: BookieAuthenticator | None = None,
) -> None:
    """Serve one connection until the peer closes it, sends garbage or stalls (or, when ``auth``
    requires an identity, starts with anything but a valid AUTH)."""
    conn = Connection(stream, max_pending, high_water, low_water, stall_timeout)
    conn.authenticated = auth is None
    decoder = FrameDecoder(max_frame_size)
    if budget is None:
        budget = ReceiveBudget(1 << 62, metrics)
    metrics.connections.inc()
    try:
        await _serve(stream, conn, decoder, processor, max_pending, budget, auth)
    except Exception:
        # A bug in one request's handling must cost this connection, never the bookie.
        log.exception("closing connection after an unexpected error")
    finally:
        conn.closed = True
        conn.write = None  # before the stream closes: its fd number may be reused
        if conn.stalled:
            metrics.connections_timed_out.inc()
        metrics.connections.dec()
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(stream)


async def _receive(stream: trio.SocketStream, conn: Connection, budget: ReceiveBudget) -> tuple[bytes, int]:
    """The next bytes from the peer (b"" at its end) and the budget reserved for them."""
    while True:
        if conn.out_bytes > conn.high_water:
            await conn.wait_drained()
        if budget._free() < _MIN_RECEIVE:
            await budget.wait_for_room()
        if budget.enter_direct():
            data = b""
            try:
                fd = conn.fd
                if fd is None:
                    data = await stream.receive_some(_RECEIVE_SIZE)
                else:  # wait, then read: no failed read per request (quire/socket_io.py)
                    data = await socket_io.receive_some(stream, fd, _RECEIVE_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            finally:
                budget.leave_direct(len(data))
            return data, len(data)
        # Wait for data first, then size the read from the room left right now: no other
        # reader runs in between, so together they never receive past the budget.
        if isinstance(stream, trio.SocketStream):  # (a TLS stream may hold decrypted bytes: no wait)
            await trio.lowlevel.wait_readable(stream.socket)
        size = budget.room()
        if size >= _MIN_RECEIVE or size == _RECEIVE_SIZE:
            break
    budget.charge(size)  # reserved until the caller charged what its decoder kept
    try:
        return await stream.receive_some(size), size
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return b"", size
    except BaseException:
        budget.charge(-size)
        raise


async def _watch_stalls(conn: Connection, scope: trio.CancelScope) -> None:
    """Close the connection once its partial frame is older than the stall timeout (checked
    a few times per timeout: no timer per read on the hot path)."""
    while True:
        await trio.sleep(conn.stall_timeout / 4)
        if trio.current_time() >= conn.frame_deadline:
            log.warning("closing connection: a request frame did not arrive whole within %.0f s", conn.stall_timeout)
            conn.stalled = True
            scope.cancel()
            return


def _authenticate(req: Request, conn: Connection, auth: BookieAuthenticator | None) -> bool:
    """Answer an AUTH (or a request sent before one); True when the peer is now authenticated."""
    ok = req.op == _AUTH and (auth is None or auth.role(req.body) is not None)
    conn.send(encode_response(Response(req.op, req.request_id, Status.OK if ok else Status.UNAUTHORIZED,
                                       req.ledger_id, req.entry_id)))
    conn.authenticated = conn.authenticated or ok
    return ok


async def _serve(
    stream: trio.SocketStream, conn: Connection, decoder: FrameDecoder, processor: RequestProcessor, max_pending: int,
    budget: ReceiveBudget, auth: BookieAuthenticator | None = None,
) -> None:
    """The reader loop, with the connection's writer beside it in the connection's nursery."""
    held = 0  # budget charged for the partial frame the decoder keeps
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.writer, nursery.cancel_scope)
            nursery.start_soon(_watch_stalls, conn, nursery.cancel_scope)
            fast, slow = processor.handle_fast, processor.handle_slow
            try:
                while True:
                    data, reserved = await _receive(stream, conn, budget)
                    if hop_trace.ENABLED:
                        rx_ns = hop_trace._now()
                    if not data:
                        budget.charge(-reserved)
                        break
                    try:
                        reqs, bad = decoder.feed_requests(data)
                    finally:
                        kept = decoder.buffered  # the partial frame, charged until it completes
                        budget.charge(kept - held - reserved)
                        held = kept
                    if not kept:
                        conn.frame_deadline = math.inf
                    elif reqs or conn.frame_deadline == math.inf:
                        conn.frame_deadline = trio.current_time() + conn.stall_timeout  # a new frame began
                    # The adds of one read are one input batch (quire/input_batch.py): the
                    # journal writes their group when the batch ends, in this task step, not one
                    # scheduler round later in its writer task. Closed before every await.
                    try:
                        for i, req in enumerate(reqs, 1):
                            input_batch.begin()  # (again after an await ended it)
                            conn.pending += 1
                            if hop_trace.ENABLED and req.op == _ADD:
                                hop_trace.mark("k.rx", req.ledger_id << 32 | req.entry_id, rx_ns)
                            if req.op == _AUTH or not conn.authenticated:
                                if not _authenticate(req, conn, auth):
                                    raise ProtocolError(
                                        "AUTH refused: invalid token or role not allowed" if req.op == _AUTH
                                        else f"{req.op.name} before a valid AUTH: unauthorized")
                                continue
                            if not fast(req, conn):
                                input_batch.end()
                                if req.op == _ADD or (req.timeout_ms > 0 and req.previous_lac >= 0):
                                    await slow(req, conn, nursery)  # adds wait inline; long polls hold no data
                                else:
                                    if conn.reads_in_flight >= _MAX_READS_IN_FLIGHT:
                                        await conn.wait_read_slot()
                                    conn.reads_in_flight += 1
                                    await slow(req, _ReadReply(conn), nursery)
                            if conn.pending >= max_pending:
                                input_batch.end()
                                await conn.wait_for_room()
                            elif conn.out_bytes > conn.high_water:
                                input_batch.end()
                                await conn.wait_drained()
                            elif not i % _YIELD_EVERY:
                                # A big burst must not starve the journal task: let it start the
                                # next group commit (and deliver finished ones) meanwhile.
                                input_batch.end()
                                await trio.sleep(0)
                    finally:
                        input_batch.end()
                    if bad is not None:
                        raise bad
            except ProtocolError as exc:
                log.warning("closing connection: %s", exc)
            # The peer half-closed: let in-flight requests answer (bounded), then stop.
            with trio.move_on_after(5):
                while conn.pending > 0 or conn.has_output:
                    await trio.sleep(0.002)
            nursery.cancel_scope.cancel()
    finally:
        budget.charge(-held)
        decoder.reset()
