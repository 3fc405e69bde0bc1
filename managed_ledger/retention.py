"""Which ledgers a trim deletes (pure; Pulsar's ``internalTrimLedgers`` rules).

Only ledgers strictly before the slowest durable cursor's ledger are candidates (that
ledger too when the cursor's mark-delete is its last entry and it is closed; every ledger
but the current one when there are no durable cursors). Walking them oldest first, a ledger
is deleted when its retention time expired OR the size left after deleting it (and all
older ones) is still at least the size quota; the walk stops at the first ledger that is
neither, and at the current ledger, which is never deleted. A negative limit means
unlimited on that axis, so -1/-1 never deletes and 0/0 deletes whatever is consumed.
"""

from __future__ import annotations

from typing import Sequence

from managed_ledger.config import MB
from managed_ledger.formats import LedgerInfo


def trim_bound(
    ledgers: Sequence[LedgerInfo], current_ledger_id: int, slowest_mark_delete: tuple[int, int] | None
) -> int:
    """Ledger id below which ledgers are fully consumed by every durable cursor."""
    if slowest_mark_delete is None:
        return current_ledger_id + 1
    ledger_id, entry_id = slowest_mark_delete
    for li in ledgers:
        if li.ledger_id == ledger_id:
            if ledger_id != current_ledger_id and li.entries > 0 and entry_id >= li.entries - 1:
                return ledger_id + 1
            break
    return ledger_id


def ledgers_to_delete(
    ledgers: Sequence[LedgerInfo],
    *,
    current_ledger_id: int,
    slowest_mark_delete: tuple[int, int] | None,
    retention_time_ms: int,
    retention_size_mb: int,
    now_ms: int,
) -> list[LedgerInfo]:
    bound = trim_bound(ledgers, current_ledger_id, slowest_mark_delete)
    total_size = sum(li.size for li in ledgers)
    size_to_delete = 0
    out: list[LedgerInfo] = []
    for li in ledgers:
        if li.ledger_id >= bound or li.ledger_id == current_ledger_id:
            break
        size_to_delete += li.size
        expired = retention_time_ms >= 0 and now_ms - li.timestamp_ms > retention_time_ms
        over_quota = retention_size_mb >= 0 and total_size - size_to_delete >= retention_size_mb * MB
        if not (expired or over_quota):
            break
        out.append(li)
    return out
