"""Helpers for integration tests: real bookie subprocesses on a real ZooKeeper."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.processes import QuireProcesses, free_port


def start_bookie(procs: QuireProcesses, zk_url: str, root: Path, index: int = 0):
    port = free_port()
    data = root / f"bookie{index}"
    return procs(
        "bookie",
        "--metadata-url", zk_url,
        "--port", str(port),
        "--http-port", "0",
        "--journal-dir", str(data / "journal"),
        "--ledger-dirs", str(data / "ledgers"),
        "--set", "journal_pre_alloc_size_mb=1",
        "--set", "db_storage_write_cache_max_size_mb=16",
        "--set", "db_storage_read_ahead_cache_max_size_mb=16",
        "--set", "disk_usage_threshold=0.999",
        "--set", "disk_usage_lwm_threshold=0.998",
        ready_port=port,
    )
