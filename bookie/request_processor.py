"""RequestProcessor: the bookie's request semantics, independent of sockets.

Adds take a synchronous fast path (checks, write cache, journal append with an ack token):
no task, no await and no closure per entry. Once a journal group is fsynced, its tokens come
back in one call that encodes every reply and queues them with one send per connection. The
check, the cache put and the journal append never have an await between them, so an add is
never accepted after a fence was answered. Only the rare
cases await inline (first add of an unknown ledger, a full write cache, a congested journal),
which stalls that one connection and so pushes back on its client. Reads answered from the
write/read cache are answered inline too; everything that may touch the disk or wait (reads
that miss, fence, long poll, write LAC) runs as a task in the connection's nursery.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import trio

from bookie import journal_format as jf
from bookie.config import BookieConfig
from bookie.entry_format import HEADER_SIZE as ENTRY_HEADER_SIZE, unpack_ids
from bookie.errors import (
    BadRequestError,
    NoEntryError,
    NoLedgerError,
    StorageError,
    TooManyRequestsError,
    UnauthorizedError,
)
from bookie.journal import Journal
from bookie.ledger_index import TOP_UNKNOWN, LedgerState
from bookie.ledger_storage import LedgerStorage
from bookie.metrics import BookieMetrics
from bookie.protocol import (
    Flag, Op, Request, Status, encode_add_reply, encode_frame, encode_frame_head, encode_frame_parts,
)
from bookie.registration import BookieState
from quire import hop_trace

log = logging.getLogger(__name__)

_ADD = int(Op.ADD)
_READ = int(Op.READ)
_FENCE = int(Flag.FENCE)
_RECOVERY = int(Flag.RECOVERY_ADD)
_PIGGYBACK = int(Flag.PIGGYBACK)
_HIGH_PRIORITY = int(Flag.HIGH_PRIORITY)
_RANGE_MAX_BYTES = 4 * 1024 * 1024  # stay well under the 5 MiB frame limit
_RANGE_MAX_ENTRIES = 10_000
_MAX_PARTS = 1000  # entries of a reply sent by one vectored write (IOV_MAX is 1024)
_RANGE = int(Op.RANGE_READ)
# What memory cannot tell about a stored entry: it may be on disk (only the slow path looks).
_UNKNOWN = object()


class ReplySink(Protocol):
    """Where replies go (a connection): ``send`` queues one encoded frame."""

    def send(self, frame: bytes) -> None: ...

    # Optional: ``send_many(buffers, count)`` queues ``count`` replies given as consecutive
    # buffers with one wake-up; sinks without it get one ``send`` per reply. An in-process
    # sink may offer ``adds_done(request_ids, status)``: add replies without a frame, and
    # ``range_read_done(request_id, ledger_id, first_entry_id, entries)``: a RANGE_READ's
    # successful reply without a frame (every entry's stored checksum verified on read, see
    # LedgerStorage.read_range; entries may be memoryviews).


def reply_frame(
    op: int, request_id: int, status: int, ledger_id: int = 0, entry_id: int = 0, body: bytes = b"",
    entries: list[bytes] | list[bytes | memoryview] | None = None, lac: int = -1, last_entry_id: int = -1,
    free: int = 0, total: int = 0,
) -> bytes:
    if entries:
        # one join of the frame's parts: the entries are copied once, not into a body first
        return encode_frame_parts(
            [op, request_id, status, ledger_id, entry_id, lac, last_entry_id, free, total, [len(e) for e in entries]],
            [body, *entries] if body else entries,
        )
    return encode_frame([op, request_id, status, ledger_id, entry_id, lac, last_entry_id, free, total, []], body)


class RequestProcessor:
    def __init__(
        self,
        config: BookieConfig,
        storage: LedgerStorage,
        journal: Journal,
        state: BookieState,
        metrics: BookieMetrics,
        ledger_exists: Callable[[int], Awaitable[bool]] | None = None,
    ) -> None:
        self.config = config
        self.storage = storage
        self.journal = journal
        self.state = state
        self.metrics = metrics
        self.ledger_exists = ledger_exists
        # Plain counters on the hot path; published into Prometheus on scrape.
        self.counts: dict[tuple[str, int], int] = {}
        self._published: dict[tuple[str, int], int] = {}
        self.added_bytes = 0
        self._published_bytes = 0
        self._states = storage.states
        # Ledgers whose fence record is fsynced in this process's journal, and fence records
        # being written: recovery sends a fencing read per entry, and only the first may cost
        # a journal write + fsync (BookKeeper journals the fence once per ledger too).
        self._fence_durable: set[int] = set()
        self._fence_writes: dict[int, trio.Event] = {}
        journal.on_durable = self._adds_durable

    # --- metrics -------------------------------------------------------------------------

    def _count(self, kind: str, status: int, n: int = 1) -> None:
        key = (kind, status)
        self.counts[key] = self.counts.get(key, 0) + n

    def publish_metrics(self) -> None:
        for key, value in self.counts.items():
            delta = value - self._published.get(key, 0)
            if delta:
                kind, status = key
                counter = self.metrics.add_entries if kind == "add" else self.metrics.read_entries
                counter.labels(Status(status).name).inc(delta)
                self._published[key] = value
        if self.added_bytes > self._published_bytes:
            self.metrics.add_bytes.inc(self.added_bytes - self._published_bytes)
            self._published_bytes = self.added_bytes

    # --- dispatch ------------------------------------------------------------------------

    def handle_fast(self, req: Request, conn: ReplySink) -> bool:
        """Handle a request without awaiting if possible (adds, cached reads); False if the
        caller must ``await handle_slow`` instead."""
        op = req.op
        if op == _ADD:
            return self.add_common(req.ledger_id, req.entry_id, req.master_key, req.body, conn,
                                   req.request_id) or self._add_fast(req, conn)
        if op == _READ and not req.flags & _FENCE and req.entry_id >= 0 and req.timeout_ms == 0:
            data = self.storage.cached_entry(req.ledger_id, req.entry_id)
            if data is not None:
                self._count("read", 0)
                conn.send(reply_frame(op, req.request_id, 0, req.ledger_id, req.entry_id, data))
                return True
        return False

    async def handle_slow(self, req: Request, conn: ReplySink, nursery: trio.Nursery) -> None:
        """The rest: adds that must wait (inline, keeping order), everything else as a task."""
        if req.op == _ADD:
            await self._add_slow(req, conn)
        else:
            nursery.start_soon(self._handle_async, req, conn)

    async def handle(self, req: Request, conn: ReplySink, nursery: trio.Nursery) -> None:
        """Process one request; exactly one reply is eventually sent to ``conn``."""
        if not self.handle_fast(req, conn):
            await self.handle_slow(req, conn, nursery)

    async def _handle_async(self, req: Request, conn: ReplySink) -> None:
        try:
            op = req.op
            if op == Op.READ:
                frame = await self._read(req)
            elif op == Op.RANGE_READ:
                entries = await self._range_entries(req)
                done = getattr(conn, "range_read_done", None)
                if done is not None:  # in-process: the entries as they are, no frame
                    done(req.request_id, req.ledger_id, req.entry_id, entries)
                    return
                send_parts = getattr(conn, "send_parts", None)
                if send_parts is not None and len(entries) < _MAX_PARTS:
                    # a socket: the reply's head, then the entries as read (views of the
                    # entry log read's buffer) in one vectored write, no join
                    size = sum(map(len, entries))
                    head = encode_frame_head([_RANGE, req.request_id, 0, req.ledger_id, req.entry_id, -1,
                                              req.entry_id + len(entries) - 1, 0, 0, [len(e) for e in entries]], size)
                    send_parts([head, *entries], len(head) + size)
                    return
                frame = reply_frame(Op.RANGE_READ, req.request_id, 0, req.ledger_id, req.entry_id, entries=entries,
                                    last_entry_id=req.entry_id + len(entries) - 1)
            elif op == Op.READ_LAC:
                frame = await self._read_lac(req)
            elif op == Op.WRITE_LAC:
                frame = await self._write_lac(req)
            elif op == Op.BOOKIE_INFO:
                free, total = await trio.to_thread.run_sync(self.storage.disk_usage)
                frame = reply_frame(op, req.request_id, 0, free=free, total=total)
            else:
                raise BadRequestError(f"unsupported op {op}")
        except StorageError as exc:
            frame = reply_frame(req.op, req.request_id, exc.status, req.ledger_id, req.entry_id)
            if req.op != Op.WRITE_LAC:
                self._count("read", exc.status)
        except Exception:
            log.exception("request %s failed", req)
            frame = reply_frame(req.op, req.request_id, int(Status.IO), req.ledger_id, req.entry_id)
            self._count("read", int(Status.IO))
        conn.send(frame)

    # --- adds ----------------------------------------------------------------------------

    def _add_error(self, req: Request, conn: ReplySink, status: int) -> None:
        self._count("add", status)
        conn.send(reply_frame(_ADD, req.request_id, status, req.ledger_id, req.entry_id))

    def _check_add(self, req: Request, st: LedgerState) -> int:
        """0 if the add may proceed, else the status to answer."""
        if st.master_key != req.master_key:
            return int(Status.UNAUTHORIZED)
        flags = req.flags
        if st.fenced and not flags & _RECOVERY:
            return int(Status.FENCED)
        if self.state.read_only and not flags & _HIGH_PRIORITY:
            return int(Status.READ_ONLY)
        body = req.body
        if len(body) < ENTRY_HEADER_SIZE or req.entry_id < 0:
            return int(Status.BAD_REQUEST)
        lid, eid, _ = unpack_ids(body)
        if lid != req.ledger_id or eid != req.entry_id:
            return int(Status.BAD_REQUEST)
        return 0

    def add_common(self, ledger_id: int, entry_id: int, master_key: bytes, body: bytes, conn: ReplySink,
                   request_id: int) -> bool:
        """The common add (a new entry of a known, writable ledger whose key matches, room in
        the journal and the write cache), from its fields: no Request is needed, which lets
        an in-process client skip building one. False = nothing was done (no reply, nothing
        stored): the caller takes the general path (``handle_fast``/``_add_fast``), which
        answers every unusual case."""
        journal = self.journal
        st = self._states.get(ledger_id)
        if (
            st is None or st.deleted or not st.master_key or st.master_key != master_key or st.fenced
            or entry_id <= st.top  # a rewrite (or a negative id, or top still unknown): compare first
            or self.state.read_only or len(body) < ENTRY_HEADER_SIZE or journal.congested
        ):
            return False
        l, e, lac = unpack_ids(body)
        if l != ledger_id or e != entry_id or not self.storage.try_add(ledger_id, e, body, lac, st):
            return False
        self.added_bytes += len(body)
        journal.append_ack(body, (conn, request_id, ledger_id, e))
        return True

    def _add_fast(self, req: Request, conn: ReplySink) -> bool:
        """The whole add without awaiting (every case ``add_common`` leaves); False if the
        slow path must take over."""
        journal = self.journal
        if journal.congested:
            return False
        lid = req.ledger_id
        st = self._states.get(lid)
        if st is None or st.deleted or not st.master_key:
            return False
        body = req.body
        # The common case in one test; anything unusual goes through _check_add for its status.
        if (
            st.master_key != req.master_key or st.fenced or self.state.read_only
            or len(body) < ENTRY_HEADER_SIZE or req.entry_id < 0
        ):
            status = self._check_add(req, st)
            if status:
                self._add_error(req, conn, status)
                return True
        l, e, lac = unpack_ids(body)
        if l != lid or e != req.entry_id:
            self._add_error(req, conn, int(Status.BAD_REQUEST))
            return True
        if e <= st.top:  # else a new entry, nothing to compare with (never while top is unknown)
            stored = self._stored(lid, e, st)
            if stored is _UNKNOWN:
                return False
            if stored is not None and stored != body:
                self._refuse_overwrite(req, conn)
                return True
        if not self.storage.try_add(lid, e, body, lac, st):
            return False
        self.added_bytes += len(body)
        journal.append_ack(body, (conn, req.request_id, lid, e))
        return True

    # --- overwrites: an entry, once stored, only ever gets its own bytes again --------------

    def _stored(self, lid: int, eid: int, st: LedgerState) -> object:
        """The entry's bytes as far as memory knows: None if nothing is stored (above the
        ledger's highest entry), the bytes if cached, else _UNKNOWN (it may be on disk)."""
        if eid > st.top:  # (never while unknown)
            return None
        storage = self.storage
        data = storage.write_cache.get(lid, eid)
        if data is None:
            data = storage.read_cache.get(lid, eid)
        return _UNKNOWN if data is None else data

    async def _stored_on_disk(self, lid: int, eid: int) -> bytes | None:
        """Learn the ledger's highest entry (once) and, if ``eid`` is not above it, read it.
        Valid while the write cache's active half is the one returned by the caller's check."""
        storage = self.storage
        while True:
            st = storage.state(lid)
            if st is None:
                return None  # deleted meanwhile: the caller's re-check answers
            if st.top != TOP_UNKNOWN:
                break
            half = storage.write_cache.active
            top = await storage.last_entry_id(lid)
            # A checkpoint in between may have moved an entry from the cache to the index
            # behind the seek: look again.
            if storage.write_cache.active is half and st.top == TOP_UNKNOWN:
                st.top = top
        if eid > st.top:
            return None
        try:
            return await storage.read_entry(lid, eid)
        except (NoEntryError, NoLedgerError):
            return None

    def _refuse_overwrite(self, req: Request, conn: ReplySink) -> None:
        # No honest client does this (recovery rewrites identical bytes): keep what is stored.
        self.metrics.overwrites_refused.inc()
        log.warning("refusing add %d:%d: other bytes than the stored entry", req.ledger_id, req.entry_id)
        self._add_error(req, conn, int(Status.BAD_REQUEST))

    def _journal_add(self, req: Request, conn: ReplySink) -> None:
        self.added_bytes += len(req.body)
        self.journal.append_ack(req.body, (conn, req.request_id, req.ledger_id, req.entry_id))

    def _adds_durable(self, tokens: list, err: BaseException | None) -> None:
        """A journal group is durable (or failed): answer all its adds, one send per connection."""
        # A group that failed for lack of space answers READ_ONLY (StorageError.status).
        status = 0 if err is None else int(getattr(err, "status", Status.IO))
        counts, key = self.counts, ("add", status)  # (_count, inlined: once per group)
        counts[key] = counts.get(key, 0) + len(tokens)
        first = tokens[0][0]
        adds_done = getattr(first, "adds_done", None)
        if adds_done is not None and len(tokens) == 1:  # a lone add (unbatched, one at a time)
            adds_done([tokens[0][1]], status)
            return
        if adds_done is not None and all(t[0] is first for t in tokens):
            adds_done([t[1] for t in tokens], status)  # in-process: no frames to encode
            return
        encode = encode_add_reply
        last_conn = None
        out: list[bytes] = []
        batches: list[tuple[ReplySink, list[bytes]]] = []
        for conn, rid, lid, eid in tokens:
            if hop_trace.ENABLED:
                hop_trace.mark("k.ack", lid << 32 | eid)
            if conn is not last_conn:
                # Tokens come in runs per connection; a dict is needed only to merge runs.
                last_conn, out = conn, []
                batches.append((conn, out))
            out.append(encode(rid, status, lid, eid))
        merged: dict[ReplySink, list[bytes]] = {}
        for conn, frames in batches:
            if conn in merged:
                merged[conn] += frames
            else:
                merged[conn] = frames
        for conn, frames in merged.items():
            send_many = getattr(conn, "send_many", None)
            if send_many is not None:
                send_many(frames, len(frames))
            else:  # a sink with only send() (e.g. the in-process local bookie channel)
                send = conn.send
                for frame in frames:
                    send(frame)

    async def _add_slow(self, req: Request, conn: ReplySink) -> None:
        """An add that must wait (unknown ledger, congested journal, full write cache).

        The state check, the write-cache put and the journal append run without an await in
        between: a fence that arrives while this add waits is seen by the re-check, so an add
        is never accepted after a fence was answered (BookKeeper #4701).
        """
        lid = req.ledger_id
        deadline = 0.0
        on_disk: tuple[object, bytes | None] | None = None  # (write-cache half, bytes) of a disk look-up
        try:
            while True:
                await self.journal.wait_for_space()
                st = self.storage.states.get(lid)
                if st is None or st.deleted:
                    if await self._open_ledger_for_add(req) is None:
                        self._add_error(req, conn, int(Status.NO_LEDGER))
                        return
                    continue  # re-read the state after the await
                if not st.master_key and req.master_key:
                    # Known only from a fence or LAC write without a key: the first add sets it.
                    self.storage.set_master_key(lid, req.master_key)
                    self.journal.append(jf.master_key_payload(lid, req.master_key), None)
                status = self._check_add(req, st)
                if status:
                    self._add_error(req, conn, status)
                    return
                eid = req.entry_id
                stored = self._stored(lid, eid, st)
                if stored is _UNKNOWN:
                    half = self.storage.write_cache.active
                    if on_disk is None or on_disk[0] is not half:
                        on_disk = (half, await self._stored_on_disk(lid, eid))
                        continue  # re-check everything after the await
                    stored = on_disk[1]
                if stored is not None and stored != req.body:
                    self._refuse_overwrite(req, conn)
                    return
                lac = unpack_ids(req.body)[2]
                if self.storage.try_add(lid, eid, req.body, lac):
                    break
                if not deadline:
                    self.metrics.throttled_adds.inc()
                    deadline = time.monotonic() + self.config.db_storage_max_throttle_time_ms / 1000.0
                if not await self.storage.wait_for_room(deadline):
                    raise TooManyRequestsError(f"write cache full for {self.config.db_storage_max_throttle_time_ms} ms")
        except StorageError as exc:
            self._add_error(req, conn, exc.status)
            return
        except Exception:
            # e.g. the metadata store did not answer: the outcome is unknown to the client (IO).
            log.exception("add %d:%d failed", req.ledger_id, req.entry_id)
            self._add_error(req, conn, int(Status.IO))
            return
        self._journal_add(req, conn)

    async def _open_ledger_for_add(self, req: Request) -> LedgerState | None:
        """First add of a ledger: refuse it if the ledger is known deleted or has no metadata."""
        lid = req.ledger_id
        if self.storage.is_deleted(lid):
            return None
        if self.ledger_exists is not None and not await self.ledger_exists(lid):
            if self.storage.states.get(lid) is None:
                log.info("refusing add to ledger %d: no metadata (deleted)", lid)
                self.storage.mark_deleted(lid)
            return None
        st = self.storage.states.get(lid)
        if st is None:
            st = self.storage.create_ledger(lid, req.master_key)
            self.journal.append(jf.master_key_payload(lid, req.master_key), None)
        return st

    # --- reads ---------------------------------------------------------------------------

    def _check_key(self, st: LedgerState, req: Request) -> None:
        if st.master_key and st.master_key != req.master_key:
            raise UnauthorizedError(f"master key mismatch on ledger {req.ledger_id}")

    async def _read(self, req: Request) -> bytes:
        lid, eid = req.ledger_id, req.entry_id
        if req.flags & _FENCE:
            return await self._fence_read(req)
        if req.previous_lac >= 0 and req.timeout_ms > 0:
            return await self._long_poll(req)
        if eid < 0:
            lac = await self.storage.last_add_confirmed(lid)
            st = self.storage.state(lid)
            self._count("read", 0)
            return reply_frame(Op.READ, req.request_id, 0, lid, eid, st.explicit_lac if st else b"", lac=lac)
        data = await self.storage.read_entry(lid, eid)
        self._count("read", 0)
        return reply_frame(Op.READ, req.request_id, 0, lid, eid, data)

    async def _fence_read(self, req: Request) -> bytes:
        """Fence durably (journal record fsynced) before answering; then the last entry."""
        lid = req.ledger_id
        if self.storage.is_deleted(lid):
            raise NoLedgerError(f"ledger {lid} was deleted")
        st = self.storage.states.get(lid)
        if st is None and self.ledger_exists is not None and not await self.ledger_exists(lid):
            # No metadata: not a recovery, a stranger (e.g. fencing future ledger ids, which
            # would refuse their creator later). Keep no state and journal nothing.
            st = self.storage.states.get(lid)
            if st is None:
                raise NoLedgerError(f"fencing read of ledger {lid}, which has no metadata")
        if st is None:
            # BookKeeper creates the ledger on a fence read: recovery may reach a bookie
            # that never got an entry, and it must still refuse the old writer from now on.
            st = self.storage.create_ledger(lid, req.master_key)
            self.journal.append(jf.master_key_payload(lid, req.master_key), None)
        self._check_key(st, req)
        self.storage.set_fenced(lid)
        await self._make_fence_durable(lid)
        last = await self.storage.last_entry_id(lid)
        eid = req.entry_id if req.entry_id >= 0 else last
        if eid < 0:
            raise NoEntryError(f"ledger {lid} has no entries")
        data = await self.storage.read_entry(lid, eid)
        lac = await self.storage.last_add_confirmed(lid)
        self._count("read", 0)
        return reply_frame(Op.READ, req.request_id, 0, lid, eid, data, lac=lac, last_entry_id=last)

    async def _make_fence_durable(self, lid: int) -> None:
        """Return once a fence record of `lid` is fsynced: write one, or wait for the one
        being written; a failed write leaves the next fencer to try again."""
        while lid not in self._fence_durable:
            pending = self._fence_writes.get(lid)
            if pending is not None:
                await pending.wait()
                continue
            done = self._fence_writes[lid] = trio.Event()
            try:
                await self.journal.append_and_wait(jf.fence_payload(lid))
                self._fence_durable.add(lid)
            finally:
                del self._fence_writes[lid]
                done.set()

    async def _long_poll(self, req: Request) -> bytes:
        lid = req.ledger_id
        if self.storage.state(lid) is None:
            raise NoLedgerError(f"ledger {lid} unknown")
        lac = await self.storage.last_add_confirmed(lid)
        if lac <= req.previous_lac:
            await self.storage.wait_lac_change(lid, req.previous_lac, req.timeout_ms / 1000.0)
            lac = await self.storage.last_add_confirmed(lid)
        body = b""
        eid = req.entry_id
        if req.flags & _PIGGYBACK and lac > req.previous_lac:
            eid = req.previous_lac + 1
            try:
                body = await self.storage.read_entry(lid, eid)
            except NoEntryError:
                body = b""
        self._count("read", 0)
        return reply_frame(Op.READ, req.request_id, 0, lid, eid, body, lac=lac)

    async def _range_entries(self, req: Request) -> list[bytes | memoryview]:
        lid, first = req.ledger_id, req.entry_id
        if first < 0:
            raise BadRequestError(f"range read from entry {first}")
        last = req.last_entry_id if req.last_entry_id >= first else first
        max_entries = min(req.max_entries or _RANGE_MAX_ENTRIES, _RANGE_MAX_ENTRIES)
        max_bytes = min(req.max_bytes or _RANGE_MAX_BYTES, _RANGE_MAX_BYTES)
        entries = await self.storage.read_range(lid, first, last, max_entries, max_bytes)
        self._count("read", 0, len(entries))
        return entries

    async def _read_lac(self, req: Request) -> bytes:
        lid = req.ledger_id
        lac = await self.storage.last_add_confirmed(lid)
        st = self.storage.state(lid)
        last = await self.storage.last_entry_id(lid)
        entries = []
        if last >= 0:
            try:
                entries.append(await self.storage.read_entry(lid, last))
            except NoEntryError:
                pass
        return reply_frame(
            Op.READ_LAC, req.request_id, 0, lid, -1, st.explicit_lac if st else b"", entries, lac=lac, last_entry_id=last
        )

    async def _write_lac(self, req: Request) -> bytes:
        lid = req.ledger_id
        st = self.storage.state(lid)
        if st is None:
            raise NoLedgerError(f"ledger {lid} unknown")
        self._check_key(st, req)
        self.storage.set_explicit_lac(lid, req.entry_id, req.body)
        await self.journal.append_and_wait(jf.explicit_lac_payload(lid, req.entry_id, req.body))
        return reply_frame(Op.WRITE_LAC, req.request_id, 0, lid, req.entry_id)
