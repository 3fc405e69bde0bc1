"""The receiver queue: messages waiting for ``receive()``.

Its size is bounded by flow control, not by a capacity check: the broker never sends more
messages than the permits the consumer granted, and permits are only returned as the
application dequeues messages (``receiver_queue_size`` per consumer).
"""

from __future__ import annotations

import math
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

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: M) -> None:
        self._items.append(item)
        if len(self._lot):  # unpark() costs even with nobody waiting
            self._lot.unpark()

    def get_nowait(self) -> M | None:
        return self._items.popleft() if self._items else None

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

    def wake_all(self) -> None:
        self._lot.unpark_all()
