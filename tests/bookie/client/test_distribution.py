"""Pure tests of the distribution schedule, quorum coverage and recovery-read decisions."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bookie.client.distribution import (
    CLIENT_CONNECTION_LOST,
    CLIENT_TIMEOUT,
    QuorumCoverage,
    RecoveryOutcome,
    RecoveryReadTracker,
    ReplyKind,
    classify,
    write_set,
)
from bookie.protocol import Status

P, N, U = ReplyKind.POSITIVE, ReplyKind.NEGATIVE, ReplyKind.UNKNOWN


def test_write_set_round_robin():
    assert write_set(0, 3, 2) == [0, 1]
    assert write_set(2, 3, 2) == [2, 0]
    assert write_set(7, 5, 3) == [2, 3, 4]
    assert write_set(4, 5, 3) == [4, 0, 1]
    # every index stores exactly WQ of every E consecutive entries
    for e_size, wq in [(3, 2), (5, 3), (4, 4)]:
        counts = [0] * e_size
        for e in range(e_size):
            for i in write_set(e, e_size, wq):
                counts[i] += 1
        assert counts == [wq] * e_size


def test_classify():
    assert classify(Status.OK) is P
    assert classify(Status.NO_ENTRY) is N and classify(Status.NO_LEDGER) is N
    for s in (Status.IO, Status.FENCED, Status.UNAUTHORIZED, Status.TOO_MANY_REQUESTS, Status.BAD_REQUEST,
              CLIENT_TIMEOUT, CLIENT_CONNECTION_LOST):
        assert classify(s) is U


def _brute_force_covered(e_size: int, wq: int, aq: int, definite: set[int]) -> bool:
    """Reference: no write set contains AQ bookies without a definite reply."""
    for start in range(e_size):
        ws = {(start + i) % e_size for i in range(wq)}
        for combo in itertools.combinations(ws, aq):
            if not set(combo) & definite:
                return False
    return True


@given(st.data())
def test_coverage_matches_definition(data):
    e_size = data.draw(st.integers(1, 7))
    wq = data.draw(st.integers(1, e_size))
    aq = data.draw(st.integers(1, wq))
    definite = data.draw(st.sets(st.integers(0, e_size - 1)))
    qc = QuorumCoverage(e_size, wq, aq)
    for i in definite:
        qc.add(i, P if i % 2 else N)
    assert qc.covered == _brute_force_covered(e_size, wq, aq, definite)
    # (E - AQ) + 1 definite replies always reach coverage (the seed's fencing threshold)
    if len(definite) >= e_size - aq + 1:
        assert qc.covered


def test_coverage_examples():
    # E=3 WQ=2 AQ=2: one reply is not enough, any two are
    qc = QuorumCoverage(3, 2, 2)
    qc.add(1, N)
    assert not qc.covered
    qc.add(2, P)
    assert qc.covered
    # E=5 WQ=2 AQ=2: alternate bookies cover every write set with 3 replies < E-AQ+1 = 4
    qc = QuorumCoverage(5, 2, 2)
    for i in (0, 2, 4):
        qc.add(i, P)
    assert qc.covered
    # E=3 WQ=3 AQ=2: two failures make it impossible
    qc = QuorumCoverage(3, 3, 2)
    qc.add(0, U)
    assert not qc.impossible
    qc.add(1, U)
    assert qc.impossible and not qc.covered


@pytest.mark.parametrize(
    "wq,aq,replies,expected",
    [
        # positive wins as soon as it arrives (seed figure 7), whatever came before
        (3, 2, [N, P], RecoveryOutcome.RECOVERABLE),
        (3, 2, [U, U, P], RecoveryOutcome.RECOVERABLE),
        # (WQ-AQ)+1 = 2 negatives: unrecoverable (figure 8)
        (3, 2, [N, N], RecoveryOutcome.UNRECOVERABLE),
        # unknowns are never negatives: no threshold reached -> abort (figures 9, 10c)
        (3, 2, [U, U, U], RecoveryOutcome.UNKNOWN),
        (3, 2, [N, U, U], RecoveryOutcome.UNKNOWN),
        # waiting for more (figure 10), then last one decides (10a / 10b / 10c)
        (3, 2, [N, U], RecoveryOutcome.PENDING),
        (3, 2, [N, U, P], RecoveryOutcome.RECOVERABLE),
        (3, 2, [N, U, N], RecoveryOutcome.UNRECOVERABLE),
        (3, 2, [N, U, U], RecoveryOutcome.UNKNOWN),
        # the seed's truncation example: IO instead of NO_ENTRY must not count
        (3, 2, [U, N], RecoveryOutcome.PENDING),
        # AQ=1: every bookie must say no
        (3, 1, [N, N], RecoveryOutcome.PENDING),
        (3, 1, [N, N, N], RecoveryOutcome.UNRECOVERABLE),
        (3, 1, [N, N, U], RecoveryOutcome.UNKNOWN),
        # WQ=AQ=2: one negative suffices (the other copy would have been needed for the ack)
        (2, 2, [N], RecoveryOutcome.UNRECOVERABLE),
    ],
)
def test_recovery_read_decisions(wq, aq, replies, expected):
    t = RecoveryReadTracker(wq, aq)
    for r in replies:
        t.add(r)
    assert t.outcome is expected


@given(st.integers(1, 5).flatmap(lambda wq: st.tuples(st.just(wq), st.integers(1, wq),
                                                      st.lists(st.sampled_from([P, N, U]), min_size=wq, max_size=wq))))
def test_recovery_never_unrecoverable_if_ack_quorum_could_hold_it(args):
    """Unrecoverable only if the entry cannot be on AQ bookies of the write set."""
    wq, aq, replies = args
    t = RecoveryReadTracker(wq, aq)
    for r in replies:
        if t.add(r) is not RecoveryOutcome.PENDING:
            break
    seen = replies[: t.positives + t.negatives + t.unknowns]
    if t.outcome is RecoveryOutcome.UNRECOVERABLE:
        # the bookies not known negative cannot form an ack quorum
        assert wq - seen.count(N) < aq
    if t.outcome is RecoveryOutcome.RECOVERABLE:
        assert P in seen
