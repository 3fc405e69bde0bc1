"""``ClientConfig``: the ledger client's settings, named after BookKeeper's ClientConfiguration.

Keys are BookKeeper's in snake_case (``addEntryTimeoutSec`` -> ``add_entry_timeout_s`` as the
issue names it, ``firstSpeculativeReadTimeout`` -> ``first_speculative_read_timeout_ms`` ...)
with BookKeeper's defaults unless noted. Loadable from a TOML table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quire.config import build, read_toml


@dataclass
class ClientConfig:
    # Per-request timeouts (BookKeeper addEntryTimeoutSec / readEntryTimeoutSec, both 5 s).
    add_entry_timeout_s: float = 5.0
    read_timeout_s: float = 5.0
    # How often the per-connection timeout monitor scans outstanding requests.
    timeout_monitor_interval_ms: int = 100
    # Speculative reads: ask the next replica after this long without any answer (x2 backoff).
    first_speculative_read_timeout_ms: int = 2000
    max_speculative_read_timeout_ms: int = 2000
    speculative_read_timeout_backoff_multiplier: float = 2.0
    reorder_read_sequence_enabled: bool = True
    # Maximum adds outstanding (sent, not yet acknowledged) per ledger handle (BookKeeper "throttle").
    throttle: int = 5000
    # Recovery reads kept in flight at once. BookKeeper's default is 1; reads are decided in
    # entry order either way, a window just pipelines them (a 100k-entry tail recovers fast).
    recovery_read_batch_size: int = 64
    # Connection establishment timeout (clientConnectTimeoutMillis).
    client_connect_timeout_ms: int = 10000
    # Largest frame accepted from a bookie (nettyMaxFrameSizeBytes, 5 MiB + header room).
    netty_max_frame_size_bytes: int = 5 * 1024 * 1024 + 64 * 1024
    # Bookies that failed are avoided by placement for this long (bookieQuarantineTimeSeconds).
    bookie_quarantine_time_s: float = 1800.0
    # Placement policy: "rackaware" (RackawareEnsemblePlacementPolicy, BookKeeper's client default:
    # random while the bookies declare fewer than two racks), "random" (DefaultEnsemblePlacementPolicy)
    # or "module:Class".
    ensemble_placement_policy: str = "rackaware"
    # Largest number of entries requested at once by one read call (chunking bounds memory).
    max_entries_per_read_batch: int = 1000
    # Metadata CAS retries when an update races with another writer of the same node.
    metadata_update_max_retries: int = 10

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "ClientConfig":
        """Unknown keys and wrongly typed values are a ConfigError (quire.config)."""
        return build(cls, values, what="ledger client")

    @classmethod
    def from_toml(cls, path: str | Path, table: str | None = None) -> "ClientConfig":
        """Load from a TOML file; ``table`` selects a sub-table (e.g. ``"bookkeeper_client"``)."""
        data = read_toml(path)
        if table:
            data = data.get(table, {})
        return build(cls, data, what="ledger client", source=str(path))
