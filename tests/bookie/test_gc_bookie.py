"""GC through a running bookie: HTTP trigger and details, metrics, suspend/resume, manual
read-only, and a bookie made read-only by a full disk that comes back after retention + GC."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import trio

from bookie import entry_log_format as elf
from bookie.bookie import Bookie
from bookie.protocol import Status
from metadata import open_store
from metadata.ledger_ids import ledger_path
from tests.bookie.gc_workload import log_bytes
from tests.bookie.helpers import BookieClient, entry, make_config
from tests.bookie.test_bookie_inprocess import _samples


async def _wait_gc_done(http: httpx.AsyncClient) -> None:
    with trio.fail_after(30):
        while (await http.get("/api/v1/bookie/gc")).json()["is_in_force_gc"] == "true":
            await trio.sleep(0.05)


def _cfg(tmp_path: Path, **kw):
    return make_config(
        tmp_path,
        http_server_enabled=True,
        http_server_port=0,
        metadata_service_uri="memory://gc",
        log_size_limit=32 * 1024,
        gc_wait_time_ms=3_600_000,
        compaction_rate_by_entries=0,
        **kw,
    )


async def _fill(b: Bookie, c: BookieClient, store, ledgers: list[int], rounds: int) -> dict[tuple[int, int], bytes]:
    expected = {}
    for lid in ledgers:
        await store.create(ledger_path(lid), b"meta", make_parents=True)
    for r in range(rounds):
        for lid in ledgers:
            for e in range(r * 5, r * 5 + 5):
                payload = bytes([lid]) * (700 + e)
                resp = await c.add(lid, e, payload)
                assert resp.status == Status.OK
                expected[(lid, e)] = entry(lid, e, payload)
        await b.sync_thread.checkpoint()
    await b.sync_thread.checkpoint()
    return expected


async def test_http_gc_trigger_details_metrics_and_readonly(tmp_path: Path) -> None:
    store = await open_store(f"memory://gc-{uuid.uuid4().hex}")
    cfg = _cfg(tmp_path)
    async with trio.open_nursery() as nursery:
        b = Bookie(cfg, store)
        await b.start(nursery)
        c = await BookieClient.connect("127.0.0.1", b.port, nursery)
        expected = await _fill(b, c, store, list(range(1, 7)), 6)
        cur = b.storage.dirs[0].current
        before = log_bytes(cur)
        for lid in (2, 4, 6):
            await store.delete(ledger_path(lid))
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{b.http_port}") as http:
            resp = await http.put("/api/v1/bookie/gc", json={"forceMajor": True})
            assert resp.status_code == 200 and resp.json() == f"Triggered GC on BookieServer: {cfg.bookie_id}"
            await _wait_gc_done(http)
            details = (await http.get("/api/v1/bookie/gc_details")).json()
            assert len(details) == 1 and details[0]["majorCompactionCounter"] == 1
            assert set(details[0]) >= {"forceCompacting", "majorCompacting", "minorCompacting",
                                       "lastMajorCompactionTime", "lastMinorCompactionTime", "minorCompactionCounter"}
            live = {k: v for k, v in expected.items() if k[0] % 2}
            live_bytes = sum(len(v) + elf.RECORD_HEADER_SIZE for v in live.values())
            assert log_bytes(cur) < before and log_bytes(cur) <= 1.3 * live_bytes + 8 * elf.HEADER_SIZE
            for (lid, eid), data in sorted(expected.items()):
                resp = await c.read(lid, eid)
                if lid % 2:
                    assert resp.status == Status.OK and resp.body == data
                else:
                    assert resp.status == Status.NO_LEDGER
            # a late add to a collected ledger is refused, it never comes back
            assert (await c.add(2, 100, b"late")).status != Status.OK
            metrics = _samples((await http.get("/metrics")).text)
            assert metrics["bookie_gc_deleted_ledgers_total"] == 3
            assert metrics["bookie_gc_deleted_entry_logs_total"] >= 1
            assert metrics['bookie_gc_reclaimed_bytes_total{by="compaction"}'] > 0
            assert metrics[f'bookie_entry_logs{{dir="{cur}"}}'] >= 1
            assert f'bookie_oldest_entry_log_age_seconds{{dir="{cur}"}}' in metrics
            logs = (await http.get("/api/v1/bookie/entry_logs")).json()[0]["entryLogs"]
            assert any(l["ledgers"] and set(l["ledgers"]) <= {1, 3, 5} for l in logs)
            # suspend / resume
            s = (await http.put("/api/v1/bookie/gc/suspend_compaction", json={"suspendMajor": True})).json()
            assert s == {"isMajorGcSuspended": "true", "isMinorGcSuspended": "false"}
            s = (await http.put("/api/v1/bookie/gc/resume_compaction", json={"resumeMajor": True})).json()
            assert s["isMajorGcSuspended"] == "false"
            assert (await http.put("/api/v1/bookie/gc", content=b"[1]")).status_code == 400
            # manual read-only
            assert (await http.put("/api/v1/bookie/state/readonly", json={"readOnly": True})).json() == {"readOnly": True}
            assert (await c.add(1, 100, b"x")).status == Status.READ_ONLY
            assert cfg.bookie_id in await store.children("/ledgers/available/readonly")
            await trio.to_thread.run_sync(b.registration.check_disks)  # the disk checker leaves it
            assert b.state.read_only
            assert (await http.put("/api/v1/bookie/state/readonly", json={"readOnly": False})).json() == {"readOnly": False}
            assert (await c.add(1, 100, b"x")).status == Status.OK
        await c.aclose()
        await b.close()
        nursery.cancel_scope.cancel()
    await store.close()


async def test_full_disk_read_only_back_to_writable_after_gc(tmp_path: Path) -> None:
    store = await open_store(f"memory://gc-{uuid.uuid4().hex}")
    cfg = _cfg(tmp_path, disk_usage_threshold=0.5, disk_usage_lwm_threshold=0.3, disk_usage_warn_threshold=0.4,
               disk_check_interval_ms=100)
    async with trio.open_nursery() as nursery:
        b = Bookie(cfg, store)
        cur = Path(cfg.ledger_directories[0]) / "current"
        disk = {"total": 100 * 1024 * 1024}
        # A small disk whose only content is the entry logs (statvfs of the real one is useless).
        fake_usage = lambda: (max(0, disk["total"] - (log_bytes(cur) if cur.exists() else 0)), disk["total"])  # noqa: E731
        b.registration.disk_usage = fake_usage
        b.storage.disk_usage = fake_usage  # type: ignore[method-assign]
        await b.start(nursery)
        c = await BookieClient.connect("127.0.0.1", b.port, nursery)
        await _fill(b, c, store, list(range(1, 7)), 8)
        disk["total"] = int(log_bytes(cur) / 0.6)  # the disk is now 60% full: over 0.5
        with trio.fail_after(10):
            while not b.state.read_only:
                await trio.sleep(0.05)
        assert (await c.add(1, 1000, b"x")).status == Status.READ_ONLY
        for lid in range(2, 7):  # retention deleted them
            await store.delete(ledger_path(lid))
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{b.http_port}") as http:
            await http.put("/api/v1/bookie/gc")
            await _wait_gc_done(http)
        with trio.fail_after(10):
            while b.state.read_only:
                await trio.sleep(0.05)
        assert cfg.bookie_id in await store.children("/ledgers/available")
        assert (await c.add(1, 1000, b"x")).status == Status.OK
        await c.aclose()
        await b.close()
        nursery.cancel_scope.cancel()
    await store.close()


async def test_journal_replay_does_not_resurrect_a_collected_ledger(tmp_path: Path) -> None:
    """Adds only in the journal (no checkpoint), ledger collected by GC, bookie stops without
    its final checkpoint: the replay skips the ledger, a late add is refused."""
    store = await open_store(f"memory://gc-{uuid.uuid4().hex}")
    cfg = _cfg(tmp_path, flush_interval_ms=3_600_000)
    await store.create(ledger_path(7), b"meta", make_parents=True)
    await store.create(ledger_path(8), b"meta", make_parents=True)
    async with trio.open_nursery() as nursery:
        b = Bookie(cfg, store)
        await b.start(nursery)
        c = await BookieClient.connect("127.0.0.1", b.port, nursery)
        for e in range(5):
            assert (await c.add(7, e, b"seven")).status == Status.OK
            assert (await c.add(8, e, b"eight")).status == Status.OK
        await store.delete(ledger_path(7))
        await b.gc[0].run_once()
        assert b.storage.is_deleted(7)
        await c.aclose()
        nursery.cancel_scope.cancel()  # no graceful close: the write cache is never flushed
    async with trio.open_nursery() as nursery:
        b = Bookie(cfg, store)
        await b.start(nursery)
        assert b.replayed_records > 0
        assert b.storage.is_deleted(7)
        c = await BookieClient.connect("127.0.0.1", b.port, nursery)
        assert (await c.read(7, 0)).status == Status.NO_LEDGER
        assert (await c.add(7, 5, b"late")).status != Status.OK
        for e in range(5):
            resp = await c.read(8, e)
            assert resp.status == Status.OK and resp.body == entry(8, e, b"eight")
        await c.aclose()
        await b.close()
        nursery.cancel_scope.cancel()
    await store.close()
