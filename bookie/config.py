"""BookieConfig: every bookie setting, named after BookKeeper's keys in snake_case.

Defaults are BookKeeper's code defaults (``ServerConfiguration``) except where a Python
process needs a concrete number instead of "a share of direct memory" (cache sizes). Load
from TOML with :meth:`BookieConfig.from_toml`; unknown keys are an error so typos surface.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bookie.errors import ConfigError
from bookie.protocol import MAX_FRAME_SIZE

MB = 1024 * 1024


@dataclass
class BookieConfig:
    # --- identity / network -------------------------------------------------------------
    bookie_port: int = 3181
    listening_interface: str = "127.0.0.1"
    advertised_address: str = ""  # default: listening_interface
    http_server_enabled: bool = True
    http_server_port: int = 8000
    metadata_service_uri: str = ""  # "" = no metadata store (cookies on disk only, no registration)
    netty_max_frame_size_bytes: int = MAX_FRAME_SIZE
    max_pending_requests_per_connection: int = 10_000
    # Replies queued for one connection: its reader pauses above the high mark until they drain
    # below the low one (BookKeeper's Netty write-buffer water marks).
    server_write_buffer_low_water_mark: int = 384 * 1024
    server_write_buffer_high_water_mark: int = 512 * 1024
    # Partial request frames and reads in flight, over all connections: readers wait for room.
    max_request_buffer_size_mb: int = 128
    # A request frame must arrive whole, and queued replies be taken, within this; else close.
    connection_stall_timeout_ms: int = 30_000

    # --- directories --------------------------------------------------------------------
    journal_directory: str = "/tmp/bk-txn"
    ledger_directories: list[str] = field(default_factory=lambda: ["/tmp/bk-data"])
    allow_storage_expansion: bool = False

    # --- journal ------------------------------------------------------------------------
    journal_max_group_wait_ms: float = 2.0
    journal_buffered_writes_threshold: int = 512 * 1024
    journal_flush_when_queue_empty: bool = False
    journal_sync_data: bool = True
    journal_page_cache_flush_interval_ms: int = 1000
    # Drop journal pages from the page cache once fsynced (BookKeeper's journalRemovePagesFromCache):
    # the journal is only read at replay, and its dirty/cached pages compete with entry-log writeback.
    journal_remove_pages_from_cache: bool = True
    journal_max_size_mb: int = 2048
    journal_max_backups: int = 5
    journal_pre_alloc_size_mb: int = 16
    journal_queue_size: int = 10_000
    journal_max_memory_size_mb: int = 256
    # Fault injection, for tests only: a sleep added to every durable journal write (a slow
    # disk), and whether PUT /api/v1/bookie/fault/journal_sync_delay may change it at run time.
    journal_test_sync_delay_ms: int = 0
    allow_fault_injection: bool = False

    # --- ledger storage (DbLedgerStorage) ------------------------------------------------
    db_storage_write_cache_max_size_mb: int = 64
    db_storage_read_ahead_cache_max_size_mb: int = 64
    db_storage_read_ahead_cache_batch_size: int = 100
    db_storage_max_throttle_time_ms: int = 10_000
    log_size_limit: int = 1024 * MB
    flush_interval_ms: int = 10_000

    # --- disks --------------------------------------------------------------------------
    disk_usage_threshold: float = 0.95
    disk_usage_lwm_threshold: float = 0.90
    disk_check_interval_ms: int = 10_000
    # After running out of space, writable again only once every bookie dir has this much free
    # (ledger dirs: at least db_storage_write_cache_max_size_mb, so the next checkpoint fits).
    disk_full_min_free_mb: int = 64

    # --- garbage collection / compaction (bookie.garbage_collector) ------------------------
    gc_wait_time_ms: int = 600_000
    minor_compaction_threshold: float = 0.2
    minor_compaction_interval: int = 3600  # seconds; <= 0 disables
    major_compaction_threshold: float = 0.8
    major_compaction_interval: int = 86400
    minor_compaction_max_time_millis: int = -1  # -1 = unlimited
    major_compaction_max_time_millis: int = -1
    compaction_rate_by_entries: int = 1000  # entries/s (is_throttle_by_bytes false)
    compaction_rate_by_bytes: int = 1_000_000  # bytes/s (is_throttle_by_bytes true)
    is_throttle_by_bytes: bool = False
    is_force_gc_allow_when_no_space: bool = False
    disk_usage_warn_threshold: float = 0.90  # over it major compaction is suspended

    def __post_init__(self) -> None:
        if isinstance(self.ledger_directories, str):
            self.ledger_directories = [d for d in self.ledger_directories.split(",") if d]
        if not self.ledger_directories:
            raise ConfigError("ledger_directories must name at least one directory")
        if self.db_storage_write_cache_max_size_mb <= 0:
            raise ConfigError("db_storage_write_cache_max_size_mb must be positive")
        if self.max_request_buffer_size_mb <= 0 or self.connection_stall_timeout_ms <= 0:
            raise ConfigError("max_request_buffer_size_mb and connection_stall_timeout_ms must be positive")
        if self.server_write_buffer_low_water_mark > self.server_write_buffer_high_water_mark:
            raise ConfigError("server_write_buffer_low_water_mark must not exceed the high-water mark")

    @property
    def bookie_id(self) -> str:
        """``host:port`` as registered in the metadata store."""
        return f"{self.advertised_address or self.listening_interface}:{self.bookie_port}"

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "BookieConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ConfigError(f"unknown bookie config keys: {', '.join(unknown)}")
        return cls(**values)

    @classmethod
    def from_toml(cls, path: str | Path, **overrides: Any) -> "BookieConfig":
        """Load a TOML file (top level or a ``[bookie]`` table); ``overrides`` win."""
        with open(path, "rb") as f:
            data = tomllib.load(f)
        if "bookie" in data and isinstance(data["bookie"], dict):
            data = data["bookie"]
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.from_dict(data)
