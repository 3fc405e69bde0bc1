"""The receiver queue: messages waiting for ``receive()``.

Its size is bounded by flow control, not by a capacity check: the broker never sends more
messages than the permits the consumer granted, and permits are only returned as the
application dequeues messages (``receiver_queue_size`` per consumer).

The blocking API reads it from user threads (``get_blocking``) without a round trip to the trio
thread: items are appended and popped with atomic deque operations, and a ``threading.Condition``
wakes waiting threads.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

import trio

from . import errors

M = TypeVar("M")


class MessageQueue(Generic[M]):
    def __init__(self) -> None:
        self._items: deque[M] = deque()
        self._lot = trio.lowlevel.ParkingLot()
        self._closed = False
        self._cv = threading.Condition()
        self._thread_waiters = 0

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: M) -> None:
        self._items.append(item)
        if len(self._lot):  # unpark() costs even with nobody waiting
            self._lot.unpark()
        if self._thread_waiters:
            with self._cv:
                self._cv.notify()

    def put_many(self, items: list[M]) -> None:
        """Append a whole entry's messages with one wakeup."""
        self._items.extend(items)
        if len(self._lot):
            self._lot.unpark_all()
        if self._thread_waiters:
            with self._cv:
                self._cv.notify_all()

    def get_nowait(self) -> M | None:
        try:
            return self._items.popleft()
        except IndexError:
            return None

    def get_blocking(self, timeout_s: float | None = None) -> M:
        """From a thread other than trio's: the next item, ``Timeout`` or ``AlreadyClosed``."""
        item = self.get_nowait()
        if item is not None:
            return item
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cv:
            self._thread_waiters += 1
            try:
                while True:
                    item = self.get_nowait()
                    if item is not None:
                        return item
                    if self._closed:
                        raise errors.AlreadyClosed("consumer closed")
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise errors.Timeout("receive timed out")
                    # Bounded waits: a notify sent between our check and wait() is never lost for long.
                    self._cv.wait(0.05 if left is None else min(left, 0.05))
            finally:
                self._thread_waiters -= 1

    def peek(self) -> M | None:
        return self._items[0] if self._items else None

    async def get(self, timeout_s: float | None = None) -> M:
        """The next item; raises ``Timeout`` after ``timeout_s`` (None: wait forever)."""
        if self._items:
            # Fast path without a cancel scope: receive() on a full queue is the hot loop, and the
            # queue empties (so we park and yield) within receiver_queue_size calls at most.
            return self._items.popleft()
        with trio.move_on_after(math.inf if timeout_s is None else timeout_s):
            while not self._items:
                if self._closed:
                    raise errors.AlreadyClosed("consumer closed")
                await self._lot.park()
            return self._items.popleft()
        raise errors.Timeout("receive timed out")

    def remove_if(self, predicate: Callable[[M], bool]) -> int:
        """Drop matching items (e.g. one child consumer's after it reconnects); return how many."""
        kept = deque(m for m in self._items if not predicate(m))
        removed = len(self._items) - len(kept)
        self._items = kept
        return removed

    def clear(self) -> int:
        n = len(self._items)
        self._items.clear()
        return n

    def close(self) -> None:
        """Wake every waiting receiver; once empty, ``get`` raises ``AlreadyClosed``."""
        self._closed = True
        self._lot.unpark_all()
        with self._cv:
            self._cv.notify_all()

    def wake_all(self) -> None:
        self._lot.unpark_all()
