"""In-process bookie tests of the write path's edges: write-cache throttling on the wire,
a fence racing a throttled add, journal deletion after checkpoints, a lastMark that never
moves backwards, and metadata-store failures answered as IO."""

from __future__ import annotations

import uuid
from pathlib import Path

import trio

from bookie import entry_format, log_mark
from bookie.journal import list_journal_ids
from bookie.ledger_storage import ledger_dirs_current
from bookie.log_mark import LogMark
from bookie.protocol import Flag, Status
from metadata import open_store
from metadata.errors import StoreUnavailableError
from metadata.ledger_ids import ledger_path
from tests.bookie.helpers import MASTER_KEY, BookieClient
from tests.bookie.test_bookie_inprocess import start
from tests.bookie.helpers import make_config


async def test_full_write_cache_throttles_then_too_many_requests_and_fence_wins(tmp_path: Path) -> None:
    # halves of 512 KiB; five 100 KiB entries fill one
    cfg = make_config(tmp_path, db_storage_write_cache_max_size_mb=1, db_storage_max_throttle_time_ms=300)
    big = bytes(100 * 1024)
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        other = await BookieClient.connect("127.0.0.1", r.bookie.port, nursery)
        storage = r.bookie.storage
        async with storage._flush_lock:  # a checkpoint that cannot make progress
            for i in range(5):
                assert (await r.client.add(1, i, big)).status == Status.OK
            t0 = trio.current_time()
            assert (await r.client.add(1, 5, big)).status == Status.TOO_MANY_REQUESTS
            assert trio.current_time() - t0 >= 0.3  # it waited max_throttle_time_ms first
            # a throttled add must re-check the ledger after waiting: a fence answered
            # meanwhile wins, the add is refused (never acknowledged after the fence)
            cfg.db_storage_max_throttle_time_ms = 10_000
            result: list[int] = []

            async def blocked_add() -> None:
                result.append((await r.client.add(1, 5, big)).status)

            nursery.start_soon(blocked_add)
            await trio.sleep(0.1)
            assert result == []
            fence = await other.read(1, -1, flags=Flag.FENCE, master_key=MASTER_KEY)
            assert fence.status == Status.OK and fence.entry_id == 4
        with trio.fail_after(10):
            while not result:
                await trio.sleep(0.01)
        assert result == [Status.FENCED]
        assert (await other.add(1, 5, big, flags=Flag.RECOVERY_ADD)).status == Status.OK
        resp = await other.read(1, 5)
        assert resp.status == Status.OK and entry_format.payload(resp.body) == big
        await other.aclose()
        await r.stop()
        nursery.cancel_scope.cancel()


async def test_checkpoint_deletes_old_journals_and_mark_never_moves_back(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, journal_max_size_mb=1, journal_max_backups=1, journal_flush_when_queue_empty=True)
    dirs = ledger_dirs_current(cfg)
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        current = r.bookie.journal.current_dir
        first = list_journal_ids(current)[-1]
        for i in range(60):  # ~3.6 MB of journal: rolls to new files several times
            assert (await r.client.add(2, i, bytes([i]) * 60_000)).status == Status.OK
        mark = r.bookie.journal.durable_mark
        assert mark.file_id >= first + 3
        assert await r.bookie.sync_thread.checkpoint() == mark
        assert log_mark.read_mark(dirs) == mark
        older = [i for i in list_journal_ids(current) if i < mark.file_id]
        assert len(older) == cfg.journal_max_backups and first not in older  # deleted beyond the backups
        # a checkpoint with a stale (older) journal position must not move the mark back
        r.bookie.journal.durable_mark = LogMark(first, 512)
        assert await r.bookie.sync_thread.checkpoint() == mark
        assert log_mark.read_mark(dirs) == mark
        r.bookie.journal.durable_mark = mark
        for i in range(60, 70):
            assert (await r.client.add(2, i, b"after")).status == Status.OK
        r.bookie.state.shutting_down = True  # crash: the last adds live only in the journal
        r.bookie._cancel.cancel()
        await r.bookie._stopped.wait()
        nursery.cancel_scope.cancel()
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        assert r.bookie.replayed_records >= 10
        assert log_mark.read_mark(dirs) >= mark
        for i in (0, 59, 69):
            resp = await r.client.read(2, i)
            assert resp.status == Status.OK and entry_format.verify(resp.body).entry_id == i
        await r.stop()
        nursery.cancel_scope.cancel()


async def test_metadata_store_failure_answers_io_and_bookie_keeps_serving(tmp_path: Path) -> None:
    store = await open_store(f"memory://bookie-{uuid.uuid4().hex}")
    cfg = make_config(tmp_path, metadata_service_uri="memory://test")
    await store.create(ledger_path(1), b"meta", make_parents=True)
    try:
        async with trio.open_nursery() as nursery:
            r = await start(cfg, nursery, store)

            async def unavailable(ledger_id: int) -> bool:
                raise StoreUnavailableError("no answer")

            r.bookie.processor.ledger_exists = unavailable
            # outcome unknown: IO (the client may retry), not NO_LEDGER and not a crash
            assert (await r.client.add(3, 0, b"x")).status == Status.IO
            assert (await r.client.add(1, 0, b"x")).status == Status.IO
            r.bookie.processor.ledger_exists = r.bookie._ledger_exists
            assert (await r.client.add(1, 0, b"x")).status == Status.OK
            assert (await r.client.add(3, 0, b"x")).status == Status.NO_LEDGER
            await r.stop()
            nursery.cancel_scope.cancel()
    finally:
        await store.close()
