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
