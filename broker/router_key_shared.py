"""Key_Shared routing: a key always goes to the same consumer.

A key (ordering key, else partition key, else ``NONE_KEY``) hashes with Murmur3-32 into
0..65535. AUTO_SPLIT gives the first consumer the whole range and splits the largest range in
half for each new consumer (a leaving consumer's range merges into its neighbour); STICKY
uses the ranges the consumer declared and refuses overlaps. An entry whose consumer cannot
take it now is held back, and so is every later entry of that consumer, to keep key order.
When consumers come or go, a key may move to a consumer while its earlier messages are still
pending on another one: that key's hash is draining and its entries wait until the other
consumer acks or returns them (Pulsar's draining hashes, PIP-379), so a key's messages
never reach a consumer out of order.
"""

from __future__ import annotations

import bisect

from broker.consumer import Consumer, Delivery
from broker.errors import BrokerError
from clients.protocol.murmur3 import murmur3_32

RANGE_SIZE = 65536
NONE_KEY = b"NONE_KEY"
AUTO_SPLIT, STICKY = 0, 1


class ConsumerAssignError(BrokerError):
    server_error = "ConsumerAssignError"
    http_status = 409


def sticky_hash(key: bytes | None) -> int:
    # Pulsar: (murmur3_32(key) & Integer.MAX_VALUE) % 65536, i.e. the low 16 bits.
    return murmur3_32(key if key else NONE_KEY) & (RANGE_SIZE - 1)


class KeySharedRouter:
    def __init__(self, mode: int = AUTO_SPLIT) -> None:
        self.mode = mode
        self.consumers: list[Consumer] = []
        # Sorted range ends (inclusive) and the consumer owning [previous end + 1, end].
        self._ends: list[int] = []
        self._owners: list[Consumer] = []
        self._sticky: list[tuple[int, int, Consumer]] = []

    def add_consumer(self, consumer: Consumer) -> None:
        if self.mode == STICKY:
            ranges = consumer.key_ranges or [(0, RANGE_SIZE - 1)]
            for a, b in ranges:
                if a < 0 or b >= RANGE_SIZE or a > b:
                    raise ConsumerAssignError(f"invalid hash range [{a}, {b}]")
                for x, y, other in self._sticky:
                    if a <= y and x <= b:
                        raise ConsumerAssignError(f"range [{a}, {b}] overlaps consumer {other.name}'s [{x}, {y}]")
            self._sticky.extend((a, b, consumer) for a, b in ranges)
            self._sticky.sort(key=lambda r: r[0])
        else:
            self._split_for(consumer)
        self.consumers.append(consumer)

    def _split_for(self, consumer: Consumer) -> None:
        if not self._ends:
            self._ends, self._owners = [RANGE_SIZE - 1], [consumer]
            consumer.key_ranges = [(0, RANGE_SIZE - 1)]
            return
        # Split the largest range; the newcomer takes its lower half.
        best, best_len = 0, -1
        for i, end in enumerate(self._ends):
            start = self._ends[i - 1] + 1 if i else 0
            if end - start > best_len:
                best, best_len = i, end - start
        start = self._ends[best - 1] + 1 if best else 0
        mid = start + best_len // 2
        self._ends.insert(best, mid)
        self._owners.insert(best, consumer)
        self._refresh_ranges()

    def _refresh_ranges(self) -> None:
        for c in self.consumers + self._owners:
            c.key_ranges = []
        start = 0
        for end, c in zip(self._ends, self._owners):
            assert c.key_ranges is not None
            c.key_ranges.append((start, end))
            start = end + 1

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        if self.mode == STICKY:
            self._sticky = [r for r in self._sticky if r[2] is not consumer]
            return
        while consumer in self._owners:
            i = self._owners.index(consumer)
            if len(self._owners) == 1:
                self._ends, self._owners = [], []
                break
            # Merge into the next range (or the previous one for the last range).
            if i < len(self._owners) - 1:
                del self._ends[i], self._owners[i]
            else:
                del self._owners[i]
                self._ends.pop(i - 1)
        self._refresh_ranges()

    def owner(self, h: int) -> Consumer | None:
        if self.mode == STICKY:
            for a, b, c in self._sticky:
                if a <= h <= b:
                    return c
            return None
        i = bisect.bisect_left(self._ends, h)
        return self._owners[i] if i < len(self._owners) else None

    def budget(self) -> int:
        return sum(c.room for c in self.consumers if c.available)

    def consumer_for_hash(self, h: int) -> Consumer | None:
        c = self.owner(h)
        return c if c is not None and c.available and not self.draining(h, c) else None

    def draining(self, h: int, owner: Consumer) -> bool:
        """Whether another consumer still holds unacked messages of hash ``h``."""
        return any(c is not owner and c.pending_hashes.get(h) for c in self.consumers)

    def assign(self, deliveries: list[Delivery], held: set[Consumer]) -> tuple[dict[Consumer, list[Delivery]], list[Delivery]]:
        out: dict[Consumer, list[Delivery]] = {}
        room: dict[Consumer, int] = {}
        blocked = set(held)
        leftovers: list[Delivery] = []
        for d in deliveries:
            c = self.owner(d.sticky_hash)
            if c is not None and c not in blocked and self.draining(d.sticky_hash, c):
                blocked.add(c)
            if c is None or c in blocked or not c.available:
                leftovers.append(d)
                if c is not None:
                    blocked.add(c)
                continue
            left = room.setdefault(c, c.room)
            if left <= 0:
                leftovers.append(d)
                blocked.add(c)
                continue
            room[c] = left - d.num_messages
            out.setdefault(c, []).append(d)
        return out, leftovers
