"""``ClientConfig``: the ledger client's settings, named after BookKeeper's ClientConfiguration.

Keys are BookKeeper's in snake_case (``addEntryTimeoutSec`` -> ``add_entry_timeout_s`` as the
issue names it, ``firstSpeculativeReadTimeout`` -> ``first_speculative_read_timeout_ms`` ...)
with BookKeeper's defaults unless noted. Loadable from a TOML table.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quire.config import ConfigError, build, read_toml


@dataclass
class ClientConfig:
    # Per-request timeouts (BookKeeper addEntryTimeoutSec / readEntryTimeoutSec, both 5 s).
    add_entry_timeout_s: float = 5.0
    read_timeout_s: float = 5.0
    # The per-connection timeout monitor's precision: it looks for expired requests at most this
    # often, and only when one can have expired (not while every deadline is further away).
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
    # The identity presented to bookies that require one (clientAuthProviderFactoryClass:
    # "token"; client_auth_token is the token, data:/file: value or the token text).
    client_auth_provider_factory_class: str = ""
    client_auth_token: str = ""
    # TLS to bookies (tlsProviderFactoryClass: "" = plain TCP): the bookie's certificate must chain
    # to tls_trust_store; tls_certificate_path/tls_key_store: this client's certificate, for
    # bookies with tls_client_authentication. Bookie ids are host:port, so names are not checked
    # unless tls_hostname_verification_enabled.
    tls_provider_factory_class: str = ""
    tls_trust_store: str = ""
    tls_certificate_path: str = ""
    tls_key_store: str = ""
    tls_hostname_verification_enabled: bool = False
    # Largest frame accepted from a bookie (nettyMaxFrameSizeBytes, 5 MiB + header room).
    netty_max_frame_size_bytes: int = 5 * 1024 * 1024 + 64 * 1024
    # Bookies that failed are avoided by placement for this long (bookieQuarantineTimeSeconds).
    bookie_quarantine_time_s: float = 1800.0
    # Placement policy: "rackaware" (RackawareEnsemblePlacementPolicy, BookKeeper's client default:
    # random while the bookies declare fewer than two racks), "random" (DefaultEnsemblePlacementPolicy)
    # or "module:Class".
    ensemble_placement_policy: str = "rackaware"
    # Largest number of entries requested at once by one read call (chunking bounds memory);
    # bookies running in the client's process (standalone) are asked up to their own range-read cap.
    max_entries_per_read_batch: int = 1000
    # Metadata CAS retries when an update races with another writer of the same node.
    metadata_update_max_retries: int = 10

    def tls_context(self) -> ssl.SSLContext | None:
        """The client side of TLS to bookies (None: plain TCP)."""
        if not self.tls_provider_factory_class:
            return None
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.tls_trust_store or None)
        ctx.check_hostname = self.tls_hostname_verification_enabled
        if self.tls_certificate_path:
            ctx.load_cert_chain(self.tls_certificate_path, self.tls_key_store or None)
        return ctx

    def auth_token(self) -> bytes | None:
        """The token presented to bookies (None: none), from ``client_auth_token`` (the token
        text, ``data:``/``file:`` value or a path)."""
        if not self.client_auth_provider_factory_class:
            return None
        if self.client_auth_provider_factory_class != "token":
            raise ConfigError(f"unknown client_auth_provider_factory_class {self.client_auth_provider_factory_class!r}"
                              " (\"\" or \"token\")")
        value = self.client_auth_token.strip()
        if value.startswith(("data:", "file:", "/")):
            from quire.security.keys import read_value
            return read_value(value, "client_auth_token").strip()
        return value.encode()

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
