"""Nack and ack-timeout deadlines (pure; clients/redelivery_tracker.py)."""

from clients.redelivery_tracker import RedeliveryTracker


def test_nack_due_after_its_delay_and_cancelled_by_an_ack() -> None:
    t = RedeliveryTracker(nack_delay_ms=1000, ack_timeout_ms=0)
    t.nacked((1, 5), now=10.0)
    t.nacked((1, 2), now=10.5)
    t.delivered((1, 7), now=10.0)  # no ack timeout configured: not tracked
    assert t.pop_due(10.9) == []
    assert t.pop_due(11.0) == [(1, 5)]
    t.acked((1, 2))
    assert t.pop_due(20.0) == []
    assert abs(t.tick_s - 1 / 3) < 1e-9


def test_ack_timeout_first_delivery_counts_and_cumulative_ack_clears() -> None:
    t = RedeliveryTracker(nack_delay_ms=60_000, ack_timeout_ms=300)
    t.delivered((1, 1), now=0.0)
    t.delivered((1, 1), now=0.2)  # redelivered copy: the first deadline stays
    t.delivered((2, 0), now=0.0)
    t.delivered((3, 0), now=0.0)
    t.acked_up_to((2, 0))
    assert t.pop_due(0.3) == [(3, 0)]
    t.delivered((4, 0), now=1.0)
    t.nacked((4, 0), now=1.0)  # a nack replaces the ack timeout
    assert t.pop_due(1.5) == []
    assert t.pop_due(61.0) == [(4, 0)]
    assert abs(t.tick_s - 0.1) < 1e-9
