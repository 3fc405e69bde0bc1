"""The data behind Pulsar's ``internalStats`` for one managed ledger (JSON-ready dict)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from managed_ledger.ledger import ManagedLedger


def internal_stats(ml: "ManagedLedger") -> dict[str, Any]:
    current = ml.current_ledger_info
    cursors = {c.name: c.stats() for c in ml.cursors.values()}
    for c in ml.non_durable_cursors:
        cursors[c.name] = c.stats()
    return {
        "entriesAddedCounter": ml.entries_added_counter,
        "numberOfEntries": ml.number_of_entries,
        "totalSize": ml.total_size,
        "currentLedgerEntries": current.entries if current else 0,
        "currentLedgerSize": current.size if current else 0,
        "lastLedgerCreatedTimestamp": ml.last_ledger_created_ms,
        "waitingCursorsCount": 0,
        "pendingAddEntriesCount": ml.pending_add_entries,
        "lastConfirmedEntry": str(ml.last_confirmed_entry),
        "state": ml.state.value,
        "ledgers": [
            {"ledgerId": li.ledger_id, "entries": li.entries, "size": li.size, "timestamp": li.timestamp_ms,
             "firstEntryTimestamp": li.first_entry_ms, "offloaded": False}
            for li in ml.ledgers
        ],
        "cursors": cursors,
        "terminatedPosition": str(ml.terminated_position) if ml.terminated_position else None,
        "ledgersDeletedCounter": ml.ledgers_deleted_counter,
        "entryCache": {
            "size": ml.cache.size,
            "hits": ml.cache.manager.hits,
            "misses": ml.cache.manager.misses,
            "evictions": ml.cache.manager.evictions,
        },
    }
