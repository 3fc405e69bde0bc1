"""The outbound side of a connection: one writer task that coalesces queued frames into one send.

Every connection of the project (broker <-> client, bookie server <-> ledger client, ledger
client -> bookie) queues encoded frames from synchronous code (a journal group commit, a
dispatch round, an add) and has one writer task send them. ``Outbox.put`` / ``put_many`` only
append and, when the writer sleeps, wake it (rescheduled directly, no Event per frame); the
writer takes everything queued since its last send and writes it in one ``send_all``: frames
below ``join_below`` bytes are joined (one copy of small replies and receipts beats a syscall
each), larger ones (a batch in a MESSAGE, a range-read reply) go out as they are.

A caller that writes the socket itself (``put_written``: the frame leaves at once when the
writer is not in a send) wakes the writer task only for what the socket did not take.

``queued_bytes`` counts what is queued or being sent; ``wait_below(n)`` lets a reader stop
taking requests while its peer does not read its replies (backpressure). ``run`` ends with
:class:`OutboxStalled` if one send does not complete within ``stall_timeout``.

An outbox built with ``write`` (a non-blocking write of the raw socket, e.g. ``os.write`` on
its fd) sends without trio's per-call socket machinery: the writer task tries ``write`` first
and awaits ``send_all`` only for what the socket did not take. Inside :func:`deferred_writes`
(a journal group's completions) ``put`` does not wake the writer task at all: when the block
ends, every outbox it touched writes its queued frames from there, one write per connection
for the whole group, saving a scheduler round and a task switch per acknowledged add.
"""

from __future__ import annotations

import math
from typing import Awaitable, Callable

import trio

JOIN_BELOW = 64 * 1024  # frames at least this large are sent without a join copy


class OutboxStalled(Exception):
    """The peer did not take a send for ``stall_timeout`` seconds."""


class Outbox:
    __slots__ = ("_frames", "queued_bytes", "_writer", "_sending", "_waiters", "closed", "join_below", "_write",
                 "_deferred")

    def __init__(self, join_below: int = JOIN_BELOW, write: Callable[[bytes], int] | None = None) -> None:
        self._write = write  # non-blocking write of the raw socket (bytes taken), or None
        self._deferred = False  # queued in the current deferred_writes block
        self._frames: list[bytes] = []
        self.queued_bytes = 0
        self._writer: trio.lowlevel.Task | None = None  # parked, waiting for frames
        self._sending = False
        self._waiters: list[tuple[int, trio.Event]] = []  # wait_below callers
        self.closed = False
        self.join_below = join_below

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing being sent."""
        return not self._frames and not self._sending

    def put(self, frame: bytes) -> None:
        if self.closed:
            return
        self._frames.append(frame)
        self.queued_bytes += len(frame)
        if self._writer is not None:
            self._wake_or_defer()

    def put_many(self, frames: list[bytes], nbytes: int = -1) -> None:
        if self.closed:
            return
        self._frames += frames
        self.queued_bytes += sum(map(len, frames)) if nbytes < 0 else nbytes
        if self._writer is not None:
            self._wake_or_defer()

    def put_written(self, frame: bytes, write: Callable[[bytes], int]) -> None:
        """``put`` then ``write_now`` without waking the writer task first: it is woken only
        for what the socket did not take. (``put`` wakes a parked writer, which then found the
        frame already written by the caller: a scheduler round per frame for nothing.)"""
        if self.closed:
            return
        self._frames.append(frame)
        self.queued_bytes += len(frame)
        self._write_or_wake(write)

    def put_many_written(self, frames: list[bytes], write: Callable[[bytes], int]) -> None:
        """``put_many`` + ``write_now`` as :meth:`put_written` does it."""
        if self.closed:
            return
        self._frames += frames
        self.queued_bytes += sum(map(len, frames))
        self._write_or_wake(write)

    def _write_or_wake(self, write: Callable[[bytes], int]) -> None:
        self.write_now(write)
        if self._frames and self._writer is not None:
            self._wake()

    def _wake_or_defer(self) -> None:
        """The writer is parked: wake it, or inside deferred_writes leave the write to the
        block's end."""
        batch = _deferred_batch
        if batch is None or self._write is None:
            self._wake()
        elif not self._deferred:
            self._deferred = True
            batch.append(self)

    def _flush_deferred(self) -> None:
        self._deferred = False
        write = self._write
        if write is not None:
            self.write_now(write)
        if self._frames:  # the socket did not take it all (or failed): the writer task's job
            self._wake()

    def write_now(self, write: Callable[[bytes], int]) -> None:
        """Send what is queued from the caller, when the writer is not in a send: a synchronous
        request then leaves without waiting a scheduler round for the writer task. ``write`` is a
        non-blocking write returning the bytes taken; what it does not take (or an OSError, which
        the writer task will meet and report) stays queued for the writer."""
        frames = self._frames
        if self._sending or not frames or self.closed:
            return
        data = frames[0] if len(frames) == 1 else b"".join(frames)
        try:
            n = write(data)
        except OSError:  # EAGAIN or a broken connection: the writer tries and owns the failure
            self._frames = [data]
            return
        self._frames = [data[n:]] if n < len(data) else []
        self.queued_bytes -= n  # (_sent, inlined)
        if self._waiters:
            self._release_waiters()

    def _wake(self) -> None:
        task = self._writer
        if task is not None:
            self._writer = None
            trio.lowlevel.reschedule(task)

    async def wait_below(self, limit: int) -> None:
        """Return once at most ``limit`` bytes are queued (or the outbox closed)."""
        while self.queued_bytes > limit and not self.closed:
            ev = trio.Event()
            self._waiters.append((limit, ev))
            await ev.wait()

    def _sent(self, n: int) -> None:
        self.queued_bytes -= n
        if self._waiters:
            self._release_waiters()

    def _release_waiters(self) -> None:
        """Set the wait_below waiters whose limit is met now."""
        if self._waiters:
            left = []
            for limit, ev in self._waiters:
                if self.queued_bytes <= limit:
                    ev.set()
                else:
                    left.append((limit, ev))
            self._waiters = left

    def close(self) -> None:
        """Drop what is queued and release every waiter (the peer is gone)."""
        self.closed = True
        self._frames = []
        self.queued_bytes = 0
        for _limit, ev in self._waiters:
            ev.set()
        self._waiters = []
        self._wake()

    def _abort_wait(self, _raise_cancel: object) -> trio.lowlevel.Abort:
        self._writer = None
        return trio.lowlevel.Abort.SUCCEEDED

    async def run(self, send_all: Callable[[bytes], Awaitable[object]], stall_timeout: float = math.inf) -> None:
        """The writer loop, until cancelled or closed; raises OutboxStalled on a stuck peer."""
        join_below = self.join_below
        write = self._write
        while not self.closed:
            if not self._frames:
                self._writer = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(self._abort_wait)
                continue
            out, self._frames = self._frames, []
            self._sending = True
            try:
                if len(out) == 1:
                    chunks = out
                else:
                    chunks = []
                    small: list[bytes] = []
                    for frame in out:
                        if len(frame) < join_below:
                            small.append(frame)
                            continue
                        if small:
                            chunks.append(b"".join(small) if len(small) > 1 else small[0])
                            small = []
                        chunks.append(frame)
                    if small:
                        chunks.append(b"".join(small) if len(small) > 1 else small[0])
                for chunk in chunks:
                    if write is not None:
                        try:
                            n = write(chunk)
                        except OSError:  # EAGAIN, or a failure send_all will meet and raise
                            n = 0
                        if n == len(chunk):
                            self._sent(n)
                            continue
                        if n:
                            self._sent(n)
                            chunk = memoryview(chunk)[n:]  # type: ignore[assignment]
                    if stall_timeout == math.inf:
                        await send_all(chunk)
                    else:
                        with trio.move_on_after(stall_timeout) as timer:
                            await send_all(chunk)
                        if timer.cancelled_caught:
                            raise OutboxStalled(f"a send was not taken for {stall_timeout:.0f} s")
                    self._sent(len(chunk))
            finally:
                self._sending = False


_deferred_batch: list[Outbox] | None = None


class deferred_writes:
    """``with deferred_writes():`` frames put into outboxes with a ``write`` are sent when the
    block ends (one write per outbox) instead of waking each writer task. Nested blocks join
    the outermost one. Event-loop thread only (like every Outbox method)."""

    __slots__ = ("_outer",)

    def __enter__(self) -> None:
        global _deferred_batch
        self._outer = _deferred_batch is not None
        if not self._outer:
            _deferred_batch = []

    def __exit__(self, *exc: object) -> None:
        global _deferred_batch
        if self._outer:
            return
        batch, _deferred_batch = _deferred_batch, None
        for outbox in batch or ():
            outbox._flush_deferred()
