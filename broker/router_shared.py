"""Shared routing: round-robin over consumers with permits, by priority level.

Consumers with the lowest ``priority_level`` number are served first; a lower-priority
consumer gets messages only while every higher-priority one is out of permits (Pulsar's
rule). Within a level each consumer gets up to ``dispatcher_max_round_robin_batch_size``
messages before the next one is served. Entries nobody can take now go back to the replay set
(not counted as a redelivery).
"""

from __future__ import annotations

from broker.consumer import Consumer, Delivery


class SharedRouter:
    def __init__(self, round_robin_batch: int = 20) -> None:
        self.consumers: list[Consumer] = []
        self.round_robin_batch = max(1, round_robin_batch)
        self._next = 0  # rotates the starting consumer between calls

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)

    def budget(self) -> int:
        return sum(c.room for c in self.consumers if c.available)

    def consumer_for_hash(self, sticky_hash: int) -> Consumer | None:
        return next((c for c in self.consumers if c.available), None)

    def assign(self, deliveries: list[Delivery], held: set[Consumer]) -> tuple[dict[Consumer, list[Delivery]], list[Delivery]]:
        n = len(self.consumers)
        if not n:
            return {}, deliveries
        start = self._next % n
        rotated = self.consumers[start:] + self.consumers[:start]
        # Simulated permits so one pass can spread a read over several consumers.
        room = {c: c.room for c in rotated if c.available}
        ring = sorted((c for c in rotated if c in room), key=lambda c: c.priority_level)  # stable
        out: dict[Consumer, list[Delivery]] = {}
        leftovers: list[Delivery] = []
        current: Consumer | None = None
        given = 0
        for d in deliveries:
            if current is None or room[current] <= 0 or given >= self.round_robin_batch:
                current = self._pick(ring, room, current)
                given = 0
            if current is None:
                leftovers.append(d)
                continue
            out.setdefault(current, []).append(d)
            room[current] -= d.num_messages
            given += d.num_messages
        if current is not None:
            self._next = (self.consumers.index(current) + 1) % n
        return out, leftovers

    @staticmethod
    def _pick(ring: list[Consumer], room: dict[Consumer, int], after: Consumer | None) -> Consumer | None:
        """Next consumer with room: the best priority level first, round-robin within it."""
        with_room = [c for c in ring if room[c] > 0]
        if not with_room:
            return None
        level = with_room[0].priority_level
        same = [c for c in with_room if c.priority_level == level]
        if after is not None and after in ring:
            later = [c for c in same if ring.index(c) > ring.index(after)]
            if later:
                return later[0]
        return same[0]
