"""A bookie whose disk fills up (issue 10, item 5) on a real small filesystem (a tmpfs; the
tests skip where mounting is not allowed): it turns read-only with a clear error to writers,
keeps serving reads, loses nothing acknowledged, restarts with little free space (old journal
preallocation given back) and becomes writable again once space returns."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from bookie import entry_format
from bookie.protocol import Status
from metadata import open_store
from metadata.errors import NotFoundError
from metadata.ledger_ids import ledger_path
from tests.bookie.helpers import make_config
from tests.fixtures.small_disk import mounted_tmpfs
from tests.bookie.test_bookie_inprocess import start

DISK_MB = 24


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path / "disk", DISK_MB) as mnt:
        yield mnt


def fill(disk: Path, leave: int) -> Path:
    """A file taking all but ``leave`` bytes of the filesystem."""
    st = os.statvfs(disk)
    filler = disk / "filler"
    with open(filler, "wb") as f:
        f.truncate(0)
        os.posix_fallocate(f.fileno(), 0, max(st.f_bavail * st.f_frsize - leave, 1))
    return filler


async def children(store, path: str) -> list[str]:  # noqa: ANN001
    try:
        return await store.children(path)
    except NotFoundError:
        return []


def journal_files(cfg) -> dict[str, int]:  # noqa: ANN001
    cur = Path(cfg.journal_directory) / "current"
    return {p.name: p.stat().st_size for p in cur.glob("*.txn")}


# Which write runs out of space first: the checkpoint (entry log) or the journal.
@pytest.mark.parametrize("first", ["checkpoint", "journal"])
async def test_disk_full_read_only_nothing_lost_restart_and_writable_again(small_disk: Path, first: str) -> None:
    store = await open_store(f"memory://bookie-{uuid.uuid4().hex}")
    await store.create(ledger_path(1), b"meta", make_parents=True)
    # The other kind of dir is on the big disk (a separate journal disk, as BookKeeper advises).
    small, big = small_disk, small_disk.parent
    cfg = make_config(
        big, metadata_service_uri="memory://test", journal_pre_alloc_size_mb=1,
        journal_directory=str((small if first == "journal" else big) / "journal"),
        ledger_directories=[str((small if first == "checkpoint" else big) / "ledgers")],
        db_storage_write_cache_max_size_mb=4, flush_interval_ms=200, disk_check_interval_ms=200,
        disk_full_min_free_mb=4, disk_usage_threshold=1.01, disk_usage_lwm_threshold=0.99,  # ENOSPC, not usage
    )
    payload = os.urandom(16 * 1024)
    acked: list[int] = []
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery, store)
        filler = fill(small_disk, 3 * 1024 * 1024)
        refused = None
        with trio.fail_after(60):
            for eid in range(2000):
                resp = await r.client.add(1, eid, payload)
                if resp.status != Status.OK:
                    refused = resp.status
                    break
                acked.append(eid)
        # a clear answer, the bookie alive and read-only, registered as such
        assert refused == Status.READ_ONLY, refused
        assert acked, "nothing was written before the disk filled"
        assert r.bookie.state.read_only and r.bookie.state.disk_full
        assert r.bookie.state.disk_full.startswith(first)
        assert (await r.client.add(1, len(acked) + 1, payload)).status == Status.READ_ONLY
        with trio.fail_after(5):
            while cfg.bookie_id not in await children(store, "/ledgers/available/readonly"):
                await trio.sleep(0.05)
        for eid in acked:
            assert entry_format.payload((await r.client.read(1, eid)).body) == payload
        # a restart while the disk is still full works, and gives back old preallocation
        await r.stop()
        nursery.cancel_scope.cancel()
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery, store)
        if first == "journal":
            # each file trimmed to its records, or new with no 1 MiB preallocation on a full disk
            sizes = journal_files(cfg)
            assert sizes and all((v - 512) % (64 * 1024) or v <= 512 + 64 * 1024 for v in sizes.values()), sizes
        for eid in acked:
            assert entry_format.payload((await r.client.read(1, eid)).body) == payload
        assert (await r.client.add(1, len(acked), payload)).status == Status.READ_ONLY
        # space returns: writable again, the held entries reach the entry log
        filler.unlink()
        with trio.fail_after(10):
            while r.bookie.state.read_only:
                await trio.sleep(0.05)
        assert not r.bookie.state.disk_full
        for eid in range(len(acked), len(acked) + 20):
            assert (await r.client.add(1, eid, payload)).status == Status.OK
            acked.append(eid)
        await r.bookie.sync_thread.checkpoint()
        with trio.fail_after(5):
            while cfg.bookie_id not in await children(store, "/ledgers/available"):
                await trio.sleep(0.05)
        await r.stop()
        nursery.cancel_scope.cancel()
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery, store)
        for eid in acked:
            assert entry_format.payload((await r.client.read(1, eid)).body) == payload
        await r.stop()
        nursery.cancel_scope.cancel()
    await store.close()


async def test_a_restart_on_a_full_disk_replays_more_than_the_write_cache_holds(small_disk: Path) -> None:
    """A crash leaves more unflushed entries in the journal than the restarted bookie's write
    cache holds, and the ledger disk is full: the replay cannot flush. The bookie must still
    start (read-only, the entries served from memory) instead of failing on ENOSPC, and
    flush them once space returns. (test_disk_full_read_only_...[checkpoint] failed twice in CI
    runs so: its replay needed one flush more than the disk had room for.)"""
    store = await open_store(f"memory://bookie-{uuid.uuid4().hex}")
    await store.create(ledger_path(1), b"meta", make_parents=True)
    big = small_disk.parent
    settings = dict(
        metadata_service_uri="memory://test", journal_pre_alloc_size_mb=1,
        journal_directory=str(big / "journal"), ledger_directories=[str(small_disk / "ledgers")],
        flush_interval_ms=600_000, disk_check_interval_ms=200,
        disk_full_min_free_mb=4, disk_usage_threshold=1.01, disk_usage_lwm_threshold=0.99,
    )
    payload = os.urandom(16 * 1024)
    n = 190  # about 3 MiB: one half of an 8 MiB cache, three halves of a 2 MiB one
    async with trio.open_nursery() as nursery:
        first = make_config(big, db_storage_write_cache_max_size_mb=8, **settings)
        r = await start(first, nursery, store)
        for eid in range(n):
            assert (await r.client.add(1, eid, payload)).status == Status.OK
        nursery.cancel_scope.cancel()  # a crash: acknowledged (journal) but never checkpointed
    r.bookie._close_files()
    filler = fill(small_disk, 1024 * 1024)
    cfg = make_config(big, db_storage_write_cache_max_size_mb=2, bookie_port=first.bookie_port, **settings)
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery, store)
        assert r.bookie.state.read_only and r.bookie.state.disk_full
        for eid in range(n):
            assert entry_format.payload((await r.client.read(1, eid)).body) == payload
        assert (await r.client.add(1, n, payload)).status == Status.READ_ONLY
        filler.unlink()
        with trio.fail_after(10):
            while r.bookie.state.read_only:
                await trio.sleep(0.05)
        await r.bookie.sync_thread.checkpoint()
        await r.stop()
        nursery.cancel_scope.cancel()
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery, store)
        assert r.bookie.replayed_records == 0  # all of it reached the entry logs
        for eid in range(n):
            assert entry_format.payload((await r.client.read(1, eid)).body) == payload
        await r.stop()
        nursery.cancel_scope.cancel()
