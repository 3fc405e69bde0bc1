"""Broker configuration: Pulsar's ``broker.conf`` names in snake_case with their defaults.

``BrokerConfig.load(path, **overrides)`` reads an optional TOML file (top-level keys or a
``[broker]`` table) and applies CLI overrides; unknown keys are an error so typos show up. The
same file's ``[bookkeeper_client]`` table configures the broker's ledger client
(``ledger_client_config``); ``managed_ledger_config`` is the one broker -> managed-ledger mapping.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bookie.client.config import ClientConfig
from broker.policies import BACKLOG_QUOTA_POLICIES
from managed_ledger.config import ManagedLedgerConfig
from quire.config import ConfigError, load_config


@dataclass
class BrokerConfig:
    # Network. Authentication is off by default, so the default listens on loopback only (Pulsar:
    # 0.0.0.0); "0.0.0.0" or a host's address opens it. The advertised address (what lookups
    # tell clients) defaults to the bind address, or 127.0.0.1 when that is a wildcard.
    bind_address: str = "127.0.0.1"
    advertised_address: str = ""
    broker_service_port: int = 6650
    web_service_port: int = 8080
    cluster_name: str = "standalone"
    metadata_store_url: str = "zk://127.0.0.1:2181"
    metadata_store_session_timeout_millis: int = 30000
    metadata_store_operation_timeout_seconds: int = 30

    # Admin HTTP: bodies above this many bytes answer 413 (Pulsar's httpMaxRequestSize,
    # whose default -1 = unlimited; admin bodies are small JSON). <= 0: no cap.
    http_max_request_size: int = 1024 * 1024
    # One INFO line per admin HTTP request (logger broker.admin.access; Pulsar logs them with Jetty's request log).
    http_access_log_enabled: bool = False

    # Protocol
    max_message_size: int = 5 * 1024 * 1024
    keep_alive_interval_seconds: int = 30
    max_pending_publish_requests_per_connection: int = 1000
    connection_outbox_bytes: int = 4 * 1024 * 1024
    # GET_TOPICS_OF_NAMESPACE: longer patterns are not evaluated here (answered unfiltered)
    subscription_pattern_max_length: int = 50

    # Topics and namespaces
    allow_auto_topic_creation: bool = True
    allow_auto_topic_creation_type: str = "non-partitioned"
    default_num_partitions: int = 1
    max_num_partitions_per_partitioned_topic: int = 0  # 0 = no limit (as Pulsar)
    default_number_of_namespace_bundles: int = 4
    broker_deduplication_enabled: bool = False
    broker_deduplication_max_number_of_producers: int = 10000
    broker_deduplication_entries_interval: int = 1000
    default_retention_time_in_minutes: int = 0
    default_retention_size_in_mb: int = 0
    ttl_duration_default_in_seconds: int = 0
    message_expiry_check_interval_in_minutes: int = 5
    retention_check_interval_in_seconds: int = 120
    # backlog quotas (Pulsar's backlogQuota*): a namespace's backlog_quota_map overrides these
    backlog_quota_check_enabled: bool = True
    backlog_quota_check_interval_in_seconds: int = 60
    backlog_quota_default_limit_bytes: int = -1  # < 0: no limit
    backlog_quota_default_limit_second: int = -1  # message_age; < 0: no limit
    backlog_quota_default_retention_policy: str = "producer_request_hold"

    # Dispatch
    max_unacked_messages_per_consumer: int = 50000
    max_unacked_messages_per_subscription: int = 200000
    dispatcher_max_read_batch_size: int = 100
    dispatcher_max_round_robin_batch_size: int = 20
    dispatcher_max_read_size_bytes: int = 5 * 1024 * 1024
    delayed_delivery_enabled: bool = True
    delayed_delivery_tick_time_millis: int = 1000
    subscription_redelivery_tracker_enabled: bool = True
    acknowledgment_at_batch_index_level_enabled: bool = True
    # bytes of entries a subscription far behind keeps read ahead from the bookies (range
    # reads in the background, across ledgers, not through the entry cache; 0 = none)
    dispatcher_read_ahead_max_bytes: int = 1024 * 1024

    # Managed ledger defaults
    managed_ledger_default_ensemble_size: int = 2
    managed_ledger_default_write_quorum: int = 2
    managed_ledger_default_ack_quorum: int = 2
    managed_ledger_max_entries_per_ledger: int = 50000
    managed_ledger_max_size_per_ledger_mbytes: int = 2048

    # Topic loading: a managed-ledger open that fails (bookies briefly short) is retried with
    # back-off for this long while the broker owns the bundle.
    topic_load_timeout_seconds: float = 60.0

    # Load manager (broker/load_manager.py). Intervals in minutes may be fractions (tests).
    load_balancer_enabled: bool = True
    load_balancer_report_update_min_interval_millis: int = 5000
    load_balancer_shedding_enabled: bool = True
    load_balancer_shedding_interval_minutes: float = 1.0
    load_balancer_shedding_grace_period_minutes: float = 30.0
    load_balancer_broker_threshold_shedder_percentage: float = 10.0
    load_balancer_history_resource_percentage: float = 0.9
    load_balancer_override_broker_nic_speed_gbps: float = 1.0  # loopback/unknown NICs: assumed speed
    load_balancer_auto_bundle_split_enabled: bool = True
    load_balancer_auto_unload_split_bundles_enabled: bool = True
    load_balancer_split_interval_minutes: float = 1.0
    load_balancer_namespace_bundle_max_topics: int = 1000
    load_balancer_namespace_bundle_max_sessions: int = 1000
    load_balancer_namespace_bundle_max_msg_rate: float = 30000.0
    load_balancer_namespace_bundle_max_bandwidth_mbytes: float = 100.0
    load_balancer_namespace_maximum_bundles: int = 128

    # Metrics
    stats_update_frequency_in_secs: int = 60
    expose_topic_level_metrics_in_prometheus: bool = True

    # Security (quire.security, broker/authorization.py): off by default, as in Pulsar.
    # authentication_providers: "token", "basic", "tls" (or Pulsar's provider class names).
    authentication_enabled: bool = False
    authentication_providers: list[str] = field(default_factory=list)
    authentication_refresh_check_seconds: int = 60
    authorization_enabled: bool = False
    superuser_roles: list[str] = field(default_factory=list)
    anonymous_user_role: str = ""
    authenticate_metrics_endpoint: bool = False
    # Tokens: exactly one of the secret key (HS256) and the public key (RS256/ES256), each as
    # data:;base64,..., file:///path or a path. The role is the token_auth_claim ("" = sub).
    token_secret_key: str = ""
    token_public_key: str = ""
    token_public_alg: str = "RS256"
    token_auth_claim: str = ""
    token_allowed_clock_skew_seconds: int = 0
    token_audience_claim: str = ""
    token_audience: str = ""
    # Basic auth: an htpasswd file (bcrypt or apr1 MD5 lines), path or data:;base64,...
    basic_auth_conf: str = ""
    # TLS: -1 = no TLS listener (Pulsar leaves brokerServicePortTls/webServicePortTls unset),
    # 0 = any free port. The key and certificate are re-read when they change on disk.
    broker_service_port_tls: int = -1
    web_service_port_tls: int = -1
    tls_certificate_file_path: str = ""
    tls_key_file_path: str = ""
    tls_trust_certs_file_path: str = ""
    tls_allow_insecure_connection: bool = False
    tls_require_trusted_client_cert_on_connect: bool = False
    tls_cert_refresh_check_duration_sec: int = 300
    # Roles trusted to act for another: a request from one may name its caller in
    # X-Original-Principal, which is then authorized too (Pulsar's proxyRoles; superusers may as well).
    proxy_roles: list[str] = field(default_factory=list)
    # This broker's identity towards other brokers' admin API (broker/broker_client.py): Pulsar's
    # brokerClientAuthenticationPlugin ("" = AuthenticationDisabled; AuthenticationToken,
    # AuthenticationTls, AuthenticationBasic or token/tls/basic) and its parameters
    # ("token:<jwt>", "file:///path", "tlsCertFile:..,tlsKeyFile:..", {"userId":..,"password":..}).
    # The role must be a superuser (or in proxy_roles) on the other brokers.
    broker_client_authentication_plugin: str = ""
    broker_client_authentication_parameters: str = ""
    # HTTPS to the other brokers' web_service_port_tls; the trust file defaults to tls_trust_certs_file_path.
    broker_client_tls_enabled: bool = False
    broker_client_trust_certs_file_path: str = ""
    broker_client_certificate_file_path: str = ""
    broker_client_key_file_path: str = ""

    def __post_init__(self) -> None:
        if not self.advertised_address:
            wildcard = self.bind_address in ("", "0.0.0.0", "::")
            self.advertised_address = "127.0.0.1" if wildcard else self.bind_address
        if ":" in self.advertised_address and not self.advertised_address.startswith("["):
            self.advertised_address = f"[{self.advertised_address}]"  # an IPv6 literal inside URLs
        if self.backlog_quota_default_retention_policy not in BACKLOG_QUOTA_POLICIES:
            raise ConfigError(f"backlog_quota_default_retention_policy must be one of "
                              f"{', '.join(BACKLOG_QUOTA_POLICIES)}, got {self.backlog_quota_default_retention_policy!r}")

    @classmethod
    def load(cls, path: str | Path | None = None, *, table: str = "broker", **overrides: Any) -> "BrokerConfig":
        """The ``[broker]`` table (or the top-level keys) of a TOML file plus overrides; every
        problem is a quire.config.ConfigError naming the key (and the snake_case spelling meant)."""
        return load_config(cls, path, table=table, what="broker", **overrides)


def managed_ledger_config(config: BrokerConfig, policies: dict[str, Any] | None = None) -> ManagedLedgerConfig:
    """The one mapping of broker keys (and a namespace's retention and persistence policies) to
    a managed ledger's settings, for every entry point (``quire broker``, ``quire standalone``) and every topic."""
    retention = (policies or {}).get("retention_policies") or {}
    persistence = (policies or {}).get("persistence") or {}
    return ManagedLedgerConfig(
        ensemble_size=persistence.get("bookkeeperEnsemble", config.managed_ledger_default_ensemble_size),
        write_quorum=persistence.get("bookkeeperWriteQuorum", config.managed_ledger_default_write_quorum),
        ack_quorum=persistence.get("bookkeeperAckQuorum", config.managed_ledger_default_ack_quorum),
        metadata_ensemble_size=config.managed_ledger_default_ensemble_size,
        metadata_write_quorum=config.managed_ledger_default_write_quorum,
        metadata_ack_quorum=config.managed_ledger_default_ack_quorum,
        max_entries_per_ledger=config.managed_ledger_max_entries_per_ledger,
        max_size_per_ledger_mb=config.managed_ledger_max_size_per_ledger_mbytes,
        retention_time_minutes=retention.get("retentionTimeInMinutes", config.default_retention_time_in_minutes),
        retention_size_mb=retention.get("retentionSizeInMB", config.default_retention_size_in_mb),
        retention_check_interval_seconds=config.retention_check_interval_in_seconds,
        throttle_mark_delete=float(persistence.get("managedLedgerMaxMarkDeleteRate", 0.0)),
    )


def ledger_client_config(path: str | Path | None) -> ClientConfig:
    """The broker's ledger-client settings: the ``[bookkeeper_client]`` table of its TOML file
    (BookKeeper ClientConfiguration keys in snake_case), the same for both entry points."""
    if path is None:
        return ClientConfig()
    return ClientConfig.from_toml(path, table="bookkeeper_client")


__all__ = ["BrokerConfig", "ledger_client_config", "managed_ledger_config"]
