"""Integration: the ledger client against real `quire bookie` processes and real ZooKeeper."""

from __future__ import annotations

import pytest
import trio

import metadata
from bookie.client import BKLedgerFencedError, BookKeeper, LedgerState
from tests.bookie.client.real_cluster import client_config as _config
from tests.bookie.client.real_cluster import start_bookies, zk_store  # noqa: F401  (fixture)


async def _stream(lh, n, acked, in_flight=64, prefix=b"m"):
    """Add n entries with up to `in_flight` outstanding; record id -> payload of each ack."""
    limiter = trio.Semaphore(in_flight)

    async def one(i):
        try:
            data = prefix + b"-%06d-" % i + b"x" * 200
            acked[await lh.add_entry(data)] = data
        finally:
            limiter.release()

    async with trio.open_nursery() as nursery:
        for i in range(n):
            await limiter.acquire()
            nursery.start_soon(one, i)


async def test_write_kill_bookie_mid_stream_recover(zk_store, zk_url, quire_procs, tmp_path):
    """E=3 WQ=2 AQ=2 on 4 bookies; SIGKILL one of the ensemble mid-stream: the writer changes
    ensemble, no gap, no duplicate, every acked entry reads back after recovery elsewhere."""
    bookies = await start_bookies(quire_procs, zk_url, tmp_path, 4, zk_store)
    by_id = {b.bookie_id: b for b in bookies}
    async with BookKeeper(zk_store, _config()) as bk:
        lh = await bk.create_ledger(3, 2, 2, password=b"pw")
        acked: dict[int, bytes] = {}
        await _stream(lh, 300, acked)
        victim = by_id[lh.metadata.last_ensemble[0]]

        async def kill_soon():
            while lh.last_add_confirmed < 600:  # mid-stream whatever the machine's speed
                await trio.sleep(0.001)
            victim.kill()

        async with trio.open_nursery() as n:
            n.start_soon(kill_soon)
            await _stream(lh, 1500, acked, prefix=b"n")
        assert sorted(acked) == list(range(1800))  # no gap, no duplicate ids
        assert len(lh.metadata.ensembles) >= 2
        assert victim.bookie_id not in lh.metadata.last_ensemble
        last = lh.last_add_confirmed

    # a second client recovers the (unclosed) ledger: nothing acked is lost
    store2 = await metadata.open_store(zk_url)
    try:
        async with BookKeeper(store2, _config()) as bk2:
            rh = await bk2.open_ledger(lh.ledger_id, password=b"pw")
            assert rh.is_closed and rh.last_add_confirmed >= last
            entries = await rh.read(0, rh.last_add_confirmed)
            assert [e.entry_id for e in entries] == list(range(rh.last_add_confirmed + 1))
            assert all(acked[e.entry_id] == e.data for e in entries if e.entry_id in acked)
    finally:
        await store2.close()


async def test_fencing_and_durability_across_sigkill(zk_store, zk_url, quire_procs, tmp_path):
    """Two writers: recovery fences the first writer; acked entries survive SIGKILL of every bookie."""
    bookies = await start_bookies(quire_procs, zk_url, tmp_path, 3, zk_store)
    async with BookKeeper(zk_store, _config()) as bk:
        w = await bk.create_ledger(3, 3, 2)
        acked: dict[int, bytes] = {}
        await _stream(w, 500, acked)
        for b in bookies:
            b.kill()
        for b in bookies:
            await b.restart()
        store2 = await metadata.open_store(zk_url)
        try:
            async with BookKeeper(store2, _config()) as bk2:
                r = await bk2.open_ledger(w.ledger_id)
                assert r.last_add_confirmed == 499
                assert [e.data for e in await r.read(0, 499)] == [acked[i] for i in range(500)]
                md = await bk2.get_ledger_metadata(w.ledger_id)
                assert md.state is LedgerState.CLOSED and md.last_entry_id == 499
        finally:
            await store2.close()
        with pytest.raises(BKLedgerFencedError):
            for _ in range(3):
                await w.add_entry(b"stale")


async def test_tailing_reader_then_recovery_fences_a_live_writer(zk_store, zk_url, quire_procs, tmp_path):
    """A reader opened without recovery reads up to the LAC and long-polls it forward while the
    writer streams; then a recovering client fences the ledger under the still-running writer:
    the writer's adds fail FENCED, and the recovered end keeps every entry acknowledged to it."""
    await start_bookies(quire_procs, zk_url, tmp_path, 3, zk_store)
    acked: dict[int, bytes] = {}
    submitted: set[bytes] = set()
    writer_error: list[BaseException] = []
    store2 = await metadata.open_store(zk_url)
    try:
        async with BookKeeper(zk_store, _config()) as bk, BookKeeper(store2, _config()) as bk2:
            w = await bk.create_ledger(3, 2, 2, password=b"pw")

            async def stream(worker: int) -> None:
                i = 0
                while True:
                    data = b"w%d-%d-" % (worker, i) + b"y" * 100
                    submitted.add(data)
                    i += 1
                    try:
                        acked[await w.add_entry(data)] = data
                    except BKLedgerFencedError as exc:
                        writer_error.append(exc)
                        return

            async with trio.open_nursery() as n:
                for k in range(16):
                    n.start_soon(stream, k)
                while w.last_add_confirmed < 200:
                    await trio.sleep(0.01)
                reader = await bk2.open_ledger(w.ledger_id, password=b"pw", recovery=False)
                assert not reader.is_closed and reader.last_add_confirmed >= 0
                lac = reader.last_add_confirmed
                seen = await reader.read(0, lac)  # up to the LAC, while the writer keeps going
                assert [e.entry_id for e in seen] == list(range(lac + 1))
                newer = await reader.wait_for_last_add_confirmed(lac, timeout_s=10)
                assert newer > lac  # long poll: the bookies learnt a later LAC from new adds
                # now another client takes the ledger over while the writer is mid-stream
                rh = await bk2.open_ledger(w.ledger_id, password=b"pw", recovery=True)
                with trio.fail_after(20):
                    while len(writer_error) < 16:
                        await trio.sleep(0.01)
            assert all(isinstance(e, BKLedgerFencedError) for e in writer_error)
            with pytest.raises(BKLedgerFencedError):
                await w.add_entry(b"stale writer")
            last = rh.last_add_confirmed
            assert rh.is_closed and last >= max(acked)
            entries = await rh.read(0, last)
            assert [e.entry_id for e in entries] == list(range(last + 1))
            for e in entries:
                assert e.data == acked[e.entry_id] if e.entry_id in acked else e.data in submitted
            assert [e.data for e in seen] == [acked[i] for i in range(lac + 1)]
            md = await bk2.get_ledger_metadata(w.ledger_id)
            assert md.state is LedgerState.CLOSED and md.last_entry_id == last
    finally:
        await store2.close()
