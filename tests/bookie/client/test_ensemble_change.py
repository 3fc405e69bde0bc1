"""Ensemble changes, fencing of the writer, and close conflicts (fake bookies)."""

from __future__ import annotations

import dataclasses

import pytest
import trio

from bookie.client import (
    BKLedgerFencedError,
    BKMetadataVersionError,
    BKNotEnoughBookiesError,
    BookKeeper,
    LedgerState,
)
from bookie.client.ledger_metadata import encode_metadata
from bookie.protocol import Status
from metadata.ledger_ids import ledger_path
from tests.bookie.client.conftest import fast_config


async def _add_many(lh, n, start=0):
    acked = {}

    async def add(i):
        acked[await lh.add_entry(b"e%d" % i)] = b"e%d" % i

    async with trio.open_nursery() as nursery:
        for i in range(start, start + n):
            nursery.start_soon(add, i)
    return acked


@pytest.mark.parametrize("fault", ["io", "crash", "hang", "too_many"])
async def test_ensemble_change_under_load(bk, cluster, fault):
    await cluster.add_bookie()
    lh = await bk.create_ledger(3, 2, 2)
    first_ensemble = lh.metadata.last_ensemble
    (spare,) = [fb for b, fb in cluster.bookies.items() if b not in first_ensemble]
    acked = await _add_many(lh, 50)
    victim = cluster[first_ensemble[1]]
    if fault == "io":
        victim.faults.add_status = Status.IO
    elif fault == "crash":
        victim.crash()
    elif fault == "hang":
        victim.faults.drop_all = True
    else:
        victim.faults.add_status = Status.TOO_MANY_REQUESTS
    with trio.fail_after(20):
        acked.update(await _add_many(lh, 200, start=50))
    assert sorted(acked) == list(range(250))
    md = lh.metadata
    assert len(md.ensembles) == 2
    first, new_ensemble = md.ensembles[1]
    assert 50 <= first <= 250
    assert new_ensemble == tuple(spare.bookie_id if b == victim.bookie_id else b for b in first_ensemble)
    # the stored metadata agrees, and every acked entry reads back once, in order
    assert (await bk.get_ledger_metadata(lh.ledger_id)).ensembles == md.ensembles
    victim.faults.clear()
    victim.faults.read_status = Status.IO  # force reads of old entries to its peers
    entries = await lh.read(0, 249)
    assert [e.entry_id for e in entries] == list(range(250))
    assert all(acked[e.entry_id] == e.data for e in entries)
    # the replacement holds every entry of the new segment in its write sets
    assert all(e >= first for e in spare.entry_ids(lh.ledger_id))
    await lh.close()
    md = await bk.get_ledger_metadata(lh.ledger_id)
    assert md.state is LedgerState.CLOSED and md.last_entry_id == 249


async def test_two_failures_in_a_row(bk, cluster):
    await cluster.add_bookie()
    await cluster.add_bookie()
    lh = await bk.create_ledger(3, 3, 2)
    acked = await _add_many(lh, 20)
    bad1 = lh.metadata.last_ensemble[0]
    cluster[bad1].faults.add_status = Status.IO
    acked.update(await _add_many(lh, 20, 20))
    bad2 = lh.metadata.last_ensemble[2]
    cluster[bad2].faults.add_status = Status.IO
    acked.update(await _add_many(lh, 20, 40))
    # two changes; when no entry was confirmed in between, the second one rewrites the
    # segment the first one added (same LAC+1 key) instead of adding another
    assert len(lh.metadata.ensembles) in (2, 3)
    assert not {bad1, bad2} & set(lh.metadata.last_ensemble)
    assert [e.data for e in await lh.read(0, 59)] == [acked[i] for i in range(60)]


async def test_no_replacement_fails_adds(bk, cluster):
    lh = await bk.create_ledger(3, 3, 3)
    await lh.add_entry(b"ok")
    cluster[lh.metadata.last_ensemble[0]].faults.add_status = Status.IO
    with pytest.raises(BKNotEnoughBookiesError):
        await lh.add_entry(b"fails")
    with pytest.raises(BKNotEnoughBookiesError):
        await lh.add_entry(b"handle is failed")


async def test_fenced_reply_fails_the_handle(bk, cluster):
    lh = await bk.create_ledger(3, 2, 2)
    await lh.add_entry(b"a")
    cluster[lh.metadata.last_ensemble[0]].faults.add_status = Status.FENCED
    with pytest.raises(BKLedgerFencedError):
        for _ in range(3):  # one of the first three lands on the fenced bookie
            await lh.add_entry(b"b")
    with pytest.raises(BKLedgerFencedError):
        await lh.add_entry(b"after")
    assert len(lh.metadata.ensembles) == 1  # FENCED is not a reason to change the ensemble


async def test_two_writers_recovery_fences_the_old_writer(store, cluster):
    async with BookKeeper(store, fast_config()) as bk1, BookKeeper(store, fast_config()) as bk2:
        w = await bk1.create_ledger(3, 2, 2, password=b"p")
        acked = await _add_many(w, 30)
        r = await bk2.open_ledger(w.ledger_id, password=b"p", recovery=True)
        assert r.is_closed and r.last_add_confirmed >= max(acked)
        with pytest.raises(BKLedgerFencedError):
            await w.add_entry(b"stale writer")
        # the stale writer's close conflicts with the recovered end unless identical
        md = await bk2.get_ledger_metadata(w.ledger_id)
        assert md.state is LedgerState.CLOSED
        if md.last_entry_id == w.last_add_confirmed and md.length == w.length:
            await w.close()
        else:
            with pytest.raises(BKMetadataVersionError):
                await w.close()
        assert [e.data for e in await r.read(0, 29)] == [acked[i] for i in range(30)]


async def test_ensemble_change_after_recovery_started_fails_fenced(store, cluster):
    await cluster.add_bookie()
    async with BookKeeper(store, fast_config()) as bk:
        w = await bk.create_ledger(3, 3, 3)
        await w.add_entry(b"a")
        # another client marks it IN_RECOVERY (metadata only); the writer then needs a change
        data, stat = await store.get(ledger_path(w.ledger_id))
        md = dataclasses.replace(w.metadata, state=LedgerState.IN_RECOVERY)
        await store.put(ledger_path(w.ledger_id), encode_metadata(md), stat.version)
        cluster[w.metadata.last_ensemble[0]].faults.add_status = Status.IO
        with pytest.raises(BKLedgerFencedError):
            await w.add_entry(b"b")


async def test_close_conflicts(bk, store):
    lh = await bk.create_ledger(3, 2, 2)
    await lh.add_entry(b"abc")
    path = ledger_path(lh.ledger_id)
    # someone else closed it identically (e.g. a recovery that found the same end): success
    _, stat = await store.get(path)
    await store.put(path, encode_metadata(lh.metadata.closed(0, 3)), stat.version)
    await lh.close()
    assert lh.is_closed
    await lh.close()  # idempotent

    lh2 = await bk.create_ledger(3, 2, 2)
    await lh2.add_entry(b"abc")
    _, stat = await store.get(ledger_path(lh2.ledger_id))
    await store.put(ledger_path(lh2.ledger_id), encode_metadata(lh2.metadata.closed(5, 100)), stat.version)
    with pytest.raises(BKMetadataVersionError):
        await lh2.close()
    md = await bk.get_ledger_metadata(lh2.ledger_id)
    assert (md.last_entry_id, md.length) == (5, 100)  # untouched


async def test_close_waits_for_pending_adds(bk, cluster):
    lh = await bk.create_ledger(3, 3, 3)
    cluster[lh.metadata.last_ensemble[0]].faults.add_delay_s = 0.3
    results = []

    async def add(i):
        results.append(await lh.add_entry(b"%d" % i))

    async with trio.open_nursery() as n:
        for i in range(5):
            n.start_soon(add, i)
        await trio.sleep(0.05)
        await lh.close()
    assert sorted(results) == list(range(5))
    assert (await bk.get_ledger_metadata(lh.ledger_id)).last_entry_id == 4


async def test_create_needs_enough_bookies(bk):
    with pytest.raises(BKNotEnoughBookiesError):
        await bk.create_ledger(4, 2, 2)


async def test_failures_reported_during_a_change_do_not_replace_the_replacement(bk, cluster):
    """A failing bookie keeps answering errors while its replacement is being chosen (a slow
    metadata store): those late failures name a bookie that is already being replaced and
    must not start a second change that would evict the healthy replacement."""
    await cluster.add_bookie()
    lh = await bk.create_ledger(3, 2, 2)
    (spare,) = [fb for b, fb in cluster.bookies.items() if b not in lh.metadata.last_ensemble]
    acked = await _add_many(lh, 5)  # the change then adds a segment (at LAC+1 = 5)
    bad = cluster[lh.metadata.last_ensemble[1]]
    bad.faults.add_status = Status.IO
    bad.faults.delay_s = 0.05  # its errors trickle in, one per add, over the whole stream
    discover = bk.ctx.writable_bookies

    async def slow_discovery():
        await trio.sleep(0.3)
        return await discover()

    bk.ctx.writable_bookies = slow_discovery  # type: ignore[method-assign]

    async def add(i):
        acked[await lh.add_entry(b"e%d" % i)] = b"e%d" % i

    with trio.fail_after(10):
        async with trio.open_nursery() as n:
            for i in range(5, 40):
                n.start_soon(add, i)
                await trio.sleep(0.01)
    assert sorted(acked) == list(range(40))
    assert len(lh.metadata.ensembles) == 2 and lh.metadata.ensembles[1][0] >= 5
    assert spare.bookie_id in lh.metadata.last_ensemble and bad.bookie_id not in lh.metadata.last_ensemble
    assert [e.data for e in await lh.read(0, 39)] == [acked[i] for i in range(40)]
