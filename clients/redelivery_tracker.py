"""Which delivered entries the consumer asks the broker to redeliver, and when.

Two deadlines per entry ``(ledger, entry)``, as the official client's NegativeAcksTracker and
UnAckedMessageTracker: a nacked entry is due ``negative_ack_redelivery_delay_ms`` after the
nack; with ``unacked_messages_timeout_ms`` set, a delivered entry not acknowledged within that
time is due too. An acknowledgement of the whole entry cancels both. Pure bookkeeping: the
consumer's timer asks for what is due and sends the REDELIVER command itself.
"""

from __future__ import annotations

Key = tuple[int, int]


class RedeliveryTracker:
    __slots__ = ("_nack_delay_s", "_ack_timeout_s", "_nacked", "_unacked")

    def __init__(self, nack_delay_ms: int | None, ack_timeout_ms: int | None) -> None:
        self._nack_delay_s = (nack_delay_ms or 0) / 1000
        self._ack_timeout_s = (ack_timeout_ms or 0) / 1000  # None or 0 = no ack timeout
        self._nacked: dict[Key, float] = {}  # key -> due time (trio clock)
        self._unacked: dict[Key, float] = {}

    @property
    def tick_s(self) -> float:
        """How often to look for due entries: a third of the shortest delay, within 10 ms..1 s."""
        delays = [self._nack_delay_s] + ([self._ack_timeout_s] if self._ack_timeout_s else [])
        return min(1.0, max(0.01, min(delays) / 3))

    def delivered(self, key: Key, now: float) -> None:
        """An entry reached the application (starts its ack timeout, if any; the first one counts)."""
        if self._ack_timeout_s:
            self._unacked.setdefault(key, now + self._ack_timeout_s)

    def nacked(self, key: Key, now: float) -> None:
        self._unacked.pop(key, None)
        self._nacked[key] = now + self._nack_delay_s

    def acked(self, key: Key) -> None:
        """The whole entry is acknowledged (a nack of a batch sibling survives sibling acks)."""
        if self._nacked:
            self._nacked.pop(key, None)
        if self._unacked:
            self._unacked.pop(key, None)

    def acked_up_to(self, key: Key) -> None:
        """A cumulative ack: no ack timeout for anything at or before ``key``."""
        if self._unacked:
            for k in [k for k in self._unacked if k <= key]:
                del self._unacked[k]

    def forget_unacked(self) -> None:
        """Everything unacked is being redelivered anyway (redeliver-all, seek)."""
        self._unacked.clear()

    def forget_nacked(self) -> None:
        self._nacked.clear()

    def pop_due(self, now: float) -> list[Key]:
        """The entries whose deadline passed, in position order, no longer tracked."""
        due = [k for k, t in self._nacked.items() if t <= now]
        due += [k for k, t in self._unacked.items() if t <= now]
        for k in due:
            self._nacked.pop(k, None)
            self._unacked.pop(k, None)
        return sorted(set(due))
