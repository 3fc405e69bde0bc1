"""Reusable large byte buffers: a bytearray is handed out again once nothing else refers to it.

A range read's bytes (an entry log read on the bookie, a reply received by the ledger client)
are handed on as memoryviews of one large buffer. A fresh buffer of a few MiB costs a page
fault per 4 KiB on first touch (and a zero-fill); a pooled one whose views are all gone is
refilled instead. "All gone" is the buffer's reference count: a view holds a reference to it,
so a buffer referred to only by the pool is free (CPython). Thread-safe (the bookie reads on
worker threads).
"""

from __future__ import annotations

import threading
from sys import getrefcount


class BufferPool:
    """Up to ``max_buffers`` buffers kept for reuse; ``get`` never waits (a new one if none is free)."""

    __slots__ = ("max_buffers", "_buffers", "_lock")

    def __init__(self, max_buffers: int) -> None:
        self.max_buffers = max_buffers
        self._buffers: list[tuple[bytearray, int]] = []  # (buffer, the most it held: its memory)
        self._lock = threading.Lock()

    def get(self, size: int) -> bytearray:
        """A bytearray of exactly ``size`` bytes (contents undefined) that nothing else refers to."""
        with self._lock:
            spare = -1
            for i, (b, cap) in enumerate(self._buffers):
                if getrefcount(b) == 3:  # the pool's tuple's, the loop's and the call's: free
                    if cap // 2 <= size <= cap:
                        # within its memory, CPython resizes in place (it reallocates a
                        # bytearray only to grow past it or to shrink below half of it)
                        have = len(b)
                        if have > size:
                            del b[size:]
                        elif have < size:
                            b += bytes(size - have)
                        return b
                    spare = i
            cap = size + (size >> 3)  # room for the next, slightly larger, read
            b = bytearray(cap)
            del b[size:]
            if len(self._buffers) < self.max_buffers:
                self._buffers.append((b, cap))
            elif spare >= 0:  # a free buffer of another size makes room for this one
                self._buffers[spare] = (b, cap)
            return b
