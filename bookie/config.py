"""BookieConfig: every bookie setting, named after BookKeeper's keys in snake_case.

Defaults are BookKeeper's code defaults (``ServerConfiguration``) except where a Python
process needs a concrete number instead of "a share of direct memory" (cache sizes). Load
with :meth:`BookieConfig.load` (quire.config: a TOML file's ``[bookie]`` table or top level,
plus overrides); an unknown key or a wrongly typed value is a ``quire.config.ConfigError``
naming the key and the snake_case spelling meant, so typos surface.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bookie.errors import ConfigError
from bookie.protocol import MAX_FRAME_SIZE
from quire.config import build, load_config

MB = 1024 * 1024


@dataclass
class BookieConfig:
    # --- identity / network -------------------------------------------------------------
    bookie_port: int = 3181
    listening_interface: str = "127.0.0.1"
    advertised_address: str = ""  # default: listening_interface
    # Also listen on a Unix socket in the abstract namespace, named in the registration: ledger
    # clients on this host (a co-located broker) use it instead of loopback TCP, which costs both
    # ends more CPU per request. Never with TLS (the bookie port's identity checks stay on TCP).
    local_socket_enabled: bool = True

    http_server_enabled: bool = True
    http_server_port: int = 8000
    metadata_service_uri: str = ""  # "" = no metadata store (cookies on disk only, no registration)
    # Metadata (ZooKeeper) session timeout: a killed bookie's registration vanishes after it (zkTimeout).
    zk_timeout: int = 10_000  # ms
    netty_max_frame_size_bytes: int = MAX_FRAME_SIZE  # a larger request frame closes its connection
    max_pending_requests_per_connection: int = 10_000  # a connection's reader pauses above this many in progress
    # Replies queued for one connection: its reader pauses above the high mark until they drain
    # below the low one (BookKeeper's Netty write-buffer water marks).
    server_write_buffer_low_water_mark: int = 384 * 1024
    server_write_buffer_high_water_mark: int = 512 * 1024
    # Partial request frames and reads in flight, over all connections: readers wait for room.
    max_request_buffer_size_mb: int = 128
    # A request frame must arrive whole, and queued replies be taken, within this; else close.
    connection_stall_timeout_ms: int = 30_000
    # Identity required of brokers and other bookies (BookKeeper's bookieAuthProviderFactoryClass;
    # "" = none, "token" = a JWT in an AUTH request first on every connection, checked with the
    # secret or public key, the role one of bookie_auth_allowed_roles when that is not empty).
    bookie_auth_provider_factory_class: str = ""
    bookie_auth_token_secret_key: str = ""
    bookie_auth_token_public_key: str = ""
    bookie_auth_token_public_alg: str = "RS256"
    bookie_auth_allowed_roles: list[str] = field(default_factory=list)
    # TLS on the bookie port (BookKeeper's tlsProviderFactoryClass; "" = plain TCP, anything else
    # = every connection is TLS): PEM certificate and key, trust store for client certificates
    # (required with tls_client_authentication), files re-read every ..._refresh_duration_seconds.
    tls_provider_factory_class: str = ""
    tls_certificate_path: str = ""
    tls_key_store: str = ""
    tls_trust_store: str = ""
    tls_client_authentication: bool = False
    tls_cert_files_refresh_duration_seconds: int = 300
    # HTTPS on http_server_port (BookKeeper's httpServerTlsEnable): the admin API and /metrics
    # speak only TLS. http_server_key_store_path: one PEM file holding the certificate chain and
    # its key (BookKeeper's httpServerKeyStorePath, a key store); "" = the bookie port's
    # tls_certificate_path and tls_key_store. Reloaded like those, every
    # tls_cert_files_refresh_duration_seconds.
    http_server_tls_enable: bool = False
    http_server_key_store_path: str = ""

    # --- directories --------------------------------------------------------------------
    journal_directory: str = "/tmp/bk-txn"
    ledger_directories: list[str] = field(default_factory=lambda: ["/tmp/bk-data"])
    allow_storage_expansion: bool = False

    # --- journal ------------------------------------------------------------------------
    journal_max_group_wait_ms: float = 2.0
    journal_buffered_writes_threshold: int = 512 * 1024
    # BookKeeper's default is false (wait up to journal_max_group_wait_ms for a group to form,
    # made for spinning disks). Ours is adaptive: a lone add is written at once, and groups
    # form while a write is in progress, so under load nothing is lost by not waiting and an
    # unbatched add does not pay 2 ms on every bookie of a cluster.
    journal_flush_when_queue_empty: bool = True

    journal_sync_data: bool = True
    journal_page_cache_flush_interval_ms: int = 1000
    # Drop journal pages from the page cache once fsynced and 8 MB behind the write position, in
    # 1 MB steps (BookKeeper's journalRemovePagesFromCache): the journal is only read at replay,
    # and its dirty/cached pages compete with entry-log writeback.
    journal_remove_pages_from_cache: bool = True

    journal_max_size_mb: int = 2048  # a journal file rolls over at this size
    journal_max_backups: int = 5  # rolled journal files kept once the log mark passed them
    journal_pre_alloc_size_mb: int = 16  # a journal file grows by this much at a time (fallocate)
    journal_queue_size: int = 10_000  # adds waiting for the journal before adders wait
    journal_max_memory_size_mb: int = 256  # bytes of adds waiting for the journal before adders wait
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
    # Drop entry-log pages from the page cache once a checkpoint fsynced them and they are 64 MB
    # behind the end of the log (BookKeeper has no such key: its direct-I/O entry logger,
    # dbStorage_directIOEntryLogger, bypasses the page cache altogether). The next checkpoint's
    # writes reuse the dropped pages instead of growing the cache with fresh ones, which cost 4-8
    # times the kernel CPU per byte on a VM (server CPU per 1 KiB published 3.70 -> 3.06 µs). Off
    # by default: entries further behind are then read from the disk (a 300 MB topic of 1 KiB
    # messages read back from its start: 452,880 -> 194,764 msg/s; bench/results/win17g.md).
    entry_log_remove_pages_from_cache: bool = False

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

    # --- auto-recovery (bookie.autorecovery; BookKeeper's ServerConfiguration keys) -----------
    # Run the auditor (elected) + replication worker inside this bookie (autoRecoveryDaemonEnabled).
    autorecovery_daemon_enabled: bool = False
    # Seconds a bookie must stay gone before its ledgers are re-replicated (lostBookieRecoveryDelay).
    lost_bookie_recovery_delay: int = 0
    # Full audits: every ledger's entries checked on its bookies (auditorPeriodicCheckInterval) and
    # every ledger's ensembles against the live bookies (auditorPeriodicBookieCheckInterval); <= 0 = off.
    auditor_periodic_check_interval: int = 604800
    auditor_periodic_bookie_check_interval: int = 86400
    # Entries per range read when copying a fragment (BookKeeper: 10 entries in flight; here
    # 4 batches of this many are in flight, reads and adds overlapping).
    rereplication_entry_batch_size: int = 100
    # An open ledger whose last ensemble lost a bookie is fenced and closed (its writer presumed
    # dead) if still open this long after a worker first saw it (openLedgerRereplicationGracePeriod).
    open_ledger_rereplication_grace_period: int = 30000  # ms
    # Back-off before a worker retries a ledger whose re-replication failed (rwRereplicateBackoffMs).
    rw_rereplicate_backoff_ms: int = 5000
    # Passwords the worker tries to write re-replicated entries (the metadata keeps only a hash;
    # the managed ledger's default password is "").
    autorecovery_ledger_passwords: list[str] = field(default_factory=lambda: [""])
    # Declared rack (rack-aware placement), written to /bookies/<id>/rack at start; "" = keep.
    bookie_rack: str = ""

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
        if self.http_server_tls_enable and not self.http_server_key_store_path and not (
                self.tls_certificate_path and self.tls_key_store):
            raise ConfigError("http_server_tls_enable needs http_server_key_store_path, or tls_certificate_path "
                              "and tls_key_store")

    @property
    def bookie_id(self) -> str:
        """``host:port`` as registered in the metadata store."""
        return f"{self.advertised_address or self.listening_interface}:{self.bookie_port}"

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "BookieConfig":
        """Unknown keys and wrongly typed values are a ConfigError (quire.config)."""
        return build(cls, values, what="bookie")

    @classmethod
    def load(cls, path: str | Path | None = None, **overrides: Any) -> "BookieConfig":
        """The ``[bookie]`` table (or the top-level keys) of a TOML file plus overrides (None =
        unset); every problem is a quire.config.ConfigError naming the key."""
        return load_config(cls, path, table="bookie", what="bookie", **overrides)
