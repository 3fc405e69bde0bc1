"""A consumer attached to a subscription: flow permits, pending acks and delivery.

Permits count messages (a batch entry costs its ``num_messages``), as the official client
expects. ``pending_acks`` maps each delivered, not yet acked entry to its number of unacked
messages; those entries return to the subscription for redelivery when the consumer closes
or asks for redelivery.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from broker.rates import Rates

if TYPE_CHECKING:
    from broker.subscription import Subscription
    from managed_ledger import Position

SUB_TYPES = {0: "Exclusive", 1: "Shared", 2: "Failover", 3: "Key_Shared"}


@dataclass(slots=True)
class Delivery:
    """One entry on its way to a consumer: the stored bytes are sent untouched."""

    position: "Position"
    data: bytes
    num_messages: int
    redelivery_count: int = 0
    ack_set: list[int] | None = None
    sticky_hash: int = -1


class ConsumerPeer(Protocol):
    """What a consumer needs from its client connection."""

    address: str

    async def send_messages(self, consumer_id: int, partition: int, deliveries: list[Delivery],
                            consumer_epoch: int | None = None) -> None: ...

    def send_close_consumer(self, consumer_id: int) -> None: ...

    def send_active_consumer_change(self, consumer_id: int, is_active: bool) -> None: ...


@dataclass(eq=False)
class Consumer:
    subscription: "Subscription | None"  # set when the topic attaches the consumer
    peer: ConsumerPeer
    consumer_id: int
    name: str
    sub_type: int
    priority_level: int = 0
    max_unacked: int = 50000
    metadata: dict[str, str] = field(default_factory=dict)
    key_ranges: list[tuple[int, int]] | None = None  # Key_Shared sticky ranges (inclusive)
    permits: int = 0
    unacked_messages: int = 0
    # position -> (unacked messages in the entry, sticky key hash)
    pending_acks: dict["Position", tuple[int, int]] = field(default_factory=dict)
    # sticky hash -> entries pending with it (Key_Shared: a key moving to another consumer
    # waits until these are acked or returned)
    pending_hashes: dict[int, int] = field(default_factory=dict)
    connected_since: float = field(default_factory=time.time)
    closed: bool = False
    # The client's consumer epoch (bumped by each redeliver-all): echoed in MESSAGE so the
    # client drops deliveries that were in flight before its redelivery request.
    epoch: int | None = None
    msg_out: int = 0
    bytes_out: int = 0
    msg_redelivered: int = 0
    rates: Rates = field(default_factory=Rates)

    def update_rates(self) -> None:
        self.rates.update({"msgRateOut": self.msg_out, "msgThroughputOut": self.bytes_out,
                           "msgRateRedeliver": self.msg_redelivered})

    @property
    def blocked(self) -> bool:
        return self.max_unacked > 0 and self.unacked_messages >= self.max_unacked

    @property
    def room(self) -> int:
        """Messages this consumer may receive now: permits, capped by its unacked limit."""
        if self.max_unacked > 0:
            return min(self.permits, self.max_unacked - self.unacked_messages)
        return self.permits

    @property
    def available(self) -> bool:
        return not self.closed and self.permits > 0 and not self.blocked

    def add_permits(self, n: int) -> None:
        self.permits += n

    async def deliver(self, deliveries: list[Delivery], partition: int, track: bool = True) -> None:
        """Charge permits, remember what is pending and write the MESSAGE frames."""
        for d in deliveries:
            self.permits -= d.num_messages
            self.msg_out += d.num_messages
            self.bytes_out += len(d.data)
            if d.redelivery_count:
                self.msg_redelivered += d.num_messages
            if track and d.position not in self.pending_acks:
                self.unacked_messages += d.num_messages
                self.pending_acks[d.position] = (d.num_messages, d.sticky_hash)
                self.pending_hashes[d.sticky_hash] = self.pending_hashes.get(d.sticky_hash, 0) + 1
        await self.peer.send_messages(self.consumer_id, partition, deliveries, self.epoch)

    def release(self, position: "Position") -> int | None:
        """Forget a pending entry (acked or handed back); its sticky hash, or None if it
        was not pending on this consumer."""
        v = self.pending_acks.pop(position, None)
        if v is None:
            return None
        self.unacked_messages -= v[0]
        left = self.pending_hashes.get(v[1], 0) - 1
        if left > 0:
            self.pending_hashes[v[1]] = left
        else:
            self.pending_hashes.pop(v[1], None)
        return v[1]

    def partly_acked(self, position: "Position", remaining: int) -> None:
        v = self.pending_acks.get(position)
        if v is not None and remaining < v[0]:
            self.unacked_messages -= v[0] - remaining
            self.pending_acks[position] = (remaining, v[1])

    def acked_up_to(self, position: "Position") -> None:
        for p in [p for p in self.pending_acks if p <= position]:
            self.release(p)

    def take_pending(self) -> list[tuple["Position", int]]:
        """Hand back every pending entry with its sticky hash (for redelivery)."""
        out = sorted((p, v[1]) for p, v in self.pending_acks.items())
        self.pending_acks.clear()
        self.pending_hashes.clear()
        self.unacked_messages = 0
        return out

    def stats(self) -> dict[str, Any]:
        return {
            "consumerName": self.name,
            "availablePermits": self.permits,
            "unackedMessages": self.unacked_messages,
            "blockedConsumerOnUnackedMsgs": self.blocked,
            "msgRateOut": self.rates.get("msgRateOut"),
            "msgThroughputOut": self.rates.get("msgThroughputOut"),
            "msgRateRedeliver": self.rates.get("msgRateRedeliver"),
            "msgOutCounter": self.msg_out,
            "bytesOutCounter": self.bytes_out,
            "address": self.peer.address,
            "connectedSince": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.connected_since)),
            "priorityLevel": self.priority_level,
            "metadata": dict(self.metadata),
            "keyHashRanges": [f"[{a}, {b}]" for a, b in (self.key_ranges or [])],
        }
