"""The chaos checker on synthetic histories: each finding kind, and what it must not flag."""

from __future__ import annotations

import pytest

from tests.chaos.checker import Report, SubscriptionReport, check
from tests.chaos.history import ACKED, FAILED, UNKNOWN, History, PayloadError, SubscriptionSpec, \
    decode_payload, encode_payload


class Script:
    """Builds a History with explicit times (no clock)."""

    def __init__(self, sub_type: str = "Exclusive", dedup: bool = True, topic: str = "t") -> None:
        self.h = History()
        self.topic = topic
        self.h.subscriptions.append(SubscriptionSpec(topic, "s", sub_type, dedup))
        self.sends: dict[tuple[str, int], object] = {}
        self.h.t_end = 100.0

    def send(self, producer: str, seq: int, t: float, outcome: str = ACKED, entry: int | None = None,
             key: str | None = None) -> None:
        data = encode_payload(producer, seq, key)
        s = self.h.begin_send(self.topic, producer, seq, key, data)
        s.t_sent = t
        if outcome != "pending":
            self.h.finish_send(s, outcome, (-1, 1, entry if entry is not None else seq, -1) if outcome == ACKED else None)
            s.t_done = t + 0.01

    def deliver(self, producer: str, seq: int, t: float, consumer: str = "c1", entry: int | None = None,
                key: str | None = None, data: bytes | None = None, partition: str | None = None) -> None:
        payload = data if data is not None else encode_payload(producer, seq, key)
        d = self.h.deliver(self.topic, partition or self.topic, "s", consumer, payload,
                           (-1, 1, entry if entry is not None else seq, -1))
        assert d is not None
        d.t = t

    def report(self) -> tuple[Report, SubscriptionReport]:
        rep = check(self.h)
        return rep, rep.subscriptions[0]


def test_payload_round_trip_and_foreign_payloads() -> None:
    assert decode_payload(encode_payload("p1", 42, "k3")) == ("p1", 42, "k3")
    assert decode_payload(encode_payload("p1", 0, None, size=10)) == ("p1", 0, None)
    with pytest.raises(PayloadError):
        decode_payload(b"hello")
    h = History()
    assert h.deliver("t", "t", "s", "c", b"garbage", (-1, 1, 1, -1)) is None
    h.subscriptions.append(SubscriptionSpec("t", "s", "Shared", False))
    assert check(h).failures == ["foreign delivery: t/s: not a chaos payload: b'garbage'"]


def test_clean_history_passes() -> None:
    sc = Script()
    for i in range(5):
        sc.send("p", i, t=i)
        sc.deliver("p", i, t=i + 0.5)
    rep, sub = sc.report()
    assert rep.ok and sub.distinct == 5 and sub.lost == sub.order_violations == sub.duplicates == 0


def test_acknowledged_but_never_delivered_is_lost() -> None:
    sc = Script()
    for i in range(3):
        sc.send("p", i, t=i)
    sc.deliver("p", 0, t=5)
    sc.deliver("p", 2, t=6)
    rep, sub = sc.report()
    assert sub.lost == 1 and not rep.ok
    assert "p:1" in sub.examples["lost"][0]


def test_failed_and_unknown_sends_may_be_missing_or_delivered() -> None:
    sc = Script()
    sc.send("p", 0, t=0, outcome=FAILED)
    sc.send("p", 1, t=1, outcome=UNKNOWN)
    sc.send("p", 2, t=2, outcome="pending")
    sc.deliver("p", 1, t=3)
    rep, sub = sc.report()
    assert rep.ok and sub.unacked_deliveries == 1 and sub.lost == 0
    assert [t.unknown for t in rep.topics] == [2] and [t.failed for t in rep.topics] == [1]


def test_order_violation_per_producer_on_exclusive_and_not_on_shared() -> None:
    for sub_type, expected in (("Exclusive", 1), ("Failover", 1), ("Shared", 0)):
        sc = Script(sub_type)
        for i in range(3):
            sc.send("p", i, t=i)
        sc.deliver("p", 0, t=5)
        sc.deliver("p", 2, t=6)
        sc.deliver("p", 1, t=7)
        rep, sub = sc.report()
        assert sub.order_violations == expected, sub_type
        assert rep.ok == (expected == 0)


def test_redelivery_rewind_is_not_an_order_violation() -> None:
    sc = Script("Exclusive")
    for i in range(4):
        sc.send("p", i, t=i)
    for t, i in enumerate([0, 1, 2, 3, 1, 2, 3]):  # reconnect: rewind to the mark-delete position
        sc.deliver("p", i, t=10 + t)
    rep, sub = sc.report()
    assert rep.ok and sub.redeliveries == 3 and sub.duplicates == 0


def test_two_producers_interleaved_are_independent_streams() -> None:
    sc = Script("Exclusive")
    for i in range(3):
        sc.send("a", i, t=i, entry=2 * i)
        sc.send("b", i, t=i, entry=2 * i + 1)
    for p, i in [("b", 0), ("b", 1), ("a", 0), ("a", 1), ("b", 2), ("a", 2)]:
        sc.deliver(p, i, t=10, entry=2 * i + (p == "b"))
    assert sc.report()[0].ok


def test_failover_order_is_per_consumer() -> None:
    # The old active consumer still reads its prefetched queue after the switch: not a violation.
    sc = Script("Failover")
    for i in range(4):
        sc.send("p", i, t=i)
    sc.deliver("p", 0, t=5, consumer="A")
    sc.deliver("p", 2, t=6, consumer="A")
    sc.deliver("p", 1, t=7, consumer="B")
    sc.deliver("p", 2, t=8, consumer="B")
    sc.deliver("p", 3, t=9, consumer="B")
    rep, sub = sc.report()
    assert sub.order_violations == 0 and sub.lost == 0


def test_key_shared_order_is_per_key() -> None:
    sc = Script("Key_Shared")
    sends = [("p", 0, "k1"), ("p", 1, "k2"), ("p", 2, "k1"), ("p", 3, "k2")]
    for p, i, k in sends:
        sc.send(p, i, t=i, key=k)
    # Keys interleave freely across consumers; within k1, seq 2 before seq 0 is a violation.
    sc.deliver("p", 1, t=5, consumer="B", key="k2")
    sc.deliver("p", 3, t=6, consumer="B", key="k2")
    sc.deliver("p", 2, t=7, consumer="A", key="k1")
    sc.deliver("p", 0, t=8, consumer="A", key="k1")
    rep, sub = sc.report()
    assert sub.order_violations == 1 and "p:0" in sub.examples["order"][0]


def test_duplicates_fail_only_with_deduplication() -> None:
    for dedup in (True, False):
        sc = Script("Shared", dedup=dedup)
        sc.send("p", 0, t=0, entry=7)
        sc.deliver("p", 0, t=1, entry=7)
        sc.deliver("p", 0, t=2, entry=9)  # the same payload stored twice (a re-send)
        rep, sub = sc.report()
        assert sub.duplicates == 1
        assert rep.ok == (not dedup)
        assert rep.totals()["duplicates_dedup_on" if dedup else "duplicates_dedup_off"] == 1


def test_payload_hash_mismatch_is_corruption() -> None:
    sc = Script()
    sc.send("p", 0, t=0)
    sc.deliver("p", 0, t=1, data=encode_payload("p", 0, None) + b"!")
    rep, sub = sc.report()
    assert sub.corrupt == 1 and not rep.ok


def test_redelivery_below_a_reported_mark_delete_is_a_lost_ack() -> None:
    sc = Script("Exclusive")
    for i in range(3):
        sc.send("p", i, t=i)
        sc.deliver("p", i, t=i + 0.5)
    sc.h.cursor("t", "s", (1, 1))
    sc.h.cursors[-1].t = 5.0
    sc.deliver("p", 1, t=6)  # at or below the mark-delete reported at t=5: the ack was lost
    sc.deliver("p", 2, t=6.5)  # above it: an ordinary redelivery
    rep, sub = sc.report()
    assert sub.lost_acks == 1 and rep.ok  # counted, allowed


def test_longest_unavailability_window() -> None:
    sc = Script()
    for i, t in enumerate([0, 1, 2, 9, 10]):
        sc.send("p", i, t=t)
        sc.deliver("p", i, t=t + 0.1)
    rep, _ = sc.report()
    assert rep.topics[0].longest_unavailable_s == pytest.approx(7.0)
    assert rep.topics[0].unavailable_from_s == pytest.approx(2.01)
