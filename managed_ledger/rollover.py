"""When to close the current ledger and start a new one (pure policy, Pulsar's rules).

A ledger is full when it holds ``max_entries_per_ledger`` entries or
``max_size_per_ledger_mb``, or is older than ``maximum_rollover_time_ms`` (stretched by a
per-managed-ledger jitter of up to 5 % so many topics do not roll at once); any of those
only counts once the ledger is older than ``minimum_rollover_time_ms`` (when that is > 0).
"""

from __future__ import annotations

import random

from managed_ledger.config import ManagedLedgerConfig

MAX_JITTER_FRACTION = 0.05


def jittered_max_rollover_ms(config: ManagedLedgerConfig, rng: random.Random | None = None) -> int:
    r = (rng or random).random()
    return int(config.maximum_rollover_time_ms * (1 + r * MAX_JITTER_FRACTION))


def current_ledger_is_full(
    *,
    entries: int,
    size: int,
    created_ms: int,
    now_ms: int,
    config: ManagedLedgerConfig,
    max_rollover_ms: int,
) -> bool:
    age = now_ms - created_ms
    space_reached = entries >= config.max_entries_per_ledger or size >= config.max_size_per_ledger_bytes
    time_reached = age >= max_rollover_ms
    if not (space_reached or time_reached):
        return False
    if config.minimum_rollover_time_ms > 0:
        return age > config.minimum_rollover_time_ms
    return True
