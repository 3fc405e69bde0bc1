"""Per-hop timestamps on the add path and the dispatch path, for hunting latency across processes.

Dispatch rows (broker): ``d.flow`` (permits granted, consumer's permits after), ``d.read`` /
``d.got`` / ``d.sent`` around one dispatcher read, ``d.idle`` (waiting, with its budget),
``d.full`` (the connection's outbox over its limit), ``ra.start`` / ``ra.done`` / ``ra.wait``
(a read ahead) and ``c.direct`` / ``c.direct.done`` (a cursor read not served by one).

Off unless ``QUIRE_HOP_TRACE`` names a directory: then every process appends
``(monotonic_ns, hop, a, b)`` rows to memory and writes them to ``<dir>/<pid>.tsv`` at exit.
CLOCK_MONOTONIC is system-wide on Linux, so rows of the client, the broker and the bookies
line up. Call sites test ``hop_trace.ENABLED`` first: one global lookup when off. Garbage
collections are recorded too (``gc.start`` / ``gc.stop``, with their generation).
"""

from __future__ import annotations

import atexit
import gc
import os
import time
from typing import Awaitable, Callable

DIR = os.environ.get("QUIRE_HOP_TRACE") or None
ENABLED = DIR is not None
_rows: list[tuple[int, str, int, int]] = []
_now = time.monotonic_ns


def mark(hop: str, a: int = 0, b: int = 0) -> None:
    _rows.append((_now(), hop, a, b))


def traced_write(write: Callable[[bytes], int], hop: str, a: int = 0) -> Callable[[bytes], int]:
    """A direct socket write that marks ``hop`` once it returns."""
    def traced(data: bytes) -> int:
        n = write(data)
        mark(hop, a, n)
        return n
    return traced


def traced_send_all(send_all: Callable[[bytes], Awaitable[object]], hop: str, a: int = 0
                    ) -> Callable[[bytes], Awaitable[None]]:
    """A writer task's ``send_all`` that marks ``hop`` once each send completes."""
    async def traced(data: bytes) -> None:
        await send_all(data)
        mark(hop, a, len(data))
    return traced


def dump() -> None:
    if DIR is None or not _rows:
        return
    with open(os.path.join(DIR, f"{os.getpid()}.tsv"), "a") as f:
        f.writelines(f"{t}\t{h}\t{a}\t{b}\n" for t, h, a, b in _rows)
    _rows.clear()


def _gc_phase(phase: str, info: dict[str, int]) -> None:
    # collections pause everything in the process: they are hops too ("gc.start" / "gc.stop")
    _rows.append((_now(), "gc." + phase, info["generation"], info.get("collected", 0)))


if ENABLED:
    atexit.register(dump)
    gc.callbacks.append(_gc_phase)
