"""Round-robin distribution schedule and the quorum-coverage rules of ledger recovery (pure).

* Entry ``e`` of an ensemble of size E is written to ensemble indices ``(e + i) mod E`` for
  ``i < WQ`` (BookKeeper's ``RoundRobinDistributionSchedule``).
* Fencing completes on *quorum coverage* of the last ensemble: for every write set (every
  window of WQ consecutive bookies), fewer than AQ bookies are still unknown, so no write set
  holds AQ unfenced bookies and the old writer can no longer complete an add
  (``RRQuorumCoverageSet``). E-AQ+1 fenced replies always suffice.
* A recovery read of one entry is *recoverable* on the first positive reply and
  *unrecoverable* only after WQ-AQ+1 negative (NO_ENTRY / NO_LEDGER) replies; errors and
  timeouts are *unknown*, never negative. When every reply is in and neither threshold was
  reached, the outcome is UNKNOWN and recovery must abort instead of closing the ledger.
"""

from __future__ import annotations

import enum

from bookie.protocol import Status

__all__ = [
    "write_set",
    "ReplyKind",
    "classify",
    "QuorumCoverage",
    "RecoveryOutcome",
    "RecoveryReadTracker",
    "CLIENT_TIMEOUT",
    "CLIENT_CONNECTION_LOST",
    "CLIENT_BAD_REPLY",
]

# Client-side pseudo statuses for replies that never came (or came garbled): all "unknown".
CLIENT_TIMEOUT = -1
CLIENT_CONNECTION_LOST = -2
CLIENT_BAD_REPLY = -3


def write_set(entry_id: int, ensemble_size: int, write_quorum: int) -> list[int]:
    """Ensemble indices that store ``entry_id``."""
    base = entry_id % ensemble_size
    return [(base + i) % ensemble_size for i in range(write_quorum)]


class ReplyKind(enum.Enum):
    POSITIVE = "positive"
    NEGATIVE = "negative"
    UNKNOWN = "unknown"


_NEGATIVE = frozenset({int(Status.NO_ENTRY), int(Status.NO_LEDGER)})


def classify(status: int) -> ReplyKind:
    """OK is positive; NO_ENTRY / NO_LEDGER are negative; anything else is unknown."""
    if status == Status.OK:
        return ReplyKind.POSITIVE
    if status in _NEGATIVE:
        return ReplyKind.NEGATIVE
    return ReplyKind.UNKNOWN


class QuorumCoverage:
    """Tracks which ensemble indices have given a *definite* reply (positive or negative).

    ``covered`` once every write set has more than WQ-AQ definite replies;
    ``impossible`` once too many unknown replies make coverage unreachable.
    """

    def __init__(self, ensemble_size: int, write_quorum: int, ack_quorum: int) -> None:
        self.e, self.wq, self.aq = ensemble_size, write_quorum, ack_quorum
        self._definite = [False] * ensemble_size
        self._failed = [False] * ensemble_size

    def add(self, index: int, kind: ReplyKind) -> None:
        if kind is ReplyKind.UNKNOWN:
            self._failed[index] = True
        else:
            self._definite[index] = True

    def _windows(self) -> range:
        # With E == WQ every window is the whole ensemble: check it once.
        return range(1 if self.e == self.wq else self.e)

    @property
    def covered(self) -> bool:
        need = self.wq - self.aq + 1
        for start in self._windows():
            n = sum(self._definite[(start + i) % self.e] for i in range(self.wq))
            if n < need:
                return False
        return True

    @property
    def impossible(self) -> bool:
        """Some write set already has AQ or more bookies that failed (can never become definite)."""
        for start in self._windows():
            if sum(self._failed[(start + i) % self.e] for i in range(self.wq)) >= self.aq:
                return True
        return False


class RecoveryOutcome(enum.Enum):
    PENDING = "pending"
    RECOVERABLE = "recoverable"
    UNRECOVERABLE = "unrecoverable"
    UNKNOWN = "unknown"


class RecoveryReadTracker:
    """The recoverability decision for one entry from its write set's replies (the seed's rules)."""

    __slots__ = ("wq", "aq", "positives", "negatives", "unknowns")

    def __init__(self, write_quorum: int, ack_quorum: int) -> None:
        self.wq, self.aq = write_quorum, ack_quorum
        self.positives = self.negatives = self.unknowns = 0

    def add(self, kind: ReplyKind) -> RecoveryOutcome:
        if kind is ReplyKind.POSITIVE:
            self.positives += 1
        elif kind is ReplyKind.NEGATIVE:
            self.negatives += 1
        else:
            self.unknowns += 1
        return self.outcome

    @property
    def negative_threshold(self) -> int:
        return self.wq - self.aq + 1

    @property
    def outcome(self) -> RecoveryOutcome:
        if self.positives:
            return RecoveryOutcome.RECOVERABLE
        if self.negatives >= self.negative_threshold:
            return RecoveryOutcome.UNRECOVERABLE
        if self.positives + self.negatives + self.unknowns >= self.wq:
            return RecoveryOutcome.UNKNOWN
        return RecoveryOutcome.PENDING
