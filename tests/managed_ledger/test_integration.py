"""The managed ledger against real bookie processes and a real ZooKeeper."""

from __future__ import annotations

import logging

import pytest
import trio

from bookie.client.errors import BKNoSuchLedgerError
from managed_ledger import ManagedLedgerError, ManagedLedgerTerminatedError, Position
from managed_ledger import cursor as cursor_module
from managed_ledger.cursor import NoMoreEntriesError
from managed_ledger.errors import ManagedLedgerWriteError
from tests.managed_ledger.cluster import NAME, owner, start_bookie


async def test_add_read_across_rollovers(bookie, zk_url, ml_config) -> None:
    async with owner(zk_url, ml_config.replace(max_entries_per_ledger=50)) as f:
        ml = await f.open(NAME)
        c = await ml.open_cursor("s", "earliest")
        tail = await ml.open_cursor("tail")  # caught up: follows the adds
        results: dict[int, Position] = {}
        tailed: list[Position] = []

        async def add(i: int) -> None:
            results[i] = await ml.add_entry(b"%05d" % i)

        async def follow() -> None:
            while len(tailed) < 230:
                tailed.extend(e.position for e in await tail.read_entries_or_wait(30))

        hits, misses = f.cache_manager.hits, f.cache_manager.misses
        async with trio.open_nursery() as n:
            n.start_soon(follow)
            for i in range(230):
                n.start_soon(add, i)
                if i % 20 == 0:
                    await trio.sleep(0)
        assert len(ml.ledgers) >= 5
        order = [i for i, _ in sorted(results.items(), key=lambda kv: kv[1])]
        # the tailing cursor was served by the entry cache alone, across the rollovers
        assert tailed == sorted(results.values())
        assert f.cache_manager.hits - hits == 230 and f.cache_manager.misses == misses
        f.cache_manager.max_bytes = 0  # force reads to the bookies
        ml.cache.clear()
        got = []
        while batch := await c.read_entries(64):
            got.extend(batch)
        assert [e.data for e in got] == [b"%05d" % i for i in order]
        assert c.number_of_entries_in_backlog == 230


async def test_cursor_recovery_after_sigkill_of_owner(driver, zk_url, ml_config) -> None:
    d = driver()
    assert "ready" in await d.reply()
    positions = [Position.parse(p) for p in (await d.call(op="add", n=300))["positions"]]
    assert len(positions) == 300 and len({p.ledger_id for p in positions}) == 3
    assert await d.call(op="mark_delete", position=str(positions[49]), properties={"dedup": 42}) == {"ok": True}
    holes = positions[51:150:2]  # 50 individual acks -> 50 ranges above the mark-delete
    assert await d.call(op="delete", positions=[str(p) for p in holes]) == {"ok": True}
    # batch-index acks of entry 200: messages 0 and 1 of 4 acked, bits 2 and 3 still set
    batch = {str(positions[200]): [0b1100]}
    assert await d.call(op="delete", positions=[str(positions[200])], ack_sets=batch) == {"ok": True}
    d.kill()  # SIGKILL: no close, no final flush
    async with owner(zk_url, ml_config.replace(retention_time_minutes=-1, retention_size_mb=-1)) as f:
        ml = await f.open(NAME)
        assert ml.number_of_entries == 300  # every acknowledged add survived
        c = ml.cursors["sub"]
        assert c.mark_delete_position == positions[49] and c.properties == {"dedup": 42}
        assert len(c.individually_deleted_ranges) == 50
        assert c.batch_deleted_indexes == {positions[200]: [0b1100]}
        assert c.number_of_entries_in_backlog == 300 - 50 - 50
        got = []
        while batch := await c.read_entries(100):
            got.extend(e.position for e in batch)
        assert got == [p for p in positions[50:] if p not in set(holes)]


async def test_second_process_fences_the_first(driver, zk_url, ml_config) -> None:
    d = driver()
    assert "ready" in await d.reply()
    acked = [Position.parse(p) for p in (await d.call(op="add", n=40))["positions"]]
    async with owner(zk_url, ml_config.replace(retention_time_minutes=-1, retention_size_mb=-1)) as f:
        ml = await f.open(NAME)  # recovery-opens the first owner's ledger: fenced
        assert (await d.call(op="add", n=1)) == {"error": "ManagedLedgerFencedError"}
        assert (await d.call(op="add", n=1)) == {"error": "ManagedLedgerFencedError"}
        c = await ml.open_cursor("reader", "earliest")
        got = []
        while batch := await c.read_entries(100):
            got.extend(e.position for e in batch)
        assert got == acked  # all data up to the fence is readable by the new owner
        p = await ml.add_entry(b"new owner")
        assert p.ledger_id > acked[-1].ledger_id
        # the old owner cannot move the cursor under the new owner either
        r = await d.call(op="mark_delete", position=str(acked[5]))
        assert r == {"error": "ManagedLedgerFencedError"}


async def test_rollover_by_size_and_time(bookie, zk_url, ml_config) -> None:
    cfg = ml_config.replace(max_size_per_ledger_mb=1, retention_time_minutes=-1, retention_size_mb=-1)
    async with owner(zk_url, cfg) as f:
        ml = await f.open(NAME)
        ps = [await ml.add_entry(b"s" * (300 * 1024)) for _ in range(8)]
        # 4 x 300 KB reach 1 MB: ledgers of 4, 4 entries
        assert [len([p for p in ps if p.ledger_id == lid]) for lid in sorted({p.ledger_id for p in ps})] == [4, 4]
        timed = await f.open(NAME + "-t", cfg.replace(maximum_rollover_time_ms=300))
        a = await timed.add_entry(b"a")
        with trio.fail_after(10):
            while timed.current_ledger_id == a.ledger_id:
                await trio.sleep(0.05)
        b = await timed.add_entry(b"b")
        assert b.ledger_id > a.ledger_id


async def test_empty_ledgers_dropped_on_reopen(bookie, zk_url, ml_config) -> None:
    cfg = ml_config.replace(retention_time_minutes=-1, retention_size_mb=-1)
    async with owner(zk_url, cfg) as f:
        ml = await f.open(NAME)
        await ml.open_cursor("s", "earliest")
        await ml.add_entry(b"one")
        first = ml.current_ledger_id
    for _ in range(2):  # each open adds a ledger; the empty ones must not pile up
        async with owner(zk_url, cfg) as f:
            ml = await f.open(NAME)
            empty = ml.current_ledger_id
    async with owner(zk_url, cfg) as f:
        ml = await f.open(NAME)
        assert [li.ledger_id for li in ml.ledgers][0] == first
        assert [li.entries for li in ml.ledgers] == [1, 0]
        with pytest.raises(BKNoSuchLedgerError):
            await f.bk.get_ledger_metadata(empty)
        c = ml.cursors["s"]
        assert [e.data for e in await c.read_entries(10)] == [b"one"]


async def test_ten_thousand_ack_holes_survive_restart(bookie, zk_url, ml_config, caplog) -> None:
    dropped_before = cursor_module.RANGES_DROPPED_TOTAL
    async with owner(zk_url, ml_config) as f:
        ml = await f.open(NAME)
        c = await ml.open_cursor("s", "earliest")
        ps: list[Position] = []

        async def add(count: int) -> None:
            for _ in range(count):
                ps.append(await ml.add_entry(b""))

        async with trio.open_nursery() as n:  # 100 producers: many adds in flight
            for _ in range(100):
                n.start_soon(add, 201)
        ps.sort()
        with caplog.at_level(logging.WARNING, logger="managed_ledger"):
            await c.delete(ps[1::2])
        assert len(ps) == 20100 and len(c.individually_deleted_ranges) == 10050
        # the overflow beyond max_unacked_ranges_to_persist is logged and counted
        assert "10050 individually deleted ranges, persisting only the first 10000" in caplog.text
        assert c.ranges_dropped_count == 1 and c.stats()["rangesDroppedOnPersist"] == 1
        assert cursor_module.RANGES_DROPPED_TOTAL == dropped_before + 1
        # more than max_unacked_ranges_to_persist_in_metadata_store: stays in the cursor ledger
    async with owner(zk_url, ml_config) as f:
        ml = await f.open(NAME)
        c = ml.cursors["s"]
        # exactly the persisted 10000 ranges come back; the 50 others are redelivered
        assert len(c.individually_deleted_ranges) == 10000
        assert c.number_of_entries_in_backlog == 20100 - 10000
        assert c.stats()["individuallyDeletedMessages"].startswith(f"[({ps[0]}..{ps[1]}]")


async def test_retention_matrix(bookie, zk_url, ml_config) -> None:
    """0/0, -1/-1, time only, size only; consumed ledgers only; the current one kept."""
    entry = b"r" * (100 * 1024)
    async with owner(zk_url, ml_config.replace(max_entries_per_ledger=4)) as f:

        async def scenario(name: str, time_min: int, size_mb: int, consume: int = 16, age_ms: int = 0) -> list[int]:
            ml = await f.open(f"{NAME}-{name}", f.config.replace(retention_time_minutes=time_min, retention_size_mb=size_mb))
            c = await ml.open_cursor("s", "earliest")
            ps = [await ml.add_entry(entry) for _ in range(16)]  # 4 full ledgers of 400 KB
            await ml.rollover()
            before = [li.ledger_id for li in ml.ledgers]
            for li in ml.ledgers[:-1]:
                li.timestamp_ms -= age_ms
            if consume:
                await c.mark_delete(ps[consume - 1])
            await ml.trim()
            after = [li.ledger_id for li in ml.ledgers]
            deleted = [lid for lid in before if lid not in after]
            for lid in deleted:  # gone from the bookies' metadata too
                with pytest.raises(BKNoSuchLedgerError):
                    await f.bk.get_ledger_metadata(lid)
            assert ml.current_ledger_id in after
            return [before.index(lid) for lid in deleted]

        assert await scenario("zero", 0, 0) == [0, 1, 2, 3]
        assert await scenario("zero-partly-consumed", 0, 0, consume=9) == [0, 1]
        assert await scenario("unlimited", -1, -1) == []
        assert await scenario("time-young", 1, -1) == []
        assert await scenario("time-old", 1, -1, age_ms=61_000) == [0, 1, 2, 3]
        # 1600 KB stored: deleting the first leaves 1200 KB >= 1 MB, the second would leave 800 KB
        assert await scenario("size", -1, 1) == [0]
        assert await scenario("size-unconsumed", -1, 0, consume=0) == []


async def test_bookie_killed_mid_stream_nothing_acked_lost(quire_procs, zk_url, tmp_path, ml_config) -> None:
    bookies = [start_bookie(quire_procs, zk_url, tmp_path, i) for i in range(3)]
    cfg = ml_config.replace(
        ensemble_size=2, write_quorum=2, ack_quorum=2, max_entries_per_ledger=150,
        retention_time_minutes=-1, retention_size_mb=-1,
    )
    async with owner(zk_url, cfg) as f:
        with trio.fail_after(20):
            while len(await f.bk.writable_bookies()) < 3:
                await trio.sleep(0.05)
        ml = await f.open(NAME)
        c = await ml.open_cursor("s", "earliest")
        acked: list[Position] = []
        for i in range(400):
            if i == 120:
                bookies[0].kill()  # may be in the current ensemble: the client replaces it
            acked.append(await ml.add_entry(b"%d" % i))
        assert acked == sorted(acked)
        ml.cache.clear()
        got = []
        while batch := await c.read_entries(100):
            got.extend(batch)
        assert [e.position for e in got] == acked
        assert [e.data for e in got] == [b"%d" % i for i in range(400)]


async def test_write_failure_rolls_over_to_a_new_ledger(quire_procs, zk_url, tmp_path, ml_config) -> None:
    first = start_bookie(quire_procs, zk_url, tmp_path, 0)
    cfg = ml_config.replace(retention_time_minutes=-1, retention_size_mb=-1)
    async with owner(zk_url, cfg) as f:
        ml = await f.open(NAME)
        before = [await ml.add_entry(b"%d" % i) for i in range(5)]
        first.kill()  # the ledger's only bookie: the next add fails, no ensemble change possible
        with pytest.raises(ManagedLedgerWriteError):
            await ml.add_entry(b"lost")
        start_bookie(quire_procs, zk_url, tmp_path, 1)
        with trio.fail_after(20):
            while not await f.bk.writable_bookies():
                await trio.sleep(0.05)
        with trio.fail_after(30):
            while True:  # the rollover after the failure creates the next ledger on the new bookie
                try:
                    after = await ml.add_entry(b"after")
                    break
                except ManagedLedgerError:
                    await trio.sleep(0.1)  # the failed bookie may still be listed for a moment
        assert after.ledger_id > before[-1].ledger_id
        assert [(li.ledger_id, li.entries) for li in ml.ledgers][0] == (before[0].ledger_id, 5)
        assert [e.data for e in await ml.read_range(after.ledger_id, 0, after.entry_id)][-1] == b"after"


async def test_terminated_ledger_accepts_no_adds(bookie, zk_url, ml_config) -> None:
    cfg = ml_config.replace(retention_time_minutes=-1, retention_size_mb=-1)
    async with owner(zk_url, cfg) as f:
        ml = await f.open(NAME)
        c = await ml.open_cursor("s", "earliest")
        ps = [await ml.add_entry(b"%d" % i) for i in range(3)]
        assert await ml.terminate() == ps[-1]
        with pytest.raises(ManagedLedgerTerminatedError):
            await ml.add_entry(b"x")
        assert len(await c.read_entries(10)) == 3
        with pytest.raises(NoMoreEntriesError):
            await c.read_entries_or_wait(10)
    async with owner(zk_url, cfg) as f:  # terminated is persistent: no new ledger on open
        ml = await f.open(NAME)
        assert ml.terminated_position == ps[-1] and [li.ledger_id for li in ml.ledgers] == [ps[0].ledger_id]
        with pytest.raises(ManagedLedgerTerminatedError):
            await ml.add_entry(b"x")
