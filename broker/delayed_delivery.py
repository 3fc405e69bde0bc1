"""Delayed delivery tracker: positions held back until their ``deliver_at_time``.

Only positions are kept (a heap ordered by time); the entries are read again when they
become due, as Pulsar's in-memory tracker does. The tick groups timers so a flood of delayed
messages does not wake the dispatcher once per message.
"""

from __future__ import annotations

import heapq

from managed_ledger import Position


class DelayedDeliveryTracker:
    def __init__(self, tick_ms: int = 1000, max_size: int = 1_000_000) -> None:
        self.tick_ms = max(1, tick_ms)
        self.max_size = max_size
        self._heap: list[tuple[int, Position, int]] = []
        self._positions: set[Position] = set()

    def __len__(self) -> int:
        return len(self._positions)

    def add(self, position: Position, deliver_at_ms: int, sticky_hash: int = -1) -> bool:
        """Hold ``position`` back; False if the tracker is full (deliver it now instead)."""
        if position in self._positions:
            return True
        if len(self._positions) >= self.max_size:
            return False
        heapq.heappush(self._heap, (deliver_at_ms, position, sticky_hash))
        self._positions.add(position)
        return True

    def remove(self, position: Position) -> None:
        # Lazy deletion: popped entries not in the set are skipped.
        self._positions.discard(position)

    def clear(self) -> None:
        self._heap.clear()
        self._positions.clear()

    def next_due_ms(self) -> int | None:
        while self._heap and self._heap[0][1] not in self._positions:
            heapq.heappop(self._heap)
        if not self._heap:
            return None
        # Round up to the tick so timers coalesce.
        t = self._heap[0][0]
        return t + (-t % self.tick_ms)

    def pop_due(self, now_ms: int) -> list[tuple[Position, int]]:
        out: list[tuple[Position, int]] = []
        while self._heap and self._heap[0][0] <= now_ms:
            _, pos, h = heapq.heappop(self._heap)
            if pos in self._positions:
                self._positions.discard(pos)
                out.append((pos, h))
        return out
