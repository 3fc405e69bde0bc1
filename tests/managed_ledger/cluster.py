"""Helpers for integration tests: real bookie subprocesses on a real ZooKeeper.

Fixtures (made available by this package's conftest.py): ``bookie`` (one bookie process), ``ml_config``
(replication 1, no periodic trim), ``driver`` (starts ``ml_driver`` subprocesses that own
the managed ledger ``NAME``; killed at the end). ``owner`` is an in-test "broker": its own
metadata session, ledger client and factory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import metadata
from bookie.client.bookkeeper import BookKeeper
from bookie.client.config import ClientConfig
from managed_ledger import ManagedLedgerConfig, ManagedLedgerFactory
from tests.fixtures.processes import REPO_ROOT, QuireProcess, QuireProcesses

NAME = "t/ns/persistent/it"


def start_bookie(procs: QuireProcesses, zk_url: str, root: Path, index: int = 0) -> QuireProcess:
    """One bookie on a port it picks itself (a port probed free can be taken by another
    process on this shared machine before the bookie binds it); clients find it in the
    metadata store."""
    data = root / f"bookie{index}"
    return procs(
        "bookie",
        "--metadata-url", zk_url,
        "--port", "0",
        "--http-port", "0",
        "--journal-dir", str(data / "journal"),
        "--ledger-dirs", str(data / "ledgers"),
        "--set", "journal_pre_alloc_size_mb=1",
        "--set", "db_storage_write_cache_max_size_mb=16",
        "--set", "db_storage_read_ahead_cache_max_size_mb=16",
        "--set", "disk_usage_threshold=0.999",
        "--set", "disk_usage_lwm_threshold=0.998",
        ready_log=r"ready \(port \d+",
    )


@pytest.fixture
def bookie(quire_procs: QuireProcesses, zk_url: str, tmp_path: Path) -> QuireProcess:
    return start_bookie(quire_procs, zk_url, tmp_path)


@pytest.fixture
def ml_config() -> ManagedLedgerConfig:
    return ManagedLedgerConfig(
        ensemble_size=1, write_quorum=1, ack_quorum=1,
        metadata_ensemble_size=1, metadata_write_quorum=1, metadata_ack_quorum=1,
        retention_check_interval_seconds=3600,
    )


@asynccontextmanager
async def owner(zk_url: str, config: ManagedLedgerConfig) -> AsyncIterator[ManagedLedgerFactory]:
    """One 'broker': its own metadata session, ledger client and factory (``.store``, ``.bk``)."""
    store = await metadata.open_store(zk_url)
    try:
        async with BookKeeper(store, ClientConfig()) as bk:
            with trio.fail_after(20):  # the bookie's port opens before it registers itself
                while not await bk.writable_bookies():
                    await trio.sleep(0.05)
            async with ManagedLedgerFactory(store, bk, config) as factory:
                yield factory
    finally:
        await store.close()


class Driver:
    """The ml_driver subprocess: another process owning the managed ledger."""

    def __init__(self, zk_url: str, name: str, config: dict[str, Any]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.managed_ledger.ml_driver", zk_url, name, json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=str(REPO_ROOT),
        )

    async def reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        with trio.fail_after(60):
            line = await trio.to_thread.run_sync(self.proc.stdout.readline)
        assert line, "driver exited"
        return json.loads(line)

    async def call(self, **cmd: object) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
        self.proc.stdin.flush()
        return await self.reply()

    def kill(self) -> None:
        """SIGKILL: no close, no final flush."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


DRIVER_CONFIG: dict[str, Any] = dict(
    ensemble_size=1, write_quorum=1, ack_quorum=1,
    metadata_ensemble_size=1, metadata_write_quorum=1, metadata_ack_quorum=1,
    max_entries_per_ledger=100, retention_time_minutes=-1, retention_size_mb=-1,
)


@pytest.fixture
def driver(zk_url: str, bookie: QuireProcess) -> Iterator[Callable[..., Driver]]:
    drivers: list[Driver] = []

    def start(**config: Any) -> Driver:
        d = Driver(zk_url, NAME, {**DRIVER_CONFIG, **config})
        drivers.append(d)
        return d

    yield start
    for d in drivers:
        d.kill()
