"""In-process channel to a bookie running in the same process (``quire standalone``).

Over a loopback socket, every entry the broker writes to its co-located bookie costs two
socket writes, two reads, a frame encode and decode each way and four task wake-ups (the
reader and writer of both ends). A bookie handed to the ledger client explicitly
(``BookKeeper(..., local_bookies={bookie_id: processor})``) is reached through
:class:`LocalBookieConnection` instead: requests go straight to the
bookie's request processor (the very code its socket server calls, with the same fast/slow
split and ordering) and replies come back through the same callback interface as
:class:`~bookie.client.bookie_connection.BookieConnection`. Durability is unchanged: an add
is answered by the processor's journal callback, i.e. only once its group was written and
fdatasynced. Cluster mode hands over no bookie, which keeps the socket path.
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Callable, Protocol

import trio

from bookie.client.config import ClientConfig
from bookie.client.distribution import CLIENT_CONNECTION_LOST, CLIENT_TIMEOUT
from bookie.protocol import Op, Request, Response, Status, decode_response

__all__ = ["LocalBookieConnection", "RequestHandler"]

log = logging.getLogger(__name__)

Callback = Callable[[int, "Response | None"], None]
_now = time.monotonic
_OP_ADD = Op.ADD
_OP_RANGE_READ = Op.RANGE_READ
_OK = Status.OK


class ReplySink(Protocol):
    def send(self, frame: bytes) -> None: ...


class RequestHandler(Protocol):
    """What the bookie's ``RequestProcessor`` offers its socket server (and us)."""

    def handle_fast(self, req: Request, conn: ReplySink) -> bool: ...

    def add_common(self, ledger_id: int, entry_id: int, master_key: bytes, body: bytes, conn: ReplySink,
                   request_id: int) -> bool: ...

    async def handle_slow(self, req: Request, conn: ReplySink, nursery: trio.Nursery) -> None: ...


class _Replies:
    """The processor's view of this connection: ``send(frame)`` = one encoded reply."""

    __slots__ = ("_conn", "adds_done")

    def __init__(self, conn: "LocalBookieConnection") -> None:
        self._conn = conn
        # Adds answered by the journal's group commit: no reply frame is encoded, let alone
        # decoded (the processor's fast path for in-process sinks). Bound, not a method
        # calling it: one Python frame less per add.
        self.adds_done: Callable[[list[int], int], None] = conn._adds_done

    def send(self, frame: bytes) -> None:
        self._conn._reply(frame)

    def range_read_done(self, request_id: int, ledger_id: int, first: int, entries: list[bytes]) -> None:
        """A RANGE_READ answered: the entries are handed over as they are (no frame). The
        bookie verified each one's stored checksum on read and the bytes never left this
        process, so the reply is marked ``verified``: the reader checks their ids, not their
        digests again (one end-to-end check per entry, not two)."""
        self._conn._respond(Response(_OP_RANGE_READ, request_id, _OK, ledger_id, first, b"", entries,
                                     last_entry_id=first + len(entries) - 1, verified=True))


class LocalBookieConnection:
    """Same interface as ``BookieConnection`` (``send``, ``send_add``, ``close``,
    ``outstanding``); callbacks receive ``(status, response_or_None)`` exactly once.

    Requests are handed to the processor in call order. One that needs the slow path (first
    add of a ledger, a congested journal, a full write cache, a read that misses the caches)
    is awaited by this connection's worker task, and every later request queues behind it, as
    a socket connection's reader would. Replies produced while a request is being submitted
    (an add refused at once, a read answered from the cache) are delivered by the worker, so a
    callback never runs inside the caller's ``send``; replies from the journal's group commit
    are delivered right away.
    """

    def __init__(self, bookie_id: str, processor: RequestHandler, nursery: trio.Nursery, config: ClientConfig) -> None:
        self.bookie_id = bookie_id
        self._processor = processor
        self._add_common = processor.add_common  # bound once: the per-add call
        self._nursery = nursery
        self._config = config
        self._sink = _Replies(self)
        self._pending: dict[int, tuple[Callback, float]] = {}
        self._backlog: collections.deque[Request] = collections.deque()
        self._deferred: list[bytes] = []
        self._deferred_adds: list[tuple[list[int], int]] = []
        self._deferred_responses: list[Response] = []
        self._submitting = False
        self._busy = False  # the worker is handling backlog requests (later ones queue)
        self._wake = trio.Event()
        self._next_id = 1
        self._running = False
        self._closed = False
        self._cancel: trio.CancelScope | None = None

    @property
    def outstanding(self) -> int:
        return len(self._pending)

    def send(self, req: Request, callback: Callback, timeout_s: float) -> None:
        """Submit ``req`` (its request_id is assigned here)."""
        if self._closed:
            callback(CLIENT_CONNECTION_LOST, None)
            return
        rid = self._next_id
        self._next_id = rid + 1
        req.request_id = rid
        self._pending[rid] = (callback, _now() + timeout_s)
        self._submit(req)

    def send_add(self, ledger_id: int, entry_id: int, flags: int, master_key: bytes, entry: bytes,
                 callback: Callback, timeout_s: float) -> None:
        """``send`` of an ADD request."""
        if self._closed:
            callback(CLIENT_CONNECTION_LOST, None)
            return
        # (send, inlined: the per-add hot path)
        rid = self._next_id
        self._next_id = rid + 1
        self._pending[rid] = (callback, _now() + timeout_s)
        if self._running and not (self._busy or self._backlog):
            # The common add straight from its fields (no Request, no dispatch); anything
            # else takes _submit with a Request, as it always did.
            self._submitting = True
            try:
                if self._add_common(ledger_id, entry_id, master_key, entry, self._sink, rid):
                    return
            finally:
                self._submitting = False
        self._submit(Request(_OP_ADD, rid, ledger_id, entry_id, flags, master_key, entry))

    def close(self) -> None:
        self._closed = True
        if self._cancel is not None:
            self._cancel.cancel()
        self._backlog.clear()
        self._deferred.clear()
        self._deferred_adds.clear()
        self._deferred_responses.clear()
        pending, self._pending = self._pending, {}
        for callback, _deadline in pending.values():
            self._complete(callback, CLIENT_CONNECTION_LOST, None)

    # -- internals ---------------------------------------------------------------------------

    def _submit(self, req: Request) -> None:
        if not self._running:
            self._running = True
            self._nursery.start_soon(self._run)
        if self._busy or self._backlog:
            self._backlog.append(req)
            self._wake.set()
            return
        self._submitting = True
        try:
            handled = self._processor.handle_fast(req, self._sink)
        finally:
            self._submitting = False
        if not handled:
            self._backlog.append(req)
            self._wake.set()

    def _reply(self, frame: bytes) -> None:
        if self._closed:
            return
        if self._submitting:
            self._deferred.append(frame)
            self._wake.set()
            return
        self._deliver(frame)

    def _adds_done(self, request_ids: list[int], status: int) -> None:
        if self._closed:
            return
        if self._submitting:  # never from the journal's group commit; kept for safety
            self._deferred_adds.append((request_ids, status))
            self._wake.set()
            return
        pending = self._pending
        for rid in request_ids:
            p = pending.pop(rid, None)
            if p is not None:  # else: it already timed out
                try:  # (_complete, inlined: once per add)
                    p[0](status, None)
                except Exception:
                    log.exception("ledger client callback failed")

    def _respond(self, resp: Response) -> None:
        if self._closed:
            return
        if self._submitting:  # never from a request task; kept for safety
            self._deferred_responses.append(resp)
            self._wake.set()
            return
        self._deliver_response(resp)

    def _deliver(self, frame: bytes) -> None:
        try:
            resp = decode_response(memoryview(frame)[4:])  # a reply frame starts with its u32 length
        except Exception:
            log.exception("undecodable reply from the local bookie %s", self.bookie_id)
            return
        self._deliver_response(resp)

    def _deliver_response(self, resp: Response) -> None:
        p = self._pending.pop(resp.request_id, None)
        if p is not None:  # else: it already timed out
            self._complete(p[0], int(resp.status), resp)

    @staticmethod
    def _complete(callback: Callback, status: int, resp: Response | None) -> None:
        try:
            callback(status, resp)
        except Exception:  # a bug in one op must not take the connection (and its peers) down
            log.exception("ledger client callback failed")

    async def _run(self) -> None:
        try:
            with trio.CancelScope() as scope:
                self._cancel = scope
                async with trio.open_nursery() as inner:
                    inner.start_soon(self._timeouts)
                    await self._worker(inner)
        finally:
            self._cancel = None
            self._running = False

    async def _worker(self, nursery: trio.Nursery) -> None:
        processor, sink = self._processor, self._sink
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            self._deliver_deferred()
            backlog = self._backlog
            self._busy = bool(backlog)
            try:
                while backlog:
                    req = backlog.popleft()
                    self._submitting = True
                    try:
                        handled = processor.handle_fast(req, sink)
                    finally:
                        self._submitting = False
                    if not handled:
                        await processor.handle_slow(req, sink, nursery)
                    self._deliver_deferred()
            finally:
                self._busy = False

    def _deliver_deferred(self) -> None:
        if self._deferred:
            deferred, self._deferred = self._deferred, []
            for frame in deferred:
                self._deliver(frame)
        if self._deferred_responses:
            responses, self._deferred_responses = self._deferred_responses, []
            for resp in responses:
                self._deliver_response(resp)
        if self._deferred_adds:
            adds, self._deferred_adds = self._deferred_adds, []
            for rids, status in adds:
                self._adds_done(rids, status)

    async def _timeouts(self) -> None:
        """A stuck bookie (e.g. a hung disk) times requests out as over a socket."""
        interval = self._config.timeout_monitor_interval_ms / 1000
        while True:
            await trio.sleep(interval)
            now = _now()
            expired = [rid for rid, p in self._pending.items() if p[1] <= now]
            for rid in expired:
                p = self._pending.pop(rid, None)
                if p is not None:
                    self._complete(p[0], CLIENT_TIMEOUT, None)
