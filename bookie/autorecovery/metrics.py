"""Prometheus metrics of the auditor and the replication worker (BookKeeper's names, snake_case).

They live in the registry they are given: the bookie's own (``/metrics`` of a bookie running the
daemon) or a private one (``quire autorecovery --http-port``). Under-replicated ledgers are
listed one series per ledger (``auditor_under_replicated_ledger{ledger_id}``) up to
``LISTED_LEDGERS_MAX``, and counted in full by ``auditor_under_replicated_ledgers``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["AutoRecoveryMetrics", "LISTED_LEDGERS_MAX"]

LISTED_LEDGERS_MAX = 100  # each listed one costs a read per refresh


class AutoRecoveryMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.is_auditor = Gauge("auditor_elected", "1 while this process is the elected auditor", registry=r)
        self.under_replicated = Gauge("auditor_under_replicated_ledgers",
                                      "Ledgers marked under-replicated (/ledgers/underreplication)", registry=r)
        self.under_replicated_ledger = Gauge(
            "auditor_under_replicated_ledger", "One series per under-replicated ledger (value: missing replicas)",
            ["ledger_id"], registry=r)
        self.lost_bookies = Gauge("auditor_lost_bookies",
                                  "Bookies gone longer than lost_bookie_recovery_delay, or decommissioned", registry=r)
        self.audits = Counter("auditor_audits", "Audits run (scans of every ledger's ensembles)", registry=r)
        self.marked_ledgers = Counter("auditor_marked_ledgers", "Ledgers marked under-replicated", registry=r)
        self.rereplicated_ledgers = Counter("replication_worker_rereplicated_ledgers",
                                            "Ledgers whose every lost fragment was re-replicated", registry=r)
        self.rereplicated_fragments = Counter("replication_worker_rereplicated_fragments",
                                              "Fragments copied to a new bookie", registry=r)
        self.rereplicated_entries = Counter("replication_worker_rereplicated_entries",
                                            "Entries copied to a new bookie", registry=r)
        self.rereplicated_bytes = Counter("replication_worker_rereplicated_bytes",
                                          "Bytes of entries copied to a new bookie", registry=r)
        self.failures = Counter("replication_worker_failures", "Re-replication attempts that failed (retried)",
                                registry=r)
        self.fenced_open_ledgers = Counter("replication_worker_fenced_open_ledgers",
                                           "Open ledgers fenced and closed after the grace period", registry=r)

    def list_under_replicated(self, marks: dict[int, int], total: int) -> None:
        """``marks``: ledger id -> missing replicas (at most LISTED_LEDGERS_MAX of them)."""
        self.under_replicated.set(total)
        self.under_replicated_ledger.clear()
        for lid, missing in marks.items():
            self.under_replicated_ledger.labels(ledger_id=str(lid)).set(missing)
