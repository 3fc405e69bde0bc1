"""ManagedLedgerConfig: Pulsar's ManagedLedgerConfig keys in snake_case, with its defaults.

Loadable from a TOML table (``[managed_ledger]``); broker-level ``managed_ledger_*`` keys
map onto these by dropping the prefix.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from quire.config import build, read_toml

MB = 1024 * 1024


@dataclass
class ManagedLedgerConfig:
    # rollover of data ledgers
    max_entries_per_ledger: int = 50000
    max_size_per_ledger_mb: int = 100
    minimum_rollover_time_ms: int = 0
    maximum_rollover_time_ms: int = 4 * 3600 * 1000
    # replication of data ledgers
    ensemble_size: int = 3
    write_quorum: int = 2
    ack_quorum: int = 2
    password: bytes = b""
    # cursor ledgers
    metadata_ensemble_size: int = 3
    metadata_write_quorum: int = 2
    metadata_ack_quorum: int = 2
    metadata_max_entries_per_ledger: int = 50000
    ledger_rollover_timeout_s: int = 4 * 3600
    max_unacked_ranges_to_persist: int = 10000
    max_unacked_ranges_to_persist_in_metadata_store: int = 1000
    max_batch_deleted_index_to_persist: int = 10000
    deletion_at_batch_index_level_enabled: bool = True
    # mark-deletes per second persisted per cursor; 0 = every one (others stay dirty and
    # are flushed by the periodic cursor flush)
    throttle_mark_delete: float = 0.0
    cursor_position_flush_seconds: float = 60
    # retention: -1 = unlimited on that axis; 0/0 = delete as soon as consumed
    retention_time_minutes: int = 0
    retention_size_mb: int = 0
    retention_check_interval_seconds: int = 120
    # 0 = no TTL; checked without reading entries, by ledger close time (the broker's
    # per-message check uses ManagedCursor.expire_entries with the publish time)
    message_ttl_seconds: int = 0
    message_expiry_check_interval_seconds: float = 300  # Pulsar: messageExpiryCheckIntervalInMinutes=5
    # entry cache shared by the factory's managed ledgers; past the budget it evicts down
    # to watermark x budget (Pulsar: managedLedgerCacheSizeMB, managedLedgerCacheEvictionWatermark)
    cache_size_mb: int = 64
    cache_eviction_watermark: float = 0.9
    # adds waiting behind a rollover or in flight, per managed ledger
    max_pending_adds: int = 4000  # below the ledger client's throttle (5000) so ids stay in call order
    # entries fetched per ledger-client read when filling a cursor read
    read_batch_size: int = 100
    # deletes of trimmed ledgers are retried this many times
    delete_retries: int = 3

    @property
    def retention_time_ms(self) -> int:
        return -1 if self.retention_time_minutes < 0 else self.retention_time_minutes * 60_000

    @property
    def max_size_per_ledger_bytes(self) -> int:
        return self.max_size_per_ledger_mb * MB

    def replace(self, **changes: Any) -> "ManagedLedgerConfig":
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, values: dict[str, Any], *, source: str = "") -> "ManagedLedgerConfig":
        """Keys as here or with the broker's ``managed_ledger_`` prefix; unknown keys are a
        ConfigError (quire.config)."""
        known: dict[str, Any] = {}
        for key, value in values.items():
            k = key.removeprefix("managed_ledger_")
            known[k] = value.encode() if k == "password" and isinstance(value, str) else value
        return build(cls, known, what="managed ledger", source=source)

    @classmethod
    def from_toml(cls, path: str, table: str = "managed_ledger") -> "ManagedLedgerConfig":
        return cls.from_dict(read_toml(path).get(table, {}), source=path)
