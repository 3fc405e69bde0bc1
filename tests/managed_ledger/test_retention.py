"""The retention matrix over the pure trim algorithm."""

from __future__ import annotations

from managed_ledger.config import MB
from managed_ledger.formats import LedgerInfo
from managed_ledger.retention import ledgers_to_delete, trim_bound

NOW = 10_000_000
# three closed ledgers of 1 MB each, closed 30/20/10 minutes ago, and the current one
LEDGERS = [
    LedgerInfo(1, 100, MB, NOW - 30 * 60_000),
    LedgerInfo(2, 100, MB, NOW - 20 * 60_000),
    LedgerInfo(3, 100, MB, NOW - 10 * 60_000),
    LedgerInfo(4, 5, 1000, 0),
]


def trim(time_min: int, size_mb: int, slowest: tuple[int, int] | None = (4, 4)) -> list[int]:
    time_ms = -1 if time_min < 0 else time_min * 60_000
    out = ledgers_to_delete(
        LEDGERS,
        current_ledger_id=4,
        slowest_mark_delete=slowest,
        retention_time_ms=time_ms,
        retention_size_mb=size_mb,
        now_ms=NOW,
    )
    return [li.ledger_id for li in out]


def test_zero_zero_deletes_everything_consumed_but_current() -> None:
    assert trim(0, 0) == [1, 2, 3]
    assert trim(0, 0, slowest=None) == [1, 2, 3]  # no durable cursors


def test_unlimited_keeps_everything() -> None:
    assert trim(-1, -1) == []


def test_time_only() -> None:
    assert trim(15, -1) == [1, 2]
    assert trim(25, -1) == [1]
    assert trim(60, -1) == []


def test_size_only() -> None:
    # total 3 MB + 1000 B: deleting ledger 1 leaves >= 2 MB, deleting 2 leaves < 2 MB
    assert trim(-1, 2) == [1]
    assert trim(-1, 1) == [1, 2]
    assert trim(-1, 5) == []


def test_either_limit_is_enough_and_walk_stops_at_first_kept() -> None:
    assert trim(25, 1) == [1, 2]  # size deletes 1 and 2, time alone only 1
    assert trim(60, 2) == [1]


def test_slowest_cursor_bounds_the_trim() -> None:
    assert trim(0, 0, slowest=(2, 50)) == [1]
    assert trim(0, 0, slowest=(2, 99)) == [1, 2]  # mark-delete at last entry of closed ledger 2
    assert trim(0, 0, slowest=(1, -1)) == []
    assert trim_bound(LEDGERS, 4, (4, 4)) == 4


def test_current_ledger_never_deleted() -> None:
    single = [LedgerInfo(9, 10, 10 * MB, 0)]
    assert ledgers_to_delete(
        single, current_ledger_id=9, slowest_mark_delete=(9, 9), retention_time_ms=0, retention_size_mb=0, now_ms=NOW
    ) == []
