"""Requests no honest client sends, refused without credentials (issue 10, item 4): an add that
would overwrite a stored entry with other bytes, and a fencing read of a ledger that has no
metadata."""

from __future__ import annotations

import uuid
from pathlib import Path

import trio

from bookie import entry_format
from bookie.protocol import Flag, Status
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
        resp = await c.call(__import__("bookie.protocol").protocol.Op.ADD, ledger_id=101, entry_id=0,
                            flags=Flag.RECOVERY_ADD, master_key=MASTER_KEY, body=entry(101, 0, b"r"))
        assert resp.status == Status.OK
        await r.stop()
        nursery.cancel_scope.cancel()
    await store.close()
