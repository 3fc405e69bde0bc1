"""Requests no honest client sends, refused without credentials (issue 10, item 4): an add that
would overwrite a stored entry with other bytes, a fencing read of a ledger that has no
metadata, and connections that hold partial frames or never read their replies."""

from __future__ import annotations

import uuid
from pathlib import Path

import trio

from bookie import entry_format, protocol
from bookie.protocol import Flag, Op, Status
from metadata import open_store
from metadata.ledger_ids import ledger_path
from tests.bookie.helpers import MASTER_KEY, entry, make_config
from tests.bookie.test_bookie_inprocess import start


async def _crash(r) -> None:  # noqa: ANN001
    """Stop without a graceful close: the last entries live only in the journal."""
    r.bookie.state.shutting_down = True
    r.bookie._cancel.cancel()
    await r.bookie._stopped.wait()


async def test_add_never_overwrites_an_entry_with_other_bytes(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        c = r.client
        for i in range(5):
            assert (await c.add(1, i, b"orig%d" % i)).status == Status.OK
        # in the write cache: a different body is refused, an identical one is fine
        assert (await c.add(1, 2, b"evil")).status == Status.BAD_REQUEST
        assert (await c.add(1, 2, b"evil", flags=Flag.RECOVERY_ADD)).status == Status.BAD_REQUEST
        assert (await c.add(1, 2, b"orig2")).status == Status.OK
        assert entry_format.payload((await c.read(1, 2)).body) == b"orig2"
        # on disk only (checkpointed, caches dropped)
        await r.bookie.sync_thread.checkpoint()
        r.bookie.storage.read_cache.drop_ledger(1)
        assert (await c.add(1, 3, b"evil")).status == Status.BAD_REQUEST
        assert (await c.add(1, 3, b"orig3", flags=Flag.RECOVERY_ADD)).status == Status.OK
        # recovery after a fence rewrites identical bytes only
        assert (await c.read(1, -1, flags=Flag.FENCE, master_key=MASTER_KEY)).status == Status.OK
        assert (await c.add(1, 4, b"evil", flags=Flag.RECOVERY_ADD)).status == Status.BAD_REQUEST
        assert (await c.add(1, 4, b"orig4", flags=Flag.RECOVERY_ADD)).status == Status.OK
        assert (await c.add(1, 5, b"new", flags=Flag.RECOVERY_ADD)).status == Status.OK
        # a ledger with entries in the journal only, after a crash (nothing known in memory)
        for i in range(3):
            assert (await c.add(2, i, b"two%d" % i)).status == Status.OK
        await _crash(r)
        nursery.cancel_scope.cancel()
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        c = r.client
        for lid, eid in ((1, 0), (1, 3), (1, 5), (2, 1)):
            assert (await c.add(lid, eid, b"evil", flags=Flag.RECOVERY_ADD)).status == Status.BAD_REQUEST
        await r.bookie.sync_thread.checkpoint()
        assert (await c.add(2, 0, b"evil")).status == Status.BAD_REQUEST
        assert (await c.add(2, 2, b"two2")).status == Status.OK
        assert (await c.add(2, 3, b"two3")).status == Status.OK
        for lid, eid, want in ((1, 0, b"orig0"), (1, 3, b"orig3"), (1, 5, b"new"), (2, 0, b"two0"), (2, 1, b"two1")):
            assert entry_format.payload((await c.read(lid, eid)).body) == want
        assert r.bookie.processor.counts.get(("add", int(Status.BAD_REQUEST)), 0) == 5
        await r.stop()
        nursery.cancel_scope.cancel()


async def test_first_add_of_a_new_entry_reads_nothing(tmp_path: Path) -> None:
    """The overwrite check costs no disk read for entries above the highest one stored."""
    cfg = make_config(tmp_path)
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        for i in range(3):
            assert (await r.client.add(3, i, b"x")).status == Status.OK
        await r.bookie.sync_thread.checkpoint()
        reads = 0
        read_entry = r.bookie.storage.read_entry

        async def counting(lid: int, eid: int) -> bytes:
            nonlocal reads
            reads += 1
            return await read_entry(lid, eid)

        r.bookie.storage.read_entry = counting  # type: ignore[method-assign]
        for i in range(3, 50):
            assert (await r.client.add(3, i, b"x")).status == Status.OK
        assert reads == 0
        await r.stop()
        nursery.cancel_scope.cancel()


async def test_fencing_read_of_a_ledger_without_metadata_is_no_ledger(tmp_path: Path) -> None:
    store = await open_store(f"memory://bookie-{uuid.uuid4().hex}")
    cfg = make_config(tmp_path, metadata_service_uri="memory://test")
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery, store)
        c = r.client
        journal_records = r.bookie.journal.metrics.journal_group_entries.collect()[0].samples
        before = {s.name: s.value for s in journal_records}
        # future ledger ids: refused, no state, no journal record, so their creation works later
        for lid in range(100, 130):
            resp = await c.read(lid, -1, flags=Flag.FENCE, master_key=b"stranger")
            assert resp.status == Status.NO_LEDGER
            assert lid not in r.bookie.storage.states
        after = {s.name: s.value for s in r.bookie.journal.metrics.journal_group_entries.collect()[0].samples}
        assert after == before
        await store.create(ledger_path(100), b"meta", make_parents=True)
        assert (await c.add(100, 0, b"real")).status == Status.OK
        # a ledger with metadata this bookie never saw is fenced (recovery needs that)
        await store.create(ledger_path(101), b"meta", make_parents=True)
        assert (await c.read(101, -1, flags=Flag.FENCE, master_key=MASTER_KEY)).status == Status.NO_ENTRY
        assert (await c.add(101, 0, b"late")).status == Status.FENCED
        resp = await c.call(Op.ADD, ledger_id=101, entry_id=0,
                            flags=Flag.RECOVERY_ADD, master_key=MASTER_KEY, body=entry(101, 0, b"r"))
        assert resp.status == Status.OK
        await r.stop()
        nursery.cancel_scope.cancel()
    await store.close()


async def test_partial_frames_are_bounded_in_total_and_time_out(tmp_path: Path) -> None:
    """Connections holding partial frames (the attack: 200 x 5 MB) share a bounded buffer and
    are closed when their frame does not complete in time; honest adds get through after."""
    cfg = make_config(tmp_path, max_request_buffer_size_mb=8, connection_stall_timeout_ms=1500)
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        budget = r.bookie.receive_budget
        peak = 0

        async def watch() -> None:
            nonlocal peak
            while True:
                peak = max(peak, budget.used)
                await trio.sleep(0.005)

        nursery.start_soon(watch)
        closed_by_bookie = 0

        async def attacker() -> None:
            nonlocal closed_by_bookie
            s = await trio.open_tcp_stream("127.0.0.1", r.bookie.port)
            frame_len = 5 * 1024 * 1024
            with trio.move_on_after(5):  # the bookie stops reading once the budget is used up
                try:
                    await s.send_all(frame_len.to_bytes(4, "big") + b"\0" * (2 * 1024 * 1024))
                except trio.BrokenResourceError:
                    pass  # closed by the bookie while still sending
            with trio.fail_after(10):
                try:
                    while await s.receive_some(1024):
                        pass
                except trio.BrokenResourceError:
                    pass
            closed_by_bookie += 1
            await s.aclose()

        async with trio.open_nursery() as attackers:
            for _ in range(20):
                attackers.start_soon(attacker)
            await trio.sleep(0.5)
            with trio.fail_after(10):
                assert (await r.client.add(1, 0, b"honest")).status == Status.OK
        assert closed_by_bookie == 20
        assert peak <= 8 * 1024 * 1024
        assert peak >= 4 * 1024 * 1024  # the attack did fill the buffer
        with trio.fail_after(5):
            while budget.used or r.bookie.metrics.connections._value.get() != 1:
                await trio.sleep(0.01)
        assert r.bookie.metrics.connections_timed_out._value.get() == 20
        assert (await r.client.add(1, 1, b"still")).status == Status.OK
        await r.stop()
        nursery.cancel_scope.cancel()


async def test_replies_a_peer_does_not_read_are_bounded(tmp_path: Path) -> None:
    """Pipelined reads whose replies are never taken: the bookie stops reading requests once
    the connection's reply queue passes the high-water mark, then closes it after the timeout."""
    cfg = make_config(tmp_path, connection_stall_timeout_ms=1500)
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        assert (await r.client.add(1, 0, b"x" * 512 * 1024)).status == Status.OK
        s = await trio.open_tcp_stream("127.0.0.1", r.bookie.port)
        reqs = b"".join(
            protocol.encode_request(protocol.Request(protocol.Op.READ, i, 1, 0)) for i in range(1, 301)
        )
        with trio.move_on_after(3):
            try:
                await s.send_all(reqs)
            except trio.BrokenResourceError:
                pass
        await trio.sleep(0.5)
        # 300 x 512 KiB = 150 MiB of replies if every request were answered into memory
        assert r.bookie.processor.counts.get(("read", 0), 0) < 60
        with trio.fail_after(10):
            while r.bookie.metrics.connections._value.get() != 1:
                await trio.sleep(0.01)
        await s.aclose()
        await r.stop()
        nursery.cancel_scope.cancel()


async def test_disk_reads_whose_replies_are_not_taken_are_bounded(tmp_path: Path) -> None:
    """The same with entries read from disk (each read a task): at most a bounded number of
    them runs ahead of a peer that does not take its replies."""
    cfg = make_config(tmp_path, connection_stall_timeout_ms=1500, db_storage_read_ahead_cache_max_size_mb=0)
    async with trio.open_nursery() as nursery:
        r = await start(cfg, nursery)
        for eid in range(4):
            assert (await r.client.add(1, eid, b"x" * 512 * 1024)).status == Status.OK
        await r.bookie.sync_thread.checkpoint()
        s = await trio.open_tcp_stream("127.0.0.1", r.bookie.port)
        reqs = b"".join(
            protocol.encode_request(protocol.Request(Op.READ, i, 1, i % 4)) for i in range(1, 301)
        )
        with trio.move_on_after(3):
            try:
                await s.send_all(reqs)
            except trio.BrokenResourceError:
                pass
        await trio.sleep(1.0)
        # 300 x 512 KiB = 150 MiB of replies if every read ran
        assert r.bookie.processor.counts.get(("read", 0), 0) < 80
        with trio.fail_after(10):
            while r.bookie.metrics.connections._value.get() != 1:
                await trio.sleep(0.01)
        await s.aclose()
        await r.stop()
        nursery.cancel_scope.cancel()
