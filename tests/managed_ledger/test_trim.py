"""Trimming wired into the managed ledger (fake ledger client)."""

from __future__ import annotations

import trio

from managed_ledger import Position

from managed_ledger.formats import decode_ml_info

NAME = "t/ns/persistent/trim"


async def setup(factory, config, n=10, per_ledger=4, **retention):
    # 10 entries, 4 per ledger: ledgers of 4, 4 and 2 (the current one, not full)
    ml = await factory.open(NAME, config.replace(max_entries_per_ledger=per_ledger, **retention))
    c = await ml.open_cursor("s", "earliest")
    ps = [await ml.add_entry(b"x" * 100) for _ in range(n)]
    await ml.trim()
    return ml, c, ps


async def test_consumed_ledgers_deleted_with_zero_retention(factory, config, bookies, meta) -> None:
    ml, c, ps = await setup(factory, config)
    assert len(ml.ledgers) == 3  # nothing consumed yet
    await c.mark_delete(ps[5])  # ledger 1 fully consumed
    await ml.trim()
    ids = [li.ledger_id for li in ml.ledgers]
    assert ps[0].ledger_id not in ids and ps[0].ledger_id not in bookies.ledgers
    assert [li.ledger_id for li in decode_ml_info(meta.nodes[ml.path][0]).ledgers] == ids
    await c.mark_delete(ps[-1])
    await ml.trim()
    assert [li.ledger_id for li in ml.ledgers] == [ml.current_ledger_id]  # current ledger kept
    assert c.number_of_entries_in_backlog == 0
    p = await ml.add_entry(b"y")
    assert [e.position for e in await c.read_entries(5)] == [p]


async def test_trim_runs_by_itself_after_mark_delete(factory, config) -> None:
    ml, c, ps = await setup(factory, config)
    await c.mark_delete(ps[7])
    with trio.fail_after(5):
        while len(ml.ledgers) != 1:
            await trio.sleep(0.01)


async def test_unlimited_retention_keeps_consumed_ledgers(factory, config) -> None:
    ml, c, ps = await setup(factory, config, retention_time_minutes=-1, retention_size_mb=-1)
    await c.mark_delete(ps[-1])
    assert await ml.trim() == [] and len(ml.ledgers) == 3


async def test_size_retention(factory, config) -> None:
    ml = await factory.open(NAME, config.replace(max_entries_per_ledger=1, retention_time_minutes=-1, retention_size_mb=1))
    c = await ml.open_cursor("s", "earliest")
    ps = [await ml.add_entry(b"x" * (400 * 1024)) for _ in range(5)]
    await c.mark_delete(ps[-1])
    await ml.trim()
    # 5 ledgers of 400 KB: keep deleting while what is left stays >= 1 MB
    assert sum(li.size for li in ml.ledgers) >= 1024 * 1024
    assert [li.entries for li in ml.ledgers] == [1, 1, 1, 0]  # 3 x 400 KB kept + the current ledger


async def test_time_retention(factory, config) -> None:
    ml, c, ps = await setup(factory, config, retention_time_minutes=1, retention_size_mb=-1)
    await c.mark_delete(ps[-1])
    assert await ml.trim() == []  # consumed but younger than a minute
    for li in ml.ledgers[:-1]:
        li.timestamp_ms -= 61_000
    assert len(await ml.trim()) == 2


async def test_unconsumed_ledgers_are_kept(factory, config) -> None:
    ml, c, ps = await setup(factory, config)
    await c.mark_delete(ps[2])
    assert await ml.trim() == []


async def test_no_durable_cursor_deletes_all_but_current_and_moves_readers(factory, config) -> None:
    ml = await factory.open(NAME, config.replace(max_entries_per_ledger=4))
    reader = ml.open_non_durable_cursor(None)
    reader2 = ml.open_non_durable_cursor(Position(-1, -1))
    ps = [await ml.add_entry(b"x") for _ in range(10)]
    await ml.trim()  # (rollovers trimmed already: readers do not hold data)
    assert [li.ledger_id for li in ml.ledgers] == [ml.current_ledger_id]
    assert reader2.mark_delete_position == ps[7]
    assert [e.position for e in await reader2.read_entries(10)] == ps[8:]
    assert len(await reader.read_entries(10)) == 2
    late = ml.open_non_durable_cursor(ps[0])  # before the first stored entry: starts there
    assert [e.position for e in await late.read_entries(10)] == ps[8:]


async def test_periodic_trim_without_traffic(meta, bookies, config) -> None:
    from managed_ledger import ManagedLedgerFactory

    cfg = config.replace(retention_check_interval_seconds=0.05, max_entries_per_ledger=2)
    async with ManagedLedgerFactory(meta.client(), bookies.client(), cfg) as f:
        ml = await f.open(NAME, cfg.replace(retention_time_minutes=-1, retention_size_mb=-1))
        c = await ml.open_cursor("s", "earliest")
        ps = [await ml.add_entry(b"x") for _ in range(6)]
        await c.mark_delete(ps[-1])
        await trio.sleep(0.1)
        assert [li.entries for li in ml.ledgers] == [2, 2, 2, 0]
        ml.set_config(retention_time_minutes=0, retention_size_mb=0)
        with trio.fail_after(5):
            while len(ml.ledgers) > 1:
                await trio.sleep(0.02)
