"""Prometheus metrics of one bookie, in a registry of its own.

A private registry (not the global default) lets several bookies live in one process
(standalone mode, tests) and lets ``/metrics`` show exactly this bookie's series. Hot paths
update counters once per batch, never once per entry, to keep the overhead negligible.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from quire.fast_histogram import FastHistogram

_LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)
_COUNT_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
_BYTES_BUCKETS = (1024, 8192, 65536, 262144, 524288, 1048576, 4194304, 16777216)


class BookieMetrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.add_entries = Counter("bookie_add_entry", "Add requests by outcome", ["status"], registry=r)
        self.add_bytes = Counter("bookie_add_entry_bytes", "Bytes of entries added", registry=r)
        self.read_entries = Counter("bookie_read_entry", "Read requests by outcome", ["status"], registry=r)
        self.read_bytes = Counter("bookie_read_entry_bytes", "Bytes of entries read", registry=r)
        self.journal_sync_seconds = FastHistogram(
            "bookie_journal_sync_seconds", "Journal group write + fdatasync latency", buckets=_LATENCY_BUCKETS, registry=r
        )
        self.journal_group_entries = FastHistogram(
            "bookie_journal_group_entries", "Records per journal group commit", buckets=_COUNT_BUCKETS, registry=r
        )
        self.journal_group_bytes = FastHistogram(
            "bookie_journal_group_bytes", "Bytes per journal group commit", buckets=_BYTES_BUCKETS, registry=r
        )
        self.write_cache_hits = Counter("bookie_write_cache_hits", "Reads served by the write cache", registry=r)
        self.read_cache_hits = Counter("bookie_read_cache_hits", "Reads served by the read cache", registry=r)
        self.read_cache_misses = Counter("bookie_read_cache_misses", "Reads that went to the entry log", registry=r)
        self.write_cache_size = Gauge("bookie_write_cache_size_bytes", "Bytes in the active write cache", registry=r)
        self.read_cache_size = Gauge("bookie_read_cache_size_bytes", "Bytes in the read cache", registry=r)
        self.throttled_adds = Counter("bookie_throttled_add_entry", "Adds that waited for a full write cache", registry=r)
        self.checkpoint_seconds = Histogram(
            "bookie_checkpoint_seconds", "Write-cache flush (checkpoint) duration", buckets=_LATENCY_BUCKETS, registry=r
        )
        self.checkpoint_entries = Counter("bookie_checkpoint_entries", "Entries flushed to entry logs", registry=r)
        self.ledgers = Gauge("bookie_ledgers", "Ledgers known to this bookie", registry=r)
        self.ledger_dir_bytes = Gauge("bookie_ledger_dir_bytes", "Bytes stored in a ledger dir (entry logs, indexes)",
                                      ["dir"], registry=r)
        self.read_only = Gauge("bookie_read_only", "1 while the bookie is read-only", registry=r)
        self.connections = Gauge("bookie_connections", "Open client connections", registry=r)
        # garbage collection (bookie.garbage_collector)
        self.gc_deleted_ledgers = Counter("bookie_gc_deleted_ledgers", "Ledgers dropped by GC (gone from the metadata store)", registry=r)
        self.gc_deleted_entry_logs = Counter("bookie_gc_deleted_entry_logs", "Entry logs deleted by GC or compaction", registry=r)
        self.gc_compacted_entry_logs = Counter("bookie_gc_compacted_entry_logs", "Entry logs compacted", registry=r)
        self.gc_reclaimed_bytes = Counter(
            "bookie_gc_reclaimed_bytes", "Bytes given back by deleting or compacting entry logs", ["by"], registry=r
        )
        self.gc_compaction_read_bytes = Counter(
            "bookie_gc_compaction_read_bytes", "Bytes of entry logs compacted (the old logs' sizes)", registry=r
        )
        self.gc_compaction_written_bytes = Counter(
            "bookie_gc_compaction_written_bytes", "Bytes of compacted logs written", registry=r
        )
        self.gc_compaction_seconds = Counter("bookie_gc_compaction_seconds", "Time spent compacting logs", registry=r)
        self.gc_failed_deletes = Counter("bookie_gc_failed_deletes", "Entry-log deletions that failed (retried)", registry=r)
        self.gc_corrupt_entry_logs = Gauge("bookie_gc_corrupt_entry_logs", "Entry logs skipped as corrupt", registry=r)
        self.entry_logs = Gauge("bookie_entry_logs", "Entry log files per ledger dir", ["dir"], registry=r)
        self.oldest_entry_log_age = Gauge(
            "bookie_oldest_entry_log_age_seconds", "Age (mtime) of the oldest entry log per ledger dir", ["dir"], registry=r
        )
        self.entry_log_usage = Gauge(
            "bookie_entry_log_usage", "Entry logs per usage bucket (live/total bytes, upper bound le)", ["dir", "le"], registry=r
        )
        self.overwrites_refused = Counter(
            "bookie_add_entry_overwrite_refused", "Adds refused for carrying other bytes than the stored entry", registry=r
        )
        self.receive_buffered_bytes = Gauge(
            "bookie_receive_buffered_bytes", "Bytes of partial request frames held for all connections", registry=r
        )
        self.connections_timed_out = Counter(
            "bookie_connections_timed_out", "Connections closed for a request or reply stalled too long", registry=r
        )
        self.disk_full = Gauge("bookie_disk_full", "1 while read-only because a disk ran out of space", registry=r)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
