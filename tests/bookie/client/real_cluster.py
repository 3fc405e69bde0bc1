"""Real bookie processes for the ledger client's integration tests (`quire bookie` + ZooKeeper)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

import metadata
from bookie.client import ClientConfig
from metadata.store import MetadataStore
from tests.fixtures.processes import QuireProcess, QuireProcesses, free_port


class RealBookie:
    def __init__(self, procs: QuireProcesses, zk_url: str, base: Path, index: int, extra: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.http_port = free_port()
        self.bookie_id = f"127.0.0.1:{self.port}"
        base = base / f"bookie-{index}"
        self.proc: QuireProcess = procs(
            "bookie",
            "--metadata-url", zk_url,
            "--port", str(self.port),
            "--http-port", str(self.http_port),
            "--journal-dir", str(base / "journal"),
            "--ledger-dirs", str(base / "ledgers"),
            "--log-level", "WARNING",
            *extra,
            ready_port=self.port,
            timeout=60.0,
        )

    def kill(self) -> None:
        self.proc.kill()

    async def restart(self) -> None:
        self.proc.kill()
        self.proc.start()
        await self.proc.wait_ready_async(60.0)


async def start_bookies(procs: QuireProcesses, zk_url: str, base: Path, n: int,
                        store: MetadataStore, extra: tuple[str, ...] = ()) -> list[RealBookie]:
    """``extra``: more `quire bookie` arguments for every bookie (e.g. ``--set key=value``)."""
    bookies = [RealBookie(procs, zk_url, base, i, extra) for i in range(n)]
    await wait_registered(store, {b.bookie_id for b in bookies})
    return bookies


async def wait_registered(store: MetadataStore, ids: set[str], timeout: float = 30.0) -> None:
    with trio.fail_after(timeout):
        while True:
            try:
                if ids <= set(await store.children("/ledgers/available")):
                    return
            except Exception:
                pass
            await trio.sleep(0.1)


def client_config() -> ClientConfig:
    """Timeouts for real bookies on a loaded machine, short enough for fault tests."""
    return ClientConfig(add_entry_timeout_s=3.0, read_timeout_s=3.0, client_connect_timeout_ms=2000)


@pytest.fixture
async def zk_store(zk_url):
    """The test's ZooKeeper chroot as a metadata store."""
    store = await metadata.open_store(zk_url)
    try:
        yield store
    finally:
        await store.close()
