"""The checker: what a chaos run's history says about durability, order and duplicates (pure).

Per topic: sends by outcome and the longest unavailability window (the longest time without
an acknowledged send). Per subscription:

* **lost**: an acknowledged send that no consumer of the subscription ever received (the
  final drain included). Always a failure.
* **corrupt**: a delivery whose payload hash differs from its send's. Always a failure.
* **order violations**: where the subscription type promises order, a message received by a
  consumer for the first time after that consumer had already received a later one of the
  same stream. Streams: Exclusive/Failover, per (consumer, partition, producer);
  Key_Shared, per (consumer, key). Re-receiving an earlier message (a redelivery after a
  reconnect rewinds to the mark-delete position) is not a violation; Shared promises nothing.
  Checked per consumer because a consumer's prefetched queue may still be read after the
  broker moved a key or the active role elsewhere.
* **duplicates**: one (producer, seq) stored under two message ids. A failure only when the
  topic has deduplication on (a producer re-sending after a reconnect duplicates otherwise).
* **unacked deliveries**: deliveries of sends whose outcome was failed/unknown (allowed).
* **lost acks**: a delivery of a message at or below a mark-delete position the broker had
  reported earlier (allowed by Pulsar after a broker crash; counted).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from tests.chaos.history import ACKED, Delivery, History, Send, SubscriptionSpec

ORDERED_BY_PRODUCER = {"Exclusive", "Failover"}
ORDERED_BY_KEY = {"Key_Shared"}
MAX_LISTED = 20  # examples kept per finding kind: the counts are complete


@dataclass
class SubscriptionReport:
    topic: str
    subscription: str
    type: str
    dedup: bool
    delivered: int = 0  # deliveries, redeliveries included
    distinct: int = 0  # distinct (producer, seq)
    lost: int = 0
    corrupt: int = 0
    order_violations: int = 0
    duplicates: int = 0
    redeliveries: int = 0
    unacked_deliveries: int = 0
    lost_acks: int = 0
    examples: dict[str, list[str]] = field(default_factory=dict)

    def note(self, kind: str, text: str) -> None:
        lst = self.examples.setdefault(kind, [])
        if len(lst) < MAX_LISTED:
            lst.append(text)

    @property
    def failures(self) -> list[str]:
        out = []
        if self.lost:
            out.append(f"{self.lost} acknowledged messages lost")
        if self.corrupt:
            out.append(f"{self.corrupt} corrupt deliveries")
        if self.order_violations:
            out.append(f"{self.order_violations} order violations")
        if self.duplicates and self.dedup:
            out.append(f"{self.duplicates} duplicates with deduplication on")
        return out


@dataclass
class TopicReport:
    topic: str
    sent: int = 0
    acked: int = 0
    failed: int = 0
    unknown: int = 0
    longest_unavailable_s: float = 0.0
    unavailable_from_s: float = 0.0


@dataclass
class Report:
    topics: list[TopicReport]
    subscriptions: list[SubscriptionReport]
    foreign: list[str]

    @property
    def failures(self) -> list[str]:
        out = [f"{s.topic}/{s.subscription}: {f}" for s in self.subscriptions for f in s.failures]
        out += [f"foreign delivery: {f}" for f in self.foreign[:MAX_LISTED]]
        return out

    @property
    def ok(self) -> bool:
        return not self.failures

    def totals(self) -> dict[str, Any]:
        keys = ("delivered", "distinct", "lost", "corrupt", "order_violations", "duplicates",
                "redeliveries", "unacked_deliveries", "lost_acks")
        tot: dict[str, Any] = {k: sum(getattr(s, k) for s in self.subscriptions) for k in keys}
        tot["duplicates_dedup_on"] = sum(s.duplicates for s in self.subscriptions if s.dedup)
        tot["duplicates_dedup_off"] = sum(s.duplicates for s in self.subscriptions if not s.dedup)
        for k in ("sent", "acked", "failed", "unknown"):
            tot[k] = sum(getattr(t, k) for t in self.topics)
        worst = max(self.topics, key=lambda t: t.longest_unavailable_s, default=None)
        tot["longest_unavailable_s"] = round(worst.longest_unavailable_s, 2) if worst else 0.0
        tot["longest_unavailable_topic"] = worst.topic if worst else ""
        return tot

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "failures": self.failures, "totals": self.totals(),
                "topics": [asdict(t) for t in self.topics],
                "subscriptions": [asdict(s) for s in self.subscriptions]}


def check(history: History) -> Report:
    sends_by_topic: dict[str, list[Send]] = defaultdict(list)
    for s in history.sends:
        sends_by_topic[s.topic].append(s)
    end = history.t_end if history.t_end is not None else history.now()
    topics = [topic_report(t, sends_by_topic.get(t, []), end)
              for t in sorted({s.topic for s in history.subscriptions} | set(sends_by_topic))]
    deliveries: dict[tuple[str, str], list[Delivery]] = defaultdict(list)
    for d in history.deliveries:
        deliveries[(d.topic, d.subscription)].append(d)
    marks = mark_deletes(history)
    subs = [subscription_report(spec, sends_by_topic.get(spec.topic, []),
                                deliveries.get((spec.topic, spec.name), []), marks)
            for spec in history.subscriptions]
    return Report(topics, subs, list(history.foreign))


def topic_report(topic: str, sends: list[Send], end: float) -> TopicReport:
    rep = TopicReport(topic, sent=len(sends))
    acked_at = []
    for s in sends:
        if s.outcome == ACKED:
            rep.acked += 1
            acked_at.append(s.t_done if s.t_done is not None else s.t_sent)
        elif s.outcome == "failed":
            rep.failed += 1
        else:
            rep.unknown += 1
    if sends:
        # From the first send to the end of sending: the longest stretch without an ack.
        start = min(s.t_sent for s in sends)
        stop = max(max(s.t_sent for s in sends), max(acked_at, default=start))
        stop = min(stop, end)
        points = [start, *sorted(acked_at), stop]
        gap, at = max(((b - a, a) for a, b in zip(points, points[1:])), default=(0.0, start))
        rep.longest_unavailable_s, rep.unavailable_from_s = round(max(gap, 0.0), 3), round(at, 3)
    return rep


def mark_deletes(history: History) -> dict[tuple[str, str], list[tuple[float, tuple[int, int]]]]:
    """Per (partition, subscription): (time, highest mark-delete reported so far), increasing."""
    out: dict[tuple[str, str], list[tuple[float, tuple[int, int]]]] = defaultdict(list)
    for c in sorted(history.cursors, key=lambda c: c.t):
        seq = out[(c.partition, c.subscription)]
        if not seq or c.mark_delete > seq[-1][1]:
            seq.append((c.t, c.mark_delete))
    return out


def _confirmed_before(marks: list[tuple[float, tuple[int, int]]], t: float) -> tuple[int, int] | None:
    best = None
    for at, pos in marks:
        if at >= t:
            break
        best = pos
    return best


def subscription_report(spec: SubscriptionSpec, sends: list[Send], deliveries: list[Delivery],
                        marks: dict[tuple[str, str], list[tuple[float, tuple[int, int]]]]) -> SubscriptionReport:
    rep = SubscriptionReport(spec.topic, spec.name, spec.type, spec.dedup, delivered=len(deliveries))
    by_id = {(s.producer, s.seq): s for s in sends}
    ids_of: dict[tuple[str, int], set[tuple[int, int, int, int]]] = defaultdict(set)
    seen_count: dict[tuple[str, int], int] = defaultdict(int)
    for d in deliveries:
        ident = (d.producer, d.seq)
        ids_of[ident].add(d.msg_id)
        seen_count[ident] += 1
        send = by_id.get(ident)
        if send is not None and send.hash != d.hash:
            rep.corrupt += 1
            rep.note("corrupt", f"{d.producer}:{d.seq} at {d.msg_id}")
        if send is None or send.outcome != ACKED:
            if seen_count[ident] == 1:
                rep.unacked_deliveries += 1
        mark = _confirmed_before(marks.get((d.partition, spec.name), []), d.t)
        if mark is not None and (d.msg_id[1], d.msg_id[2]) <= mark:
            rep.lost_acks += 1
            rep.note("lost_acks", f"{d.producer}:{d.seq} {d.msg_id} at t={d.t:.2f} after mark-delete {mark}")
    rep.distinct = len(ids_of)
    rep.redeliveries = sum(seen_count.values()) - len(seen_count)
    for ident, ids in sorted(ids_of.items()):
        if len(ids) > 1:
            rep.duplicates += len(ids) - 1
            rep.note("duplicates", f"{ident[0]}:{ident[1]} stored as {sorted(ids)}")
    for s in sends:
        if s.outcome == ACKED and (s.producer, s.seq) not in ids_of:
            rep.lost += 1
            rep.note("lost", f"{s.producer}:{s.seq} acked as {s.msg_id} at t={s.t_done}")
    if spec.type in ORDERED_BY_PRODUCER or spec.type in ORDERED_BY_KEY:
        check_order(spec, deliveries, rep)
    return rep


def check_order(spec: SubscriptionSpec, deliveries: list[Delivery], rep: SubscriptionReport) -> None:
    """Seq numbers only order one producer's sends, so a Key_Shared stream is (consumer, key,
    producer): each producer's messages of a key must reach their consumer in order."""
    highest: dict[tuple[Any, ...], Delivery] = {}
    seen: set[tuple[str, str, int]] = set()  # (consumer, producer, seq) already received
    for d in deliveries:  # in the order the consumers received them
        if (d.consumer, d.producer, d.seq) in seen:
            continue
        seen.add((d.consumer, d.producer, d.seq))
        if spec.type in ORDERED_BY_KEY:
            stream: tuple[Any, ...] = (d.consumer, d.key, d.producer)
        else:
            stream = (d.consumer, d.partition, d.producer)
        prev = highest.get(stream)
        if prev is not None and d.seq < prev.seq:
            rep.order_violations += 1
            rep.note("order", f"{d.consumer} got {d.producer}:{d.seq} {d.msg_id} after "
                              f"{prev.producer}:{prev.seq} {prev.msg_id} on {d.partition} key={d.key}")
        else:
            highest[stream] = d
