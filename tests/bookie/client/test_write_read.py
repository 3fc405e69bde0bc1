"""Create / add / read / close against fake bookies: quorum semantics, ordering, reads."""

from __future__ import annotations

import pytest
import trio

from bookie import entry_format
from bookie.client import (
    BKDigestMismatchError,
    BKIllegalOpError,
    BKLedgerClosedError,
    BKNoSuchEntryError,
    BKNoSuchLedgerError,
    BKUnauthorizedAccessError,
    BookKeeper,
    LedgerState,
)
from bookie.client.distribution import write_set
from bookie.protocol import Op, Status
from tests.bookie.client.conftest import fast_config


async def test_create_add_read_close(bk, cluster, store):
    lh = await bk.create_ledger(3, 2, 2, password=b"pw", custom_metadata={"topic": b"t1"})
    assert lh.last_add_confirmed == -1 and not lh.is_closed
    payloads = [f"entry-{i}".encode() * (i + 1) for i in range(20)]
    for i, p in enumerate(payloads):
        assert await lh.add_entry(p) == i
    assert lh.last_add_confirmed == 19
    assert lh.length == sum(map(len, payloads))
    entries = await lh.read(0, 19)
    assert [e.data for e in entries] == payloads
    assert [e.entry_id for e in entries] == list(range(20))
    # each entry sits on exactly its write set, with the digest header
    ens = lh.metadata.last_ensemble
    for i in range(20):
        holders = {b for b, fb in cluster.bookies.items() if i in fb.entry_ids(lh.ledger_id)}
        assert holders == {ens[j] for j in write_set(i, 3, 2)}
        data = cluster[ens[write_set(i, 3, 2)[0]]].ledgers[lh.ledger_id].entries[i]
        hdr = entry_format.verify(data)
        assert (hdr.ledger_id, hdr.entry_id, hdr.length) == (lh.ledger_id, i, sum(map(len, payloads[: i + 1])))
        assert hdr.lac == i - 1  # the LAC piggybacked when it was sent (adds were sequential)
    await lh.close()
    assert lh.is_closed
    md = await bk.get_ledger_metadata(lh.ledger_id)
    assert md.state is LedgerState.CLOSED and md.last_entry_id == 19 and md.length == lh.length
    assert md.custom_metadata == {"topic": b"t1"} and md.ctime_ms > 0
    with pytest.raises(BKLedgerClosedError):
        await lh.add_entry(b"late")
    # reopen without and with recovery: same content
    for recovery in (False, True):
        rh = await bk.open_ledger(lh.ledger_id, password=b"pw", recovery=recovery)
        assert rh.is_closed and rh.last_add_confirmed == 19
        assert [e.data for e in await rh.read(5, 9)] == payloads[5:10]
        with pytest.raises(BKIllegalOpError):
            await rh.add_entry(b"x")


async def test_concurrent_adds_get_ids_in_call_order(bk):
    lh = await bk.create_ledger(3, 3, 2)
    results: dict[int, int] = {}

    async def add(i):
        results[i] = await lh.add_entry(b"%d" % i)

    async with trio.open_nursery() as n:
        for i in range(300):
            n.start_soon(add, i)
            if i % 50 == 0:
                await trio.sleep(0)
    assert sorted(results.values()) == list(range(300))
    entries = await lh.read(0, 299)
    for e in entries:
        assert results[int(e.data)] == e.entry_id


async def test_ack_quorum_with_one_slow_bookie(bk, cluster):
    """WQ=3 AQ=2: a very slow bookie does not hold up acknowledgements."""
    lh = await bk.create_ledger(3, 3, 2)
    slow = cluster[lh.metadata.last_ensemble[0]]
    slow.faults.add_delay_s = 30
    with trio.fail_after(10):
        for i in range(10):
            assert await lh.add_entry(b"x") == i
    assert slow.entry_ids(lh.ledger_id) == []  # it has not answered (or stored) anything yet
    assert lh.metadata.ensembles == ((0, lh.metadata.last_ensemble),)  # no ensemble change
    assert [e.data for e in await lh.read(0, 9)] == [b"x"] * 10


async def test_acks_are_delivered_in_entry_order(bk, cluster):
    """Entry 1 is fully acked before entry 0, but add_entry(…1) returns after entry 0."""
    lh = await bk.create_ledger(3, 2, 2)
    ens = lh.metadata.last_ensemble
    cluster[ens[0]].faults.add_delay_s = 0.3  # holds entry 0 (write set {0,1}), not entry 1 ({1,2})
    done: list[int] = []

    async def add(data):
        eid = await lh.add_entry(data)
        assert lh.last_add_confirmed >= eid  # returned only once every earlier entry is confirmed
        done.append(eid)

    async with trio.open_nursery() as n:
        n.start_soon(add, b"a")
        await trio.sleep(0)
        n.start_soon(add, b"b")
        await trio.sleep(0.1)
        assert cluster[ens[2]].entry_ids(lh.ledger_id) == [1]  # entry 1 replicated already
        assert done == [] and lh.last_add_confirmed == -1
    assert sorted(done) == [0, 1]


async def test_read_beyond_lac_and_bad_ranges(bk):
    lh = await bk.create_ledger(2, 2, 2)
    await lh.add_entry(b"a")
    with pytest.raises(BKNoSuchEntryError):
        await lh.read(0, 1)
    with pytest.raises(BKNoSuchEntryError):
        await lh.read(1, 0)


async def test_read_failover_and_speculation(store, cluster):
    async with BookKeeper(store, fast_config(read_timeout_s=30)) as bk:
        lh = await bk.create_ledger(3, 3, 3)
        for i in range(6):
            await lh.add_entry(b"%d" % i)
        ens = cluster.in_ensemble(lh.metadata.last_ensemble)
        # first replica of entry 0 errors, of entry 1 hangs (only speculation gets past it)
        ens[0].faults.read_status = Status.IO
        ens[1].faults.drop_all = True
        with trio.fail_after(10):  # far below the 30 s read timeout
            assert [e.data for e in await lh.read(0, 5)] == [b"%d" % i for i in range(6)]


async def test_digest_mismatch_fails_over_then_errors(bk, cluster):
    lh = await bk.create_ledger(3, 2, 2)
    for i in range(4):
        await lh.add_entry(b"payload-%d" % i)
    ens = cluster.in_ensemble(lh.metadata.last_ensemble)
    ens[0].faults.corrupt_reads = True
    assert [e.data for e in await lh.read(0, 3)] == [b"payload-%d" % i for i in range(4)]
    for fb in ens:
        fb.faults.corrupt_reads = True
    with pytest.raises(BKDigestMismatchError):
        await lh.read(0, 0)


async def test_all_replicas_missing_is_no_such_entry(bk, cluster):
    lh = await bk.create_ledger(3, 2, 2)
    await lh.add_entry(b"a")
    for fb in cluster.bookies.values():
        fb.lose_entry(lh.ledger_id, 0)
    with pytest.raises(BKNoSuchEntryError):
        await lh.read(0, 0)


async def test_reconnect_after_bookie_restart(bk, cluster):
    lh = await bk.create_ledger(3, 3, 3)
    await lh.add_entry(b"a")
    fb = cluster[lh.metadata.last_ensemble[0]]
    await fb.restart(cluster.nursery)
    await trio.sleep(0.2)  # the client notices the closed connection before the next request
    await lh.add_entry(b"b")  # goes over a new connection to the restarted bookie
    assert len(lh.metadata.ensembles) == 1
    assert fb.entry_ids(lh.ledger_id) == [0, 1]
    for b in lh.metadata.last_ensemble[1:]:
        cluster[b].faults.read_status = Status.IO
    assert [e.data for e in await lh.read(0, 1)] == [b"a", b"b"]


async def test_lac_read_and_long_poll(bk, cluster):
    lh = await bk.create_ledger(3, 3, 2)
    for i in range(5):
        await lh.add_entry(b"%d" % i)
    reader = await bk.open_ledger(lh.ledger_id, recovery=False)
    assert not reader.is_closed
    assert reader.last_add_confirmed == 3  # bookies know the LAC piggybacked on entry 4
    assert [e.data for e in await reader.read(0, 3)] == [b"0", b"1", b"2", b"3"]
    with pytest.raises(BKNoSuchEntryError):
        await reader.read(4, 4)
    # long poll: returns once the writer's next entry carries LAC 4
    got = []

    async def tail():
        got.append(await reader.wait_for_last_add_confirmed(3, timeout_s=10))

    async with trio.open_nursery() as n:
        n.start_soon(tail)
        await trio.sleep(0.2)
        assert got == []
        await lh.add_entry(b"5")
    assert got == [4]
    assert await reader.read_last_add_confirmed() == 4
    # a poll with nothing new returns at its timeout with the old LAC
    assert await reader.wait_for_last_add_confirmed(4, timeout_s=0.2) == 4
    # the writer's own handle answers locally
    assert await lh.read_last_add_confirmed() == 5
    assert await lh.wait_for_last_add_confirmed(4, timeout_s=1) == 5
    # once the writer closes, a poll that brings nothing new finds the close in the metadata
    await lh.close()
    assert not reader.is_closed
    assert await reader.wait_for_last_add_confirmed(4, timeout_s=0.2) == 5
    assert reader.is_closed and [e.data for e in await reader.read(4, 5)] == [b"4", b"5"]


async def test_delete_and_password(bk):
    lh = await bk.create_ledger(3, 2, 2, password=b"secret")
    await lh.add_entry(b"a")
    with pytest.raises(BKUnauthorizedAccessError):
        await bk.open_ledger(lh.ledger_id, password=b"wrong")
    await bk.delete_ledger(lh.ledger_id)
    with pytest.raises(BKNoSuchLedgerError):
        await bk.open_ledger(lh.ledger_id, password=b"secret")
    with pytest.raises(BKNoSuchLedgerError):
        await bk.delete_ledger(lh.ledger_id)


async def test_ids_follow_call_order_when_the_window_is_full(store, cluster):
    """throttle=3 with a slow bookie: most callers queue for a window slot, and newcomers keep
    arriving while slots are handed over; ids still follow the order of the calls."""
    async with BookKeeper(store, fast_config(throttle=3)) as bk:
        lh = await bk.create_ledger(3, 3, 3)
        cluster[lh.metadata.last_ensemble[0]].faults.add_delay_s = 0.02
        order: list[int] = []
        ids: dict[int, int] = {}

        async def add(i):
            order.append(i)  # the call begins (no checkpoint before add_entry takes its place)
            ids[i] = await lh.add_entry(b"%d" % i)

        async with trio.open_nursery() as n:
            for i in range(60):
                n.start_soon(add, i)
                if i % 7 == 0:
                    await trio.sleep(0.015)
        assert [ids[i] for i in order] == list(range(60))
        assert lh._in_flight == 0 and not lh._waiting
        entries = await lh.read(0, 59)
        assert [int(e.data) for e in entries] == order


async def test_cancelled_add_stays_in_flight(bk, cluster):
    """Cancelling a caller does not unsend its entry: the id is used, the entry is written
    and later adds complete behind it (no hole, nothing rescheduled into a gone task)."""
    lh = await bk.create_ledger(3, 3, 3)
    cluster[lh.metadata.last_ensemble[0]].faults.add_delay_s = 0.2
    with trio.move_on_after(0.05) as scope:
        await lh.add_entry(b"cancelled")
    assert scope.cancelled_caught and lh.last_add_pushed == 0
    assert await lh.add_entry(b"next") == 1
    assert [e.data for e in await lh.read(0, 1)] == [b"cancelled", b"next"]


async def test_range_reads_when_every_bookie_holds_every_entry(store, cluster):
    """E == WQ: a read is one RANGE_READ per segment to one replica. A replica whose answer
    does not verify (corrupt) or does not come (hung) is left for entry-by-entry reads with
    failover: the data read back is the same."""
    await cluster.add_bookie()
    async with BookKeeper(store, fast_config(read_timeout_s=30)) as bk:
        lh = await bk.create_ledger(3, 3, 3)
        payloads = [b"p%d" % i for i in range(30)]
        for p in payloads[:10]:
            await lh.add_entry(p)
        bad = lh.metadata.last_ensemble[1]
        cluster[bad].faults.add_status = Status.IO  # an ensemble change: two segments
        for p in payloads[10:]:
            await lh.add_entry(p)
        assert len(lh.metadata.ensembles) == 2
        cluster[bad].faults.clear()
        for fb in cluster.bookies.values():
            fb.requests.clear()
        assert [e.data for e in await lh.read(0, 29)] == payloads
        ops = sorted(r[0] for fb in cluster.bookies.values() for r in fb.requests)
        assert ops == [Op.RANGE_READ, Op.RANGE_READ]  # one per segment, nothing entry by entry
        source = cluster[lh.metadata.last_ensemble[write_set(10, 3, 3)[0]]]
        source.faults.corrupt_reads = True
        assert [e.data for e in await lh.read(10, 29)] == payloads[10:]
        source.faults.clear()
        source.faults.drop_all = True
        with trio.fail_after(10):  # the speculative timeout, not the 30 s read timeout
            assert [e.data for e in await lh.read(10, 29)] == payloads[10:]
