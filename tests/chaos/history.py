"""What a chaos run observed: every send with its outcome, every delivery, cursor snapshots.

Payloads identify themselves: ``chaos|<producer>|<seq>|<key>|<padding>`` (`encode_payload`),
so a delivery is matched to its send without trusting broker-assigned ids. `History` is the
thread-safe recorder the workload writes to (producer callbacks and consumer threads of both
client libraries run in their own threads); the checker reads its plain lists afterwards.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

MessageKey = tuple[int, int, int, int]  # (partition, ledger, entry, batch index)

ACKED, FAILED, UNKNOWN, PENDING = "acked", "failed", "unknown", "pending"


class PayloadError(ValueError):
    """A delivered payload that is not one of ours (corruption or a foreign message)."""


def encode_payload(producer: str, seq: int, key: str | None, size: int = 64) -> bytes:
    head = f"chaos|{producer}|{seq}|{key or ''}|".encode()
    return head + b"x" * max(0, size - len(head))


def decode_payload(data: bytes) -> tuple[str, int, str | None]:
    """(producer, seq, key) of a payload made by `encode_payload`."""
    parts = data.split(b"|", 4)
    if len(parts) != 5 or parts[0] != b"chaos":
        raise PayloadError(f"not a chaos payload: {data[:60]!r}")
    try:
        return parts[1].decode(), int(parts[2]), parts[3].decode() or None
    except (UnicodeDecodeError, ValueError) as exc:
        raise PayloadError(f"malformed chaos payload: {data[:60]!r}") from exc


def payload_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=8).hexdigest()


@dataclass
class Send:
    """One send attempt; `outcome` is pending until the client's callback (or the end)."""

    topic: str  # the logical topic (a partitioned topic's base name)
    producer: str
    seq: int
    key: str | None
    hash: str
    t_sent: float
    outcome: str = PENDING
    t_done: float | None = None
    msg_id: MessageKey | None = None
    error: str = ""


@dataclass
class Delivery:
    """One message handed to the application by `receive()` (the drain included)."""

    topic: str
    partition: str  # the partition topic the message came from (== topic if not partitioned)
    subscription: str
    consumer: str
    producer: str
    seq: int
    key: str | None
    hash: str
    msg_id: MessageKey
    t: float
    drain: bool = False


@dataclass
class CursorSnapshot:
    """A subscription's mark-delete position as the owning broker reported it at time `t`."""

    partition: str
    subscription: str
    mark_delete: tuple[int, int]  # (ledger, entry)
    t: float


@dataclass
class SubscriptionSpec:
    topic: str
    name: str
    type: str  # Exclusive | Failover | Shared | Key_Shared
    dedup: bool
    partitions: int = 0


@dataclass
class FaultRecord:
    kind: str
    target: str
    t_start: float
    t_end: float | None = None
    error: str = ""


@dataclass
class History:
    """Everything recorded in one run; `lock` guards appends from many threads."""

    subscriptions: list[SubscriptionSpec] = field(default_factory=list)
    sends: list[Send] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    cursors: list[CursorSnapshot] = field(default_factory=list)
    faults: list[FaultRecord] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)  # deliveries that were not our payloads
    t0: float = field(default_factory=time.monotonic)
    t_end: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    # (topic, subscription) -> (producer, seq) received so far: tells a drain when it is done
    received: dict[tuple[str, str], set[tuple[str, int]]] = field(default_factory=dict, repr=False)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def begin_send(self, topic: str, producer: str, seq: int, key: str | None, data: bytes) -> Send:
        send = Send(topic, producer, seq, key, payload_hash(data), self.now())
        with self.lock:
            self.sends.append(send)
        return send

    def finish_send(self, send: Send, outcome: str, msg_id: MessageKey | None = None, error: str = "") -> None:
        with self.lock:
            if send.outcome != PENDING:
                return  # a callback after the run gave up on it
            send.outcome, send.msg_id, send.error, send.t_done = outcome, msg_id, error, self.now()

    def deliver(self, topic: str, partition: str, subscription: str, consumer: str, data: bytes,
                msg_id: MessageKey, *, drain: bool = False) -> Delivery | None:
        try:
            producer, seq, key = decode_payload(data)
        except PayloadError as exc:
            with self.lock:
                self.foreign.append(f"{partition}/{subscription}: {exc}")
            return None
        d = Delivery(topic, partition, subscription, consumer, producer, seq, key, payload_hash(data),
                     msg_id, self.now(), drain)
        with self.lock:
            self.deliveries.append(d)
            self.received.setdefault((topic, subscription), set()).add((producer, seq))
        return d

    def missing(self, topic: str, subscription: str, among: set[tuple[str, int]] | None = None) -> set[tuple[str, int]]:
        """The acknowledged sends of `topic` (or of `among`) the subscription has not received yet."""
        with self.lock:
            got = self.received.get((topic, subscription), set())
            if among is None:
                among = {(s.producer, s.seq) for s in self.sends if s.topic == topic and s.outcome == ACKED}
            return {x for x in among if x not in got}

    def cursor(self, partition: str, subscription: str, mark_delete: tuple[int, int]) -> None:
        with self.lock:
            self.cursors.append(CursorSnapshot(partition, subscription, mark_delete, self.now()))

    def fault(self, kind: str, target: str) -> FaultRecord:
        rec = FaultRecord(kind, target, self.now())
        with self.lock:
            self.faults.append(rec)
        return rec

    def to_json(self) -> dict[str, Any]:
        with self.lock:
            return {"subscriptions": [asdict(s) for s in self.subscriptions],
                    "sends": [asdict(s) for s in self.sends],
                    "deliveries": [asdict(d) for d in self.deliveries],
                    "cursors": [asdict(c) for c in self.cursors],
                    "faults": [asdict(f) for f in self.faults], "foreign": list(self.foreign)}
