"""Exclusive and Failover routing: every entry goes to the one active consumer.

Exclusive admits a single consumer. Failover keeps all consumers, ordered by priority level
then subscribe order (non-partitioned) or by name (partitioned, active = partition index mod
consumer count, which spreads partitions evenly), and tells each one whether it is active
with ACTIVE_CONSUMER_CHANGE whenever the active consumer changes.
"""

from __future__ import annotations

from broker.consumer import Consumer, Delivery
from broker.errors import ConsumerBusyError

EXCLUSIVE, FAILOVER = 0, 2


class SingleActiveRouter:
    def __init__(self, sub_type: int, partition_index: int) -> None:
        self.sub_type = sub_type
        self.partition_index = partition_index
        self.consumers: list[Consumer] = []
        self.active: Consumer | None = None

    def add_consumer(self, consumer: Consumer) -> None:
        if self.sub_type == EXCLUSIVE and self.consumers:
            raise ConsumerBusyError("Exclusive consumer is already connected")
        self.consumers.append(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)

    def pick_active(self) -> tuple[Consumer | None, Consumer | None]:
        """Recompute the active consumer; returns (old, new)."""
        old = self.active
        if not self.consumers:
            self.active = None
        elif self.partition_index >= 0:
            ordered = sorted(self.consumers, key=lambda c: (c.priority_level, c.name))
            top = [c for c in ordered if c.priority_level == ordered[0].priority_level]
            self.active = top[self.partition_index % len(top)]
        else:
            self.active = min(self.consumers, key=lambda c: c.priority_level)
        return old, self.active

    def budget(self) -> int:
        a = self.active
        return a.room if a is not None and a.available else 0

    def consumer_for_hash(self, sticky_hash: int) -> Consumer | None:
        a = self.active
        return a if a is not None and a.available else None

    def assign(self, deliveries: list[Delivery], held: set[Consumer]) -> tuple[dict[Consumer, list[Delivery]], list[Delivery]]:
        a = self.active
        if a is None or not a.available:
            return {}, deliveries
        return {a: deliveries}, []
