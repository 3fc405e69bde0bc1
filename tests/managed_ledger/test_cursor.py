"""ManagedCursor over the fake ledger client: reads, acks, persistence, recovery."""

from __future__ import annotations

import logging

import pytest
import trio

from managed_ledger import ManagedLedgerFactory, ManagedLedgerFencedError, Position
from managed_ledger.ack_set import AckSet
from managed_ledger.cursor import NoMoreEntriesError
from managed_ledger.formats import decode_cursor_info
from quire import invariants
from quire.invariants import InvariantViolation

NAME = "t/ns/persistent/c"


async def fill(ml, n: int, prefix: str = "m") -> list[Position]:
    return [await ml.add_entry(f"{prefix}{i}".encode()) for i in range(n)]


async def test_read_across_ledgers_in_batches(factory, config) -> None:
    ml = await factory.open(NAME, config.replace(max_entries_per_ledger=7))
    c = await ml.open_cursor("s", "earliest")
    ps = await fill(ml, 30)
    assert len(ml.ledgers) == 5
    got = []
    while batch := await c.read_entries(4):
        got.extend(batch)
    assert [e.position for e in got] == ps
    assert c.number_of_entries_in_backlog == 30 and not c.has_more_entries


async def test_concurrent_opens_of_one_cursor_share_it(factory) -> None:
    ml = await factory.open(NAME)
    await fill(ml, 3)
    opened = []

    async def open_one() -> None:
        opened.append(await ml.open_cursor("s", initial_position="earliest"))

    async with trio.open_nursery() as nursery:
        for _ in range(4):
            nursery.start_soon(open_one)
    assert len({id(c) for c in opened}) == 1 and ml.cursors["s"] is opened[0]
    await opened[0].mark_delete(opened[0].read_position)
    await opened[0].flush()
    await ml.add_entry(b"still the owner")  # not fenced by its own second open


async def test_latest_cursor_starts_after_existing(factory) -> None:
    ml = await factory.open(NAME)
    await fill(ml, 3)
    c = await ml.open_cursor("s")
    assert c.number_of_entries_in_backlog == 0 and await c.read_entries(10) == []
    p = await ml.add_entry(b"new")
    assert [e.position for e in await c.read_entries(10)] == [p]


async def test_individual_deletes_collapse_and_are_skipped(factory, config) -> None:
    ml = await factory.open(NAME, config.replace(max_entries_per_ledger=5))
    c = await ml.open_cursor("s", "earliest")
    ps = await fill(ml, 12)
    await c.delete([ps[1], ps[2], ps[6]])
    assert c.mark_delete_position == ml.previous_position(ps[0])
    assert c.number_of_entries_in_backlog == 9
    await c.delete([ps[0]])  # touches the mark-delete: collapse to ps[2]
    assert c.mark_delete_position == ps[2]
    await c.delete([ps[3], ps[4]])  # end of ledger 1 -> next is first entry of ledger 2
    assert c.mark_delete_position == ps[4]
    await c.delete([ps[5]])  # crosses the ledger boundary, then absorbs ps[6]
    assert c.mark_delete_position == ps[6] and len(c.individually_deleted_ranges) == 0
    await c.delete([ps[9]])
    assert [e.position for e in await c.read_entries(100)] == [ps[7], ps[8], ps[10], ps[11]]
    await c.mark_delete(ps[10])
    assert c.number_of_entries_in_backlog == 1 and len(c.individually_deleted_ranges) == 0


async def test_batch_index_acks(factory) -> None:
    ml = await factory.open(NAME)
    c = await ml.open_cursor("s", "earliest")
    ps = await fill(ml, 2)
    full = AckSet.all_unacked(10)
    # ack messages 0..4 of entry 0: bits 5..9 stay set
    await c.delete([ps[0]], {ps[0]: AckSet.from_indexes(range(5, 10)).to_words()})
    assert c.batch_deleted_indexes == {ps[0]: AckSet.from_indexes(range(5, 10)).to_words()}
    assert c.number_of_entries_in_backlog == 2
    await c.delete([ps[0]], {ps[0]: AckSet.from_indexes(range(0, 5)).to_words()})
    assert c.batch_deleted_indexes == {} and c.mark_delete_position == ps[0]
    assert full.cardinality() == 10


async def test_mark_delete_properties_and_persistence_roundtrip(meta, bookies, config, crash) -> None:
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f:
        ml = await f.open(NAME)
        c = await ml.open_cursor("s", "earliest")
        ps = await fill(ml, 20)
        await c.mark_delete(ps[4], {"dedup": 42})
        await c.delete([ps[7], ps[8], ps[12]])
        await c.delete([ps[15]], {ps[15]: [0b1100]})
        info = decode_cursor_info(meta.nodes[c.path][0])
        assert info.cursors_ledger_id > 0  # a cursor ledger holds the position records
        crash.kill()
    crash.restore()
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f:
        ml = await f.open(NAME)
        c = ml.cursors["s"]
        assert c.mark_delete_position == ps[4] and c.properties == {"dedup": 42}
        assert c.individually_deleted_ranges.ranges() == [(ps[7].as_tuple(), ps[8].as_tuple()), (ps[12].as_tuple(),) * 2]
        assert c.batch_deleted_indexes == {ps[15]: [0b1100]}
        assert c.number_of_entries_in_backlog == 20 - 5 - 3
        assert [e.position for e in await c.read_entries(3)] == [ps[5], ps[6], ps[9]]
        await ml.close()  # small state: goes to the node, cursor ledger deleted
        info = decode_cursor_info(meta.nodes[c.path][0])
        assert info.cursors_ledger_id == -1 and info.position.mark_delete == ps[4].as_tuple()
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f:
        ml = await f.open(NAME)
        c = ml.cursors["s"]
        assert c.mark_delete_position == ps[4] and c.number_of_entries_in_backlog == 12


async def test_cursor_ledger_lost_rolls_back_to_node(meta, bookies, config, crash) -> None:
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f:
        ml = await f.open(NAME)
        c = await ml.open_cursor("s", "earliest")
        ps = await fill(ml, 5)
        await c.mark_delete(ps[1])  # creates the cursor ledger; node holds ps[1] as fallback
        await c.mark_delete(ps[3])
        cursor_ledger = decode_cursor_info(meta.nodes[c.path][0]).cursors_ledger_id
        crash.kill()
    crash.restore()
    del bookies.ledgers[cursor_ledger]
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f:
        ml = await f.open(NAME)
        assert ml.cursors["s"].mark_delete_position == ps[1]


async def test_cursor_ledger_write_failure_falls_back_to_node(meta, bookies, config) -> None:
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f:
        ml = await f.open(NAME)
        c = await ml.open_cursor("s", "earliest")
        ps = await fill(ml, 5)
        await c.mark_delete(ps[0])
        bookies.fail_adds = 1
        await c.mark_delete(ps[2])
        info = decode_cursor_info(meta.nodes[c.path][0])
        assert info.cursors_ledger_id == -1 and info.position.mark_delete == ps[2].as_tuple()
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f:
        ml = await f.open(NAME)
        assert ml.cursors["s"].mark_delete_position == ps[2]


async def test_cursor_ledger_rolls_over(meta, bookies, config, crash) -> None:
    cfg = config.replace(metadata_max_entries_per_ledger=3)
    async with ManagedLedgerFactory(meta.client(), bookies.client(), cfg) as f:
        ml = await f.open(NAME)
        c = await ml.open_cursor("s", "earliest")
        ps = await fill(ml, 10)
        seen = set()
        for p in ps:
            await c.mark_delete(p)
            seen.add(decode_cursor_info(meta.nodes[c.path][0]).cursors_ledger_id)
        assert len(seen) >= 3
        live = [l for l in bookies.ledgers.values() if l.custom_metadata.get("component") == b"managed-ledger-cursor"]
        assert len(live) == 1  # old cursor ledgers are deleted
        crash.kill()
    crash.restore()
    async with ManagedLedgerFactory(meta.client(), bookies.client(), cfg) as f:
        ml = await f.open(NAME)
        assert ml.cursors["s"].mark_delete_position == ps[-1]


async def test_too_many_ranges_truncated_logged_and_counted(meta, bookies, config, caplog, crash) -> None:
    cfg = config.replace(max_unacked_ranges_to_persist=5, max_unacked_ranges_to_persist_in_metadata_store=2)
    async with ManagedLedgerFactory(meta.client(), bookies.client(), cfg) as f:
        ml = await f.open(NAME)
        c = await ml.open_cursor("s", "earliest")
        ps = await fill(ml, 40)
        with caplog.at_level(logging.WARNING, logger="managed_ledger"):
            await c.delete(ps[1:40:2])  # 20 holes
        assert len(c.individually_deleted_ranges) == 20
        assert c.ranges_dropped_count >= 1 and "persisting only the first 5" in caplog.text
        assert c.stats()["rangesDroppedOnPersist"] >= 1
        crash.kill()
    crash.restore()
    async with ManagedLedgerFactory(meta.client(), bookies.client(), cfg) as f:
        ml = await f.open(NAME)
        c = ml.cursors["s"]
        # exactly what was persisted: the first 5 ranges; the rest are redelivered
        assert len(c.individually_deleted_ranges) == 5
        assert c.number_of_entries_in_backlog == 40 - 5


async def test_ten_thousand_holes_persist_and_recover(meta, bookies, config, crash) -> None:
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f:
        ml = await f.open(NAME)
        c = await ml.open_cursor("s", "earliest")
        ps = [await ml.add_entry(b"") for _ in range(20002)]
        await c.delete(ps[1::2])
        assert len(c.individually_deleted_ranges) == 10001
        assert c.number_of_entries_in_backlog == 10001
        crash.kill()
    crash.restore()
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f:
        ml = await f.open(NAME)
        c = ml.cursors["s"]
        assert len(c.individually_deleted_ranges) == 10000  # max_unacked_ranges_to_persist
        assert c.number_of_entries_in_backlog == 10002


async def test_read_entries_or_wait_wakes_on_add(factory) -> None:
    ml = await factory.open(NAME)
    c = await ml.open_cursor("s")
    got = []

    async def reader() -> None:
        got.extend(await c.read_entries_or_wait(10))

    async with trio.open_nursery() as n:
        n.start_soon(reader)
        await trio.sleep(0.05)
        assert got == []
        p = await ml.add_entry(b"wake")
    assert [e.position for e in got] == [p]


async def test_read_or_wait_on_terminated_ledger(factory) -> None:
    ml = await factory.open(NAME)
    c = await ml.open_cursor("s", "earliest")
    await fill(ml, 2)
    await ml.terminate()
    assert len(await c.read_entries_or_wait(10)) == 2
    with pytest.raises(NoMoreEntriesError):
        await c.read_entries_or_wait(10)


async def test_tailing_reads_come_from_the_cache(factory, bookies) -> None:
    ml = await factory.open(NAME)
    c = await ml.open_cursor("s")
    await fill(ml, 50)
    hits0, misses0 = factory.cache_manager.hits, factory.cache_manager.misses
    assert len(await c.read_entries(100)) == 50
    assert factory.cache_manager.hits - hits0 == 50 and factory.cache_manager.misses == misses0
    assert ml.cache.size == 0  # every active cursor read them: evicted


async def test_seek_reset_and_find(factory, config) -> None:
    ml = await factory.open(NAME, config.replace(max_entries_per_ledger=4, retention_time_minutes=-1, retention_size_mb=-1))
    c = await ml.open_cursor("s", "earliest")
    ps = await fill(ml, 10)
    # entries carry their "publish time" = index
    newest = await c.find_newest_matching(lambda e: int(e.data[1:]) <= 6)
    assert newest == ps[6]
    assert await c.find_newest_matching(lambda e: False) is None
    await c.reset_cursor(ps[5])
    assert c.mark_delete_position == ps[4] and c.read_position == ps[5]
    assert c.number_of_entries_in_backlog == 5
    await c.reset_cursor(ps[0])
    assert c.number_of_entries_in_backlog == 10
    await c.seek(ps[8])
    assert [e.position for e in await c.read_entries(10)] == [ps[8], ps[9]]
    await c.skip_entries(3)
    assert c.mark_delete_position == ps[2]
    await c.clear_backlog()
    assert c.number_of_entries_in_backlog == 0
    # TTL: everything "published" before 7 expires
    c2 = await ml.open_cursor("ttl", "earliest")
    assert await c2.expire_entries(lambda e: int(e.data[1:]) < 7) == ps[6]
    assert c2.number_of_entries_in_backlog == 3


async def test_non_durable_cursor(factory, meta) -> None:
    ml = await factory.open(NAME)
    ps = await fill(ml, 5)
    r = ml.open_non_durable_cursor(ps[2])
    assert [e.position for e in await r.read_entries(10)] == ps[2:]
    r2 = ml.open_non_durable_cursor(ps[2], inclusive=False)
    assert [e.position for e in await r2.read_entries(10)] == ps[3:]
    r3 = ml.open_non_durable_cursor(Position(-1, -1))
    assert len(await r3.read_entries(10)) == 5
    await r3.mark_delete(ps[4])
    assert not any(p.startswith(ml.path + "/") for p in meta.nodes)


async def test_delete_cursor(factory, meta) -> None:
    ml = await factory.open(NAME)
    c = await ml.open_cursor("s")
    await fill(ml, 2)
    await c.mark_delete(ml.last_confirmed_entry)
    await ml.delete_cursor("s")
    assert c.path not in meta.nodes and "s" not in ml.cursors


async def test_throttled_mark_delete_is_flushed_later(meta, bookies, config) -> None:
    cfg = config.replace(throttle_mark_delete=1.0, cursor_position_flush_seconds=0.1)
    async with ManagedLedgerFactory(meta.client(), bookies.client(), cfg) as f:
        ml = await f.open(NAME)
        c = await ml.open_cursor("s", "earliest")
        ps = await fill(ml, 5)
        await c.mark_delete(ps[0])  # persisted (first in this second)
        await c.mark_delete(ps[3])  # throttled: only in memory for now
        assert c.is_dirty
        with trio.fail_after(5):  # the background loop flushes the dirty position
            while c.is_dirty:
                await trio.sleep(0.02)


async def test_cursor_properties_and_is_deleted_survive_reopen(meta, bookies, config) -> None:
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f:
        ml = await f.open(NAME)
        c = await ml.open_cursor("s", "earliest")
        ps = await fill(ml, 4)
        await c.set_cursor_properties({"owner": "spark"})
        await c.delete([ps[2]])
        assert c.is_deleted(ps[2]) and not c.is_deleted(ps[1])
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f:
        ml = await f.open(NAME)
        c = ml.cursors["s"]
        assert c.cursor_properties == {"owner": "spark"} and c.is_deleted(ps[2])
        assert not ml.is_terminated


async def test_stale_owner_cannot_overwrite_recovered_cursor(meta, bookies, config) -> None:
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f1:
        ml1 = await f1.open(NAME)
        c1 = await ml1.open_cursor("s", "earliest")
        ps = await fill(ml1, 10)
        await c1.mark_delete(ps[2])  # position lives in c1's cursor ledger
        async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f2:
            ml2 = await f2.open(NAME)  # takes over; ml1 has not noticed (no add since)
            c2 = ml2.cursors["s"]
            assert c2.mark_delete_position == ps[2]
            with pytest.raises(ManagedLedgerFencedError):
                await c1.mark_delete(ps[8])  # cursor ledger fenced -> node CAS loses
            assert ml1.is_fenced
            await c2.mark_delete(ps[4])  # the new owner is unaffected
        async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f3:
            ml3 = await f3.open(NAME)
            assert ml3.cursors["s"].mark_delete_position == ps[4]


async def test_dirty_position_flushed_one_flush_period_after_it_became_dirty(meta, bookies, config, autojump_clock) -> None:
    # TTL checks wake the background loop every 50 ms: they must not flush early
    cfg = config.replace(
        throttle_mark_delete=0.001, cursor_position_flush_seconds=10,
        message_ttl_seconds=3600, message_expiry_check_interval_seconds=0.05,
    )
    async with ManagedLedgerFactory(meta.client(), bookies.client(), cfg) as f:
        ml = await f.open(NAME)
        c = await ml.open_cursor("s", "earliest")
        ps = await fill(ml, 5)
        await c.mark_delete(ps[0])  # persisted
        await c.mark_delete(ps[3])  # throttled: dirty
        await trio.sleep(9)
        assert c.is_dirty
        await trio.sleep(2)
        assert not c.is_dirty
        assert decode_cursor_info(meta.nodes[c.path][0]).cursors_ledger_id > 0


async def test_mark_delete_never_moves_back_except_by_a_reset(factory) -> None:
    ml = await factory.open(NAME)
    ps = [await ml.add_entry(b"m%d" % i) for i in range(6)]
    c = await ml.open_cursor("s", "earliest")
    await c.mark_delete(ps[3])
    await c.mark_delete(ps[1])  # an older cumulative ack is a no-op, not a move back
    assert c.mark_delete_position == ps[3]
    before = invariants.violations
    with pytest.raises(InvariantViolation, match="mark-delete moving back"):
        c._move_mark_delete(ps[1])  # what a bug in an ack path would do
    assert invariants.violations == before + 1
    await c.reset_cursor(ps[0])  # a seek the user asked for may move it back
    assert c.mark_delete_position < ps[3]
