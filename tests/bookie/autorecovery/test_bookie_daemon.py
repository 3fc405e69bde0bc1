"""A bookie with `autorecovery_daemon_enabled` and `bookie_rack` (in process, memory store)."""

from __future__ import annotations

import uuid
from pathlib import Path

import trio

from bookie.autorecovery.underreplication import UnderReplicationManager
from bookie.bookie import Bookie
from metadata import open_store
from tests.bookie.helpers import make_config


async def test_bookie_declares_its_rack_and_runs_the_auditor(tmp_path: Path) -> None:
    store = await open_store(f"memory://bookie-{uuid.uuid4().hex}")
    try:
        cfg = make_config(tmp_path, metadata_service_uri="memory://x", bookie_rack="/rack-a",
                          autorecovery_daemon_enabled=True, http_server_enabled=False)
        async with trio.open_nursery() as nursery:
            bookie = Bookie(cfg, store)
            await bookie.start(nursery)
            assert (await store.get(f"/bookies/{bookie.bookie_id}/rack"))[0] == b"/rack-a"
            with trio.fail_after(10):
                while not bookie.autorecovery.auditor.is_auditor:
                    await trio.sleep(0.02)
            assert (await UnderReplicationManager(store).auditor()).startswith(bookie.bookie_id)
            assert b"auditor_elected 1.0" in bookie.metrics.exposition()
            await bookie.close()  # stops the daemon too
            nursery.cancel_scope.cancel()
        assert not bookie.autorecovery.auditor.is_auditor
    finally:
        await store.close()


async def test_a_failing_autorecovery_restarts_instead_of_taking_the_bookie_down(tmp_path: Path, monkeypatch) -> None:
    from bookie.autorecovery.replication_worker import ReplicationWorker

    calls = []

    async def broken_once(self):
        calls.append(self)
        if len(calls) == 1:
            raise RuntimeError("a bug")
        return 0

    monkeypatch.setattr(ReplicationWorker, "run_once", broken_once)
    store = await open_store(f"memory://bookie-{uuid.uuid4().hex}")
    try:
        cfg = make_config(tmp_path, metadata_service_uri="memory://x", autorecovery_daemon_enabled=True,
                          http_server_enabled=False, rw_rereplicate_backoff_ms=50)
        async with trio.open_nursery() as nursery:
            bookie = Bookie(cfg, store)
            await bookie.start(nursery)
            with trio.fail_after(10):
                while len({id(w) for w in calls}) < 2:  # a second worker: the service restarted
                    await trio.sleep(0.02)
            assert bookie.state.running
            await bookie.close()
            nursery.cancel_scope.cancel()
    finally:
        await store.close()
