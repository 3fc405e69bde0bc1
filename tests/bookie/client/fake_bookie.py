"""A fault-injecting in-process bookie for the ledger client's unit tests.

A trio TCP server speaking ``bookie/protocol.py`` with entries kept in memory, implementing
the semantics the client relies on (master key checks, fencing through READ with FENCE,
RECOVERY_ADD accepted after a fence, LAC from piggybacked entry headers, long-poll LAC reads)
plus per-bookie fault knobs (:class:`Faults`): drop replies, delay them, answer with an error
status (IO, NO_ENTRY, FENCED, TOO_MANY_REQUESTS ...), per-entry read overrides, slow adds, and
``crash()``/``restart()`` (connections cut, data kept) for outages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from bookie import entry_format
from bookie.protocol import Flag, FrameDecoder, Op, Request, Response, Status, decode_request, encode_response

DROP = "drop"  # in Faults.entry_status: never answer reads of that entry


@dataclass
class Faults:
    drop_all: bool = False  # swallow every request (a hung bookie: the client times out)
    drop_adds: bool = False
    delay_s: float = 0.0  # delay every reply
    add_delay_s: float = 0.0  # "slow" bookie: delay add replies only
    add_status: Status | None = None  # answer adds with this status instead of storing
    read_status: Status | None = None  # answer entry reads (entry >= 0) with this status
    fence_status: Status | None = None  # answer READ of entry -1 with this status (no fencing)
    corrupt_reads: bool = False  # flip a payload byte in every entry read back
    # per-entry read override: entry id -> Status or DROP (for every ledger)
    entry_status: dict[int, Status | str] = field(default_factory=dict)

    def clear(self) -> None:
        self.__init__()  # type: ignore[misc]


@dataclass
class _Ledger:
    master_key: bytes = b""
    fenced: bool = False
    lac: int = -1
    entries: dict[int, bytes] = field(default_factory=dict)
    changed: trio.Event = field(default_factory=trio.Event)


class FakeBookie:
    def __init__(self) -> None:
        self.faults = Faults()
        self.ledgers: dict[int, _Ledger] = {}
        self.port = 0
        self.requests: list[tuple[Op, int, int, int]] = []  # (op, ledger, entry, flags) seen
        self._scope: trio.CancelScope | None = None
        self._listeners: list[trio.SocketListener] = []

    @property
    def bookie_id(self) -> str:
        return f"127.0.0.1:{self.port}"

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery) -> None:
        await nursery.start(self._serve)

    async def _serve(self, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as scope:
            self._scope = scope
            listeners = await trio.open_tcp_listeners(self.port, host="127.0.0.1")
            self.port = listeners[0].socket.getsockname()[1]
            self._listeners = listeners
            async with trio.open_nursery() as n:
                task_status.started()
                await trio.serve_listeners(self._handle, listeners, handler_nursery=n)

    def crash(self) -> None:
        """Stop listening and cut every connection (entries stay: the journal had them)."""
        if self._scope is not None:
            self._scope.cancel()
            self._scope = None

    async def restart(self, nursery: trio.Nursery) -> None:
        self.crash()
        await trio.sleep(0)
        await nursery.start(self._serve)

    def lose_entry(self, ledger_id: int, entry_id: int) -> None:
        self.ledgers.get(ledger_id, _Ledger()).entries.pop(entry_id, None)

    def entry_ids(self, ledger_id: int) -> list[int]:
        return sorted(self.ledgers.get(ledger_id, _Ledger()).entries)

    # -- protocol --------------------------------------------------------------------------

    async def _handle(self, stream: trio.SocketStream) -> None:
        async with stream, trio.open_nursery() as n:
            try:
                await self._serve_connection(stream, n)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            n.cancel_scope.cancel()

    async def _serve_connection(self, stream: trio.SocketStream, n: trio.Nursery) -> None:
        decoder = FrameDecoder()
        lock = trio.Lock()
        while True:
            data = await stream.receive_some(65536)
            if not data:
                return
            immediate: list[bytes] = []
            for frame in decoder.feed(data):
                req = decode_request(frame)
                self.requests.append((req.op, req.ledger_id, req.entry_id, req.flags))
                if self._dropped(req):
                    continue
                delay = self.faults.delay_s + (self.faults.add_delay_s if req.op == Op.ADD else 0.0)
                long_poll = req.op == Op.READ and req.entry_id == -1 and req.timeout_ms > 0
                if delay > 0 or long_poll:
                    n.start_soon(self._reply_later, stream, lock, req, delay)
                else:
                    immediate.append(encode_response(self._process(req)))
            if immediate:
                async with lock:
                    await stream.send_all(b"".join(immediate))

    def _dropped(self, req: Request) -> bool:
        f = self.faults
        if f.drop_all or (f.drop_adds and req.op == Op.ADD):
            return True
        return req.op in (Op.READ, Op.RANGE_READ) and f.entry_status.get(req.entry_id) == DROP and req.entry_id >= 0

    async def _reply_later(self, stream: trio.SocketStream, lock: trio.Lock, req: Request, delay: float) -> None:
        await trio.sleep(delay)
        if req.op == Op.READ and req.entry_id == -1 and req.timeout_ms > 0 and not req.flags & Flag.FENCE:
            resp = await self._long_poll(req)
        else:
            resp = self._process(req)
        try:
            async with lock:
                await stream.send_all(encode_response(resp))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client went away meanwhile

    async def _long_poll(self, req: Request) -> Response:
        with trio.move_on_after(req.timeout_ms / 1000):
            while True:
                led = self.ledgers.get(req.ledger_id)
                if led is not None and led.lac > req.previous_lac:
                    break
                if led is None:
                    led = self.ledgers.setdefault(req.ledger_id, _Ledger())
                await led.changed.wait()
        return self._process(Request(Op.READ, req.request_id, req.ledger_id, -1))

    def _process(self, req: Request) -> Response:
        f = self.faults
        if req.op == Op.ADD:
            if f.add_status is not None:
                return Response(Op.ADD, req.request_id, f.add_status, req.ledger_id, req.entry_id)
            return self._add(req)
        if req.op == Op.READ:
            if req.entry_id == -1:
                if f.fence_status is not None:
                    return Response(Op.READ, req.request_id, f.fence_status, req.ledger_id, -1)
                return self._read_lac(req)
            override = f.entry_status.get(req.entry_id, f.read_status)
            if req.flags & Flag.FENCE:
                self._fence(req)
            if isinstance(override, Status):
                return Response(Op.READ, req.request_id, override, req.ledger_id, req.entry_id)
            return self._read(req)
        if req.op == Op.RANGE_READ:
            return self._range_read(req)
        return Response(req.op, req.request_id, Status.BAD_REQUEST, req.ledger_id, req.entry_id)

    def _range_read(self, req: Request) -> Response:
        """Consecutive entries from entry_id (the read faults apply per entry; stops at the first
        missing or faulty one, which answers the request only if it is the first)."""
        entries: list[bytes] = []
        for eid in range(req.entry_id, max(req.entry_id, req.last_entry_id) + 1):
            if len(entries) >= (req.max_entries or 10_000):
                break
            override = self.faults.entry_status.get(eid, self.faults.read_status)
            resp = self._read(Request(Op.READ, req.request_id, req.ledger_id, eid))
            if override is not None or resp.status != Status.OK:
                if entries:
                    break
                status = override if isinstance(override, Status) else resp.status
                return Response(Op.RANGE_READ, req.request_id, status, req.ledger_id, req.entry_id)
            entries.append(resp.body)
        return Response(Op.RANGE_READ, req.request_id, Status.OK, req.ledger_id, req.entry_id, entries=entries,
                        last_entry_id=req.entry_id + len(entries) - 1)

    def _add(self, req: Request) -> Response:
        led = self.ledgers.get(req.ledger_id)
        if led is None:
            led = self.ledgers[req.ledger_id] = _Ledger(master_key=req.master_key)
        elif led.master_key and led.master_key != req.master_key:
            return Response(Op.ADD, req.request_id, Status.UNAUTHORIZED, req.ledger_id, req.entry_id)
        if led.fenced and not req.flags & Flag.RECOVERY_ADD:
            return Response(Op.ADD, req.request_id, Status.FENCED, req.ledger_id, req.entry_id)
        hdr = entry_format.unpack_header(req.body)
        led.entries[req.entry_id] = req.body
        if hdr.lac > led.lac:
            led.lac = hdr.lac
            led.changed.set()
            led.changed = trio.Event()
        return Response(Op.ADD, req.request_id, Status.OK, req.ledger_id, req.entry_id)

    def _fence(self, req: Request) -> _Ledger:
        led = self.ledgers.get(req.ledger_id)
        if led is None:
            led = self.ledgers[req.ledger_id] = _Ledger(master_key=req.master_key)
        led.fenced = True
        return led

    def _read_lac(self, req: Request) -> Response:
        if req.flags & Flag.FENCE:
            led = self.ledgers.get(req.ledger_id)
            if led is not None and led.master_key and led.master_key != req.master_key:
                return Response(Op.READ, req.request_id, Status.UNAUTHORIZED, req.ledger_id, -1)
            led = self._fence(req)
        else:
            led = self.ledgers.get(req.ledger_id)
            if led is None:
                return Response(Op.READ, req.request_id, Status.NO_LEDGER, req.ledger_id, -1)
        if not led.entries:
            return Response(Op.READ, req.request_id, Status.NO_ENTRY, req.ledger_id, -1, lac=led.lac)
        last = max(led.entries)
        return Response(Op.READ, req.request_id, Status.OK, req.ledger_id, -1, body=led.entries[last], lac=led.lac)

    def _read(self, req: Request) -> Response:
        led = self.ledgers.get(req.ledger_id)
        if led is None:
            return Response(Op.READ, req.request_id, Status.NO_LEDGER, req.ledger_id, req.entry_id)
        data = led.entries.get(req.entry_id)
        if data is None:
            return Response(Op.READ, req.request_id, Status.NO_ENTRY, req.ledger_id, req.entry_id, lac=led.lac)
        if self.faults.corrupt_reads:
            data = data[:-1] + bytes([data[-1] ^ 0xFF]) if len(data) > entry_format.HEADER_SIZE else data[:-1]
        return Response(Op.READ, req.request_id, Status.OK, req.ledger_id, req.entry_id, body=data, lac=led.lac)
