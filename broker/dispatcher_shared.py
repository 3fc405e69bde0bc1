"""Shared routing: round-robin over consumers with permits.

Each consumer gets up to ``dispatcher_max_round_robin_batch_size`` messages before the next
one is served; entries no consumer can take now go back to the replay set (not counted as a
redelivery).
"""

from __future__ import annotations

from broker.consumer import Consumer, Delivery


class SharedRouter:
    def __init__(self, round_robin_batch: int = 20) -> None:
        self.consumers: list[Consumer] = []
        self.round_robin_batch = max(1, round_robin_batch)
        self._next = 0

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)

    def budget(self) -> int:
        return sum(c.permits for c in self.consumers if c.available)

    def consumer_for_hash(self, sticky_hash: int) -> Consumer | None:
        return next((c for c in self.consumers if c.available), None)

    def assign(self, deliveries: list[Delivery], held: set[Consumer]) -> tuple[dict[Consumer, list[Delivery]], list[Delivery]]:
        out: dict[Consumer, list[Delivery]] = {}
        # Simulated permits so one pass can spread a read over several consumers.
        room = {c: c.permits for c in self.consumers if c.available}
        if not room:
            return {}, deliveries
        order = self.consumers[self._next % len(self.consumers):] + self.consumers[: self._next % len(self.consumers)]
        ring = [c for c in order if c in room]
        i, given = 0, 0
        leftovers: list[Delivery] = []
        for d in deliveries:
            # Find the next consumer with room, starting from the current one.
            tried = 0
            while ring and (room[ring[i % len(ring)]] <= 0 or given >= self.round_robin_batch) and tried < len(ring):
                i, given, tried = i + 1, 0, tried + 1
            c = ring[i % len(ring)] if ring else None
            if c is None or room[c] <= 0:
                leftovers.append(d)
                continue
            out.setdefault(c, []).append(d)
            room[c] -= d.num_messages
            given += d.num_messages
        if ring:
            last = ring[i % len(ring)]
            self._next = (self.consumers.index(last) + 1) % len(self.consumers)
        return out, leftovers
