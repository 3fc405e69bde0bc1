"""BookieServer connections: bytes in, frames out, with pipelining and bounded concurrency.

Each connection has a reader (decodes everything a ``receive_some`` returned in one go and
hands each request to the :class:`RequestProcessor`) and a writer (sends every reply queued
since its last send with one ``send_all``). At most ``max_pending_requests_per_connection``
requests are outstanding per connection; beyond that the reader stops reading, so a client
that pipelines too much is slowed down by TCP itself. A malformed frame closes the connection:
the stream cannot be resynchronised.
"""

from __future__ import annotations

import logging

import trio

from bookie.errors import ProtocolError
from bookie.metrics import BookieMetrics
from bookie.protocol import FrameDecoder
from bookie.request_processor import RequestProcessor

log = logging.getLogger(__name__)

_RECEIVE_SIZE = 1024 * 1024
_YIELD_EVERY = 32  # frames processed between scheduling points


class Connection:
    """One client connection; ``send`` is synchronous so journal callbacks can call it."""

    def __init__(self, stream: trio.abc.Stream, max_pending: int) -> None:
        self.stream = stream
        self.max_pending = max_pending
        self.pending = 0
        self.closed = False
        self._out: list[bytes] = []
        self._out_ready = trio.Event()
        self._room = trio.Event()

    def send(self, frame: bytes) -> None:
        self.pending -= 1
        if self.closed:
            return
        self._out.append(frame)
        self._out_ready.set()
        if self.pending < self.max_pending:
            self._room.set()

    def send_many(self, buffers: list[bytes], count: int) -> None:
        """Queue ``count`` replies at once (a journal group's acks for this connection)."""
        self.pending -= count
        if self.closed:
            return
        self._out += buffers
        self._out_ready.set()
        if self.pending < self.max_pending:
            self._room.set()

    @property
    def has_output(self) -> bool:
        return bool(self._out)

    async def writer(self, scope: trio.CancelScope) -> None:
        try:
            while True:
                await self._out_ready.wait()
                self._out_ready = trio.Event()
                if not self._out:
                    continue
                data = b"".join(self._out) if len(self._out) > 1 else self._out[0]
                self._out.clear()
                await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            # The peer is gone: nothing more can be answered on this connection.
            self.closed = True
            self._room.set()
            scope.cancel()

    async def wait_for_room(self) -> None:
        while self.pending >= self.max_pending and not self.closed:
            self._room = trio.Event()
            await self._room.wait()


async def serve_connection(
    stream: trio.SocketStream, processor: RequestProcessor, metrics: BookieMetrics, max_frame_size: int, max_pending: int
) -> None:
    """Serve one connection until the peer closes it or sends garbage."""
    conn = Connection(stream, max_pending)
    decoder = FrameDecoder(max_frame_size)
    metrics.connections.inc()
    try:
        await _serve(stream, conn, decoder, processor, max_pending)
    except Exception:
        # A bug in one request's handling must cost this connection, never the bookie.
        log.exception("closing connection after an unexpected error")
    finally:
        conn.closed = True
        metrics.connections.dec()
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(stream)


async def _serve(
    stream: trio.SocketStream, conn: Connection, decoder: FrameDecoder, processor: RequestProcessor, max_pending: int
) -> None:
    """The reader loop, with the connection's writer beside it in the connection's nursery."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.writer, nursery.cancel_scope)
        fast, slow = processor.handle_fast, processor.handle_slow
        try:
            while True:
                try:
                    data = await stream.receive_some(_RECEIVE_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    break
                if not data:
                    break
                reqs, bad = decoder.feed_requests(data)
                for i, req in enumerate(reqs, 1):
                    conn.pending += 1
                    if not fast(req, conn):
                        await slow(req, conn, nursery)
                    if conn.pending >= max_pending:
                        await conn.wait_for_room()
                    elif not i % _YIELD_EVERY:
                        # A big burst must not starve the journal task: let it start the
                        # next group commit (and deliver finished ones) meanwhile.
                        await trio.sleep(0)
                if bad is not None:
                    raise bad
        except ProtocolError as exc:
            log.warning("closing connection: %s", exc)
        # The peer half-closed: let in-flight requests answer (bounded), then stop.
        with trio.move_on_after(5):
            while conn.pending > 0 or conn.has_output:
                await trio.sleep(0.002)
        nursery.cancel_scope.cancel()
